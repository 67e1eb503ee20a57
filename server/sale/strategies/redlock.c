/*
 * redlock - one lock over several independent Redis servers (Redlock).
 *
 * The race: nolock's; and redis-lock's single point of failure: if its one
 * Redis goes down, nobody can sell, and if it fails over to a replica that
 * had not yet seen the lock, two holders enter.
 *
 * The fix: N independent servers (--redlock, N odd, usually 3 or 5) and the
 * same token on each: SET lock:{P}:redlock <token> NX PX ttl on every one,
 * one after the other, timing the whole round. The lock is ours if a
 * majority said yes and time is left: validity = ttl - elapsed - drift
 * (drift: 1% of the TTL plus 2 ms for clocks that do not tick alike).
 * Otherwise we undo what we got and try again until lock_wait_ms. Release
 * is compare-and-delete on every server, answered or not. A minority of
 * servers may be down without stopping sales.
 *
 * The price: N round trips to lock and N to unlock, and more ways to lose
 * the race for a majority under contention. And it is still a lease, with a
 * TTL and no fencing: a holder that outlives its validity (hold_ms >
 * ttl_ms, or a pause) keeps working while a second holder takes the
 * majority, and both sell from the same count. More servers do not make a
 * lease safer against a slow holder.
 */
#include "backend/redis.h"
#include "backend/redlock.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdio.h>

/* Compare-and-delete on every server; how many still held our token. */
static int unlock_all(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    char key[LOCK_NAME_MAX];
    lock_state_name(key, held->kind, 0, rq->product);
    int deleted = 0;
    for (int i = 0; i < redlock_count(); i++) {
        int lost;
        /* a server that does not answer lets the key expire */
        if (redis_lease_release(w, redlock_link(w, i), key, held->token, &lost) == ST_OK)
            deleted += !lost;
    }
    return deleted;
}

/* A server that restarted leaves a dead connection behind: the first
 * command on it fails. Try once more on a fresh one before counting the
 * server as down. */
static st_result set_on(struct worker *w, int i, redisReply **reply, const char **argv)
{
    struct redis_link *link = redlock_link(w, i);
    int was_connected = link->ctx != NULL;
    st_result r = redis_link_call(w, link, reply, 6, argv);
    if (r == ST_BACKEND_UNAVAILABLE && was_connected && !link->ctx)
        r = redis_link_call(w, link, reply, 6, argv);
    return r;
}

static st_result try_once(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken)
{
    int n = redlock_count(), quorum = n / 2 + 1;
    if (n == 0)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "redlock: no servers configured (--redlock / STOCKD_REDLOCK)");
    char key[LOCK_NAME_MAX], ttl[16];
    lock_state_name(key, held->kind, 0, rq->product);
    snprintf(ttl, sizeof ttl, "%d", rq->ttl_ms);
    const char *argv[] = {"SET", key, held->token, "NX", "PX", ttl};

    long long start = monotonic_ms();
    int granted = 0, answered = 0;
    for (int i = 0; i < n; i++) {
        redisReply *reply;
        if (set_on(w, i, &reply, argv) != ST_OK)
            continue;
        answered++;
        granted += reply->type == REDIS_REPLY_STATUS;
        freeReplyObject(reply);
    }
    long long drift = rq->ttl_ms / 100 + 2;
    long long validity = rq->ttl_ms - (monotonic_ms() - start) - drift;
    if (granted >= quorum && validity > 0) {
        *taken = 1;
        return ST_OK;
    }
    if (granted > 0)
        unlock_all(w, rq, held);
    if (answered < quorum)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "redlock: only %d of %d servers answered, %d needed", answered, n,
                           quorum);
    return ST_OK;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    *lost = unlock_all(w, rq, held) < redlock_count() / 2 + 1;
    return ST_OK;
}

static const struct lock_kind redlock = {
    .name = "redlock",
    .backend = BACKEND_REDLOCK,
    .tokens = 1,
    .names = {"lock:{%d}:redlock"},
    .try_once = try_once,
    .release = release,
};

/* A majority that forgets the lock (one server's clock jumps, one restarts
 * empty) lets a second holder in; a grant whose validity is gone when it
 * arrives is refused (try_once), so a late answer sells nothing. */
static const struct lease redlock_lease = {
    .busy_holder = LEASE_OVERSELLS,
    .paused_holder = LEASE_OVERSELLS,
    .clock_jump = LEASE_OVERSELLS,
    .empty_restart = LEASE_OVERSELLS,
    .late_grant = LEASE_SAFE,
};

const struct strategy strategy_redlock = {
    .name = "redlock",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "while the holder finishes within the lock's validity time",
    .summary = "SET NX PX on a majority of independent Redis servers within the TTL (Redlock)",
    .contention = CONTENTION_WAITS,
    .lease = &redlock_lease,
    .lock = &redlock,
};
