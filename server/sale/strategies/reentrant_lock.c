/*
 * reentrant-lock - a Redisson-style lock: re-entrant, renewed by a
 * watchdog, waiters woken by pub/sub.
 *
 * The race: nolock's; and redis-lock's lease problem: a holder that works
 * longer than the TTL loses the lock while it still works.
 *
 * The fix: the lock is a hash, lock:{P}:reentrant, whose one field is the
 * holder's token and whose value counts how many times that holder has
 * taken it, so code that already holds the lock can take it again (here
 * the body does: acquire, acquire again - count 2 - release once, then the
 * sale, then the last release). Lua scripts (EVALSHA) take, re-enter and
 * release it atomically; the last release deletes the hash and PUBLISHes
 * on lock:{P}:reentrant:released. Waiters do not poll: they SUBSCRIBE to
 * that channel on a connection of their own and sleep until a release, or
 * until the holder's TTL would run out, within lock_wait_ms. While the lock
 * is held, a watchdog thread renews its TTL every ttl/3, so a holder that
 * is slow but alive keeps it however long it works (hold_ms > ttl_ms). The
 * TTL is 100 ms at least, whatever ttl_ms asks: renewing more often than
 * every 33 ms would only load Redis.
 * Waking by broadcast is unfair on its own: a release wakes every waiter
 * one network hop late, while the worker that released goes straight on to
 * its next request and would take the lock first, again and again, until a
 * waiter gives up busy. So waiters queue in a sorted set
 * (lock:{P}:reentrant:waiters, scored by when each gives up), and while
 * anyone waits a free lock goes only to the longest waiter: first come,
 * first served, which is Redisson's fair lock rather than its default.
 *
 * The price: a thread and a Redis connection per holder for the watchdog,
 * one more connection per waiting worker, and scripts on every step.
 * Fairness costs throughput (each hand-over waits for the one waiter whose
 * turn it is to wake up: docs/bench.md shows the price) and buys a short tail: nobody
 * waits behind a stream of newcomers. A waiter that dies blocks the queue
 * until its score passes (lock_wait_ms at most). And
 * the watchdog only helps a holder that runs: when the whole process
 * freezes (a GC or VM pause, pause_ms) the watchdog freezes with it, the
 * lock expires, a second holder enters, and the first one wakes up to
 * write what it read before the pause. Safe while the holder runs.
 */
#include "backend/redis.h"
#include "core/config.h"
#include "core/log.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Takes or re-enters the lock: the new hold count, or minus the time in
 * ms until the other holder's lock expires (at least 1). A caller that
 * does not get it joins the waiters (KEYS[2], scored by when it gives up:
 * now + ARGV[3], so in order of arrival); a free lock goes only to the
 * first of them, so a request that just arrived cannot barge past the ones
 * a release woke. Waiters that gave up or died drop out by their score. */
static struct redis_script lock_script = {
    .source = "local t = redis.call('TIME')\n"
              "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
              "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)\n"
              "local mine = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1\n"
              "local free = redis.call('EXISTS', KEYS[1]) == 0\n"
              "local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]\n"
              "if mine or (free and (head == nil or head == ARGV[1])) then\n"
              "  redis.call('ZREM', KEYS[2], ARGV[1])\n"
              "  local count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)\n"
              "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
              "  return count\n"
              "end\n"
              "redis.call('ZADD', KEYS[2], 'NX', now + tonumber(ARGV[3]), ARGV[1])\n"
              "redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]) + 1000)\n"
              "local ttl = redis.call('PTTL', KEYS[1])\n"
              "if ttl < 1 then ttl = 1 end\n"
              "return -ttl\n",
};

/* Releases once: the hold count left (0: deleted and announced), or -1
 * when the lock is no longer ours. */
static struct redis_script unlock_script = {
    .source = "if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end\n"
              "local count = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)\n"
              "if count > 0 then\n"
              "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
              "  return count\n"
              "end\n"
              "redis.call('DEL', KEYS[1])\n"
              "redis.call('PUBLISH', KEYS[2], ARGV[1])\n"
              "return 0\n",
};

/* The watchdog's renewal: 1 if the lock was still ours. */
static struct redis_script renew_script = {
    .source = "if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then\n"
              "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
              "  return 1\n"
              "end\n"
              "return 0\n",
};

struct names {
    char key[LOCK_NAME_MAX], channel[REDIS_KEY_MAX], waiters[LOCK_NAME_MAX];
};

static const struct lock_kind reentrant; /* its names are its row's */

static void names_of(int product, struct names *n)
{
    lock_state_name(n->key, &reentrant, 0, product);
    redis_key(n->channel, "lock", product, ":reentrant:released"); /* no state: a channel */
    lock_state_name(n->waiters, &reentrant, 1, product);
}

/* ------------------------------------------------------------ watchdog */

/* The shortest lease: the watchdog renews every third of it, and a
 * request's ttl_ms of a few milliseconds would have it call Redis hundreds
 * of times a second per holder. */
#define MIN_LEASE_MS 100

/* The lease the lock is taken and renewed with: ttl_ms, at least
 * MIN_LEASE_MS. */
static int lease_ms(const struct deduct_request *rq)
{
    return rq->ttl_ms > MIN_LEASE_MS ? rq->ttl_ms : MIN_LEASE_MS;
}

/* One per holder: a thread with its own worker (so its own Redis link)
 * that renews the TTL every ttl/3 until told to stop, and skips renewals
 * while frozen. Fields below `mu` are guarded by it. */
struct watchdog {
    pthread_t thread;
    struct names names;
    char token[33];
    char ttl[16];
    int period_ms;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stop, frozen, lost;
};

/* Runs the renewal script; 1 renewed, 0 not ours any more, -1 failed. */
static int renew(struct worker *w, struct watchdog *d)
{
    const char *argv[] = {d->names.key, d->token, d->ttl};
    redisReply *reply;
    if (redis_eval(w, &renew_script, &reply, 1, 3, argv) != ST_OK) {
        log_warn("reentrant-lock: watchdog could not renew %s: %s", d->names.key, w->error);
        return -1;
    }
    int renewed = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    return renewed;
}

static void *watchdog_run(void *arg)
{
    struct watchdog *d = arg;
    struct worker *w = worker_new();
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        timespec_add_ms(&next, d->period_ms);
        int rc = 0;
        while (!d->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&d->wake, &d->mu, &next);
        if (d->stop)
            break;
        if (d->frozen)
            continue; /* the process is "paused": no renewal */
        pthread_mutex_unlock(&d->mu);
        int renewed = renew(w, d);
        pthread_mutex_lock(&d->mu);
        if (renewed == 0) {
            d->lost = 1; /* expired or taken over: nothing left to renew */
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    backends_close(w);
    worker_free(w);
    return NULL;
}

static struct watchdog *watchdog_start(const struct deduct_request *rq, const struct names *n,
                                       const char *token)
{
    struct watchdog *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->names = *n;
    snprintf(d->token, sizeof d->token, "%s", token);
    snprintf(d->ttl, sizeof d->ttl, "%d", lease_ms(rq));
    d->period_ms = lease_ms(rq) / 3;
    cond_init_monotonic(&d->wake);
    pthread_mutex_init(&d->mu, NULL);
    if (pthread_create(&d->thread, NULL, watchdog_run, d) != 0) {
        pthread_cond_destroy(&d->wake);
        pthread_mutex_destroy(&d->mu);
        free(d);
        return NULL;
    }
    return d;
}

/* Stops and joins the thread; whether it found the lock gone. */
static int watchdog_stop(struct watchdog *d)
{
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    int lost = d->lost;
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return lost;
}

static void freeze(struct held_lock *held, int frozen)
{
    struct watchdog *d = held->state;
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    d->frozen = frozen;
    pthread_mutex_unlock(&d->mu);
}

/* ------------------------------------------------- taking and releasing */

/* One run of the lock script: *count > 0 taken (the hold count), else
 * *count is minus the holder's remaining TTL. */
static st_result lock_once(struct worker *w, const struct deduct_request *rq, const struct names *n,
                           const char *token, long long *count)
{
    char ttl[16], wait[16];
    snprintf(ttl, sizeof ttl, "%d", lease_ms(rq));
    snprintf(wait, sizeof wait, "%d", config.lock_wait_ms);
    const char *argv[] = {n->key, n->waiters, token, ttl, wait};
    redisReply *reply;
    st_result r = redis_eval(w, &lock_script, &reply, 2, 5, argv);
    if (r != ST_OK)
        return r;
    if (redis_reply_int(reply, count) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: unexpected reply from the lock script");
    freeReplyObject(reply);
    return r;
}

/* A waiter that gives up leaves the waiters at once (best effort: if Redis
 * does not answer - the link was dropped - its entry drops out by its
 * score). */
static void leave_waiters(struct worker *w, const struct names *n, const char *token)
{
    redis_undo(w, 3, (const char *[]){"ZREM", n->waiters, token});
}

/* One release: *left is the hold count left, or -1 if it was not ours. */
static st_result unlock_once(struct worker *w, const struct deduct_request *rq,
                             const struct names *n, const char *token, long long *left)
{
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%d", lease_ms(rq));
    const char *argv[] = {n->key, n->channel, token, ttl};
    redisReply *reply;
    st_result r = redis_eval(w, &unlock_script, &reply, 2, 4, argv);
    if (r != ST_OK)
        return r;
    if (redis_reply_int(reply, left) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE,
                        "redis: unexpected reply from the unlock script");
    freeReplyObject(reply);
    return r;
}

/* ------------------------------------------------------------ pub/sub */

/* The worker's subscriber connection is in subscribed mode between
 * subscribe() and unsubscribe(); any failure closes it (the next wait
 * connects again). */
static st_result subscribe(struct worker *w, const char *channel)
{
    const char *argv[] = {"SUBSCRIBE", channel};
    redisReply *reply;
    st_result r = redis_link_call(w, redis_subscriber(w), &reply, 2, argv);
    if (r != ST_OK)
        return r;
    freeReplyObject(reply); /* ["subscribe", channel, 1] */
    return ST_OK;
}

static int is_push(const redisReply *reply, const char *kind)
{
    return reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
           reply->element[0]->type == REDIS_REPLY_STRING &&
           strcmp(reply->element[0]->str, kind) == 0;
}

/* Sleeps until a release is announced or `ms` pass; ST_OK either way. */
static st_result wait_release(struct worker *w, int ms)
{
    struct redis_link *subscriber = redis_subscriber(w);
    redisContext *ctx = subscriber->ctx;
    void *got = NULL;
    if (redisGetReplyFromReader(ctx, &got) != REDIS_OK)
        goto broken;
    if (!got) {
        struct pollfd p = {.fd = ctx->fd, .events = POLLIN};
        int ready = poll(&p, 1, ms);
        if (ready < 0 && errno != EINTR)
            goto broken;
        if (ready <= 0)
            return ST_OK;
        if (redisBufferRead(ctx) != REDIS_OK || redisGetReplyFromReader(ctx, &got) != REDIS_OK)
            goto broken;
    }
    if (got)
        freeReplyObject(got); /* a "message": someone released */
    return ST_OK;
broken:
    worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis %s:%d: subscription lost: %s", subscriber->host,
                subscriber->port, ctx->errstr[0] ? ctx->errstr : "error");
    redis_link_close(subscriber);
    return ST_BACKEND_UNAVAILABLE;
}

/* UNSUBSCRIBE, skipping messages that arrived meanwhile, until Redis
 * confirms; the connection is then a plain one again. */
static void unsubscribe(struct worker *w)
{
    struct redis_link *subscriber = redis_subscriber(w);
    if (!subscriber->ctx)
        return;
    const char *argv[] = {"UNSUBSCRIBE"};
    redisReply *reply;
    if (redis_link_call(w, subscriber, &reply, 1, argv) != ST_OK) {
        redis_link_close(subscriber); /* still subscribed, maybe: start afresh */
        return;
    }
    while (!is_push(reply, "unsubscribe")) {
        freeReplyObject(reply);
        void *got;
        if (redisGetReply(subscriber->ctx, &got) != REDIS_OK || !got) {
            redis_link_close(subscriber);
            return;
        }
        reply = got;
    }
    freeReplyObject(reply);
}

/* Takes the lock the first time: try; if held, subscribe and try again
 * (a release between the two is then never missed), then sleep until a
 * release or the holder's TTL, and try again, until lock_wait_ms. */
static st_result lock_first(struct worker *w, const struct deduct_request *rq,
                            const struct names *n, struct held_lock *held)
{
    long long deadline = lock_wait_deadline(w);
    int subscribed = 0;
    st_result r;
    for (;;) {
        long long count;
        held->attempts++;
        r = lock_once(w, rq, n, held->token, &count);
        if (r != ST_OK || count > 0)
            break;
        long long now = monotonic_ms();
        if (now >= deadline) {
            r = lock_wait_expired(w, "reentrant lock");
            break;
        }
        if (!subscribed) {
            r = subscribe(w, n->channel);
            if (r != ST_OK)
                break;
            subscribed = 1;
            continue;
        }
        /* No release is announced when a lock expires: wake up by then. */
        long long wait = deadline - now, ttl_left = -count > 0 ? -count : 1;
        if (ttl_left < wait)
            wait = ttl_left;
        r = wait_release(w, (int)wait);
        if (r != ST_OK)
            break;
    }
    if (subscribed)
        unsubscribe(w);
    if (r != ST_OK) { /* leave the queue, keeping the reason */
        char why[sizeof w->error];
        memcpy(why, w->error, sizeof why);
        leave_waiters(w, n, held->token);
        memcpy(w->error, why, sizeof why);
    }
    return r;
}

static st_result acquire(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    struct names n;
    names_of(rq->product, &n);
    st_result r = lock_first(w, rq, &n, held);
    if (r != ST_OK)
        return r;
    held->state = watchdog_start(rq, &n, held->token);
    if (!held->state)
        log_warn("reentrant-lock: no watchdog thread; the lock lives %d ms", lease_ms(rq));

    /* Re-enter, as nested code holding the lock would, then leave once. */
    long long count = 0, left = 0;
    r = lock_once(w, rq, &n, held->token, &count);
    if (r == ST_OK && count != 2)
        r = worker_fail(w, ST_BUSY, "re-entry found the lock gone (count %lld)", count);
    if (r == ST_OK)
        r = unlock_once(w, rq, &n, held->token, &left);
    if (r == ST_OK && left != 1)
        r = worker_fail(w, ST_BUSY, "leaving the re-entry found the lock gone (count %lld)", left);
    if (r == ST_OK)
        return ST_OK;

    char why[sizeof w->error];
    memcpy(why, w->error, sizeof why);
    if (held->state)
        watchdog_stop(held->state);
    held->state = NULL;
    for (int k = 0; k < 2; k++) /* at most the two holds we took */
        if (unlock_once(w, rq, &n, held->token, &left) != ST_OK || left <= 0)
            break;
    memcpy(w->error, why, sizeof why);
    return r;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    struct names n;
    names_of(rq->product, &n);
    /* Stop renewing first: a renewal racing the final DEL would find the
     * lock gone and report it lost. The last renewal left most of a TTL. */
    int watchdog_lost = held->state && watchdog_stop(held->state);
    held->state = NULL;
    long long left = -1;
    st_result r = unlock_once(w, rq, &n, held->token, &left);
    *lost = watchdog_lost || (r == ST_OK && left < 0);
    return r;
}

static const struct lock_kind reentrant = {
    .name = "reentrant lock",
    .backend = BACKEND_REDIS,
    .tokens = 1,
    .names = {"lock:{%d}:reentrant", "lock:{%d}:reentrant:waiters"},
    .acquire = acquire,
    .release = release,
    .freeze = freeze,
};

/* The watchdog renews a busy holder's lease; a frozen one's it cannot. */
static const struct lease renewed_while_running = {.busy_holder = LEASE_SAFE,
                                                   .paused_holder = LEASE_OVERSELLS};

const struct strategy strategy_reentrant_lock = {
    .name = "reentrant-lock",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "while the holder runs: a frozen process's watchdog stops renewing",
    .summary = "Redisson-style re-entrant hash lock, renewed by a watchdog, waiters woken by "
               "pub/sub",
    .contention = CONTENTION_WAITS,
    .lease = &renewed_while_running,
    .lock = &reentrant,
};
