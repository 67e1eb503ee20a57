/*
 * lua-stream - the production flash sale: deduct in Redis, stream the
 * order, settle it into MySQL later, exactly once.
 *
 * The race: not between buyers - lua's one script already makes the
 * deduction atomic - but between the steps of the design everyone builds
 * on it: deduct in Redis, then send the order to a queue, then write MySQL.
 * A process that dies after the deduction and before the send has sold a
 * unit nobody will ever ship; a consumer that dies after its INSERT and
 * before its acknowledgement writes the order twice when it is retried.
 *
 * The fix: the script checks and decrements the stock, records the sale in
 * the Redis ledger and XADDs the order (an id stockd made, product, qty,
 * reset epoch) to the stream orders:stream, all in one atomic step inside
 * Redis. A consumer group settles the stream into MySQL (order_stream.h):
 * one transaction per batch, the order id a unique key, COMMIT before
 * XACK - so every accepted order lands once, whichever process dies when.
 * The sale is sent the way lua sends it (the HTTP loop's own pipe, or a
 * shared pipeline on a worker).
 *
 * The price: the 200 means accepted in Redis, not written in MySQL: MySQL
 * catches up after the drain, and its stock lags Redis's by the stream's
 * length. The row is as durable as Redis's persistence (appendfsync) and,
 * like lua, loses acknowledged sales in a Redis failover. The reply
 * carries the order id, so that clients can reconcile.
 *
 * Not on a Redis Cluster: the script XADDs every product's order to one
 * stream, whose key has a slot of its own, not the product's - a cluster
 * refuses such a script (CROSSSLOT). A stream per product would keep the
 * keys together, but then the consumers would have to find and read every
 * product's stream; until they do, the row answers 503 there, nothing sold.
 */
#include "backend/redis_cluster.h"
#include "core/later.h"
#include "sale/combine.h"
#include "sale/script_sale.h"
#include "sale/strategy.h"
#include "store/store.h"

static const struct combiner pipeline = {.run = script_sale_pipeline, .across_products = 1};

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    if (redis_cluster_enabled()) {
        rq->later->answer(rq->later, ST_BACKEND_UNAVAILABLE,
                          "lua-stream does not run on a Redis Cluster: its script streams every "
                          "product's order to one key (orders:stream), in a slot of its own");
        return ST_OK;
    }
    return script_sale_deduct(&pipeline, w, rq, out);
}

const struct strategy strategy_lua_stream = {
    .name = "lua-stream",
    .store = &store_redis,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "a 200 is as durable as Redis: the stack runs appendonly yes, appendfsync no, so a "
              "killed Redis process loses no accepted order, a crashed machine up to ~30 s of them",
    .summary = "one Lua script deducts, records and streams the order; a consumer group settles "
               "it into MySQL exactly once",
    .contention = CONTENTION_WAITS, /* in Redis's one thread */
    .settles = SETTLES_LATER,
    .answers_later = 1,
    .keeps_key = KEEPS_KEY_IN_SCRIPT, /* the keyed stream script (redis_stock.h), the key settled
                                         with its order */
    .orders_why =
        "its order is settled into MySQL later, and a return would have to reach both stores once",
    .deduct = deduct,
};
