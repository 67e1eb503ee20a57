/*
 * segmented - the stock split into segments on different Redis primaries,
 * a sale from one segment, falling through to the others.
 *
 * The race: none of its own - each segment is lua's count, sold by lua's
 * script. What it answers is the hot item: lua sells every unit of a
 * product on one Redis thread, so one product can never sell faster than
 * one primary runs scripts, however many primaries a cluster has.
 *
 * The fix: reset splits the count into --segments parts (store/
 * redis_segments.h), each under a hash tag whose slot lies on a different
 * primary of a cluster of that many; a sale runs the sale script on one
 * segment, chosen round robin, so K primaries share a product's sales. A
 * segment that cannot cover qty passes the sale on to the next, and only
 * when every one has refused is the answer sold_out: for qty 1 nobody is
 * refused while a unit is left anywhere.
 *
 * The price: a sale of qty > 1 is refused when no single segment holds qty,
 * even if together they do (undersell: 2 + 2 + 2 left, 3 asked). Buying
 * across segments would be a reservation: take what each segment has, in
 * turn, with the sale script, until qty is reached; when the segments run
 * out first, give back what was taken (INCRBY the count, HINCRBY the ledger
 * by minus as much) and refuse. Between the take and the give-back other
 * buyers see those units gone and are refused in their turn, the ledger
 * briefly shows units no 200 sold, a sale split over shards is no longer
 * one script (a shard lost between two takes leaves a reservation nobody
 * returns without a recovery log), and one order is several ledger rows.
 * Not built: the refusals it saves are the ones at the very end of stock.
 * A refusal costs up to K scripts, so the last buyers pay K round trips;
 * the reply has no `remaining`, because what a script reports is its
 * segment's count, not the product's, and no script sees them all.
 * Otherwise lua's price, and on a cluster a primary's failover loses
 * acknowledged sales of its segment as lua loses them.
 */
#include "sale/strategy.h"
#include "store/redis_segments.h"

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return segments_sell(w, rq, out, 1);
}

const struct strategy strategy_segmented = {
    .name = "segmented",
    .store = &store_segments,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "the stock split over Redis Cluster shards; one Lua script on one segment, "
               "the others tried before sold_out",
    .contention = CONTENTION_WAITS, /* in each shard's one thread; every unit sells at qty 1 */
    .undersells = UNDERSELLS_SPLIT_QTY,
    .deduct = deduct,
};
