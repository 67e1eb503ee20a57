/*
 * redis-lock-wait - redis-lock, its acquisition followed by WAIT.
 *
 * The race: redis-lock's lock key lives on the primary only until the
 * replica has it. If the primary dies in that window, Sentinel promotes a
 * replica that never saw the lock; a second client takes the same lock on
 * the new primary while the first still holds it, and both sell from the
 * same count: two holders, oversold - the argument that gave rise to
 * Redlock and to fencing tokens.
 *
 * The fix, the one Redisson made when it deprecated Redlock: a lock counts
 * as taken only once a replica has it. After SET NX PX succeeds, WAIT
 * numreplicas timeout; only when --redis-wait-replicas replicas
 * acknowledged it within --redis-wait-timeout-ms does the body run. With
 * one replica, the one Sentinel promotes, the new primary knows the lock.
 *
 * The price: a WAIT round trip per acquisition, and the replica's lag. A
 * lock no replica acknowledged is released (compare-and-delete) and the
 * request answers backend_unavailable without selling: nothing changed.
 * It is still a lease: a holder that outlives its TTL oversells exactly as
 * redis-lock's does.
 */
#include "backend/redis.h"
#include "core/log.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <string.h>

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    return lock_redis_set_nx.release(w, rq, held, lost);
}

static st_result try_once(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken)
{
    st_result r = lock_redis_set_nx.try_once(w, rq, held, taken);
    if (r != ST_OK || !*taken)
        return r;
    r = redis_wait_replicas(w, "lock", ST_BACKEND_UNAVAILABLE);
    if (r == ST_OK)
        return r;
    /* Not ours to use: give it back, keeping why. */
    *taken = 0;
    char why[sizeof w->error];
    memcpy(why, w->error, sizeof why);
    int lost;
    if (release(w, rq, held, &lost) != ST_OK)
        log_warn("redis-lock-wait: releasing a lock not replicated failed; it expires by its "
                 "TTL: %s",
                 w->error);
    memcpy(w->error, why, sizeof why);
    return r;
}

static const struct lock_kind redis_set_nx_wait = {
    .name = "redis lock",
    .backend = BACKEND_REDIS,
    .names = {"lock:{%d}"}, /* redis-lock's own key: the same lock */
    .try_once = try_once,
    .release = release,
};

const struct strategy strategy_redis_lock_wait = {
    .name = "redis-lock-wait",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "while the lock's TTL outlives the critical section; through a failover too, with "
              "one replica, the one Sentinel promotes",
    .summary = "redis-lock, each acquisition WAITed for by a replica; not replicated: released, "
               "nothing sold",
    .contention = CONTENTION_WAITS,
    .lease = &lease_expires_under_holder,
    .failover = FAILOVER_SAFE,
    .lock = &redis_set_nx_wait,
};
