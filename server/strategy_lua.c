/*
 * lua - the whole sale as one Lua script inside Redis.
 *
 * The race: redis-nolock's - GET the count, SET count - qty; between the two
 * round trips another client sells from the same count.
 *
 * The fix: send the check and the write to Redis as one script (EVALSHA).
 * Redis runs a script to its end before it serves any other command, so the
 * script reads the count, refuses when it is short, and otherwise DECRBYs
 * it and records the sale in ledger:{P} (sold, orders) with no other client
 * in between: the script is the critical section, and the sale and its
 * ledger entry apply together.
 *
 * The price: nothing can wait inside a script (it would stall the whole
 * Redis), so hold_ms and pause_ms are spent before the script, outside any
 * critical section; they cost this request time and never open a race. And
 * every sale of every product on this Redis runs one after the other on its
 * single thread: a slow script slows everyone.
 */
#include "redis_store.h"
#include "sale.h"
#include "store.h"
#include "worker.h"

#include <stdio.h>

/* Returns {1, left} when sold, {0, count} when short, {-1, 0} when the
 * product is not in Redis. */
static struct redis_script sell = {
    .source = "local count = tonumber(redis.call('GET', KEYS[1]))\n"
              "if not count then return {-1, 0} end\n"
              "local qty = tonumber(ARGV[1])\n"
              "if count < qty then return {0, count} end\n"
              "local left = redis.call('DECRBY', KEYS[1], qty)\n"
              "redis.call('HINCRBY', KEYS[2], 'sold', qty)\n"
              "redis.call('HINCRBY', KEYS[2], 'orders', 1)\n"
              "return {1, left}\n",
};

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    char stock[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX], qty[16];
    redis_key(stock, "stock", rq->product, "");
    redis_key(ledger, "ledger", rq->product, "");
    snprintf(qty, sizeof qty, "%d", rq->qty);
    out->attempts = 1;

    /* Not a critical section: the script below is the only one. */
    critical_section_wait(rq, NULL);

    const char *argv[] = {stock, ledger, qty};
    redisReply *reply;
    st_result r = redis_eval_sale(w, &sell, &reply, 2, 3, argv);
    if (r != ST_OK)
        return r;
    long long sold, count;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        redis_reply_int(reply->element[0], &sold) != 0 ||
        redis_reply_int(reply->element[1], &count) != 0) {
        freeReplyObject(reply);
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "redis: unexpected reply from the sale script");
    }
    freeReplyObject(reply);
    if (sold < 0)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in redis", rq->product);
    out->remaining = count;
    if (sold == 0)
        return worker_fail(w, ST_SOLD_OUT, "%lld left, %d asked", count, rq->qty);
    return ST_OK;
}

const struct strategy strategy_lua = {
    .name = "lua",
    .store = &store_redis,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "one Lua script checks, decrements and records the sale inside Redis",
    .contention = CONTENTION_WAITS, /* in Redis's one thread */
    .deduct = deduct,
};
