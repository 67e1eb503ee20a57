/*
 * set_nx_lock.c - the SET NX PX lease: redis-lock's lock, which
 * redis-lock-wait takes too before it WAITs for a replica. Its story is
 * redis-lock's (strategies/redis_lock.c); it lives here, below the
 * strategies, because two of them take it.
 */
#include "sale/lock.h"

#include "backend/redis.h"
#include "core/worker.h"

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
