/*
 * fenced - a Redis lock that hands out fencing tokens, checked by MySQL.
 *
 * The race: redis-lock's. A lease expires under a holder that is still
 * working (hold_ms > ttl_ms), or that was frozen (a GC or VM pause,
 * pause_ms): a second holder enters, and when the first one wakes up it
 * writes the count it read long ago. No lock can stop that on its own: the
 * stale holder does not know it is stale.
 *
 * The fix: make the store refuse the stale holder. One Lua script takes the
 * lock (SET lock:{P}:fenced NX PX ttl) and, only if it got it, INCRs
 * fence:{P}: every holder gets a strictly larger token than the one before.
 * The body (read_then_write in sale.c) first claims the token on the stock
 * row (fence = token, only if the row's fence is smaller), then reads, and
 * writes only if the row still carries its token. Once a newer holder has
 * claimed the row, the older one's write matches nothing: it answers busy
 * and changes nothing.
 *
 * Tokens never go back: a reset keeps both the counter and the row's fence,
 * and a counter that Redis lost (a restart without its data, a FLUSHALL)
 * catches up with the row's fence the first time the row refuses a token;
 * that request then takes the lock once more, with a token the row accepts.
 *
 * The price: the store has to take part (a fence column and a conditional
 * write), one more statement per sale, and under expiry the lock stops
 * being a queue: work done by stale holders is thrown away as busy. But
 * the stock is never oversold, however long the holder stalls. On a
 * multi-primary cluster the claim is a write, and writes do not wait for
 * the node to apply the previous holder's sale (reads do): it can lose
 * certification against that sale and answer busy while stock remains.
 */
#include "backend/redis.h"
#include "core/log.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdio.h>

/* The lock and its token in one step: 0 when the lock is taken. */
static struct redis_script lock_and_fence = {
    .source = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
              "  return redis.call('INCR', KEYS[2])\n"
              "end\n"
              "return 0\n",
};

static st_result try_once(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken)
{
    char key[LOCK_NAME_MAX], fence[REDIS_KEY_MAX], ttl[16];
    lock_state_name(key, held->kind, 0, rq->product);
    redis_key(fence, "fence", rq->product, "");
    snprintf(ttl, sizeof ttl, "%d", rq->ttl_ms);
    const char *argv[] = {key, fence, held->token, ttl};
    redisReply *reply;
    st_result r = redis_eval(w, &lock_and_fence, &reply, 2, 4, argv);
    if (r != ST_OK)
        return r;
    long long token = 0;
    if (redis_reply_int(reply, &token) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: unexpected reply from the fence script");
    freeReplyObject(reply);
    *taken = r == ST_OK && token > 0;
    if (*taken)
        held->guard.fence = token;
    return r;
}

/* Sets fence:{P} to at least ARGV[1]: a counter that fell behind the
 * store's newest token (Redis lost it) catches up, instead of handing out
 * tokens the store refuses forever; 1 if it did. A counter that is ahead
 * (a newer holder drew from it) is left alone: tokens never go back. */
static struct redis_script catch_up = {
    .source = "if (tonumber(redis.call('GET', KEYS[1])) or 0) < tonumber(ARGV[1]) then\n"
              "  redis.call('SET', KEYS[1], ARGV[1])\n"
              "  return 1\n"
              "end\n"
              "return 0\n",
};

/* Deletes fence:{P} if nobody drew a token since ours: only a product that
 * does not exist gets here, and it must leave no counter behind. */
static struct redis_script forget_counter = {
    .source = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
              "  return redis.call('DEL', KEYS[1])\n"
              "end\n"
              "return 0\n",
};

/* Runs a one-key script on fence:{P} and gives its integer answer; best
 * effort (a failure is logged, and answers 0). */
static long long on_counter(struct worker *w, int product, struct redis_script *script,
                            long long value)
{
    char fence[REDIS_KEY_MAX], text[24];
    redis_key(fence, "fence", product, "");
    snprintf(text, sizeof text, "%lld", value);
    const char *argv[] = {fence, text};
    redisReply *reply;
    long long answer = 0;
    if (redis_eval(w, script, &reply, 1, 2, argv) != ST_OK) {
        log_warn("fenced: %s: %s", fence, w->error);
        return 0;
    }
    if (redis_reply_int(reply, &answer) != 0)
        answer = 0;
    freeReplyObject(reply);
    return answer;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    char key[LOCK_NAME_MAX];
    lock_state_name(key, held->kind, 0, rq->product);
    /* Refused although we held the lock, and the counter was behind - or
     * had come back to a token the row had seen already: the refusal was
     * Redis's lost counter, not a newer holder. Go again, past the row's. */
    if (held->guard.newest_fence > held->guard.fence)
        held->again = on_counter(w, rq->product, &catch_up, held->guard.newest_fence) == 1;
    else if (held->guard.newest_fence == held->guard.fence)
        held->again = 1; /* tokens are unique while the counter lives */
    return redis_lease_release(w, redis_main(w), key, held->token, lost);
}

static void forget(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    on_counter(w, rq->product, &forget_counter, held->guard.fence);
}

static const struct lock_kind fenced_lock = {
    .name = "fenced lock",
    .backend = BACKEND_REDIS,
    .tokens = 1,
    .names = {"lock:{%d}:fenced"}, /* not fence:{P}: tokens never go back */
    .fences = 1,
    .try_once = try_once,
    .release = release,
    .forget = forget,
};

/* However long the holder stalls, and whatever its Redis forgets (a clock
 * jump, a restart without its data, a grant answered late), the store
 * refuses its stale write. */
static const struct lease fenced_out = {
    .busy_holder = LEASE_SAFE,
    .paused_holder = LEASE_SAFE,
    .clock_jump = LEASE_SAFE,
    .empty_restart = LEASE_SAFE,
    .late_grant = LEASE_SAFE,
};

const struct strategy strategy_fenced = {
    .name = "fenced",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "SET lock NX PX plus INCR fence in one script; MySQL refuses writes with a stale "
               "token",
    .contention = CONTENTION_WAITS,
    .failover = FAILOVER_SAFE,
    .lease = &fenced_out,
    .cluster = CLUSTER_CONFLICTS_AT_COMMIT,
    .lock = &fenced_lock,
};
