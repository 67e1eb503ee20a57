/*
 * http.h - stockd's HTTP front: libmicrohttpd run by stockd's own loops.
 */
#ifndef STOCKD_HTTP_H
#define STOCKD_HTTP_H

/* Starts the worker pool and the HTTP loops, listening on
 * config.listen:config.port; 0, or -1 (after logging why) if it cannot. */
int http_start(void);

/* Stops accepting, refuses new requests (503 shutting_down), lets the
 * requests in flight finish and send their replies, then stops the daemon
 * and joins the workers - all within config.drain_ms. -1 when requests were
 * still running at the deadline: the daemon could not be stopped, and the
 * caller exits without it. */
int http_stop(void);

#endif
