/*
 * strategy.c - the table that registers every strategy.
 *
 * Order matters only for presentation: /strategies, the comparison run and
 * the README list strategies in this order, from the race itself to the
 * safest fix.
 */
#include "strategy.h"

#include <string.h>

extern const struct strategy strategy_nolock;
extern const struct strategy strategy_mutex;
extern const struct strategy strategy_sql;
extern const struct strategy strategy_for_update;
extern const struct strategy strategy_cas;
extern const struct strategy strategy_watch;
extern const struct strategy strategy_redis_lock;

static const struct strategy *const strategies[] = {
    &strategy_nolock, &strategy_mutex, &strategy_sql,        &strategy_for_update,
    &strategy_cas,    &strategy_watch, &strategy_redis_lock,
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

const char *store_name(enum store s)
{
    return s == STORE_MYSQL ? "mysql" : "redis";
}
