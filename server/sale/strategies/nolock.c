/*
 * nolock - the race itself.
 *
 * The race: SELECT the count, compute count - qty in the server, UPDATE the
 * row to that value. Two requests that read the same count both write
 * count - qty: two sales, one deduction. The ledger records both, so
 * lost_updates counts the vanished deductions, and once enough vanish the
 * product sells units it never had (oversold).
 *
 * The fix: none here. Every other strategy is a fix for this one, and the
 * lock strategies wrap exactly this body (read_then_write in sale.c).
 *
 * The price: two round trips and a short transaction per sale, no waiting
 * at all - the fastest wrong answer. hold_ms widens the gap between the
 * read and the write so that two requests in flight overlap every time.
 */
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/store.h"

const struct strategy strategy_nolock = {
    .name = "nolock",
    .store = &store_mysql,
    .safe_single = 0,
    .safe_multi = 0,
    .summary = "SELECT count, then UPDATE count = read - qty: the race",
    .contention = CONTENTION_NONE,
    .exposed_by = EXPOSED_BY_HOLD,
    .cluster = CLUSTER_LOSES_UPDATES,
    .deduct = sell_unlocked,
};
