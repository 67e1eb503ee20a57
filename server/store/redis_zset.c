/*
 * redis_zset - held Redis orders past their deadline, swept from a sorted
 * set of deadlines.
 *
 * A hold ZADDs its order to deadlines:{P} scored by its deadline, in its
 * sale's script, and its product to order-products before that, so no
 * hold is ever out of a sweeper's sight. Every stockd, every --sweep-ms,
 * runs one script per product that reads Redis's TIME itself, takes the
 * orders due (ZRANGEBYSCORE -inf now), and for each still held expires it,
 * gives its units back and records the return - one script, so nothing
 * runs between the check and the return, and two instances sweeping at
 * once return each order once. A sweeper killed between two scripts loses
 * nothing: the sorted set still holds what it did not reach.
 *
 * The lag it promises: the next sweep of any live instance - two rounds and
 * a second for a slow server. A failover that loses the primary's last
 * writes loses holds and returns alike (the strategy's failover fact).
 */
#include "store/expiry.h"
#include "store/redis_orders.h"

static st_result sweep(struct worker *w, const struct expiry *e, int *returned)
{
    (void)e;
    return redis_orders_sweep(w, returned);
}

const struct expiry expiry_redis_zset = {
    .name = "redis-zset",
    .store = &store_redis,
    .summary = "every stockd, every sweep_ms: one script per product takes the orders of "
               "deadlines:{P} due by Redis's TIME and, for each still held, expires it and returns "
               "its units",
    .promises_lag = 1,
    .sweep = sweep,
};
