/*
 * worker.h - what each thread that runs requests owns.
 *
 * stockd runs requests on a fixed pool of threads (pool.h). Each thread has
 * one struct worker: a slot per backend (core/backend_id.h; the backends themselves in backend/)
 * where that backend's file keeps this thread's own connections - opened on first use, kept across
 * requests, dropped as soon as they fail, so there is no connect per request, no connection pool
 * lock on the hot path, and a backend that comes back is used again without restarting stockd.
 * Threads that are not pool workers but talk to backends (health probes, a lock's watchdog) have a
 * worker of their own too.
 *
 * The worker also carries the running request's deadline and the detail of
 * the last failure (like errno), so that a result travels as a plain
 * st_result with the message beside it.
 */
#ifndef STOCKD_WORKER_H
#define STOCKD_WORKER_H

#include "core/backend_id.h"
#include "core/result.h"

#include <pthread.h>
#include <stddef.h>
#include <time.h>

struct worker {
    void *links[BACKEND_COUNT];    /* each backend's connections, NULL until used */
    long long deadline_ms;         /* the running request's deadline, 0: none      */
    unsigned int seed;             /* backoff jitter, per thread                   */
    int must_not_block;            /* an HTTP loop's: it may queue work, never wait */
    int answers_later;             /* the running request went on to be answered
                                      through its deferred answer (later.h), not by
                                      what its handler returns                   */
    struct redis_pipe *redis_pipe; /* an HTTP loop's Redis, never waited on (redis_pipe.h) */
    char error[256];               /* detail of the last failed result             */
};

/* A new worker with no links. Never NULL (out of memory is fatal). */
struct worker *worker_new(void);

/* Frees a worker whose links are closed (backends_close()). */
void worker_free(struct worker *w);

/* The worker's slot for backend `id`: `size` zeroed bytes made on first
 * use, when *fresh (if not NULL) is set for the backend's file to fill them
 * in. Never NULL (out of memory is fatal: a slot is a few hundred bytes). */
void *worker_links(struct worker *w, enum backend_id id, size_t size, int *fresh);

/* Records why `r` happened and returns `r`, so failures read
 * `return worker_fail(w, ST_BUSY, "lock held for %d ms", ms);` */
st_result worker_fail(struct worker *w, st_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The moment the running request must be answered by, on the monotonic
 * clock: its own deadline, brought forward to the server's drain deadline
 * once it is stopping. 0 when there is none. */
long long worker_deadline(const struct worker *w);

/* The same for a request whose own deadline is `own_ms` (0: none). */
long long effective_deadline(long long own_ms);

/* ST_TIMEOUT, with a message saying so, once worker_deadline() has passed;
 * ST_OK before. Called before a request starts and before every wait or
 * retry, so that a request nobody waits for any more changes nothing. */
st_result worker_check_deadline(struct worker *w);

/* Brings every request's deadline forward to `when_ms` (a stop's drain). */
void workers_stop_by(long long when_ms);

/* Whether the server has closed (or reset) a link that has been idle since
 * `used_ms`: an idle client connection has nothing to read, so readable
 * means EOF or an error. A link used in the last LINK_IDLE_MS is not even
 * polled: under load (a request per worker every millisecond or so) a poll
 * per link per request would cost more than it saves, and no server
 * restarts within that time. */
#define LINK_IDLE_MS 10
int idle_link_closed(int fd, long long used_ms);

/* A random integer in [0, bound), from the worker's own generator. */
int worker_random(struct worker *w, int bound);

/* Sleeps for `ms` milliseconds (0 returns at once). */
void sleep_ms(int ms);

/* Milliseconds on the monotonic clock, for deadlines. */
long long monotonic_ms(void);

/* Microseconds on the monotonic clock, for latencies. */
long long monotonic_us(void);

/* Milliseconds since the epoch, for what a browser shows. */
long long wall_clock_ms(void);

/* Moves `t` on by `ms` milliseconds. */
void timespec_add_ms(struct timespec *t, long long ms);

/* `ms` milliseconds from now on `clock`, as the absolute time the timed waits
 * of pthreads take: CLOCK_REALTIME for pthread_mutex_timedlock(),
 * CLOCK_MONOTONIC for a condition variable from cond_init_monotonic(). */
struct timespec time_in_ms(clockid_t clock, long long ms);

/* Makes `cond` a condition variable whose timed waits count on
 * CLOCK_MONOTONIC, so that setting the wall clock stretches no wait. */
void cond_init_monotonic(pthread_cond_t *cond);

/* Fills `out` (at least 2*bytes+1 long) with hex of `bytes` bytes from the
 * OS random source: lock tokens that no other client can guess. */
void random_token(char *out, size_t bytes);

#endif
