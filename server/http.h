/*
 * http.h - stockd's HTTP front: libmicrohttpd with its own thread pool.
 */
#ifndef STOCKD_HTTP_H
#define STOCKD_HTTP_H

struct MHD_Daemon;

/* Starts the worker pool and listens on config.listen:config.port; NULL
 * (after logging why) if it cannot. */
struct MHD_Daemon *http_start(void);

/* Stops accepting, refuses new requests (503 shutting_down), lets the
 * requests in flight finish and send their replies, then stops the daemon
 * and joins the workers - all within config.drain_ms. -1 when requests were
 * still running at the deadline: the daemon could not be stopped, and the
 * caller exits without it. */
int http_stop(struct MHD_Daemon *daemon);

#endif
