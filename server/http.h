/*
 * http.h - stockd's HTTP front: libmicrohttpd with its own thread pool.
 */
#ifndef STOCKD_HTTP_H
#define STOCKD_HTTP_H

struct MHD_Daemon;

/* Starts listening on config.listen:config.port with config.threads
 * workers; NULL (after logging why) if it cannot. */
struct MHD_Daemon *http_start(void);

/* Stops accepting, lets requests in flight finish (up to `drain_ms`), then
 * closes every connection and joins the workers. */
void http_stop(struct MHD_Daemon *daemon, int drain_ms);

#endif
