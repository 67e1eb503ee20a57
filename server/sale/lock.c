/*
 * lock.c - composing a lock with the shared body.
 *
 * A committed sale is never reported as a failure: if releasing fails (the
 * lock backend went away), the sale stands, the lock expires by its TTL,
 * and the reply says so in `lock_lost`.
 */
#include "sale/lock.h"

#include "core/config.h"
#include "core/later.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/worker.h"
#include "sale/sale.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

long long lock_wait_deadline(struct worker *w)
{
    long long deadline = monotonic_ms() + config.lock_wait_ms, request = worker_deadline(w);
    return request && request < deadline ? request : deadline;
}

st_result lock_wait_expired(struct worker *w, const char *what)
{
    st_result r = worker_check_deadline(w);
    if (r != ST_OK)
        return r;
    return worker_fail(w, ST_BUSY, "%s not acquired within %d ms", what, config.lock_wait_ms);
}

_Static_assert(sizeof((struct sale_trace *)0)->lock_token == sizeof((struct held_lock *)0)->token,
               "a trace holds a whole lock token");

/* Repeats kind->try_once with jittered, growing sleeps until it succeeds,
 * fails, or the wait's deadline has passed. */
static st_result poll_until_taken(const struct lock_kind *kind, struct worker *w,
                                  const struct deduct_request *rq, struct held_lock *held)
{
    long long deadline = lock_wait_deadline(w);
    for (int attempt = 1;; attempt++) {
        int taken = 0;
        held->attempts = attempt;
        st_result r = kind->try_once(w, rq, held, &taken);
        if (r != ST_OK || taken)
            return r;
        long long now = monotonic_ms();
        if (now >= deadline)
            return lock_wait_expired(w, kind->name);
        int ceiling = attempt >= 4 ? 16 : 1 << attempt;
        int nap = 1 + worker_random(w, ceiling);
        sleep_ms(nap < deadline - now ? nap : (int)(deadline - now));
    }
}

/* The body's freeze: the kind's, on the lock the guard belongs to. */
static void freeze_held(struct guard *g, int frozen)
{
    struct held_lock *held = CONTAINER_OF(g, struct held_lock, guard);
    held->kind->freeze(held, frozen);
}

/* One round: take the lock, run the body, give the lock back. */
static st_result lock_and_sell(const struct lock_kind *kind, const struct store *store,
                               struct worker *w, const struct deduct_request *rq,
                               struct held_lock *held, struct deduct_reply *out)
{
    long long asked_us = monotonic_us();
    st_result r = kind->try_once ? poll_until_taken(kind, w, rq, held) : kind->acquire(w, rq, held);
    out->lock_wait_us += monotonic_us() - asked_us;
    out->attempts += held->attempts;
    if (r != ST_OK)
        return r;
    if (rq->trace) {
        trace_mark(rq->trace, TRACE_LOCK_ACQUIRED);
        if (kind->tokens)
            memcpy(rq->trace->lock_token, held->token, sizeof held->token);
    }

    r = read_then_write(store, w, rq, &held->guard, out);

    /* Keep the body's failure detail: release may overwrite w->error. */
    char body_error[sizeof w->error];
    memcpy(body_error, w->error, sizeof body_error);
    int lost = 0;
    st_result released = kind->release(w, rq, held, &lost);
    if (released != ST_OK) {
        log_warn("%s: release failed, the lock will expire by its TTL: %s", rq->seller, w->error);
        lost = 1;
    }
    if (r == ST_UNKNOWN_PRODUCT && kind->forget)
        kind->forget(w, rq, held);
    memcpy(w->error, body_error, sizeof body_error);
    out->lock_lost = lost;
    return r;
}

st_result deduct_under_lock(const struct lock_kind *kind, const struct store *store,
                            struct worker *w, const struct deduct_request *rq,
                            struct deduct_reply *out)
{
    struct held_lock held;
    memset(&held, 0, sizeof held);
    held.kind = kind;
    held.guard.freeze = kind->freeze ? freeze_held : NULL;
    random_token(held.token, 16);

    st_result r = lock_and_sell(kind, store, w, rq, &held, out);
    if (held.again) {
        assert(r == ST_BUSY); /* only a refused body asks for another round */
        held.again = 0;
        held.attempts = 0;
        held.guard.fence = held.guard.newest_fence = 0;
        r = lock_and_sell(kind, store, w, rq, &held, out);
    }
    return r;
}

void lock_state_name(char out[LOCK_NAME_MAX], const struct lock_kind *kind, int which, int product)
{
    assert(which >= 0 && which < LOCK_NAMES_MAX && kind->names[which]);
/* The formats are the lock kinds' own constant "...%d..." rows. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(out, LOCK_NAME_MAX, kind->names[which], product);
#pragma GCC diagnostic pop
}

st_result mutex_lock_within_wait(struct worker *w, pthread_mutex_t *mutex)
{
    /* pthread_mutex_timedlock() counts on CLOCK_REALTIME: convert. */
    long long left = lock_wait_deadline(w) - monotonic_ms();
    struct timespec deadline = time_in_ms(CLOCK_REALTIME, left > 0 ? left : 0);
    int rc = pthread_mutex_timedlock(mutex, &deadline);
    if (rc == ETIMEDOUT)
        return lock_wait_expired(w, "mutex");
    if (rc != 0)
        return worker_fail(w, ST_BUSY, "mutex: error %d", rc);
    return ST_OK;
}

static struct redis_script compare_and_delete = {
    .source = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
              "  return redis.call('DEL', KEYS[1])\n"
              "end\n"
              "return 0\n",
};

st_result redis_lease_release(struct worker *w, struct redis_link *link, const char *key,
                              const char *token, int *lost)
{
    const char *argv[] = {key, token};
    redisReply *reply;
    st_result r = redis_link_eval(w, link, &compare_and_delete, &reply, 1, 2, argv);
    if (r != ST_OK)
        return r;
    *lost = !(reply->type == REDIS_REPLY_INTEGER && reply->integer == 1);
    freeReplyObject(reply);
    return ST_OK;
}
