/*
 * redis-nolock - the race, on Redis.
 *
 * The race: GET stock:{P}, compute count - qty in the server, SET the key to
 * that value. Two requests that read the same count both write count - qty:
 * two sales, one deduction. Redis runs each command atomically, but nothing
 * ties the GET to the SET, so a fast store does not make the pair atomic.
 *
 * The fix: none here; watch and lua are the fixes. The SET and the ledger
 * entry (HINCRBY sold, orders) go in one MULTI/EXEC, so the ledger always
 * matches the writes made - but without WATCH, EXEC applies them even when
 * the count changed since the GET, and lost_updates counts the vanished
 * deductions.
 *
 * The price: two round trips and no waiting at all. hold_ms sits between the
 * GET and the SET, so that two requests in flight overlap every time.
 */
#include "redis_store.h"
#include "sale.h"
#include "worker.h"

#include <stdio.h>

static st_result read_count(struct worker *w, const struct deduct_request *rq, const char *stock,
                            long long *count)
{
    const char *argv[] = {"GET", stock};
    redisReply *reply;
    st_result r = redis_call(w, &reply, 2, argv);
    if (r != ST_OK)
        return r;
    if (reply->type == REDIS_REPLY_NIL)
        r = worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in redis", rq->product);
    else if (redis_reply_int(reply, count) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: %s does not hold an integer", stock);
    freeReplyObject(reply);
    return r;
}

/* MULTI; SET; HINCRBY sold; HINCRBY orders; EXEC - in one round trip. */
static st_result write_sale(struct worker *w, const struct deduct_request *rq, const char *stock,
                            const char *ledger, long long left)
{
    char left_text[24], qty_text[16];
    snprintf(left_text, sizeof left_text, "%lld", left);
    snprintf(qty_text, sizeof qty_text, "%d", rq->qty);
    const char *multi[] = {"MULTI"};
    const char *set[] = {"SET", stock, left_text};
    const char *sold[] = {"HINCRBY", ledger, "sold", qty_text};
    const char *orders[] = {"HINCRBY", ledger, "orders", "1"};
    const char *exec[] = {"EXEC"};
    const char *const *argvs[] = {multi, set, sold, orders, exec};
    const int argcs[] = {1, 3, 4, 4, 1};
    redisReply *replies[5];
    st_result r = redis_pipeline(w, 5, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    redisReply *result = replies[4];
    if (result->type != REDIS_REPLY_ARRAY || result->elements != 3)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: EXEC failed: %s",
                        result->type == REDIS_REPLY_ERROR ? result->str : "unexpected reply");
    redis_free_replies(replies, 5);
    return r;
}

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    char stock[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX];
    redis_key(stock, "stock", rq->product, "");
    redis_key(ledger, "ledger", rq->product, "");
    out->attempts = 1;

    long long count;
    st_result r = read_count(w, rq, stock, &count);
    if (r != ST_OK)
        return r;
    out->remaining = count;
    if (count < rq->qty)
        return worker_fail(w, ST_SOLD_OUT, "%lld left, %d asked", count, rq->qty);

    critical_section_wait(rq, NULL);

    out->remaining = count - rq->qty;
    return write_sale(w, rq, stock, ledger, count - rq->qty);
}

const struct strategy strategy_redis_nolock = {
    .name = "redis-nolock",
    .store = STORE_REDIS,
    .safe_single = 0,
    .safe_multi = 0,
    .summary =
        "GET count, then SET count = read - qty (ledger in the same MULTI): the race on Redis",
    .needs = NEEDS_REDIS,
    .deduct = deduct,
};
