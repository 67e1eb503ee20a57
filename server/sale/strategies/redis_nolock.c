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
 * GET and the SET, so that two requests in flight overlap every time. This
 * is the shared body (read_then_write in sale.c) on the redis store, the
 * very body the lock strategies wrap.
 */
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/store.h"

const struct strategy strategy_redis_nolock = {
    .name = "redis-nolock",
    .store = &store_redis,
    .safe_single = 0,
    .safe_multi = 0,
    .summary =
        "GET count, then SET count = read - qty (ledger in the same MULTI): the race on Redis",
    .contention = CONTENTION_NONE,
    .exposed_by = EXPOSED_BY_HOLD,
    .deduct = sell_unlocked,
};
