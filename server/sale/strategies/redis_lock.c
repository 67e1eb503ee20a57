/*
 * redis-lock - a Redis lock around the nolock body.
 *
 * The race: nolock's, between any threads of any stockd instances.
 *
 * The fix: SET lock:{P} <random token> NX PX <ttl> - set only if absent,
 * expiring by itself if the holder dies. Waiters poll with jittered backoff
 * for up to lock_wait_ms, then answer busy. Release is a Lua
 * compare-and-delete (EVALSHA): delete the key only if it still holds our
 * token, so a holder whose lock expired cannot delete the next holder's.
 *
 * The price: a Redis round trip to lock, one to unlock, plus polling; and
 * the lock is only a lease. If the critical section outlives the TTL
 * (hold_ms > ttl_ms, or a pause), the lock expires under the holder, a
 * second holder enters, and the stock is oversold: safe only while the TTL
 * outlives the critical section.
 */
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

/* Nothing guards it once its one server forgets it: by expiry, a clock that
 * jumps, a restart without its data, or a grant that comes too late, which
 * it takes as it comes. */
static const struct lease lease_forgotten = {
    .busy_holder = LEASE_OVERSELLS,
    .paused_holder = LEASE_OVERSELLS,
    .clock_jump = LEASE_OVERSELLS,
    .empty_restart = LEASE_OVERSELLS,
    .late_grant = LEASE_OVERSELLS,
};

const struct strategy strategy_redis_lock = {
    .name = "redis-lock",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "while the lock's TTL outlives the critical section",
    .summary = "SET lock NX PX ttl around the nolock body; Lua compare-and-delete release",
    .contention = CONTENTION_WAITS,
    .lease = &lease_forgotten,
    .lock = &lock_redis_set_nx,
};
