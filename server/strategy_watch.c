/*
 * watch - optimistic on Redis: WATCH the stock key, then MULTI/EXEC.
 *
 * The race: GET the count, SET count - qty: between the two, another client
 * can sell from the same count (redis-nolock's race).
 *
 * The fix: WATCH stock:{P} before the GET. EXEC then runs the queued SET and
 * the ledger update only if nobody touched the key since WATCH; otherwise it
 * returns nil, nothing is applied, and this request retries (jittered
 * backoff, up to optimistic_attempts), then answers busy. The sale and its
 * ledger entry are in the same MULTI, so they apply together or not at all.
 *
 * The price: three round trips per attempt (WATCH+GET, then the pipelined
 * MULTI..EXEC), and like cas, wasted work under contention.
 */
#include "config.h"
#include "redis_store.h"
#include "sale.h"
#include "worker.h"

#include <stdio.h>

struct keys {
    char stock[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX];
};

/* WATCH then GET; the count is left in *count. */
static st_result watch_and_read(struct worker *w, const struct deduct_request *rq,
                                const struct keys *k, long long *count)
{
    const char *watch[] = {"WATCH", k->stock};
    const char *get[] = {"GET", k->stock};
    const char *const *argvs[] = {watch, get};
    const int argcs[] = {2, 2};
    redisReply *replies[2];
    st_result r = redis_pipeline(w, 2, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    if (replies[1]->type == REDIS_REPLY_NIL)
        r = worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in redis", rq->product);
    else if (redis_reply_int(replies[1], count) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: %s does not hold an integer",
                        k->stock);
    redis_free_replies(replies, 2);
    return r;
}

static void unwatch(struct worker *w)
{
    redisReply *reply;
    const char *argv[] = {"UNWATCH"};
    if (redis_call(w, &reply, 1, argv) == ST_OK)
        freeReplyObject(reply);
}

/* MULTI; SET; HINCRBY sold; HINCRBY orders; EXEC. ST_BUSY when EXEC was
 * aborted because the watched key changed. */
static st_result exec_sale(struct worker *w, const struct deduct_request *rq,
                           const struct keys *k, long long left)
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

static st_result attempt_once(struct worker *w, const struct deduct_request *rq,
                              const struct keys *k, struct deduct_reply *out)
{
    long long count;
    st_result r = watch_and_read(w, rq, k, &count);
    if (r == ST_OK) {
        out->remaining = count;
        if (count < rq->qty)
            r = worker_fail(w, ST_SOLD_OUT, "%lld left, %d asked", count, rq->qty);
    }
    if (r != ST_OK) {
        unwatch(w);
        return r;
    }
    critical_section_wait(rq, NULL);
    out->remaining = count - rq->qty;
    return exec_sale(w, rq, k, count - rq->qty);
}

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    struct keys k;
    redis_key(k.stock, "stock", rq->product, "");
    redis_key(k.ledger, "ledger", rq->product, "");
    for (int attempt = 1;; attempt++) {
        out->attempts = attempt;
        st_result r = attempt_once(w, rq, &k, out);
        if (r != ST_BUSY)
            return r;
        if (attempt >= config.optimistic_attempts)
            return worker_fail(w, ST_BUSY, "%s changed under every one of %d attempts", k.stock,
                               attempt);
        optimistic_backoff(w, attempt);
    }
}

const struct strategy strategy_watch = {
    .name = "watch",
    .store = STORE_REDIS,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "Redis WATCH/MULTI/EXEC with bounded, jittered retry",
    .needs = NEEDS_REDIS,
    .deduct = deduct,
};
