/*
 * mutex - a process-local lock around the nolock body.
 *
 * The race: nolock's, between threads of this process.
 *
 * The fix: one pthread mutex held across the whole read-then-write, so the
 * threads of one stockd take turns. A waiter gives up after lock_wait_ms
 * and answers busy.
 *
 * The price: every sale of the process is serialised, database round trips
 * included. And the mutex lives in this process's memory only: a second
 * stockd instance has its own, so two instances race exactly like nolock.
 * Safe with one instance, unsafe with several.
 */
#include "config.h"
#include "lock.h"
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static pthread_mutex_t sale_mutex = PTHREAD_MUTEX_INITIALIZER;

static st_result acquire(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    (void)rq;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    long long ns = deadline.tv_nsec + (long long)(config.lock_wait_ms % 1000) * 1000000LL;
    deadline.tv_sec += config.lock_wait_ms / 1000 + (time_t)(ns / 1000000000LL);
    deadline.tv_nsec = (long)(ns % 1000000000LL);
    held->attempts = 1;
    int rc = pthread_mutex_timedlock(&sale_mutex, &deadline);
    if (rc == ETIMEDOUT)
        return worker_fail(w, ST_BUSY, "mutex not acquired within %d ms", config.lock_wait_ms);
    if (rc != 0)
        return worker_fail(w, ST_BUSY, "mutex: error %d", rc);
    return ST_OK;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    (void)w, (void)rq, (void)held;
    *lost = 0;
    pthread_mutex_unlock(&sale_mutex);
    return ST_OK;
}

static const struct lock_kind process_mutex = {.acquire = acquire, .release = release};

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return deduct_under_lock(&process_mutex, w, rq, out);
}

const struct strategy strategy_mutex = {
    .name = "mutex",
    .store = STORE_MYSQL,
    .safe_single = 1,
    .safe_multi = 0,
    .caveat = "the mutex exists in one process only",
    .summary = "a process-local pthread mutex around the nolock body",
    .needs = NEEDS_MYSQL,
    .deduct = deduct,
};
