/*
 * strategy.c - the table that registers every strategy.
 *
 * Order matters only for presentation: /strategies, the comparison run and
 * the README list strategies in this order, from the race itself to the
 * safest fix.
 */
#include "strategy.h"

#include "lock.h"

#include <assert.h>
#include <string.h>

extern const struct strategy strategy_nolock;
extern const struct strategy strategy_mutex;
extern const struct strategy strategy_sql;
extern const struct strategy strategy_for_update;
extern const struct strategy strategy_cas;
extern const struct strategy strategy_watch;
extern const struct strategy strategy_redis_lock;
extern const struct strategy strategy_redis_nolock;
extern const struct strategy strategy_lua;
extern const struct strategy strategy_setnx_expire;
extern const struct strategy strategy_getset;
extern const struct strategy strategy_reentrant_lock;
extern const struct strategy strategy_redlock;
extern const struct strategy strategy_fenced;
extern const struct strategy strategy_mutex_tx;
extern const struct strategy strategy_zk_lock;
extern const struct strategy strategy_mysql_lock;
extern const struct strategy strategy_get_lock;

/* One strategy per row, in presentation order. */
static const struct strategy *const strategies[] = {
    &strategy_nolock,         /* SELECT then UPDATE: the race itself         */
    &strategy_mutex,          /* a process mutex: one instance only          */
    &strategy_sql,            /* one conditional UPDATE                      */
    &strategy_for_update,     /* SELECT ... FOR UPDATE: pessimistic          */
    &strategy_cas,            /* version compare-and-set: optimistic         */
    &strategy_watch,          /* Redis WATCH/MULTI/EXEC                      */
    &strategy_redis_lock,     /* SET NX PX lease, compare-and-delete release */
    &strategy_redis_nolock,   /* GET then SET: the race on Redis             */
    &strategy_lua,            /* the whole sale in one Lua script            */
    &strategy_setnx_expire,   /* SETNX then EXPIRE, DEL without owner check  */
    &strategy_getset,         /* the SETNX/GETSET timestamp lock             */
    &strategy_reentrant_lock, /* Redisson-style: re-entrant, watchdog        */
    &strategy_redlock,        /* a majority of independent Redis servers     */
    &strategy_fenced,         /* a lease plus a fencing token checked by SQL */
    &strategy_mutex_tx,       /* a mutex released before COMMIT              */
    &strategy_zk_lock,        /* ZooKeeper sequential node, Curator recipe   */
    &strategy_mysql_lock,     /* a unique-key row in a lock table            */
    &strategy_get_lock,       /* MySQL GET_LOCK / RELEASE_LOCK               */
};

size_t strategy_count(void)
{
    return sizeof strategies / sizeof strategies[0];
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

st_result strategy_run(const struct strategy *s, struct worker *w, const struct deduct_request *rq,
                       struct deduct_reply *out)
{
    assert(!s->lock != !s->deduct); /* a body of its own, or a lock: exactly one */
    return s->lock ? deduct_under_lock(s->lock, w, rq, out) : s->deduct(w, rq, out);
}

const char *store_name(enum store s)
{
    return s == STORE_MYSQL ? "mysql" : "redis";
}
