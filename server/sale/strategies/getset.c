/*
 * getset - the timestamp lock of the seeds: SETNX, GET, GETSET.
 *
 * The race: nolock's, between any threads of any stockd instances.
 *
 * The fix it tries: the lock's value is its own expiry time (wall clock,
 * milliseconds), so no separate EXPIRE can be forgotten. SETNX lock:{P}:getset
 * <now + ttl> wins a free lock. Otherwise GET the expiry: if it has passed,
 * the holder is presumed dead, and GETSET <now + ttl> takes the lock over -
 * GETSET answers the value it replaced, and only the one contender whose
 * GET read exactly that value owns the lock; the others see a newer expiry
 * and keep waiting. Release: DEL, but only if our expiry has not passed yet
 * (after it, someone may have taken the lock over).
 *
 * The price: it trusts every client's clock to agree. A losing contender's
 * GETSET still overwrote the winner's expiry with its own. The release
 * check and the DEL are two steps, so a holder at the edge of its expiry
 * can still delete a successor's lock. And above all it is a lease like
 * every TTL lock: a holder that outlives its expiry (hold_ms > ttl_ms, or a
 * pause) is taken over while it still works, and both sell from the same
 * count. Unsafe under expiry.
 */
#include "backend/redis.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Milliseconds since the epoch: the lock's value must mean the same on
 * every client, so this is the wall clock, not the monotonic one. */
static long long wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The lock's value is the holder's expiry; held->token keeps the one we
 * wrote, as text, because that value is what identifies us as the holder. */
static st_result try_once(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken)
{
    char key[LOCK_NAME_MAX];
    lock_state_name(key, held->kind, 0, rq->product);
    long long now = wall_ms();
    snprintf(held->token, sizeof held->token, "%lld", now + rq->ttl_ms);

    const char *setnx[] = {"SETNX", key, held->token};
    redisReply *reply;
    st_result r = redis_call(w, &reply, 3, setnx);
    if (r != ST_OK)
        return r;
    *taken = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    if (*taken)
        return ST_OK;

    const char *get[] = {"GET", key};
    r = redis_call(w, &reply, 2, get);
    if (r != ST_OK)
        return r;
    long long expiry;
    int readable = reply->type == REDIS_REPLY_STRING && redis_reply_int(reply, &expiry) == 0;
    char seen[32] = "";
    if (readable)
        snprintf(seen, sizeof seen, "%s", reply->str);
    freeReplyObject(reply);
    if (!readable || expiry >= now)
        return ST_OK; /* released just now (nil) or still valid: poll again */

    /* Expired: try to take it over. */
    const char *getset[] = {"GETSET", key, held->token};
    r = redis_call(w, &reply, 3, getset);
    if (r != ST_OK)
        return r;
    *taken = reply->type == REDIS_REPLY_STRING && strcmp(reply->str, seen) == 0;
    freeReplyObject(reply);
    return ST_OK;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    char key[LOCK_NAME_MAX];
    lock_state_name(key, held->kind, 0, rq->product);
    const char *get[] = {"GET", key};
    redisReply *reply;
    st_result r = redis_call(w, &reply, 2, get);
    if (r != ST_OK)
        return r;
    *lost = !(reply->type == REDIS_REPLY_STRING && strcmp(reply->str, held->token) == 0);
    freeReplyObject(reply);

    long long expiry = strtoll(held->token, NULL, 10);
    if (wall_ms() >= expiry) {
        *lost = 1; /* past our expiry: the lock may be someone else's now */
        return ST_OK;
    }
    const char *del[] = {"DEL", key};
    r = redis_call(w, &reply, 2, del);
    if (r == ST_OK)
        freeReplyObject(reply);
    return r;
}

static const struct lock_kind timestamp_lock = {
    .name = "getset lock",
    .backend = BACKEND_REDIS,
    .tokens = 1,
    .names = {"lock:{%d}:getset"},
    .try_once = try_once,
    .release = release,
};

const struct strategy strategy_getset = {
    .name = "getset",
    .store = &store_mysql,
    .safe_single = 0,
    .safe_multi = 0,
    .caveat = "excludes only while the holder finishes before the expiry it wrote, and only "
              "if every client's clock agrees",
    .summary = "SETNX lock <expiry>; an expired lock is taken over by GET then GETSET",
    .contention = CONTENTION_WAITS,
    .lease = &lease_expires_under_holder,
    .exposed_by = EXPOSED_BY_HOLD | EXPOSED_BY_TTL,
    .lock = &timestamp_lock,
};
