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
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <pthread.h>

static pthread_mutex_t sale_mutex = PTHREAD_MUTEX_INITIALIZER;

static st_result acquire(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    (void)rq;
    held->attempts = 1;
    return mutex_lock_within_wait(w, &sale_mutex);
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    (void)w, (void)rq, (void)held;
    *lost = 0;
    pthread_mutex_unlock(&sale_mutex);
    return ST_OK;
}

static const struct lock_kind process_mutex = {
    .name = "process mutex",
    .backend = BACKEND_COUNT, /* in this process's memory */
    .acquire = acquire,
    .release = release,
};

const struct strategy strategy_mutex = {
    .name = "mutex",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 0,
    .caveat = "the mutex exists in one process only",
    .summary = "a process-local pthread mutex around the nolock body",
    .contention = CONTENTION_WAITS,
    .exposed_by = EXPOSED_BY_HOLD, /* with two instances */
    .lock = &process_mutex,
};
