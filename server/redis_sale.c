/*
 * redis_sale.c - reading the count and writing a sale on Redis.
 */
#include "redis_sale.h"

#include "sale.h"
#include "worker.h"

#include <stdio.h>

void redis_stock_keys(struct redis_stock *k, int product)
{
    redis_key(k->stock, "stock", product, "");
    redis_key(k->ledger, "ledger", product, "");
}

st_result redis_count_reply(struct worker *w, const struct deduct_request *rq,
                            const struct redis_stock *k, const redisReply *reply,
                            struct deduct_reply *out)
{
    long long count;
    if (reply->type == REDIS_REPLY_NIL)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in redis", rq->product);
    if (redis_reply_int(reply, &count) != 0)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: %s does not hold an integer",
                           k->stock);
    return count_covers(w, rq, count, out);
}

st_result redis_sale_exec(struct worker *w, const struct deduct_request *rq,
                          const struct redis_stock *k, long long left)
{
    char left_text[24], qty_text[16];
    snprintf(left_text, sizeof left_text, "%lld", left);
    snprintf(qty_text, sizeof qty_text, "%d", rq->qty);
    const char *multi[] = {"MULTI"};
    const char *set[] = {"SET", k->stock, left_text};
    const char *sold[] = {"HINCRBY", k->ledger, "sold", qty_text};
    const char *orders[] = {"HINCRBY", k->ledger, "orders", "1"};
    const char *exec[] = {"EXEC"};
    const char *const *argvs[] = {multi, set, sold, orders, exec};
    const int argcs[] = {1, 3, 4, 4, 1};
    redisReply *replies[5];
    st_result r = redis_pipeline(w, 5, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    redisReply *result = replies[4];
    if (result->type == REDIS_REPLY_NIL)
        r = worker_fail(w, ST_BUSY, "%s changed between WATCH and EXEC", k->stock);
    else if (result->type != REDIS_REPLY_ARRAY || result->elements != 3)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: EXEC failed: %s",
                        result->type == REDIS_REPLY_ERROR ? result->str : "unexpected reply");
    redis_free_replies(replies, 5);
    return r;
}
