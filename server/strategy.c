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

static const struct strategy *const strategies[] = {
    &strategy_nolock,     &strategy_mutex,        &strategy_sql,        &strategy_for_update,
    &strategy_cas,        &strategy_watch,        &strategy_redis_lock, &strategy_redis_nolock,
    &strategy_lua,        &strategy_setnx_expire, &strategy_getset,     &strategy_reentrant_lock,
    &strategy_redlock,    &strategy_fenced,       &strategy_mutex_tx,   &strategy_zk_lock,
    &strategy_mysql_lock, &strategy_get_lock,
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
