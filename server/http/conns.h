/*
 * conns.h - a loop's connections, each from its opening to its close: the
 * time a whole request may take to arrive, and the close of its client,
 * seen at once (conns.c says why libmicrohttpd needs both done for it).
 *
 * One `struct conns` per loop, used by that loop's thread alone.
 */
#ifndef STOCKD_CONNS_H
#define STOCKD_CONNS_H

#include <microhttpd.h>

struct pending; /* a whole request (http.c), only pointed at here */

/* A connection of a loop's; conns.c says what each part is for. */
struct conn {
    struct conn *prev, *next; /* on `waiting` while a request is due */
    int fd;
    long long since_ms;      /* when the request became due */
    struct pending *request; /* the whole request it carries, until completed */
    int client_closed;       /* its client closed its end (EPOLLRDHUP) */
};

/* Its client closed the connection of `request`, which is whole: whether
 * its socket is to be shut now (else the request's owner closes it). */
typedef int (*client_went_fn)(struct pending *request);

struct conns {
    int watch;                  /* an epoll set: its connections' closes */
    struct conn waiting;        /* the connections a request is due from, oldest first */
    client_went_fn client_went; /* asked about a connection carrying a request */
};

/* Empty, and nothing to close yet. */
void conns_init(struct conns *cs, client_went_fn client_went);
/* The epoll set; 0, or -1. */
int conns_open(struct conns *cs);
void conns_close(struct conns *cs);

/* libmicrohttpd's notice of a connection opened (`started`) or closed:
 * `*context` is the connection's socket context, its struct conn. */
void conns_notice(struct conns *cs, struct MHD_Connection *c, void **context, int started);

/* The whole of request `p` arrived on its connection. */
void conns_arrived(struct pending *p, struct MHD_Connection *c);

/* The connection is done with its request; `next`: it stays open for
 * another, unless its client has closed it meanwhile. */
void conns_done(struct conns *cs, struct MHD_Connection *c, int next);

/* Takes the closes the epoll set reports. */
void conns_closed(struct conns *cs);

/* Shuts the sockets whose request is overdue (--idle-timeout-s). */
void conns_expire(struct conns *cs);

#endif
