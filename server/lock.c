/*
 * lock.c - composing a lock with the shared body.
 *
 * A committed sale is never reported as a failure: if releasing fails (the
 * lock backend went away), the sale stands, the lock expires by its TTL,
 * and the reply says so in `lock_lost`.
 */
#include "lock.h"

#include "config.h"
#include "log.h"
#include "sale.h"
#include "worker.h"

#include <string.h>

st_result deduct_under_lock(const struct lock_kind *kind, struct worker *w,
                            const struct deduct_request *rq, struct deduct_reply *out)
{
    struct held_lock held;
    memset(&held, 0, sizeof held);
    held.kind = kind;
    random_token(held.token, 16);

    st_result r = kind->acquire(w, rq, &held);
    out->attempts = held.attempts;
    if (r != ST_OK)
        return r;

    r = read_then_write(w, rq, &held, out);

    /* Keep the body's failure detail: release may overwrite w->error. */
    char body_error[sizeof w->error];
    memcpy(body_error, w->error, sizeof body_error);
    int lost = 0;
    st_result released = kind->release(w, rq, &held, &lost);
    if (released != ST_OK) {
        log_warn("%s: release failed, the lock will expire by its TTL: %s", rq->strategy->name,
                 w->error);
        lost = 1;
    }
    memcpy(w->error, body_error, sizeof body_error);
    out->lock_lost = lost;
    return r;
}

st_result lock_poll(struct worker *w, struct held_lock *held, const char *what,
                    st_result (*try_once)(struct worker *, const struct deduct_request *,
                                          struct held_lock *, int *taken),
                    const struct deduct_request *rq)
{
    long long deadline = monotonic_ms() + config.lock_wait_ms;
    for (int attempt = 1;; attempt++) {
        int taken = 0;
        held->attempts = attempt;
        st_result r = try_once(w, rq, held, &taken);
        if (r != ST_OK || taken)
            return r;
        long long now = monotonic_ms();
        if (now >= deadline)
            return worker_fail(w, ST_BUSY, "%s not acquired within %d ms", what,
                               config.lock_wait_ms);
        int ceiling = attempt >= 4 ? 16 : 1 << attempt;
        int nap = 1 + worker_random(w, ceiling);
        sleep_ms(nap < deadline - now ? nap : (int)(deadline - now));
    }
}
