/*
 * segmented-strict - segmented without the fall-through: a sale asks its
 * one segment and takes no for an answer.
 *
 * The race: none; each segment is lua's count and script.
 *
 * The fix: the same split as segmented (store/redis_segments.h), one
 * script on one segment per sale, chosen round robin.
 *
 * The price: undersell even for qty 1. Once one segment is empty, every
 * K-th buyer is refused sold_out while the others still hold stock; the
 * round robin drains the segments together, so under an even load the
 * units left behind are few, but any skew - a segment drained by larger
 * orders, a reset between sales, buyers that stop early - leaves buyers
 * turned away from a product that is not sold out. It is the bucket design
 * of the seckill projects that stop at their bucket, here to measure what
 * segmented's fall-through (at most K scripts for a refusal) saves.
 */
#include "sale/strategy.h"
#include "store/redis_segments.h"

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return segments_sell(w, rq, out, 0);
}

const struct strategy strategy_segmented_strict = {
    .name = "segmented-strict",
    .store = &store_segments,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "segmented with no fall-through: a sale's one segment refuses it, stock left "
               "elsewhere or not",
    .contention = CONTENTION_NONE, /* not "waits": units are left unsold, see above */
    .undersells = UNDERSELLS_ANY_QTY,
    .deduct = deduct,
};
