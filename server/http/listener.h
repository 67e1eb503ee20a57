/*
 * listener.h - the one listening socket, and which HTTP loop takes each new
 * connection.
 *
 * Every loop accepts from one socket, bound once: a second stockd started
 * on a port in use fails instead of sharing its clients (SO_REUSEPORT
 * would let it). A keep-alive connection stays on the loop that took it, so
 * who takes what decides how the work is shared. Left to libmicrohttpd,
 * whichever loop woke first took a burst, and the connections could all
 * land on one loop, which then did the HTTP work of every core while the
 * others idled. So the loops accept here instead, each only
 * while it has at most one connection more than the loop with the fewest
 * (and fewer than its share of --max-connections): a loop that stops
 * taking connections wakes the others, so that one of those with the
 * fewest is always listening.
 */
#ifndef STOCKD_LISTENER_H
#define STOCKD_LISTENER_H

#include <sys/socket.h>

/* Binds and listens on address:port (IPv4) for `loops` loops, each
 * taking at most `limit` connections; 0, or -1 after logging why. */
int listener_open(const char *address, int port, int loops, unsigned limit);

/* The listening socket for loop `i` to poll, or -1 while it is not to
 * take connections (it has enough, or the listener is shut). */
int listener_fd_for(int i);

/* Accepts for loop `i` what it may take of the waiting connections, each
 * handed to take(arg, fd, addr, len), which owns the socket from then on.
 * Returns whether loop `i` has stopped taking connections by doing so:
 * the caller then wakes the other loops. */
int listener_take(int i,
                  void (*take)(void *arg, int fd, const struct sockaddr *addr, socklen_t len),
                  void *arg);

/* Loop `i`'s connections changed by `delta` (one opened: +1, closed: -1). */
void listener_count(int i, int delta);

/* No more connections: clients are refused at once from now on. */
void listener_shut(void);

/* Closes the socket (once no loop polls it any more). */
void listener_close(void);

#endif
