/*
 * redis.h - the worker's Redis connections, commands and scripts.
 *
 * Keys of one product all carry the hash tag {P}, so they would live in one
 * Redis Cluster slot:
 *   stock:{P}          the remaining count
 *   stock:{P}:initial  what reset set it to (every reset writes it)
 *   ledger:{P}         hash: sold (sum of qty), orders (count of sales)
 *   lock:{P}...        lock keys of the lock strategies (each lock kind
 *                      declares its own, and reset deletes exactly those)
 *   fence:{P}          fencing-token counter (only grows; reset keeps it)
 *   stock:{P}:epoch    MySQL's reset epoch, which lua-stream's orders carry
 *   orders:stream, orders:dead   lua-stream's order stream and its dead
 *                      letters, one for every product (order_stream.h); with
 *                      no hash tag, that row runs on one Redis, not a Cluster
 */
#ifndef STOCKD_REDIS_STORE_H
#define STOCKD_REDIS_STORE_H

#include "backend/backend.h"
#include "backend/redis_route.h" /* a round trip's replies: redis_free_replies() */
#include "core/config.h"
#include "core/result.h"

#include <hiredis/hiredis.h>
#include <stdatomic.h>

struct worker;

/* A Lua script run by EVALSHA. Define one as
 *   static struct redis_script unlock = {.source = "..."};
 * its SHA1 is learned from SCRIPT LOAD on first use, and the script loaded
 * again whenever a Redis says NOSCRIPT (after a restart or SCRIPT FLUSH).
 * A SHA1 depends on the source only: once known it never changes, so every
 * request reads it without a lock. */
struct redis_script {
    const char *source;
    const char *steps; /* what it does, in words, for a traced sale (sale scripts) */
    char sha[41];      /* written once, before `known`       */
    atomic_int known;  /* release/acquire: `sha` is complete */
};

/* Records the SHA1 (40 hex digits) a SCRIPT LOAD of `script` answered,
 * unless it is known already. */
void redis_script_learn(struct redis_script *script, const char *sha);

/* The words an EVALSHA of `script` starts with, into full[0..2]: the
 * script's SHA - or "0" while it is not known to be loaded, so that Redis
 * answers NOSCRIPT and the caller loads it - and the number of keys, which
 * is written into `numkeys`. */
#define REDIS_EVALSHA_HEAD 3
void redis_evalsha_head(const char **full, const struct redis_script *script, int nkeys,
                        char numkeys[static 12]);

/* Whether Redis refused a script call for not knowing the script (nothing
 * ran). */
int redis_is_noscript(const redisReply *reply);

#define REDIS_KEY_MAX 64

/* Formats a per-product key such as "stock:{1001}"; `suffix` may be "". */
void redis_key(char out[REDIS_KEY_MAX], const char *kind, int product, const char *suffix);

/* One Redis server and the worker's connection to it (NULL until needed or
 * after a failure). The main Redis is redis_main(); lock strategies that
 * talk to several independent servers keep one link each. */
struct redis_link {
    redisContext *ctx;
    const char *host;
    int port;
    /* The main Redis's links under Sentinel (sentinel.h): host and port are
     * the primary of `generation`, copied into primary_host. */
    int follows_primary;
    unsigned generation;
    char primary_host[CONFIG_TEXT_MAX];
    long long used_ms;       /* when a request last went through it          */
    int wait_ms;             /* how long its reads and writes may block now  */
    enum backend_id backend; /* whose server it is, for the metrics          */
    int connections;         /* made so far: every one after the first is a reconnect */
};

/* The worker's link to the main Redis (the redis store, the Redis locks),
 * and a second one to the same server for pub/sub waits. */
struct redis_link *redis_main(struct worker *w);
struct redis_link *redis_subscriber(struct worker *w);

/*
 * Runs one command given as argv strings on `link`. A NULL reply (the link
 * broke) drops the connection and gives ST_BACKEND_UNAVAILABLE; an error
 * reply gives ST_BACKEND_UNAVAILABLE with Redis's message. No call waits
 * past the running request's deadline: it is ST_TIMEOUT when that cut the
 * wait short (the link is dropped: its late reply would come to the next
 * request). On ST_OK the caller owns *reply and frees it with
 * freeReplyObject().
 */
st_result redis_link_call(struct worker *w, struct redis_link *link, redisReply **reply, int argc,
                          const char **argv);

/* Runs `script` with `nkeys` keys followed by the arguments, as above. */
st_result redis_link_eval(struct worker *w, struct redis_link *link, struct redis_script *script,
                          redisReply **reply, int nkeys, int argc, const char **argv);

/* The same two on the worker's main Redis. */
st_result redis_call(struct worker *w, redisReply **reply, int argc, const char **argv);
st_result redis_eval(struct worker *w, struct redis_script *script, redisReply **reply, int nkeys,
                     int argc, const char **argv);

/* Sends `count` commands to the main Redis in one round trip and collects
 * every reply into replies[] (error replies included, for the caller to
 * read); on failure nothing is left to free. */
st_result redis_pipeline(struct worker *w, int count, const int *argcs,
                         const char *const *const *argvs, redisReply **replies);

/* redis_pipeline() for a request that commits a sale: a reply lost after
 * the request went out is ST_OUTCOME_UNKNOWN. */
st_result redis_pipeline_sale(struct worker *w, int count, const int *argcs,
                              const char *const *const *argvs, redisReply **replies);

/*
 * EVALSHA of `script` once per sale, every one in the same round trip (a
 * pipeline): argvs[i] holds sale i's `argc` arguments, the first `nkeys` of
 * them keys. replies[i] gets sale i's answer, an error reply included, or
 * stays NULL when the sale's fate is the returned failure (for sales that
 * went out and got no reply, ST_OUTCOME_UNKNOWN). A script Redis did not
 * know is loaded, and the sales it refused are sent again. The caller frees
 * every non-NULL reply.
 */
st_result redis_eval_sales(struct worker *w, struct redis_script *script, int count, int nkeys,
                           int argc, const char *const *const *argvs, redisReply **replies);

/* Whether a server refused a write for being a replica (a demoted
 * primary): nothing ran, and the primary is elsewhere now. */
int redis_is_readonly(const redisReply *reply);

/* WAIT for config.redis_wait_replicas replicas to acknowledge every write
 * this worker made on its main Redis, for at most redis-wait-timeout-ms
 * (less if the request's deadline comes first). Too few is `failure`, with
 * "<what> not replicated: N of M replicas acknowledged within T ms". When
 * `failure` is ST_OUTCOME_UNKNOWN (the write was a sale), so is every other
 * way WAIT can fail: the sale stands on the primary, replicated or not. */
st_result redis_wait_replicas(struct worker *w, const char *what, st_result failure);

/* Reads an integer reply or a bulk string that holds one; -1 if neither. */
int redis_reply_int(const redisReply *reply, long long *out);

/* Sends a command that undoes what this worker left on its main Redis (an
 * UNWATCH, a waiter's ZREM), best effort, and only on a live link: a link
 * dropped after a failure took its WATCH with it (so does one to a primary
 * that is no longer in force), and a waiter's entry drops out by its score,
 * so nothing is worth reconnecting for. */
void redis_undo(struct worker *w, int argc, const char **argv);

/* Connects `link` if needed and sends PING. */
st_result redis_link_ping(struct worker *w, struct redis_link *link);

/* DEL of `count` keys (at most REDIS_DELETE_MAX) on `link`. */
#define REDIS_DELETE_MAX 32
st_result redis_link_delete(struct worker *w, struct redis_link *link, const char *const *keys,
                            int count);
void redis_link_close(struct redis_link *link);

/* Closes `link` if the server has closed the idle connection. */
void redis_link_drop_if_closed(struct redis_link *link);

#endif
