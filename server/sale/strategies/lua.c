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
 * The transport: the sale is sent as script_sale.h sends every sale
 * script - on the HTTP loop's own pipe, or in a shared pipeline on a worker.
 *
 * The price: nothing can wait inside a script (it would stall the whole
 * Redis), so hold_ms and pause_ms are spent before the script, outside any
 * critical section; they cost this request time and never open a race. And
 * every sale of every product on this Redis runs one after the other on its
 * single thread: a slow script slows everyone. A pipeline whose connection
 * breaks answers outcome_unknown for every sale in it that got no answer.
 */
#include "sale/combine.h"
#include "sale/script_sale.h"
#include "sale/strategy.h"
#include "store/store.h"

static const struct combiner pipeline = {.run = script_sale_pipeline, .across_products = 1};

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return script_sale_deduct(&pipeline, w, rq, out);
}

const struct strategy strategy_lua = {
    .name = "lua",
    .store = &store_redis,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "one Lua script checks, decrements and records the sale inside Redis",
    .contention = CONTENTION_WAITS, /* in Redis's one thread */
    .answers_later = 1,
    .keeps_key = KEEPS_KEY_IN_SCRIPT, /* the keyed sale script (redis_stock.h) */
    .deduct = deduct,
};
