/*
 * worker.h - what each libmicrohttpd worker thread owns.
 *
 * stockd answers requests on a fixed pool of threads. Each thread lazily
 * opens its own MySQL connection (with its prepared statements) and its own
 * Redis connection, keeps them across requests, and drops one as soon as it
 * fails; the next request that needs it connects again. So there is no
 * connect per request, no connection pool lock on the hot path, and a backend
 * that comes back is used again without restarting stockd.
 *
 * The worker also carries the detail of the last failure (like errno), so
 * that a result travels as a plain st_result and the message beside it.
 */
#ifndef STOCKD_WORKER_H
#define STOCKD_WORKER_H

#include "result.h"

#include "redis_store.h"
#include "redlock.h"
#include "sql.h"

#include <mysql.h>

struct worker {
    MYSQL *mysql;                           /* NULL until needed or after a failure */
    MYSQL_STMT *statements[SQL_COUNT];      /* prepared on first use per connection */
    unsigned mysql_errno;                   /* MySQL error number of the last failure */
    struct redis_link redis;                /* the main Redis store                  */
    struct redis_link subscriber;           /* reentrant-lock: pub/sub waits on the main Redis */
    struct redis_link redlock[REDLOCK_MAX]; /* redlock: one link per --redlock server */
    unsigned int seed;                      /* for backoff jitter; per thread        */
    char error[256];                        /* detail of the last failed result      */
};

/* The calling thread's worker, created on first use. Never NULL. */
struct worker *worker_self(void);

/* Closes and frees the calling thread's worker now (threads that exit free
 * theirs automatically). */
void worker_release_self(void);

/* Records why `r` happened and returns `r`, so failures read
 * `return worker_fail(w, ST_BUSY, "lock held for %d ms", ms);` */
st_result worker_fail(struct worker *w, st_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Drops every connection whose server has closed it since it was last used
 * (the server restarted, or timed the idle link out), so that this request
 * connects afresh instead of failing on a dead socket. Called at the start
 * of each request, never inside a transaction or a WATCH: a zero-timeout
 * poll() per connection, no round trip.
 */
void worker_drop_dead_links(struct worker *w);

/* Whether the peer has closed (or reset) idle socket `fd`: an idle client
 * connection has nothing to read, so readable means EOF or an error. */
int socket_peer_closed(int fd);

/* A random integer in [0, bound), from the worker's own generator. */
int worker_random(struct worker *w, int bound);

/* Sleeps for `ms` milliseconds (0 returns at once). */
void sleep_ms(int ms);

/* Milliseconds on the monotonic clock, for deadlines. */
long long monotonic_ms(void);

/* Fills `out` (at least 2*bytes+1 long) with hex of `bytes` bytes from the
 * OS random source: lock tokens that no other client can guess. */
void random_token(char *out, size_t bytes);

#endif
