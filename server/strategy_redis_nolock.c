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
#include "redis_sale.h"
#include "sale.h"
#include "worker.h"

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    struct redis_stock k;
    redis_stock_keys(&k, rq->product);
    out->attempts = 1;
    const char *get[] = {"GET", k.stock};
    redisReply *reply;
    st_result r = redis_call(w, &reply, 2, get);
    if (r != ST_OK)
        return r;
    r = redis_count_reply(w, rq, &k, reply, out);
    freeReplyObject(reply);
    if (r != ST_OK)
        return r;
    critical_section_wait(rq, NULL);
    out->remaining -= rq->qty;
    return redis_sale_exec(w, rq, &k, out->remaining);
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
