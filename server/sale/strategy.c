/*
 * strategy.c - the table that registers every strategy.
 *
 * Order matters only for presentation: /strategies, the comparison run and
 * docs/strategies.md list strategies in this order, from the race itself to the
 * safest fix.
 */
#include "sale/strategy.h"

#include "core/metrics.h"
#include "sale/lock.h"
#include "sale/sale.h"
#include "store/mysql_keys.h"
#include "store/store.h"

#include <assert.h>
#include <string.h>

const struct lease lease_expires_under_holder = {.busy_holder = LEASE_OVERSELLS,
                                                 .paused_holder = LEASE_OVERSELLS};

/* The strategies' rows (table.h), each defined in its own file. */
#define STRATEGY(id) extern const struct strategy strategy_##id;
#include "sale/strategies/table.h"
#undef STRATEGY

static const struct strategy *const strategies[] = {
#define STRATEGY(id) &strategy_##id,
#include "sale/strategies/table.h"
#undef STRATEGY
};

_Static_assert(sizeof strategies / sizeof strategies[0] <= METRICS_STRATEGIES,
               "raise METRICS_STRATEGIES");

size_t strategy_count(void)
{
    return sizeof strategies / sizeof strategies[0];
}

size_t strategy_index(const struct strategy *s)
{
    size_t i = 0;
    while (i < strategy_count() && strategies[i] != s)
        i++;
    assert(i < strategy_count());
    return i;
}

const struct strategy *strategy_at(size_t i)
{
    return i < strategy_count() ? strategies[i] : NULL;
}

const struct strategy *strategy_find(const char *name)
{
    for (size_t i = 0; i < strategy_count(); i++)
        if (strcmp(strategies[i]->name, name) == 0)
            return strategies[i];
    return NULL;
}

/* The rows that have a failover fact: they keep something in Redis. */
static const backend_set touches_redis = BACKEND_BIT(BACKEND_REDIS) | BACKEND_BIT(BACKEND_REDLOCK);

/* One sentence per rule, for the log of a row that breaks it: the first
 * broken rule is named, in this order (a later rule may read what an
 * earlier one checked, the store and the lock). */
const char *strategy_row_flaw(const struct strategy *s)
{
    if (!s->name || !s->store || !s->summary)
        return "it needs a name, a store and a summary";
    if (!s->lock == !s->deduct)
        return "it needs either a lock or a body of its own, one of the two";
    if (s->lock && !s->lock->name)
        return "its lock needs a name";
    if (s->lock && !s->lock->acquire && !s->lock->try_once)
        return "its lock needs an acquire or a try_once";
    if (s->lock && !s->lock->release)
        return "its lock needs a release";
    if (s->lock && s->lock->fences && !s->store->claim_fence)
        return "its lock fences, and its store cannot check a fence (claim_fence)";
    if (s->safe_multi && !s->safe_single)
        return "a row safe with several instances must be safe with one";
    if (s->safe_multi && s->exposed_by)
        return "a row safe with several instances has nothing that exposes it (exposed_by)";
    if (!s->safe_multi && !s->exposed_by)
        return "unsafe with several instances, it must name what exposes it (exposed_by)";
    if (s->failover == FAILOVER_NONE || s->cluster == CLUSTER_NONE)
        return "FAILOVER_NONE and CLUSTER_NONE are derived, never written in a row";
    if (strategy_failover(s) == FAILOVER_DEFAULT)
        return "its failover outcome must be said";
    if (strategy_cluster(s) == CLUSTER_DEFAULT)
        return "a MySQL row must say its cluster outcome, unless its lock lives outside MySQL";
    if (!(strategy_needs(s) & touches_redis) && s->failover != FAILOVER_DEFAULT)
        return "a row that keeps nothing in Redis has no failover outcome to say";
    if (s->store->backend != BACKEND_MYSQL && s->cluster != CLUSTER_DEFAULT)
        return "only a MySQL row has a cluster outcome to say";
    /* "waits" says every unit sells: never true of a row that refuses qty 1 */
    if (s->undersells == UNDERSELLS_ANY_QTY && s->contention == CONTENTION_WAITS)
        return "a row that may refuse a single unit while stock remains cannot claim it waits";
    return NULL;
}

int strategy_row_sound(const struct strategy *s)
{
    return strategy_row_flaw(s) == NULL;
}

/* Its own body, or its lock around read_then_write. */
static st_result sell(const struct strategy *s, struct worker *w, const struct deduct_request *rq,
                      struct deduct_reply *out)
{
    assert(!s->lock != !s->deduct); /* every row: strategy_row_sound() */
    return s->lock ? deduct_under_lock(s->lock, s->store, w, rq, out) : s->deduct(w, rq, out);
}

/* A keyed sale on the mysql store: the key's kept answer when it has one;
 * else the sale, whose commit keeps the key (mysql_keys.h), and a refusal
 * kept after it. */
static st_result sell_keyed_mysql(const struct strategy *s, struct worker *w,
                                  const struct deduct_request *rq, struct deduct_reply *out)
{
    int found;
    st_result r = mysql_key_find(w, rq, out, &found);
    if (r != ST_OK || found)
        return r;
    r = sell(s, w, rq, out);
    return r == ST_SOLD_OUT || r == ST_BUSY ? mysql_key_keep_refusal(w, rq, r, out) : r;
}

st_result strategy_run(const struct strategy *s, struct worker *w, const struct deduct_request *rq,
                       struct deduct_reply *out)
{
    assert(!rq->key[0] || !strategy_idempotent_why(s)); /* api.c drops a key a row cannot keep */
    if (rq->key[0] && s->store == &store_mysql)
        return sell_keyed_mysql(s, w, rq, out);
    return sell(s, w, rq, out);
}

st_result sell_unlocked(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    out->attempts = 1;
    return read_then_write(rq->strategy->store, w, rq, NULL, out);
}

backend_set strategy_needs(const struct strategy *s)
{
    backend_set needs = BACKEND_BIT(s->store->backend);
    if (s->lock && s->lock->backend != BACKEND_COUNT)
        needs |= BACKEND_BIT(s->lock->backend);
    return needs;
}

enum failover_outcome strategy_failover(const struct strategy *s)
{
    if (!(strategy_needs(s) & touches_redis))
        return FAILOVER_NONE;
    if (s->failover != FAILOVER_DEFAULT)
        return s->failover;
    if (s->store->backend == BACKEND_REDIS)
        return FAILOVER_LOSES_SALES;
    return s->lock->backend == BACKEND_REDIS ? FAILOVER_TWO_HOLDERS : FAILOVER_SAFE;
}

enum partition_outcome strategy_partition(const struct strategy *s)
{
    return s->settles == SETTLES_LATER && strategy_failover(s) == FAILOVER_LOSES_SALES
               ? PARTITION_OVERSELLS
               : PARTITION_AS_FAILOVER;
}

enum cluster_outcome strategy_cluster(const struct strategy *s)
{
    if (s->store->backend != BACKEND_MYSQL)
        return CLUSTER_NONE;
    if (s->cluster != CLUSTER_DEFAULT || !s->lock)
        return s->cluster; /* CLUSTER_DEFAULT: unsound, it must say */
    switch (s->lock->backend) {
    case BACKEND_MYSQL:
        return CLUSTER_DEFAULT; /* unsound: a lock inside MySQL must say */
    case BACKEND_COUNT:
        return CLUSTER_TWO_HOLDERS; /* in one process's memory */
    default:
        return CLUSTER_SAFE; /* outside MySQL: one lock for every node */
    }
}

const char *strategy_orders_why(const struct strategy *s)
{
    if (s->orders_why)
        return s->orders_why;
    return s->store->orders ? NULL : "its store keeps no orders";
}

const char *strategy_idempotent_why(const struct strategy *s)
{
    if (s->store == &store_mysql)
        return strategy_orders_why(s) ? "its ledger write is its own, not the mysql store's "
                                        "shared commit, where a key is kept with the sale"
                                      : NULL;
    return s->keeps_key ? NULL
                        : "not yet: outside MySQL a key is kept by the keyed sale scripts "
                          "(lua, lua-stream), and this row's sale is another script or a MULTI";
}

backend_set strategy_resets(const struct strategy *s)
{
    backend_set resets = BACKEND_BIT(s->store->backend);
    if (s->lock && s->lock->names[0])
        resets |= BACKEND_BIT(s->lock->backend);
    return resets;
}

static const char *const contention_names[] = {
    [CONTENTION_NONE] = "none",
    [CONTENTION_WAITS] = "waits",
    [CONTENTION_RETRIES] = "retries",
};

static const char *lease_outcome_name(enum lease_outcome o)
{
    return o == LEASE_SAFE ? "safe" : "oversells";
}

/* The two cases every lease states, and those of make partition it states. */
static json_t *lease_json(const struct lease *l)
{
    json_t *o = json_pack("{s:s, s:s}", "busy_holder", lease_outcome_name(l->busy_holder),
                          "paused_holder", lease_outcome_name(l->paused_holder));
    const struct {
        const char *name;
        enum lease_outcome outcome;
    } stated[] = {{"clock_jump", l->clock_jump},
                  {"empty_restart", l->empty_restart},
                  {"late_grant", l->late_grant}};
    for (size_t i = 0; i < sizeof stated / sizeof stated[0]; i++)
        if (stated[i].outcome)
            json_object_set_new(o, stated[i].name,
                                json_string(lease_outcome_name(stated[i].outcome)));
    return o;
}

static const char *const failover_names[] = {
    [FAILOVER_SAFE] = "safe",
    [FAILOVER_LOSES_SALES] = "loses_sales",
    [FAILOVER_TWO_HOLDERS] = "two_holders",
};

static const char *const cluster_names[] = {
    [CLUSTER_SAFE] = "safe",
    [CLUSTER_CONFLICTS_AT_COMMIT] = "conflicts_at_commit",
    [CLUSTER_TWO_HOLDERS] = "two_holders",
    [CLUSTER_LOSES_UPDATES] = "loses_updates",
};

static json_t *exposed_by_json(unsigned exposed_by)
{
    json_t *params = json_array();
    if (exposed_by & EXPOSED_BY_HOLD)
        json_array_append_new(params, json_string("hold_ms"));
    if (exposed_by & EXPOSED_BY_TTL)
        json_array_append_new(params, json_string("ttl_ms"));
    return params;
}

json_t *strategy_json(const struct strategy *s)
{
    json_t *o =
        json_pack("{s:s, s:s, s:b, s:b, s:s, s:o, s:s, s:o, s:o, s:s}", "name", s->name, "store",
                  s->store->name, "safe_single", s->safe_single, "safe_multi", s->safe_multi,
                  "summary", s->summary, "needs", backend_set_json(strategy_needs(s)), "contention",
                  contention_names[s->contention], "exposed_by", exposed_by_json(s->exposed_by),
                  "resets", backend_set_json(strategy_resets(s)), "hold",
                  s->hold_per_batch ? "per_batch" : "per_request");
    if (s->caveat)
        json_object_set_new(o, "caveat", json_string(s->caveat));
    json_object_set_new(o, "lock", s->lock ? json_string(s->lock->name) : json_null());
    json_object_set_new(o, "lease", s->lease ? lease_json(s->lease) : json_null());
    if (strategy_failover(s) != FAILOVER_NONE)
        json_object_set_new(o, "failover", json_string(failover_names[strategy_failover(s)]));
    if (s->settles == SETTLES_LATER)
        json_object_set_new(o, "settles", json_string("async"));
    if (strategy_partition(s) == PARTITION_OVERSELLS) /* only where it is not failover's */
        json_object_set_new(o, "partition", json_string("oversells"));
    if (strategy_cluster(s) != CLUSTER_NONE)
        json_object_set_new(o, "cluster", json_string(cluster_names[strategy_cluster(s)]));
    json_object_set_new(o, "idempotent", json_boolean(!strategy_idempotent_why(s)));
    if (strategy_idempotent_why(s))
        json_object_set_new(o, "idempotent_why", json_string(strategy_idempotent_why(s)));
    json_object_set_new(o, "orders", json_boolean(!strategy_orders_why(s)));
    if (strategy_orders_why(s))
        json_object_set_new(o, "orders_why", json_string(strategy_orders_why(s)));
    if (s->undersells != UNDERSELLS_NEVER)
        json_object_set_new(
            o, "undersells",
            json_string(s->undersells == UNDERSELLS_ANY_QTY ? "any_qty" : "split_qty"));
    return o;
}
