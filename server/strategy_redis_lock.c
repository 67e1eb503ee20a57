/*
 * redis-lock - a Redis lock around the nolock body.
 *
 * The race: nolock's, between any threads of any stockd instances.
 *
 * The fix: SET lock:{P} <random token> NX PX <ttl> - set only if absent,
 * expiring by itself if the holder dies. Waiters poll with jittered backoff
 * for up to lock_wait_ms, then answer busy. Release is a Lua
 * compare-and-delete (EVALSHA): delete the key only if it still holds our
 * token, so a holder whose lock expired cannot delete the next holder's.
 *
 * The price: a Redis round trip to lock, one to unlock, plus polling; and
 * the lock is only a lease. If the critical section outlives the TTL
 * (hold_ms > ttl_ms, or a pause), the lock expires under the holder, a
 * second holder enters, and the stock is oversold: safe only while the TTL
 * outlives the critical section.
 */
#include "lock.h"
#include "redis_store.h"
#include "store.h"
#include "worker.h"

#include <stdio.h>

static st_result try_once(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken)
{
    char key[LOCK_NAME_MAX], ttl[16];
    lock_state_name(key, held->kind, 0, rq->product);
    snprintf(ttl, sizeof ttl, "%d", rq->ttl_ms);
    const char *argv[] = {"SET", key, held->token, "NX", "PX", ttl};
    redisReply *reply;
    st_result r = redis_call(w, &reply, 6, argv);
    if (r != ST_OK)
        return r;
    *taken = reply->type == REDIS_REPLY_STATUS;
    freeReplyObject(reply);
    return ST_OK;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    char key[LOCK_NAME_MAX];
    lock_state_name(key, held->kind, 0, rq->product);
    return redis_lease_release(w, redis_main(w), key, held->token, lost);
}

const struct lock_kind lock_redis_set_nx = {
    .name = "redis lock",
    .backend = BACKEND_REDIS,
    .tokens = 1,
    .names = {"lock:{%d}"},
    .try_once = try_once,
    .release = release,
};

const struct strategy strategy_redis_lock = {
    .name = "redis-lock",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "while the lock's TTL outlives the critical section",
    .summary = "SET lock NX PX ttl around the nolock body; Lua compare-and-delete release",
    .contention = CONTENTION_WAITS,
    .failover = FAILOVER_TWO_HOLDERS,
    .lease = &lease_expires_under_holder,
    .cluster = CLUSTER_SAFE,
    .lock = &lock_redis_set_nx,
};
