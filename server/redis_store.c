/*
 * redis_store.c - Redis links: lazy connect, one command, pipelines, and
 * EVALSHA with the NOSCRIPT fallback.
 *
 * A link whose connection breaks (NULL reply, hiredis error flag) is freed
 * at once; the next call reconnects. Error replies are Redis answering, so
 * the connection stays.
 */
#include "redis_store.h"

#include "config.h"
#include "log.h"
#include "worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Guards the SHA1 fields of every struct redis_script. */
static pthread_mutex_t script_sha_lock = PTHREAD_MUTEX_INITIALIZER;

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
    if (link->ctx && socket_peer_closed(link->ctx->fd)) {
        log_info("redis %s:%d: the server closed an idle connection; reconnecting", link->host,
                 link->port);
        redis_link_close(link);
    }
}

static st_result link_broken(struct worker *w, struct redis_link *link, const char *what)
{
    worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis %s:%d: %s: %s", link->host, link->port, what,
                link->ctx && link->ctx->err ? link->ctx->errstr : "connection lost");
    log_warn("%s", w->error);
    redis_link_close(link);
    return ST_BACKEND_UNAVAILABLE;
}

static struct timeval timeval_from_ms(int ms)
{
    return (struct timeval){ms / 1000, (ms % 1000) * 1000};
}

static st_result connect_if_needed(struct worker *w, struct redis_link *link)
{
    if (link->ctx)
        return ST_OK;
    link->ctx =
        redisConnectWithTimeout(link->host, link->port, timeval_from_ms(config.connect_timeout_ms));
    if (!link->ctx || link->ctx->err)
        return link_broken(w, link, "connect");
    if (redisSetTimeout(link->ctx, timeval_from_ms(config.io_timeout_ms)) != REDIS_OK)
        return link_broken(w, link, "set timeout");
    log_debug("redis: connected to %s:%d", link->host, link->port);
    return ST_OK;
}

static st_result error_reply(struct worker *w, struct redis_link *link, redisReply *reply)
{
    worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis %s:%d: %s", link->host, link->port, reply->str);
    freeReplyObject(reply);
    return ST_BACKEND_UNAVAILABLE;
}

st_result redis_link_call(struct worker *w, struct redis_link *link, redisReply **reply, int argc,
                          const char **argv)
{
    *reply = NULL;
    st_result r = connect_if_needed(w, link);
    if (r != ST_OK)
        return r;
    redisReply *got = redisCommandArgv(link->ctx, argc, argv, NULL);
    if (!got)
        return link_broken(w, link, argv[0]);
    if (got->type == REDIS_REPLY_ERROR)
        return error_reply(w, link, got);
    *reply = got;
    return ST_OK;
}

st_result redis_call(struct worker *w, redisReply **reply, int argc, const char **argv)
{
    return redis_link_call(w, &w->redis, reply, argc, argv);
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
    pthread_mutex_lock(&script_sha_lock);
    memcpy(script->sha, reply->str, 41);
    pthread_mutex_unlock(&script_sha_lock);
    freeReplyObject(reply);
    return ST_OK;
}

/* EVALSHA once; *noscript tells whether Redis did not know the script. */
static st_result evalsha(struct worker *w, struct redis_link *link, struct redis_script *script,
                         redisReply **reply, int nkeys, int argc, const char **argv, int *noscript)
{
    const char *full[16];
    char sha[41], numkeys[12];
    if (argc + 3 > 16)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: script has too many arguments");
    pthread_mutex_lock(&script_sha_lock);
    memcpy(sha, script->sha, sizeof sha);
    pthread_mutex_unlock(&script_sha_lock);
    snprintf(numkeys, sizeof numkeys, "%d", nkeys);
    full[0] = "EVALSHA";
    full[1] = sha;
    full[2] = numkeys;
    memcpy(full + 3, argv, sizeof *argv * (size_t)argc);

    *reply = NULL;
    *noscript = 0;
    st_result r = connect_if_needed(w, link);
    if (r != ST_OK)
        return r;
    redisReply *got = redisCommandArgv(link->ctx, argc + 3, full, NULL);
    if (!got)
        return link_broken(w, link, "EVALSHA");
    if (got->type == REDIS_REPLY_ERROR && strncmp(got->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(got);
        *noscript = 1;
        return ST_OK;
    }
    if (got->type == REDIS_REPLY_ERROR)
        return error_reply(w, link, got);
    *reply = got;
    return ST_OK;
}

st_result redis_link_eval(struct worker *w, struct redis_link *link, struct redis_script *script,
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

st_result redis_eval(struct worker *w, struct redis_script *script, redisReply **reply, int nkeys,
                     int argc, const char **argv)
{
    return redis_link_eval(w, &w->redis, script, reply, nkeys, argc, argv);
}

void redis_free_replies(redisReply **replies, int count)
{
    for (int i = 0; i < count; i++) {
        if (replies[i])
            freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

st_result redis_pipeline(struct worker *w, int count, const int *argcs,
                         const char *const *const *argvs, redisReply **replies)
{
    struct redis_link *link = &w->redis;
    memset(replies, 0, sizeof *replies * (size_t)count);
    st_result r = connect_if_needed(w, link);
    if (r != ST_OK)
        return r;
    for (int i = 0; i < count; i++)
        if (redisAppendCommandArgv(link->ctx, argcs[i], (const char **)argvs[i], NULL) != REDIS_OK)
            return link_broken(w, link, "pipeline");
    for (int i = 0; i < count; i++) {
        void *got;
        if (redisGetReply(link->ctx, &got) != REDIS_OK || !got) {
            redis_free_replies(replies, i);
            return link_broken(w, link, argvs[i][0]);
        }
        replies[i] = got;
    }
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
