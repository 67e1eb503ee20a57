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
#include "core/worker.h"
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/redis_stock.h"
#include "store/store.h"

static st_result attempt_once(struct worker *w, const struct deduct_request *rq,
                              struct deduct_reply *out)
{
    struct redis_stock k;
    redis_stock_keys(&k, rq->product);
    st_result r = redis_watch_and_read(w, rq, &k, k.stock, out);
    if (r != ST_OK)
        return r;
    critical_section_wait(rq, NULL);
    out->remaining -= rq->qty;
    r = redis_sale_exec(w, rq, &k, out->remaining);
    if (r == ST_BUSY)
        worker_fail(w, r, "the stock key changed between WATCH and EXEC");
    return r;
}

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return optimistic_retry(w, rq, out, attempt_once, "the stock key");
}

const struct strategy strategy_watch = {
    .name = "watch",
    .store = &store_redis,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "Redis WATCH/MULTI/EXEC with bounded, jittered retry",
    .contention = CONTENTION_RETRIES,
    .deduct = deduct,
};
