/*
 * redis_zset - held Redis orders past their deadline, swept from a sorted
 * set of deadlines.
 *
 * A hold ZADDs its order to deadlines:{P} scored by its deadline, in its
 * sale's script, and its product to order-products before that, so no
 * hold is ever out of a sweeper's sight. Every stockd, every --sweep-ms,
 * runs one script per product that reads Redis's TIME itself and takes the
 * orders due (ZRANGEBYSCORE -inf now), then returns each one through its
 * strategy (sale/returns.h): the units go back the way that strategy
 * writes stock (lua: its script; watch: its WATCH and MULTI; redis-nolock:
 * its unprotected GET then SET), with the order's state change,
 * conditional on `held`, in the same script or MULTI - so two instances
 * sweeping at once return each order once. A sweeper killed between two
 * returns loses nothing: the sorted set still holds what it did not
 * reach.
 *
 * The lag it promises: the next sweep of any live instance - two rounds and
 * a second for a slow server. A failover that loses the primary's last
 * writes loses holds and returns alike (the strategy's failover fact).
 */
#include "store/expiry.h"
#include "store/redis_orders.h"

static st_result sweep(struct worker *w, const struct expiry *e, int *returned)
{
    return redis_orders_sweep(w, e, returned);
}

const struct expiry expiry_redis_zset = {
    .name = "redis-zset",
    .store = &store_redis,
    .summary = "every stockd, every sweep_ms: one script per product takes the orders of "
               "deadlines:{P} due by Redis's TIME; each still held is expired and its units "
               "returned through its strategy, conditional on held",
    .promises_lag = 1,
    .sweep = sweep,
};
