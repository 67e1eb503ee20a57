/*
 * setnx-expire - the naive Redis lock of the seeds: SETNX, then EXPIRE.
 *
 * The race: nolock's, between any threads of any stockd instances.
 *
 * The fix it tries: SETNX lock:{P}:setnx - set only if absent, so one client
 * wins - then PEXPIRE the key with the TTL, so a crashed holder cannot keep
 * it forever; DEL it when done.
 *
 * The price, and why it is unsafe: three mistakes, each one a story.
 * SETNX and PEXPIRE are two commands: a holder that dies (or loses its
 * connection) between them leaves a lock with no TTL, and every later
 * request waits out lock_wait_ms and answers busy until a reset. The DEL
 * does not check who holds the key: once the TTL has expired under a slow
 * holder (hold_ms > ttl_ms, or a pause) and a second holder took the lock,
 * the first one's DEL frees the second one's lock too, and a third walks
 * in. And like every lease, an expired lock lets two holders read the same
 * count: with hold_ms > ttl_ms it oversells every time. redis-lock is the
 * fix of the first two (SET NX PX in one command, compare-and-delete).
 */
#include "backend/redis.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

static st_result try_once(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken)
{
    char key[LOCK_NAME_MAX], ttl[16];
    lock_state_name(key, held->kind, 0, rq->product);
    const char *setnx[] = {"SETNX", key, held->token};
    redisReply *reply;
    st_result r = redis_call(w, &reply, 3, setnx);
    if (r != ST_OK)
        return r;
    *taken = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    if (!*taken)
        return ST_OK;

    /* The gap: until this command lands, the lock has no TTL. */
    snprintf(ttl, sizeof ttl, "%d", rq->ttl_ms);
    const char *pexpire[] = {"PEXPIRE", key, ttl};
    r = redis_call(w, &reply, 3, pexpire);
    if (r == ST_OK)
        freeReplyObject(reply);
    else
        *taken = 0; /* the lock stays behind without a TTL: the seeds' deadlock */
    return r;
}

/* GET only to report whether the lock was still ours; the DEL happens
 * either way, which is the bug. */
static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    char key[LOCK_NAME_MAX];
    lock_state_name(key, held->kind, 0, rq->product);
    const char *get[] = {"GET", key};
    const char *del[] = {"DEL", key};
    const char *const *argvs[] = {get, del};
    const int argcs[] = {2, 2};
    redisReply *replies[2];
    st_result r = redis_pipeline(w, 2, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    redisReply *value = replies[0];
    *lost = !(value->type == REDIS_REPLY_STRING && strcmp(value->str, held->token) == 0);
    if (replies[1]->type == REDIS_REPLY_ERROR)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: DEL %s: %s", key, replies[1]->str);
    redis_free_replies(replies, 2);
    return r;
}

static const struct lock_kind setnx_then_expire = {
    .name = "setnx lock",
    .backend = BACKEND_REDIS,
    .tokens = 1,
    .names = {"lock:{%d}:setnx"},
    .try_once = try_once,
    .release = release,
};

const struct strategy strategy_setnx_expire = {
    .name = "setnx-expire",
    .store = &store_mysql,
    .safe_single = 0,
    .safe_multi = 0,
    .caveat = "excludes only while the TTL outlives the critical section; its DEL frees "
              "whoever holds the lock",
    .summary = "SETNX lock, then PEXPIRE ttl as a second command; DEL without an owner check",
    .contention = CONTENTION_WAITS,
    .lease = &lease_expires_under_holder,
    .exposed_by = EXPOSED_BY_HOLD | EXPOSED_BY_TTL,
    .lock = &setnx_then_expire,
};
