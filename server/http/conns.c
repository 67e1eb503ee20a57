/*
 * conns.c - a loop's connections, from libmicrohttpd's notice of each to
 * its close.
 *
 * libmicrohttpd's idle timer starts again at every byte, so a
 * client that sends a header line now and then keeps its connection for
 * ever. The loop gives each connection --idle-timeout-s for a whole request
 * (its head and its body) instead, from its opening or its last reply:
 * those that are waiting for one sit on the loop's `waiting` list, oldest
 * first, and the loop shuts the socket of any still there when its time is
 * up (libmicrohttpd then closes the connection as it would a client's).
 * Idle keep-alive connections end the same way and as soon as before.
 *
 * A client that closes its connection is noticed at once, through the
 * loop's own epoll set (`watch`, EPOLLRDHUP on every connection's socket),
 * because libmicrohttpd 0.9.75 (Debian 12's) misses it: it watches each
 * socket edge-triggered without EPOLLRDHUP, and takes a read shorter than
 * its buffer to mean the socket is drained. Half a request and the close
 * that follows it arrive as one edge; libmicrohttpd reads the half and
 * never reads again, so it never sees the read of 0 that says the client
 * went, and the connection kept its slot (and its address's share of
 * --max-per-ip) in CLOSE_WAIT until its idle timeout. (libmicrohttpd 1.0
 * asks for EPOLLRDHUP itself.) Seeing the close, the loop shuts a socket
 * that has no whole request, or whose request it holds itself, and
 * libmicrohttpd closes it as it does any socket shut; it closes one whose
 * request another thread has at once too (struct pending, `settled`); one
 * being answered on the spot is left to send its reply, and shut when it
 * has (`client_closed`).
 *
 * What to do with a request whose client went is its owner's to say (the
 * `client_went` callback): the requests' state between threads is
 * http.c's, and this file only keeps sockets and times.
 */
#include "http/conns.h"

#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/worker.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

static void conn_unwait(struct conn *k)
{
    if (!k->prev)
        return;
    k->prev->next = k->next;
    k->next->prev = k->prev;
    k->prev = k->next = NULL;
}

/* A request is due from `k` from now on: last on the list. */
static void conn_wait(struct conns *cs, struct conn *k)
{
    conn_unwait(k);
    k->since_ms = monotonic_ms();
    k->prev = cs->waiting.prev;
    k->next = &cs->waiting;
    cs->waiting.prev->next = k;
    cs->waiting.prev = k;
}

void conns_arrived(struct pending *p, struct MHD_Connection *c)
{
    struct conn *k = conn_of(c);
    if (!k)
        return;
    assert(!k->request); /* the one before was done with (conns_done) */
    conn_unwait(k);
    k->request = p;
}

void conns_done(struct conns *cs, struct MHD_Connection *c, int next)
{
    struct conn *k = conn_of(c);
    if (!k)
        return;
    k->request = NULL;
    if (next && k->client_closed)
        shutdown(k->fd, SHUT_RDWR); /* its reply is sent: nobody sends another */
    else if (next)
        conn_wait(cs, k);
}

/* The client of `k` closed its end (the top of this file says what is
 * done). Once: shutting the socket wakes the set again (edge-triggered or
 * not), and taking that for another close would shut it for ever, never
 * idle. */
static void conn_client_closed(struct conns *cs, struct conn *k)
{
    if (k->client_closed)
        return;
    k->client_closed = 1;
    if (k->request && !cs->client_went(k->request))
        return;
    conn_unwait(k);
    shutdown(k->fd, SHUT_RDWR);
}

/* Each event's connection is still open: a closed one leaves the set
 * first (conns_notice). */
void conns_closed(struct conns *cs)
{
    struct epoll_event events[64];
    int n;
    do {
        n = epoll_wait(cs->watch, events, 64, 0);
        for (int i = 0; i < n; i++)
            conn_client_closed(cs, events[i].data.ptr);
    } while (n == 64);
    if (n < 0 && errno != EINTR)
        log_warn("http: epoll_wait: %s", strerror(errno));
}

/* libmicrohttpd sees the shut sockets end and closes their connections. */
void conns_expire(struct conns *cs)
{
    long long due = monotonic_ms() - (long long)config.idle_timeout_s * 1000;
    for (struct conn *k; (k = cs->waiting.next) != &cs->waiting && k->since_ms <= due;) {
        conn_unwait(k);
        shutdown(k->fd, SHUT_RDWR);
        metrics_http(HTTP_HEAD_DEADLINE);
    }
}

void conns_init(struct conns *cs, client_went_fn client_went)
{
    cs->watch = -1;
    cs->waiting.prev = cs->waiting.next = &cs->waiting;
    cs->client_went = client_went;
}

int conns_open(struct conns *cs)
{
    cs->watch = epoll_create1(EPOLL_CLOEXEC);
    return cs->watch < 0 ? -1 : 0;
}

void conns_close(struct conns *cs)
{
    if (cs->watch >= 0)
        close(cs->watch);
    cs->watch = -1;
}

/* A connection opened: its request is due from now on, and its close is
 * watched. */
static void conn_opened(struct conns *cs, struct MHD_Connection *c, void **context)
{
    struct conn *k = calloc(1, sizeof *k);
    *context = k;
    if (!k)
        return; /* it goes without a request deadline: only its idle timer */
    k->fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
    conn_wait(cs, k);
    /* Edge-triggered: each close is reported once, and one that came
     * before this is reported at the next wait. */
    struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET, .data.ptr = k};
    if (epoll_ctl(cs->watch, EPOLL_CTL_ADD, k->fd, &ev) != 0)
        log_warn("http: cannot watch a connection for its close: %s", strerror(errno));
}

/* A connection closed: before its descriptor is, so that no event of it
 * may come after. */
static void conn_gone(struct conns *cs, struct conn *k)
{
    if (epoll_ctl(cs->watch, EPOLL_CTL_DEL, k->fd, NULL) != 0 && errno != ENOENT)
        log_warn("http: cannot stop watching a connection: %s", strerror(errno));
    conn_unwait(k);
    free(k);
}

void conns_notice(struct conns *cs, struct MHD_Connection *c, void **context, int started)
{
    if (started)
        conn_opened(cs, c, context);
    else if (*context)
        conn_gone(cs, *context);
}
