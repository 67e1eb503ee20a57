/*
 * redlock.c - the Redlock server table and what every worker does with it.
 */
#include "backend/redlock.h"

#include "backend/backend.h"
#include "backend/redis.h"
#include "core/config.h"
#include "core/log.h"
#include "core/worker.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* --redlock, parsed by config_load(). */
static const struct server_list *const servers = &config.redlock_servers;

int redlock_count(void)
{
    return servers->count;
}

/* One worker's links, one per server, in its BACKEND_REDLOCK slot. */
struct redlock_links {
    struct redis_link server[CONFIG_SERVERS_MAX];
};

struct redis_link *redlock_link(struct worker *w, int i)
{
    assert(i >= 0 && i < servers->count);
    int fresh;
    struct redlock_links *l = worker_links(w, BACKEND_REDLOCK, sizeof *l, &fresh);
    for (int k = 0; fresh && k < servers->count; k++)
        l->server[k] = (struct redis_link){
            .host = servers->at[k].host, .port = servers->at[k].port, .backend = BACKEND_REDLOCK};
    return &l->server[i];
}

static int configured(void)
{
    return servers->count > 0;
}

static st_result ping(struct worker *w)
{
    char down[CONFIG_SERVERS_MAX * (CONFIG_TEXT_MAX + 8)] = "";
    int failed = 0;
    for (int i = 0; i < servers->count; i++) {
        if (redis_link_ping(w, redlock_link(w, i)) == ST_OK)
            continue;
        size_t len = strlen(down);
        snprintf(down + len, sizeof down - len, "%s%s:%d", failed ? ", " : "", servers->at[i].host,
                 servers->at[i].port);
        failed++;
    }
    if (failed)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "%d of %d redlock servers down: %s", failed,
                           servers->count, down);
    return ST_OK;
}

static void drop_if_closed(struct worker *w)
{
    struct redlock_links *l = w->links[BACKEND_REDLOCK];
    for (int i = 0; l && i < servers->count; i++)
        redis_link_drop_if_closed(&l->server[i]);
}

static void close_links(struct worker *w)
{
    struct redlock_links *l = w->links[BACKEND_REDLOCK];
    if (!l)
        return;
    for (int i = 0; i < servers->count; i++)
        redis_link_close(&l->server[i]);
    free(l);
    w->links[BACKEND_REDLOCK] = NULL;
}

/* Deletes the keys on every server that answers; the others' keys expire by
 * their TTL, so a reset never fails because of one of them. */
static st_result clear(struct worker *w, const char *const *keys, int count)
{
    for (int i = 0; i < servers->count; i++)
        if (redis_link_delete(w, redlock_link(w, i), keys, count) != ST_OK)
            log_warn("reset: redlock server %s:%d skipped, its keys expire by TTL: %s",
                     servers->at[i].host, servers->at[i].port, w->error);
    return ST_OK;
}

static void describe(json_t *state)
{
    json_t *list = json_array();
    for (int i = 0; i < servers->count; i++)
        json_array_append_new(list,
                              json_sprintf("%s:%d", servers->at[i].host, servers->at[i].port));
    json_object_set_new(state, "servers", list);
}

const struct backend backend_redlock = {
    .name = "redlock",
    .configured = configured,
    .ping = ping,
    .drop_if_closed = drop_if_closed,
    .close = close_links,
    .clear = clear,
    .describe = describe,
};
