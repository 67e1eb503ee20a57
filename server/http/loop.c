/*
 * loop.c - the HTTP loops' life: their start, their turns, and the
 * orderly stop.
 *
 * stockd runs config.threads loops, each a thread with a libmicrohttpd
 * daemon of its own, in libmicrohttpd's external mode: the loop waits
 * (poll) on the daemon's epoll set, its Redis pipe (redis_pipe.h), a
 * wake-up, its connections' closes (conns.h) and, while it takes new
 * connections, the listening socket; lets the daemon serve what is ready,
 * then writes the turn's sales to Redis at once. The loops share one
 * listening socket, so each enforces its share of the configured
 * connection limits.
 *
 * Every loop takes new connections from one listening socket, each loop
 * its fair share (listener.h says why and how), and hands them to its
 * daemon, which has no listening socket of its own.
 *
 * Stopping, as libmicrohttpd documents it for a daemon run externally:
 * the listening socket is shut down at once, so that clients are refused
 * (it is closed only after the daemons are stopped), and each loop goes on
 * turning: every new request is answered 503 shutting_down with
 * `Connection: close`, the requests already queued or running finish and
 * send their replies, nothing is resumed by force. When none is left the
 * loops end, and only then is each daemon stopped (MHD_stop_daemon() from
 * the main thread, never while its loop runs). --drain-ms bounds all of
 * it: requests still waiting for a lock give up as 503 timeout when it
 * runs out, and a request stuck in a backend past it is abandoned by
 * exiting.
 */
#include "http/loop.h"

#include "backend/backend.h"
#include "backend/pool.h"
#include "backend/redis_pipe.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "http/guards.h"
#include "http/listener.h"
#include "http/refusals.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* How long a loop that holds a request waits at most (struct loop says why). */
#define HELD_WAIT_MS 1

/* Set once a stop begins: every request from then on is refused. */
static atomic_int stopping;
/* Requests handed to the pool whose connection has not completed yet. */
static atomic_int outstanding;

/* The loop running on this thread; NULL on any other thread. */
static __thread struct loop *this_loop;

/* The requests' side, as loops_start() was given it. */
static struct loop_handlers handlers;

struct loop *loop_of_this_thread(void)
{
    return this_loop;
}

int loops_stopping(void)
{
    return atomic_load(&stopping);
}

void loops_outstanding_add(int n)
{
    atomic_fetch_add(&outstanding, n);
}

/* Wakes `l` - once until its next turn: when a wake-up is already on its
 * way, the loop will run after this call anyway. */
void loop_wake(struct loop *l)
{
    uint64_t one = 1;
    if (!atomic_exchange(&l->woken, 1) && write(l->wake, &one, sizeof one) < 0)
        log_warn("http: cannot wake a loop: %s", strerror(errno));
}

/* libmicrohttpd's notice of a connection opened or closed on loop `cls`. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct loop *l = cls;
    int started = code == MHD_CONNECTION_NOTIFY_STARTED;
    listener_count(l->index, started ? 1 : -1);
    conns_notice(&l->conns, c, socket_context, started);
}

/*
 * libmicrohttpd's complaints are about one connection each - a request it
 * cannot parse, a client gone in the middle of one - and anyone can cause
 * as many as they like: each is counted (stockd_http_dropped_total), and
 * at most one line per LOG_EVERY_MS says how many there were, and the last.
 */
#define LOG_EVERY_MS 10000

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    static _Atomic long long logged_ms = -LOG_EVERY_MS;
    static atomic_ullong unlogged;
    metrics_http(HTTP_PROTOCOL_ERROR);
    unsigned long long before = atomic_fetch_add(&unlogged, 1);
    long long now = monotonic_ms(), last = atomic_load(&logged_ms);
    if (now - last < LOG_EVERY_MS || !atomic_compare_exchange_strong(&logged_ms, &last, now))
        return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    atomic_fetch_sub(&unlogged, before + 1);
    if (before)
        log_warn("http: %llu more connection errors since the last line; now: %s", before, line);
    else
        log_warn("http: %s", line);
}

static struct loop *loops;
static int loop_count;
/* When the stop gives up on what still runs (monotonic ms), once stopping. */
static _Atomic long long drain_deadline_ms;

/* How long a loop may wait: until libmicrohttpd's next timeout (briefly
 * while it only asks for held requests) or the pipe's (`pipe_ms`, -1:
 * none), and briefly while stopping, to see the drain end; not at all
 * after resuming a connection itself: libmicrohttpd (without MHD_USE_ITC)
 * is woken by nothing when a connection is resumed, and would take it up
 * at the loop's next event only. */
static int loop_wait_ms(const struct loop *l, int pipe_ms)
{
    MHD_UNSIGNED_LONG_LONG mhd;
    int ms = MHD_get_timeout(l->daemon, &mhd) == MHD_YES ? (mhd > 1000 ? 1000 : (int)mhd) : 1000;
    if (ms == 0 && l->held && !l->answered)
        ms = HELD_WAIT_MS;
    if (l->resumed)
        ms = 0;
    if (pipe_ms >= 0 && pipe_ms < ms)
        ms = pipe_ms;
    return atomic_load(&stopping) && ms > 10 ? 10 : ms;
}

/* Whether the loop is done: stopping, and nothing of the drain left (or
 * no time left for it). */
static int loop_done(void)
{
    return atomic_load(&stopping) &&
           (atomic_load(&outstanding) == 0 || monotonic_ms() >= atomic_load(&drain_deadline_ms));
}

/* A new connection, accepted for loop `arg`: its daemon owns the socket
 * from now on (and closes it when over its limits). */
static void take_connection(void *arg, int fd, const struct sockaddr *addr, socklen_t len)
{
    struct loop *l = arg;
    if (MHD_add_connection(l->daemon, fd, addr, len) != MHD_YES)
        log_debug("http: a new connection was refused: %s", strerror(errno));
}

/* Takes this loop's share of the new connections; when that makes it
 * stop taking them, the others are woken to look again. */
static void take_connections(struct loop *l)
{
    if (!listener_take(l->index, take_connection, l))
        return;
    for (int i = 0; i < loop_count; i++)
        if (&loops[i] != l)
            loop_wake(&loops[i]);
}

/* One turn: wait for the HTTP connections (libmicrohttpd's epoll set), the
 * pipe and the wake-up; let libmicrohttpd serve what is ready (handlers
 * queue their sales on the pipe); then write the turn's sales at once. */
static void loop_turn(struct loop *l, int epoll_fd)
{
    struct redis_pipe *pipe = l->w->redis_pipe;
    struct pollfd fds[5] = {{.fd = epoll_fd, .events = POLLIN},
                            {.fd = l->wake, .events = POLLIN},
                            {.fd = -1},
                            {.fd = listener_fd_for(l->index), .events = POLLIN},
                            {.fd = l->conns.watch, .events = POLLIN}};
    int pipe_ms = redis_pipe_poll(pipe, &fds[2]);
    if (poll(fds, 5, loop_wait_ms(l, pipe_ms)) < 0 && errno != EINTR)
        log_warn("http: poll: %s", strerror(errno));
    uint64_t wakes;
    if (fds[1].revents && read(l->wake, &wakes, sizeof wakes) < 0 && errno != EAGAIN)
        log_warn("http: wake-up: %s", strerror(errno));
    /* Before MHD_run(): a resume that finds the flag still set is one this
     * run will see; one after this store writes a wake-up of its own. */
    atomic_store(&l->woken, 0);
    if (fds[2].revents)
        redis_pipe_ready(pipe, fds[2].revents);
    if (fds[3].revents)
        take_connections(l);
    l->answered = 0; /* this run sends what is answered by now */
    l->resumed = 0;
    MHD_run(l->daemon);
    /* After the run: a whole request that came with its client's close is
     * served (or queued, and dropped) as before; half of one is shut. */
    if (fds[4].revents)
        conns_closed(&l->conns);
    conns_expire(&l->conns);
    redis_pipe_flush(pipe);
    redis_pipe_expire(pipe);
}

static void *loop_main(void *arg)
{
    struct loop *l = arg;
    this_loop = l;
    int epoll_fd = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_EPOLL_FD)->epoll_fd;
    while (!loop_done())
        loop_turn(l, epoll_fd);
    MHD_run(l->daemon); /* the last replies, refusals included */
    return NULL;
}

/* A limit shared by the loops: each takes its part, rounded up. */
static unsigned loop_share(int limit)
{
    return (unsigned)((limit + loop_count - 1) / loop_count);
}

/* Each loop's memory for a connection's request line, headers and reply
 * headers (a body arrives in chunks through http.c's on_request()). libmicrohttpd
 * zeroes it for every request, so the less of it the more connections
 * stay in the cache, down to what a request needs. 8 KiB leaves a request
 * about 7 KiB of request line and headers, as nginx's 8 KiB header
 * buffers do; more gets libmicrohttpd's own 431. */
#define CONNECTION_MEMORY (8 * 1024)

/*
 * A loop's daemon, run by the loop itself (no thread of libmicrohttpd's),
 * with no listening socket: the loop hands it the connections it takes
 * (listener.h), and it tells the listener of each one opened and closed.
 * libmicrohttpd waits with epoll. A sale answered on its loop
 * costs no hand-off and no wake-up, where HTTP threads handing each sale
 * to a worker-led pipeline pay both per sale. Holding it instead of suspending it (struct loop)
 * saves its two epoll_ctl() calls and a recv() that finds nothing. (libmicrohttpd's poll mode,
 * which has no epoll_ctl(), exists only with its own threads; its select mode stops at descriptor
 * 1024.)
 */
static struct MHD_Daemon *loop_daemon(struct loop *l)
{
    unsigned flags =
        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handlers.request, l, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_NOTIFY_COMPLETED,
        handlers.completed, l, MHD_OPTION_UNESCAPE_CALLBACK, guard_unescape, NULL,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)config.idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        loop_share(config.max_connections), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        loop_share(config.max_per_ip), MHD_OPTION_END);
}

static int loop_open(struct loop *l)
{
    l->w = worker_new();
    l->w->must_not_block = 1;
    l->w->redis_pipe = redis_pipe_new();
    l->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!l->w->redis_pipe || l->wake < 0 || conns_open(&l->conns) != 0)
        return -1;
    l->daemon = loop_daemon(l);
    return l->daemon ? 0 : -1;
}

/* Frees a loop whose thread has ended (or never started). */
static void loop_close(struct loop *l)
{
    if (l->daemon)
        MHD_stop_daemon(l->daemon);
    if (l->w) {
        redis_pipe_free(l->w->redis_pipe);
        l->w->redis_pipe = NULL;
        backends_close(l->w);
        worker_free(l->w);
    }
    if (l->wake >= 0)
        close(l->wake);
    conns_close(&l->conns);
    refusals_free(l->refusals);
}

/* Wakes every loop and waits for its thread to end. */
static void loops_join(void)
{
    for (int i = 0; i < loop_count; i++)
        if (loops[i].running)
            loop_wake(&loops[i]);
    for (int i = 0; i < loop_count; i++)
        if (loops[i].running)
            pthread_join(loops[i].thread, NULL);
}

static void loops_close(void)
{
    for (int i = 0; i < loop_count; i++)
        loop_close(&loops[i]);
    free(loops);
    loops = NULL;
    loop_count = 0;
    listener_close();
}

/* The stop begins, to be over by `deadline` (monotonic ms): every new
 * request is refused, and clients are refused from now on. */
static void stop_by(long long deadline)
{
    atomic_store(&drain_deadline_ms, deadline);
    atomic_store(&stopping, 1);
    listener_shut();
}

/* Stops whatever loops_start() had started when it failed. */
static int start_failed(void)
{
    stop_by(monotonic_ms());
    loops_join();
    loops_close();
    pool_stop();
    atomic_store(&stopping, 0);
    return -1;
}

int loops_start(const struct loop_handlers *given)
{
    handlers = *given;
    loop_count = config.threads;
    if (listener_open(config.listen, config.port, loop_count, loop_share(config.max_connections)) !=
        0) {
        loop_count = 0;
        return -1;
    }
    pool_limit_knobs(config.knob_workers, config.knob_queue);
    if (pool_start(config.workers, config.queue_max) != 0) {
        loop_count = 0;
        listener_close();
        return -1;
    }
    loops = calloc((size_t)loop_count, sizeof *loops);
    if (!loops) {
        loop_count = 0;
        return start_failed();
    }
    for (int i = 0; i < loop_count; i++) {
        loops[i] = (struct loop){.index = i, .wake = -1};
        conns_init(&loops[i].conns, handlers.client_went);
    }
    for (int i = 0; i < loop_count; i++) {
        if (loop_open(&loops[i]) != 0) {
            log_error("cannot start HTTP loop %d", i);
            return start_failed();
        }
    }
    for (int i = 0; i < loop_count; i++) {
        if (pthread_create(&loops[i].thread, NULL, loop_main, &loops[i]) != 0) {
            log_error("cannot start the thread of HTTP loop %d", i);
            return start_failed();
        }
        loops[i].running = 1;
    }
    return 0;
}

int loops_stop(void)
{
    long long deadline = monotonic_ms() + config.drain_ms;
    stop_by(deadline);
    pool_close();
    workers_stop_by(deadline);
    loops_join();
    int left = atomic_load(&outstanding);
    if (left > 0) {
        log_error("drain-ms (%d) is over with %d requests still running; exiting without them",
                  config.drain_ms, left);
        return -1; /* their connections are suspended: the daemons cannot stop */
    }
    loops_close();
    pool_stop();
    return 0;
}
