/*
 * redlock.c - the Redlock server table and what every worker does with it.
 */
#include "redlock.h"

#include "backend.h"
#include "config.h"
#include "log.h"
#include "redis_store.h"
#include "worker.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static struct server_addr servers[REDLOCK_MAX];
static int server_count;

int redlock_configure(const char *list, FILE *err)
{
    int count = config_servers(list, "redlock", servers, REDLOCK_MAX, err);
    server_count = count > 0 ? count : 0;
    return count < 0 ? -1 : 0;
}

int redlock_count(void)
{
    return server_count;
}

/* One worker's links, one per server, in its BACKEND_REDLOCK slot. */
struct redlock_links {
    struct redis_link server[REDLOCK_MAX];
};

struct redis_link *redlock_link(struct worker *w, int i)
{
    assert(i >= 0 && i < server_count);
    int fresh;
    struct redlock_links *l = worker_links(w, BACKEND_REDLOCK, sizeof *l, &fresh);
    for (int k = 0; fresh && k < server_count; k++)
        l->server[k] = (struct redis_link){
            .host = servers[k].host, .port = servers[k].port, .backend = BACKEND_REDLOCK};
    return &l->server[i];
}

static int configured(void)
{
    return server_count > 0;
}

static st_result ping(struct worker *w)
{
    char down[REDLOCK_MAX * (CONFIG_TEXT_MAX + 8)] = "";
    int failed = 0;
    for (int i = 0; i < server_count; i++) {
        if (redis_link_ping(w, redlock_link(w, i)) == ST_OK)
            continue;
        size_t len = strlen(down);
        snprintf(down + len, sizeof down - len, "%s%s:%d", failed ? ", " : "", servers[i].host,
                 servers[i].port);
        failed++;
    }
    if (failed)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "%d of %d redlock servers down: %s", failed,
                           server_count, down);
    return ST_OK;
}

static void drop_if_closed(struct worker *w)
{
    struct redlock_links *l = w->links[BACKEND_REDLOCK];
    for (int i = 0; l && i < server_count; i++)
        redis_link_drop_if_closed(&l->server[i]);
}

static void close_links(struct worker *w)
{
    struct redlock_links *l = w->links[BACKEND_REDLOCK];
    if (!l)
        return;
    for (int i = 0; i < server_count; i++)
        redis_link_close(&l->server[i]);
    free(l);
    w->links[BACKEND_REDLOCK] = NULL;
}

/* Deletes the keys on every server that answers; the others' keys expire by
 * their TTL, so a reset never fails because of one of them. */
static st_result clear(struct worker *w, const char *const *keys, int count)
{
    for (int i = 0; i < server_count; i++)
        if (redis_link_delete(w, redlock_link(w, i), keys, count) != ST_OK)
            log_warn("reset: redlock server %s:%d skipped, its keys expire by TTL: %s",
                     servers[i].host, servers[i].port, w->error);
    return ST_OK;
}

static void describe(json_t *state)
{
    json_t *list = json_array();
    for (int i = 0; i < server_count; i++)
        json_array_append_new(list, json_sprintf("%s:%d", servers[i].host, servers[i].port));
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
