/*
 * redis_cluster.c - the slot map of a Redis Cluster, the slot of a key and
 * of a command, and the redirects (redis_cluster.h says why stockd routes
 * on its own).
 *
 * The map is an array of node indexes, one per slot, each an atomic short:
 * a request reads its slot's entry without a lock, and a refresh writes the
 * entries one by one - a request in between goes to the old node, which
 * answers MOVED, and that is followed. Node addresses are appended to a
 * table and never moved or removed, so an index stays valid for as long as
 * stockd runs and a worker's link to node i (redis.c) stays that node's.
 *
 * One thread learns the map: at start, and when asked - by a MOVED, a
 * node's broken link, a slot without a primary - at most once per
 * RETRY_MS, and every RETRY_MS while no node answers. Nothing else moves
 * slots, so there is no periodic refresh: a map that no redirect and no
 * failure contradicts is the cluster's. It asks CLUSTER SLOTS of the configured nodes
 * first, then of every node it has learnt, and takes the first answer.
 * Its connections are bounded by connect-timeout-ms, never io-timeout-ms:
 * a node that hangs must not keep the others from being asked; they are
 * made from --bind-source like every other (redis_connect.c), so that a
 * lab that cuts one address from a node cuts the map's questions too.
 */
#include "backend/redis_cluster.h"

#include "backend/redis_auth.h"
#include "backend/redis_connect.h"
#include "core/background.h"
#include "core/log.h"
#include "core/worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RETRY_MS 100

static const struct server_list *const seeds = &config.redis_cluster_nodes;

/* slot -> node index, -1: no primary. */
static atomic_short slot_node[REDIS_CLUSTER_SLOTS];

/* The nodes learnt so far; an entry is complete before `node_count` counts
 * it (release/acquire). Appended under `keeper.lock`. */
static struct server_addr nodes[REDIS_CLUSTER_NODES_MAX];
static atomic_int node_count;

/* Redirect replies met, by kind (for /health). */
static atomic_ullong redirects[REDIRECT_TRYAGAIN + 1];

/* The thread that keeps the map, and what it is asked. `suspected` and
 * `last_error` are guarded by `keeper.lock`. */
static struct background keeper = BACKGROUND_INIT;
static int suspected;
static char last_error[256];

int redis_cluster_enabled(void)
{
    return seeds->count > 0;
}

/* ------------------------------------------------------------- the slot */

/* CRC16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster hashes. */
static uint16_t crc16(const char *data, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)data[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

int redis_cluster_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
        if (close && close > open + 1) { /* "{}" is no tag: the whole key */
            key = open + 1;
            len = (size_t)(close - key);
        }
    }
    return crc16(key, len) & (REDIS_CLUSTER_SLOTS - 1);
}

/* Commands with no key at all. */
static int keyless(const char *name)
{
    static const char *const none[] = {"MULTI",   "EXEC",   "DISCARD", "UNWATCH",   "WAIT",
                                       "PING",    "SCRIPT", "AUTH",    "ASKING",    "CLUSTER",
                                       "INFO",    "ROLE",   "DEBUG",   "SUBSCRIBE", "UNSUBSCRIBE",
                                       "PUBLISH", NULL};
    for (int i = 0; none[i]; i++)
        if (strcasecmp(name, none[i]) == 0)
            return 1;
    return 0;
}

/* Where a command's keys are: argv[first], then every `step`-th up to
 * (not including) argv[end]. */
struct key_span {
    int first, end, step;
};

static struct key_span keys_of(int argc, const char *const *argv)
{
    const char *name = argv[0];
    if (strcasecmp(name, "EVALSHA") == 0 || strcasecmp(name, "EVAL") == 0) {
        int n = argc > 2 ? atoi(argv[2]) : 0;
        return (struct key_span){3, 3 + (n < argc - 3 ? n : argc - 3), 1};
    }
    if (strcasecmp(name, "XREADGROUP") == 0 || strcasecmp(name, "XREAD") == 0) {
        for (int i = 1; i < argc; i++)
            if (strcasecmp(argv[i], "STREAMS") == 0)
                return (struct key_span){i + 1, i + 1 + (argc - i - 1) / 2, 1};
        return (struct key_span){0, 0, 1};
    }
    if (strcasecmp(name, "XGROUP") == 0)
        return (struct key_span){2, argc > 2 ? 3 : 2, 1};
    if (strcasecmp(name, "MSET") == 0)
        return (struct key_span){1, argc, 2};
    if (strcasecmp(name, "DEL") == 0 || strcasecmp(name, "MGET") == 0 ||
        strcasecmp(name, "WATCH") == 0 || strcasecmp(name, "EXISTS") == 0)
        return (struct key_span){1, argc, 1};
    return (struct key_span){1, argc > 1 ? 2 : 1, 1};
}

int redis_cluster_command_slot(int argc, const char *const *argv)
{
    if (argc < 1 || keyless(argv[0]))
        return SLOT_NO_KEY;
    struct key_span k = keys_of(argc, argv);
    int slot = SLOT_NO_KEY;
    for (int i = k.first; i < k.end; i += k.step) {
        int s = redis_cluster_key_slot(argv[i], strlen(argv[i]));
        if (slot >= 0 && s != slot)
            return SLOT_SPLIT;
        slot = s;
    }
    return slot;
}

/* -------------------------------------------------------------- the map */

int redis_cluster_node_of(int slot)
{
    return atomic_load_explicit(&slot_node[slot], memory_order_relaxed);
}

int redis_cluster_any_node(void)
{
    for (int slot = 0; slot < REDIS_CLUSTER_SLOTS; slot++) {
        int node = redis_cluster_node_of(slot);
        if (node >= 0)
            return node;
    }
    return -1;
}

const struct server_addr *redis_cluster_node(int node)
{
    return &nodes[node];
}

/* The index of host:port among the first `n` nodes, -1 if not there. */
static int find_node(int n, const char *host, size_t host_len, int port)
{
    for (int i = 0; i < n; i++)
        if (nodes[i].port == port && strlen(nodes[i].host) == host_len &&
            memcmp(nodes[i].host, host, host_len) == 0)
            return i;
    return -1;
}

/* The index of host:port, appended when new; -1 when the table is full. */
static int node_index(const char *host, size_t host_len, int port)
{
    int i =
        find_node(atomic_load_explicit(&node_count, memory_order_acquire), host, host_len, port);
    if (i >= 0)
        return i;
    pthread_mutex_lock(&keeper.lock);
    int n = atomic_load_explicit(&node_count, memory_order_relaxed);
    i = find_node(n, host, host_len, port); /* another thread may have added it */
    if (i < 0 && n < REDIS_CLUSTER_NODES_MAX && host_len < sizeof nodes[n].host) {
        memcpy(nodes[n].host, host, host_len);
        nodes[n].host[host_len] = '\0';
        nodes[n].port = port;
        atomic_store_explicit(&node_count, n + 1, memory_order_release);
        log_info("redis cluster: node %d is %s:%d", n, nodes[n].host, port);
        i = n;
    } else if (i < 0) {
        log_warn("redis cluster: no room for node %.*s:%d", (int)host_len, host, port);
    }
    pthread_mutex_unlock(&keeper.lock);
    return i;
}

/* Takes CLUSTER SLOTS' answer into the map; 0, or -1 with why. `asked` is
 * the node that answered: an entry without a host is that node's. */
static int take_slots(const redisReply *reply, const struct server_addr *asked, char *why,
                      size_t size)
{
    if (reply->type != REDIS_REPLY_ARRAY) {
        snprintf(why, size, "CLUSTER SLOTS: %s",
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "an unexpected reply");
        return -1;
    }
    static short next[REDIS_CLUSTER_SLOTS]; /* the thread's alone */
    memset(next, 0xff, sizeof next);        /* -1: no primary */
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *range = reply->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2 ||
            range->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            range->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
            snprintf(why, size, "CLUSTER SLOTS: an entry of an unexpected shape");
            return -1;
        }
        long long from = range->element[0]->integer, to = range->element[1]->integer;
        const redisReply *primary = range->element[2];
        const char *host = primary->element[0]->str;
        size_t host_len = primary->element[0]->len;
        if (host_len == 0 || strcmp(host, "?") == 0)
            host = asked->host, host_len = strlen(asked->host);
        int node = node_index(host, host_len, (int)primary->element[1]->integer);
        for (long long s = from; s <= to && s < REDIS_CLUSTER_SLOTS; s++)
            if (s >= 0)
                next[s] = (short)node;
    }
    for (int s = 0; s < REDIS_CLUSTER_SLOTS; s++)
        atomic_store_explicit(&slot_node[s], next[s], memory_order_relaxed);
    return 0;
}

/* CLUSTER SLOTS of one node into the map; 0, or -1 with why. */
static int ask_node(const struct server_addr *at, char *why, size_t size)
{
    struct timeval bound = {config.connect_timeout_ms / 1000,
                            (config.connect_timeout_ms % 1000) * 1000};
    redisContext *c = redis_connect(at->host, at->port, config.connect_timeout_ms);
    char refused[160] = "";
    int r = -1;
    if (c && !c->err && redisSetTimeout(c, bound) == REDIS_OK &&
        redis_auth(c, refused, sizeof refused) == 0) {
        redisReply *reply = redisCommand(c, "CLUSTER SLOTS");
        if (reply)
            r = take_slots(reply, at, why, size);
        else
            snprintf(why, size, "%s", c->errstr);
        freeReplyObject(reply);
    } else {
        snprintf(why, size, "%s", refused[0] ? refused : c ? c->errstr : "out of memory");
    }
    redisFree(c);
    return r;
}

/* CLUSTER SLOTS of the first node that answers, into the map: the
 * configured ones, then the learnt ones; 0, or -1 with why in `all`. */
static int ask_nodes(char *all, size_t size)
{
    char why[200];
    all[0] = '\0';
    for (int i = 0; i < seeds->count; i++) {
        if (ask_node(&seeds->at[i], why, sizeof why) == 0)
            return 0;
        size_t used = strlen(all);
        snprintf(all + used, size - used, "%s%s:%d: %s", i ? "; " : "", seeds->at[i].host,
                 seeds->at[i].port, why);
    }
    int n = atomic_load_explicit(&node_count, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (ask_node(&nodes[i], why, sizeof why) == 0)
            return 0;
    return -1;
}

/* Learns the map; 0, or -1 (last_error says why). */
static int refresh(void)
{
    char why[sizeof last_error - 40];
    int r = ask_nodes(why, sizeof why);
    pthread_mutex_lock(&keeper.lock);
    if (r == 0)
        last_error[0] = '\0';
    else
        snprintf(last_error, sizeof last_error, "no node answered CLUSTER SLOTS: %s", why);
    pthread_mutex_unlock(&keeper.lock);
    return r;
}

/* Waits until asked or stopped; whether to go on. */
static int wait_for_work(void)
{
    pthread_mutex_lock(&keeper.lock);
    while (!keeper.stopping && !suspected)
        pthread_cond_wait(&keeper.wake, &keeper.lock);
    suspected = 0;
    int go_on = !keeper.stopping;
    pthread_mutex_unlock(&keeper.lock);
    return go_on;
}

static void *keep_map(void *unused)
{
    (void)unused;
    int failing = 0;
    while (wait_for_work()) {
        int failed = refresh() != 0;
        if (failed) /* again after RETRY_MS, until a node answers */
            redis_cluster_suspect();
        if (failed && !failing)
            log_warn("redis cluster: %s", last_error);
        else if (!failed && failing)
            log_info("redis cluster: the map is learnt again");
        failing = failed;
        sleep_ms(RETRY_MS); /* a burst of suspicions costs one refresh */
    }
    return NULL;
}

int redis_cluster_start(void)
{
    if (!redis_cluster_enabled())
        return 0;
    for (int s = 0; s < REDIS_CLUSTER_SLOTS; s++)
        atomic_init(&slot_node[s], -1);
    if (refresh() != 0) {
        log_error("redis cluster: %s", last_error);
        return -1;
    }
    log_info("redis cluster: %d nodes serve the slots", atomic_load(&node_count));
    return background_start(&keeper, "the thread that keeps the redis cluster's slot map", keep_map,
                            NULL);
}

void redis_cluster_stop(void)
{
    background_stop(&keeper);
}

void redis_cluster_suspect(void)
{
    pthread_mutex_lock(&keeper.lock);
    suspected = 1;
    if (keeper.threads)
        pthread_cond_signal(&keeper.wake);
    pthread_mutex_unlock(&keeper.lock);
}

/* ------------------------------------------------------------ redirects */

enum redis_redirect redis_cluster_redirect(const redisReply *reply, int *node)
{
    if (reply->type != REDIS_REPLY_ERROR)
        return REDIRECT_NONE;
    if (strncmp(reply->str, "TRYAGAIN", 8) == 0) {
        atomic_fetch_add_explicit(&redirects[REDIRECT_TRYAGAIN], 1, memory_order_relaxed);
        return REDIRECT_TRYAGAIN;
    }
    enum redis_redirect kind = strncmp(reply->str, "MOVED ", 6) == 0 ? REDIRECT_MOVED
                               : strncmp(reply->str, "ASK ", 4) == 0 ? REDIRECT_ASK
                                                                     : REDIRECT_NONE;
    if (kind == REDIRECT_NONE)
        return kind;
    /* "MOVED <slot> <host>:<port>"; an empty host is the asked node's,
     * which only a configured node can stand for here. */
    char *end;
    long slot = strtol(strchr(reply->str, ' ') + 1, &end, 10);
    const char *address = *end == ' ' ? end + 1 : NULL;
    const char *colon = address ? strrchr(address, ':') : NULL;
    if (slot < 0 || slot >= REDIS_CLUSTER_SLOTS || !colon)
        return REDIRECT_NONE;
    int port = atoi(colon + 1);
    size_t host_len = (size_t)(colon - address);
    const char *host = address;
    if (host_len == 0)
        host = seeds->at[0].host, host_len = strlen(host);
    *node = node_index(host, host_len, port);
    if (*node < 0)
        return REDIRECT_NONE;
    atomic_fetch_add_explicit(&redirects[kind], 1, memory_order_relaxed);
    if (kind == REDIRECT_MOVED) {
        atomic_store_explicit(&slot_node[slot], (short)*node, memory_order_relaxed);
        redis_cluster_suspect();
    }
    return kind;
}

/* ---------------------------------------------------------------- health */

void redis_cluster_describe(json_t *state)
{
    if (!redis_cluster_enabled())
        return;
    int n = atomic_load_explicit(&node_count, memory_order_acquire), unserved = 0;
    int served[REDIS_CLUSTER_NODES_MAX] = {0};
    for (int s = 0; s < REDIS_CLUSTER_SLOTS; s++) {
        int node = redis_cluster_node_of(s);
        if (node >= 0)
            served[node]++;
        else
            unserved++;
    }
    json_t *primaries = json_object(); /* "host:port": the slots it serves */
    for (int i = 0; i < n; i++) {
        char name[CONFIG_TEXT_MAX + 8];
        snprintf(name, sizeof name, "%.200s:%d", nodes[i].host, nodes[i].port);
        if (served[i])
            json_object_set_new(primaries, name, json_integer(served[i]));
    }
    json_t *cluster =
        json_pack("{s:o, s:i, s:I, s:I, s:I}", "primaries", primaries, "slots_unserved", unserved,
                  "moved", (json_int_t)atomic_load(&redirects[REDIRECT_MOVED]), "ask",
                  (json_int_t)atomic_load(&redirects[REDIRECT_ASK]), "tryagain",
                  (json_int_t)atomic_load(&redirects[REDIRECT_TRYAGAIN]));
    pthread_mutex_lock(&keeper.lock);
    if (last_error[0])
        json_object_set_new(cluster, "error", json_string(last_error));
    pthread_mutex_unlock(&keeper.lock);
    json_object_set_new(state, "cluster", cluster);
}
