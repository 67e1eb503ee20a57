/*
 * redis.c - the Redis backend: each worker's links to the main Redis
 * (commands, pipelines, EVALSHA with the NOSCRIPT fallback), usable on any
 * other Redis server too (redlock.c).
 *
 * A link whose connection breaks (NULL reply, hiredis error flag) is freed
 * at once; the next call reconnects. Error replies are Redis answering, so
 * the connection stays. Every request is written out whole before its
 * reply is read, so a break tells which side it happened on: while
 * writing, Redis never got a whole command and nothing ran; while reading,
 * it may have run. Calls that commit a sale (the *_sale forms) report the
 * second case as ST_OUTCOME_UNKNOWN.
 *
 * Under Sentinel (sentinel.h) the main Redis is wherever the primary is: a
 * link connects to the primary in force, lets go of its connection once a
 * newer one is, and reports a break or a READONLY reply (its server was
 * demoted: the refused command did nothing, its error reply says so to the
 * caller) so that the Sentinels are asked again.
 *
 * Under a Redis Cluster (redis_cluster.h) the main link stands for every
 * node: each worker keeps a link per node, and redis_route.c decides which
 * one a round trip on the main link goes over, and whether it goes again.
 * Without a cluster, none of this runs.
 */
#include "backend/redis.h"

#include "backend/backend.h"
#include "backend/redis_auth.h"
#include "backend/redis_cluster.h"
#include "backend/redis_connect.h"
#include "backend/sentinel.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Serializes the first SCRIPT LOADs (see struct redis_script). */
static pthread_mutex_t script_sha_lock = PTHREAD_MUTEX_INITIALIZER;

/* One worker's links to the main Redis, in its BACKEND_REDIS slot. */
struct redis_links {
    struct redis_link main;       /* the redis store, the Redis locks    */
    struct redis_link subscriber; /* pub/sub waits (reentrant-lock)      */
    int last;                     /* cluster: the node of the last round trip, -1 none */
    struct redis_link nodes[];    /* cluster: one per node (REDIS_CLUSTER_NODES_MAX) */
};

/* A link to the main Redis: the configured server, or under Sentinel the
 * primary in force (its address is filled in when it connects), or under a
 * cluster its first configured node (pub/sub reaches every node). */
static void main_link_init(struct redis_link *link)
{
    *link = (struct redis_link){
        .host = config.redis_host, .port = config.redis_port, .backend = BACKEND_REDIS};
    if (sentinel_enabled()) {
        link->follows_primary = 1;
        link->host = link->primary_host;
    } else if (redis_cluster_enabled()) {
        link->host = config.redis_cluster_nodes.at[0].host;
        link->port = config.redis_cluster_nodes.at[0].port;
    }
}

static struct redis_links *links_of(struct worker *w)
{
    int fresh;
    size_t nodes = redis_cluster_enabled() ? REDIS_CLUSTER_NODES_MAX : 0;
    struct redis_links *l =
        worker_links(w, BACKEND_REDIS, sizeof *l + nodes * sizeof(struct redis_link), &fresh);
    if (fresh) {
        main_link_init(&l->main);
        main_link_init(&l->subscriber);
        l->last = -1;
    }
    return l;
}

/* Under a cluster: the worker's link to node `node`. */
static struct redis_link *node_link(struct redis_links *l, int node)
{
    struct redis_link *link = &l->nodes[node];
    if (!link->host) {
        const struct server_addr *at = redis_cluster_node(node);
        *link = (struct redis_link){.host = at->host, .port = at->port, .backend = BACKEND_REDIS};
    }
    return link;
}

/* The link the worker's last round trip on the main Redis went over: under
 * a cluster, that node's. */
static struct redis_link *last_link(struct worker *w)
{
    struct redis_links *l = links_of(w);
    return redis_cluster_enabled() && l->last >= 0 ? &l->nodes[l->last] : &l->main;
}

struct redis_link *redis_main(struct worker *w)
{
    return &links_of(w)->main;
}

struct redis_link *redis_subscriber(struct worker *w)
{
    return &links_of(w)->subscriber;
}

void redis_key(char out[REDIS_KEY_MAX], const char *kind, int product, const char *suffix)
{
    snprintf(out, REDIS_KEY_MAX, "%s:{%d}%s", kind, product, suffix);
}

void redis_link_close(struct redis_link *link)
{
    if (link->ctx)
        redisFree(link->ctx);
    link->ctx = NULL;
}

void redis_link_drop_if_closed(struct redis_link *link)
{
    if (link->ctx && idle_link_closed(link->ctx->fd, link->used_ms)) {
        log_info("redis %s:%d: the server closed an idle connection; reconnecting", link->host,
                 link->port);
        redis_link_close(link);
    }
}

/* The link's server is gone or no longer the primary: let it go, and have
 * the primary looked up again when the link follows one. */
static void link_lost(struct redis_link *link)
{
    redis_link_close(link);
    if (link->follows_primary)
        sentinel_suspect(link->generation);
}

/* Connected to the server the link is meant for: for a link that follows
 * the primary, the one in force now. */
static int link_current(const struct redis_link *link)
{
    return link->ctx && (!link->follows_primary || link->generation == sentinel_generation());
}

/* The link broke: drop it, and say `r` (503) with what happened. */
static st_result link_broken_as(struct worker *w, st_result r, struct redis_link *link,
                                const char *what)
{
    worker_fail(w, r, "redis %s:%d: %s: %s%s", link->host, link->port, what,
                link->ctx && link->ctx->err ? link->ctx->errstr : "connection lost",
                r == ST_OUTCOME_UNKNOWN ? " (the sale was sent; its reply was lost)" : "");
    log_warn("%s", w->error);
    link_lost(link);
    return r;
}

static st_result link_broken(struct worker *w, struct redis_link *link, const char *what)
{
    return link_broken_as(w, ST_BACKEND_UNAVAILABLE, link, what);
}

static struct timeval timeval_from_ms(int ms)
{
    return (struct timeval){ms / 1000, (ms % 1000) * 1000};
}

/* How long the next request on a link may wait for Redis: io-timeout-ms,
 * cut short by the running request's deadline; 0 once that has passed. */
static int wait_allowed_ms(const struct worker *w)
{
    long long deadline = worker_deadline(w);
    if (!deadline)
        return config.io_timeout_ms;
    long long left = deadline - monotonic_ms();
    return left <= 0 ? 0 : left < config.io_timeout_ms ? (int)left : config.io_timeout_ms;
}

/* A link that follows the primary: once a newer primary is in force, it
 * drops its connection and takes the new address. ST_BACKEND_UNAVAILABLE,
 * at once, while there is none. */
static st_result follow_primary(struct worker *w, struct redis_link *link)
{
    if (link->ctx && link->generation == sentinel_generation())
        return ST_OK;
    if (link->ctx)
        log_info("redis %s:%d: the primary moved; reconnecting", link->host, link->port);
    redis_link_close(link);
    char why[200];
    link->generation = sentinel_primary(link->primary_host, sizeof link->primary_host, &link->port,
                                        why, sizeof why);
    if (!link->primary_host[0])
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: no primary: %s", why);
    return ST_OK;
}

/* Connects if needed, and sets how long the link's reads and writes may
 * block (`wait_ms`; a setsockopt only when it changes). */
static st_result connect_if_needed(struct worker *w, struct redis_link *link, int wait_ms)
{
    link->used_ms = monotonic_ms();
    if (link->follows_primary) {
        st_result r = follow_primary(w, link);
        if (r != ST_OK)
            return r;
    }
    int fresh = !link->ctx;
    if (fresh) {
        if (link->connections++)
            metrics_reconnect(link->backend);
        int connect_ms = wait_ms < config.connect_timeout_ms ? wait_ms : config.connect_timeout_ms;
        link->ctx = redis_connect(link->host, link->port, connect_ms);
        link->wait_ms = 0;
        if (!link->ctx || link->ctx->err)
            return link_broken(w, link, "connect");
        log_debug("redis: connected to %s:%d", link->host, link->port);
    }
    if (link->wait_ms != wait_ms) {
        if (redisSetTimeout(link->ctx, timeval_from_ms(wait_ms)) != REDIS_OK)
            return link_broken(w, link, "set timeout");
        link->wait_ms = wait_ms;
    }
    char why[200];
    if (fresh && redis_auth(link->ctx, why, sizeof why) != 0) {
        worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis %s:%d: %s", link->host, link->port, why);
        log_warn("%s", w->error);
        redis_link_close(link);
        return ST_BACKEND_UNAVAILABLE;
    }
    return ST_OK;
}

static st_result error_reply(struct worker *w, struct redis_link *link, redisReply *reply)
{
    worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis %s:%d: %s", link->host, link->port, reply->str);
    freeReplyObject(reply);
    return ST_BACKEND_UNAVAILABLE;
}

int redis_is_readonly(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "READONLY", 8) == 0;
}

/* A READONLY reply: the server is a replica now. The refused commands did
 * nothing (their error replies say so to the caller); the link lets go of
 * the server and the primary is asked for again. */
static void moved_if_readonly(struct redis_link *link, redisReply **replies, int count)
{
    for (int i = 0; i < count; i++)
        if (redis_is_readonly(replies[i]) ||
            (replies[i]->type == REDIS_REPLY_ARRAY && replies[i]->elements > 0 &&
             redis_is_readonly(replies[i]->element[0]))) {
            log_warn("redis %s:%d is a replica now (READONLY); looking for the primary", link->host,
                     link->port);
            link_lost(link);
            return;
        }
}

/*
 * Sends `count` commands (argcs/argvs) in one round trip on `link`'s own
 * server and collects every reply, error replies included. The whole
 * request is written before any reply is read; on failure nothing is left
 * to free.
 */
static st_result link_round_trip(struct worker *w, struct redis_link *link, enum request_kind kind,
                                 int count, const int *argcs, const char *const *const *argvs,
                                 redisReply **replies)
{
    memset(replies, 0, sizeof *replies * (size_t)count);
    int wait_ms = wait_allowed_ms(w);
    if (wait_ms == 0) /* nothing sent: nothing changed */
        return worker_check_deadline(w);
    st_result r = connect_if_needed(w, link, wait_ms);
    if (r != ST_OK)
        return r;
    for (int i = 0; i < count; i++)
        if (redisAppendCommandArgv(link->ctx, argcs[i], (const char **)argvs[i], NULL) != REDIS_OK)
            return link_broken(w, link, argvs[0][0]);
    for (int done = 0; !done;)
        if (redisBufferWrite(link->ctx, &done) != REDIS_OK)
            return link_broken(w, link, argvs[0][0]);
    for (int i = 0; i < count; i++) {
        void *got;
        if (redisGetReply(link->ctx, &got) != REDIS_OK || !got) {
            redis_free_replies(replies, i);
            /* A wait the deadline cut short is the request's timeout. */
            st_result lost = kind == COMMITS                  ? ST_OUTCOME_UNKNOWN
                             : wait_ms < config.io_timeout_ms ? ST_TIMEOUT
                                                              : ST_BACKEND_UNAVAILABLE;
            return link_broken_as(w, lost, link, argvs[i][0]);
        }
        replies[i] = got;
    }
    moved_if_readonly(link, replies, count);
    return ST_OK;
}

/* Under a cluster: `trip` in one round trip over the worker's link to
 * node `node` (redis_route.h's `send`). */
static st_result node_round_trip(struct worker *w, int node, const struct redis_trip *trip)
{
    return link_round_trip(w, node_link(links_of(w), node), trip->kind, trip->count, trip->argcs,
                           trip->argvs, trip->replies);
}

/* A round trip on `link`: under a cluster, the main link routes it. */
static st_result round_trip(struct worker *w, struct redis_link *link, enum request_kind kind,
                            int count, const int *argcs, const char *const *const *argvs,
                            redisReply **replies)
{
    if (redis_cluster_enabled()) {
        struct redis_links *l = links_of(w);
        const struct redis_route route = {node_round_trip, wait_allowed_ms, &l->last};
        const struct redis_trip trip = {kind, count, argcs, argvs, replies};
        if (link == &l->main)
            return redis_routed_round_trip(w, &route, &trip);
    }
    return link_round_trip(w, link, kind, count, argcs, argvs, replies);
}

/* One command; an error reply becomes ST_BACKEND_UNAVAILABLE. */
static st_result one_command(struct worker *w, struct redis_link *link, enum request_kind kind,
                             redisReply **reply, int argc, const char **argv)
{
    const char *const *argvs[] = {argv};
    st_result r = round_trip(w, link, kind, 1, &argc, argvs, reply);
    if (r == ST_OK && (*reply)->type == REDIS_REPLY_ERROR) {
        r = error_reply(w, link, *reply);
        *reply = NULL;
    }
    return r;
}

st_result redis_link_call(struct worker *w, struct redis_link *link, redisReply **reply, int argc,
                          const char **argv)
{
    return one_command(w, link, READS, reply, argc, argv);
}

st_result redis_call(struct worker *w, redisReply **reply, int argc, const char **argv)
{
    return one_command(w, redis_main(w), READS, reply, argc, argv);
}

void redis_undo(struct worker *w, int argc, const char **argv)
{
    redisReply *reply;
    if (link_current(last_link(w)) && redis_call(w, &reply, argc, argv) == ST_OK)
        freeReplyObject(reply);
}

void redis_script_learn(struct redis_script *script, const char *sha)
{
    pthread_mutex_lock(&script_sha_lock);
    if (!atomic_load_explicit(&script->known, memory_order_relaxed)) {
        memcpy(script->sha, sha, 40);
        script->sha[40] = '\0';
        atomic_store_explicit(&script->known, 1, memory_order_release);
    }
    pthread_mutex_unlock(&script_sha_lock);
}

/* SCRIPT LOAD on `link`, remembering the SHA1 it answers. */
static st_result script_load(struct worker *w, struct redis_link *link, struct redis_script *script)
{
    redisReply *reply;
    const char *argv[] = {"SCRIPT", "LOAD", script->source};
    st_result r = redis_link_call(w, link, &reply, 3, argv);
    if (r != ST_OK)
        return r;
    if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
        freeReplyObject(reply);
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: SCRIPT LOAD gave no SHA1");
    }
    redis_script_learn(script, reply->str);
    freeReplyObject(reply);
    return ST_OK;
}

int redis_is_noscript(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOSCRIPT", 8) == 0;
}

void redis_evalsha_head(const char **full, const struct redis_script *script, int nkeys,
                        char numkeys[static 12])
{
    snprintf(numkeys, 12, "%d", nkeys);
    full[0] = "EVALSHA";
    full[1] = atomic_load_explicit(&script->known, memory_order_acquire) ? script->sha : "0";
    full[2] = numkeys;
}

/* EVALSHA once; *noscript tells whether Redis did not know the script. */
static st_result evalsha(struct worker *w, struct redis_link *link, struct redis_script *script,
                         redisReply **reply, int nkeys, int argc, const char **argv, int *noscript)
{
    const char *full[16];
    char numkeys[12];
    if (argc + REDIS_EVALSHA_HEAD > 16)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: script has too many arguments");
    redis_evalsha_head(full, script, nkeys, numkeys);
    memcpy(full + REDIS_EVALSHA_HEAD, argv, sizeof *argv * (size_t)argc);

    *noscript = 0;
    int full_argc = argc + REDIS_EVALSHA_HEAD;
    const char *const *argvs[] = {full};
    st_result r = round_trip(w, link, READS, 1, &full_argc, argvs, reply);
    if (r != ST_OK)
        return r;
    if (redis_is_noscript(*reply)) {
        freeReplyObject(*reply);
        *reply = NULL;
        *noscript = 1;
    } else if ((*reply)->type == REDIS_REPLY_ERROR) {
        r = error_reply(w, link, *reply);
        *reply = NULL;
    }
    return r;
}

static st_result eval(struct worker *w, struct redis_link *link, struct redis_script *script,
                      redisReply **reply, int nkeys, int argc, const char **argv)
{
    int noscript;
    st_result r = evalsha(w, link, script, reply, nkeys, argc, argv, &noscript);
    if (r != ST_OK || !noscript)
        return r;
    r = script_load(w, link, script);
    if (r != ST_OK)
        return r;
    r = evalsha(w, link, script, reply, nkeys, argc, argv, &noscript);
    if (r == ST_OK && noscript)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: script vanished right after load");
    return r;
}

st_result redis_link_eval(struct worker *w, struct redis_link *link, struct redis_script *script,
                          redisReply **reply, int nkeys, int argc, const char **argv)
{
    return eval(w, link, script, reply, nkeys, argc, argv);
}

st_result redis_eval(struct worker *w, struct redis_script *script, redisReply **reply, int nkeys,
                     int argc, const char **argv)
{
    return eval(w, redis_main(w), script, reply, nkeys, argc, argv);
}

/* EVALSHA of `script` for the `n` sales listed in `which`, in one round
 * trip; each reply goes to replies[which[j]]. */
static st_result evalsha_each(struct worker *w, struct redis_script *script, int n,
                              const int *which, int nkeys, int argc,
                              const char *const *const *argvs, redisReply **replies)
{
    int full_argc = argc + REDIS_EVALSHA_HEAD;
    const char **args = calloc((size_t)n * (size_t)full_argc, sizeof *args);
    const char *const **lists = calloc((size_t)n, sizeof *lists);
    int *argcs = calloc((size_t)n, sizeof *argcs);
    redisReply **got = calloc((size_t)n, sizeof *got);
    st_result r = ST_OK;
    if (!args || !lists || !argcs || !got) {
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: out of memory for a pipeline");
    } else {
        const char *head[REDIS_EVALSHA_HEAD]; /* the same for every sale: made once */
        char numkeys[12];
        redis_evalsha_head(head, script, nkeys, numkeys);
        for (int j = 0; j < n; j++) {
            const char **full = args + (size_t)j * (size_t)full_argc;
            memcpy(full, head, sizeof head);
            memcpy(full + REDIS_EVALSHA_HEAD, argvs[which[j]], sizeof *full * (size_t)argc);
            lists[j] = full;
            argcs[j] = full_argc;
        }
        r = round_trip(w, redis_main(w), COMMITS, n, argcs, lists, got);
        for (int j = 0; r == ST_OK && j < n; j++)
            replies[which[j]] = got[j];
    }
    free(args);
    free(lists);
    free(argcs);
    free(got);
    return r;
}

/* redis_eval_sales() for the `n` sales listed in `which` (rewritten). */
static st_result eval_sales_of(struct worker *w, struct redis_script *script, int n, int *which,
                               int nkeys, int argc, const char *const *const *argvs,
                               redisReply **replies)
{
    st_result r = evalsha_each(w, script, n, which, nkeys, argc, argvs, replies);
    /* The ones Redis refused for not knowing the script did nothing: load
     * it (where they ran: the last round trip's node), and send them
     * again. */
    int again = 0;
    for (int j = 0; r == ST_OK && j < n; j++)
        if (redis_is_noscript(replies[which[j]])) {
            freeReplyObject(replies[which[j]]);
            replies[which[j]] = NULL;
            which[again++] = which[j];
        }
    if (again) {
        r = script_load(w, redis_main(w), script);
        if (r == ST_OK)
            r = evalsha_each(w, script, again, which, nkeys, argc, argvs, replies);
    }
    return r;
}

/* Under a cluster, the sales of one slot at a time (each its own round
 * trip, to its node); a failure is that slot's sales' fate, the others
 * keep their replies. */
static st_result eval_sales_by_slot(struct worker *w, struct redis_script *script, int count,
                                    int *which, int nkeys, int argc,
                                    const char *const *const *argvs, redisReply **replies)
{
    int *slot = calloc((size_t)count, sizeof *slot);
    if (!slot)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: out of memory for a pipeline");
    for (int i = 0; i < count; i++)
        slot[i] = redis_cluster_key_slot(argvs[i][0], strlen(argvs[i][0]));
    st_result r = ST_OK;
    for (int i = 0; i < count; i++) {
        if (slot[i] < 0)
            continue;
        int n = 0, here = slot[i];
        for (int j = i; j < count; j++)
            if (slot[j] == here) {
                which[n++] = j;
                slot[j] = -1;
            }
        st_result got = eval_sales_of(w, script, n, which, nkeys, argc, argvs, replies);
        if (got != ST_OK)
            r = got;
    }
    free(slot);
    return r;
}

st_result redis_eval_sales(struct worker *w, struct redis_script *script, int count, int nkeys,
                           int argc, const char *const *const *argvs, redisReply **replies)
{
    memset(replies, 0, sizeof *replies * (size_t)count);
    int *which = calloc((size_t)count, sizeof *which);
    if (!which)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: out of memory for a pipeline");
    st_result r;
    if (redis_cluster_enabled()) {
        r = eval_sales_by_slot(w, script, count, which, nkeys, argc, argvs, replies);
    } else {
        for (int i = 0; i < count; i++)
            which[i] = i;
        r = eval_sales_of(w, script, count, which, nkeys, argc, argvs, replies);
    }
    free(which);
    return r;
}

st_result redis_pipeline(struct worker *w, int count, const int *argcs,
                         const char *const *const *argvs, redisReply **replies)
{
    return round_trip(w, redis_main(w), READS, count, argcs, argvs, replies);
}

st_result redis_pipeline_sale(struct worker *w, int count, const int *argcs,
                              const char *const *const *argvs, redisReply **replies)
{
    return round_trip(w, redis_main(w), COMMITS, count, argcs, argvs, replies);
}

st_result redis_wait_replicas(struct worker *w, const char *what, st_result failure)
{
    int wait_ms = config.redis_wait_timeout_ms, left = wait_allowed_ms(w);
    if (left < wait_ms + 10) /* WAIT must answer before the read gives up */
        wait_ms = left > 20 ? left - 10 : 1;
    char replicas[16], wait_text[16];
    snprintf(replicas, sizeof replicas, "%d", config.redis_wait_replicas);
    snprintf(wait_text, sizeof wait_text, "%d", wait_ms);
    const char *argv[] = {"WAIT", replicas, wait_text};
    const int argc = 3;
    const char *const *argvs[] = {argv};
    redisReply *reply;
    struct redis_link *link = last_link(w);
    /* WAIT speaks for the writes of its own connection only. */
    if (!link_current(link))
        return worker_fail(w, failure,
                           "%s not known replicated: the connection that wrote it is gone", what);
    enum request_kind kind = failure == ST_OUTCOME_UNKNOWN ? COMMITS : READS;
    st_result r = round_trip(w, link, kind, 1, &argc, argvs, &reply);
    if (r == ST_OK && reply->type != REDIS_REPLY_INTEGER) {
        r = worker_fail(w, failure, "redis %s:%d: WAIT: %s", link->host, link->port,
                        reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        freeReplyObject(reply);
    }
    if (r != ST_OK) /* what was written stands, replicated or not */
        return kind == COMMITS && r != ST_OUTCOME_UNKNOWN
                   ? worker_fail(w, ST_OUTCOME_UNKNOWN, "%s not known replicated: WAIT failed",
                                 what)
                   : r;
    long long acked = reply->integer;
    freeReplyObject(reply);
    if (acked < config.redis_wait_replicas)
        return worker_fail(w, failure,
                           "%s not replicated: %lld of %d replicas acknowledged within %d ms", what,
                           acked, config.redis_wait_replicas, wait_ms);
    return ST_OK;
}

int redis_reply_int(const redisReply *reply, long long *out)
{
    if (reply->type == REDIS_REPLY_INTEGER) {
        *out = reply->integer;
        return 0;
    }
    if (reply->type != REDIS_REPLY_STRING || reply->len == 0)
        return -1;
    char *end;
    long long v = strtoll(reply->str, &end, 10);
    if (*end)
        return -1;
    *out = v;
    return 0;
}

st_result redis_link_ping(struct worker *w, struct redis_link *link)
{
    redisReply *reply;
    const char *argv[] = {"PING"};
    st_result r = redis_link_call(w, link, &reply, 1, argv);
    if (r == ST_OK)
        freeReplyObject(reply);
    return r;
}

st_result redis_link_delete(struct worker *w, struct redis_link *link, const char *const *keys,
                            int count)
{
    if (count == 0)
        return ST_OK;
    const char *argv[1 + REDIS_DELETE_MAX];
    if (count > REDIS_DELETE_MAX)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: more than %d keys to delete",
                           REDIS_DELETE_MAX);
    argv[0] = "DEL";
    memcpy(argv + 1, keys, sizeof *keys * (size_t)count);
    redisReply *reply;
    st_result r = redis_link_call(w, link, &reply, count + 1, argv);
    if (r == ST_OK)
        freeReplyObject(reply);
    return r;
}

/* ------------------------------------------------------------ the backend */

static st_result ping(struct worker *w)
{
    return redis_link_ping(w, redis_main(w));
}

/* Under a cluster, the links to its nodes (none otherwise). */
static int node_links(void)
{
    return redis_cluster_enabled() ? REDIS_CLUSTER_NODES_MAX : 0;
}

static void drop_if_closed(struct worker *w)
{
    struct redis_links *l = w->links[BACKEND_REDIS];
    if (!l)
        return;
    redis_link_drop_if_closed(&l->main);
    redis_link_drop_if_closed(&l->subscriber); /* idle: unsubscribed between requests */
    for (int i = 0; i < node_links(); i++)
        redis_link_drop_if_closed(&l->nodes[i]);
}

static void close_links(struct worker *w)
{
    struct redis_links *l = w->links[BACKEND_REDIS];
    if (!l)
        return;
    redis_link_close(&l->main);
    redis_link_close(&l->subscriber);
    for (int i = 0; i < node_links(); i++)
        redis_link_close(&l->nodes[i]);
    free(l);
    w->links[BACKEND_REDIS] = NULL;
}

/* Under Sentinel the primary in use; under a cluster its primaries. */
static void describe(json_t *state)
{
    sentinel_describe(state);
    redis_cluster_describe(state);
}

static st_result clear(struct worker *w, const char *const *keys, int count)
{
    return redis_link_delete(w, redis_main(w), keys, count);
}

const struct backend backend_redis = {
    .name = "redis",
    .ping = ping,
    .drop_if_closed = drop_if_closed,
    .close = close_links,
    .clear = clear,
    .describe = describe,
};
