/*
 * redlock.c - the Redlock server table and what every worker does with it.
 */
#include "redlock.h"

#include "config.h"
#include "log.h"
#include "redis_store.h"
#include "worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct {
    char host[CONFIG_TEXT_MAX];
    int port;
} servers[REDLOCK_MAX];
static int server_count;

int redlock_configure(const char *list, FILE *err)
{
    server_count = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        if (server_count == REDLOCK_MAX) {
            fprintf(err, "stockd: redlock: at most %d servers\n", REDLOCK_MAX);
            return -1;
        }
        if (!colon || colon == p || (size_t)(colon - p) >= CONFIG_TEXT_MAX) {
            fprintf(err, "stockd: redlock: '%.*s' is not host:port\n", (int)len, p);
            return -1;
        }
        char port_text[8] = "";
        size_t port_len = len - (size_t)(colon + 1 - p);
        if (port_len == 0 || port_len >= sizeof port_text) {
            fprintf(err, "stockd: redlock: '%.*s' has no valid port\n", (int)len, p);
            return -1;
        }
        memcpy(port_text, colon + 1, port_len);
        char *stop;
        errno = 0;
        long port = strtol(port_text, &stop, 10);
        if (errno || *stop || port < 1 || port > 65535) {
            fprintf(err, "stockd: redlock: '%.*s' has no valid port\n", (int)len, p);
            return -1;
        }
        memcpy(servers[server_count].host, p, (size_t)(colon - p));
        servers[server_count].host[colon - p] = '\0';
        servers[server_count].port = (int)port;
        server_count++;
        p += len + (end != NULL);
        if (end && !*p) {
            fprintf(err, "stockd: redlock: the list ends with a comma\n");
            return -1;
        }
    }
    return 0;
}

int redlock_count(void)
{
    return server_count;
}

struct redis_link *redlock_link(struct worker *w, int i)
{
    struct redis_link *link = &w->redlock[i];
    link->host = servers[i].host;
    link->port = servers[i].port;
    return link;
}

st_result redlock_ping(struct worker *w)
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

int redlock_describe(json_t *state)
{
    if (server_count == 0)
        return 0;
    json_t *list = json_array();
    for (int i = 0; i < server_count; i++)
        json_array_append_new(list, json_sprintf("%s:%d", servers[i].host, servers[i].port));
    json_object_set_new(state, "servers", list);
    return 1;
}

static struct redis_script delete_product_keys = {
    .source = "local keys = redis.call('KEYS', ARGV[1])\n"
              "for _, key in ipairs(keys) do\n"
              "  redis.call('DEL', key)\n"
              "end\n"
              "return #keys\n",
};

st_result redlock_reset(struct worker *w, int product)
{
    char pattern[REDIS_KEY_MAX];
    snprintf(pattern, sizeof pattern, "*{%d}*", product);
    const char *argv[] = {pattern};
    for (int i = 0; i < server_count; i++) {
        redisReply *reply;
        if (redis_link_eval(w, redlock_link(w, i), &delete_product_keys, &reply, 0, 1, argv) ==
            ST_OK)
            freeReplyObject(reply);
        else
            log_warn("reset: redlock server %s:%d skipped, its keys expire by TTL: %s",
                     servers[i].host, servers[i].port, w->error);
    }
    return ST_OK;
}
