/*
 * lua-wait - the lua sale, followed by WAIT for a replica.
 *
 * The race: not between clients - lua's script already runs alone - but
 * between the primary and its replica. Redis replicates asynchronously: the
 * script's DECRBY and ledger entry are applied, and acknowledged, on the
 * primary before the replica has them. If the primary dies in that window,
 * Sentinel promotes the replica, and the sale the client was told about is
 * not in the store any more ("acknowledged, lost"); its units sell again.
 *
 * The fix, Redisson's choice for its locks: after the write, WAIT
 * numreplicas timeout on the same connection. Redis answers how many
 * replicas have acknowledged everything this connection wrote; only when
 * --redis-wait-replicas of them have is the sale answered 200. With one
 * replica, the one Sentinel promotes, a 200 is a sale that survives the
 * failover.
 *
 * With an Idempotency-Key it runs lua's keyed sale script (redis_stock.h):
 * the key is kept in the script with the sale, and WAITed for with it, so
 * a key a 200 answered survives the failover its sale survives.
 *
 * The price: a WAIT round trip, and the replica's lag, on every sale (so it
 * runs on a worker, never on a loop's pipe: WAIT holds its connection).
 * When too few replicas acknowledge within --redis-wait-timeout-ms, the
 * sale has run on the primary and may or may not survive a failover: the
 * answer is outcome_unknown, never a 200 and never a refusal - the ledger
 * knows. WAIT does not make Redis strongly consistent: a replica that
 * acknowledged can still lose the write if it is not the one promoted.
 */
#include "backend/redis.h"
#include "core/worker.h"
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/redis_stock.h"
#include "store/store.h"

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    /* Not a critical section: the script is the only one. */
    critical_section_wait(rq, NULL);
    struct redis_script_args args;
    redis_script_args_of(&args, rq, out);
    const char *const *argvs[] = {args.argv};
    redisReply *reply;
    st_result r = redis_eval_sales(w, args.script, 1, args.nkeys, args.argc, argvs, &reply);
    if (r != ST_OK)
        return r;
    r = redis_script_result(w, rq, reply, 0, out);
    freeReplyObject(reply);
    if (r != ST_OK)
        return r;
    return redis_wait_replicas(w, "the sale ran on the primary but is", ST_OUTCOME_UNKNOWN);
}

const struct strategy strategy_lua_wait = {
    .name = "lua-wait",
    .store = &store_redis,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "through a failover too, with one replica, the one Sentinel promotes: a sale it "
              "did not acknowledge within redis-wait-timeout-ms answers outcome_unknown",
    .summary = "the lua sale script, then WAIT for a replica before answering",
    .contention = CONTENTION_WAITS, /* in Redis's one thread */
    .failover = FAILOVER_SAFE,
    .orders_why = "its script is its own (the sale, then WAIT), not the store's sale script",
    .keeps_key = KEEPS_KEY_IN_SCRIPT, /* lua's keyed sale script, then WAIT */
    .deduct = deduct,
};
