/*
 * backend.c - the table that registers every backend (backend.h says why).
 */
#include "backend/backend.h"

#include "core/metrics.h"

#include <assert.h>

_Static_assert(BACKEND_COUNT <= METRICS_BACKENDS, "raise METRICS_BACKENDS");

extern const struct backend backend_mysql;
extern const struct backend backend_redis;
extern const struct backend backend_redlock;
extern const struct backend backend_zookeeper;

/* One backend per row, indexed by its id. */
static const struct backend *const backends[BACKEND_COUNT] = {
    [BACKEND_MYSQL] = &backend_mysql,         /* the mysql store; lock tables; GET_LOCK */
    [BACKEND_REDIS] = &backend_redis,         /* the redis store; the Redis locks       */
    [BACKEND_REDLOCK] = &backend_redlock,     /* redlock's independent Redis servers    */
    [BACKEND_ZOOKEEPER] = &backend_zookeeper, /* zk-lock's ensemble                     */
};

const struct backend *backend_at(enum backend_id id)
{
    assert((unsigned)id < BACKEND_COUNT && backends[id]);
    return backends[id];
}

int backend_configured(enum backend_id id)
{
    const struct backend *b = backend_at(id);
    return !b->configured || b->configured();
}

json_t *backend_set_json(backend_set set)
{
    json_t *names = json_array();
    for (int id = 0; id < BACKEND_COUNT; id++)
        if (set & BACKEND_BIT(id))
            json_array_append_new(names, json_string(backends[id]->name));
    return names;
}

void backends_drop_dead_links(struct worker *w)
{
    for (int id = 0; id < BACKEND_COUNT; id++)
        if (backends[id]->drop_if_closed)
            backends[id]->drop_if_closed(w);
}

void backends_close(struct worker *w)
{
    for (int id = 0; id < BACKEND_COUNT; id++)
        if (backends[id]->close)
            backends[id]->close(w);
}
