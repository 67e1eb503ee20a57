/*
 * redis_keyspace - the design the blog posts teach: a key per hold with the
 * hold's TTL, and a subscriber to Redis's `expired` events.
 *
 * A hold SETs hold:{P}:<ID> with PX ttl in its sale's script. Every stockd
 * subscribes to __keyevent@0__:expired (it sets notify-keyspace-events Ex
 * itself at start when Redis lets it; the stack's Redis has it on) and, on
 * an event for a hold key, returns that one order as redis-zset does,
 * through its strategy: still held (its key expired at its deadline, by
 * Redis's clock), it expires and its units come back, once, however many
 * instances heard the event.
 *
 * Its flaw, kept on purpose because it is the row's lesson: Redis
 * publishes an event once, to whoever listens at that moment, and keeps no
 * copy. An event published while no subscriber is connected - every stockd
 * down, a reconnect, a failover to a replica whose keys expire on their
 * own clock - is lost, and its hold stays held forever: stranded. The
 * subscriber reconnects by itself and goes on with the events to come; it
 * never looks back for the ones it missed. So it promises no lag. (Redis
 * also expires a key only when it is touched or its sampler finds it, so
 * an event can come well after the TTL.)
 */
#include "backend/redis.h"
#include "core/log.h"
#include "core/worker.h"
#include "store/expiry.h"
#include "store/redis_orders.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define EXPIRED_CHANNEL "__keyevent@0__:expired"

/* How long a wait for an event lasts before the loop asks whether to stop. */
#define EVENT_WAIT_MS 200

/* Turns the events on where Redis lets this client (a managed Redis may
 * not: its operator does it, or the row strands everything). */
static void events_on(struct worker *w)
{
    redisReply *reply;
    const char *argv[] = {"CONFIG", "SET", "notify-keyspace-events", "Ex"};
    if (redis_call(w, &reply, 4, argv) == ST_OK)
        freeReplyObject(reply);
    else
        log_warn("redis-keyspace: cannot set notify-keyspace-events (%s); the Redis must have it",
                 w->error);
}

static st_result subscribe(struct worker *w)
{
    redisReply *reply;
    const char *argv[] = {"SUBSCRIBE", EXPIRED_CHANNEL};
    st_result r = redis_link_call(w, redis_subscriber(w), &reply, 2, argv);
    if (r == ST_OK)
        freeReplyObject(reply);
    return r;
}

/* The product and order of an expired key "hold:{P}:<ID>": 0, or -1 when
 * the key is none of ours. */
static int hold_key_parts(const char *key, int *product, const char **id)
{
    if (strncmp(key, "hold:{", 6) != 0)
        return -1;
    char *end;
    long p = strtol(key + 6, &end, 10);
    if (end == key + 6 || strncmp(end, "}:", 2) != 0 || p < 1 || p > 2147483647L)
        return -1;
    *product = (int)p;
    *id = end + 2;
    return 0;
}

/* One event: its order returned, when it is a hold's key. */
static st_result on_event(struct worker *w, const struct expiry *e, const redisReply *m)
{
    int product, returned;
    const char *id;
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[2]->type != REDIS_REPLY_STRING ||
        hold_key_parts(m->element[2]->str, &product, &id) != 0)
        return ST_OK;
    return expiry_return_one(w, e, id, &returned);
}

/* Waits up to EVENT_WAIT_MS for events and claims their orders. */
static st_result next_events(struct worker *w, const struct expiry *e)
{
    struct redis_link *sub = redis_subscriber(w);
    struct pollfd p = {.fd = sub->ctx->fd, .events = POLLIN};
    int ready = poll(&p, 1, EVENT_WAIT_MS);
    if (ready < 0 && errno != EINTR)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis-keyspace: poll: %s", strerror(errno));
    if (ready <= 0)
        return ST_OK;
    if (redisBufferRead(sub->ctx) != REDIS_OK)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis-keyspace: subscription lost: %s",
                           sub->ctx->errstr);
    st_result r = ST_OK;
    for (;;) {
        void *got = NULL;
        if (redisGetReplyFromReader(sub->ctx, &got) != REDIS_OK)
            return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis-keyspace: bad event: %s",
                               sub->ctx->errstr);
        if (!got)
            return r;
        st_result claimed = on_event(w, e, got);
        if (claimed != ST_OK) /* the order stays held: it is stranded now */
            r = claimed;
        freeReplyObject(got);
    }
}

static void listen(struct worker *w, const struct expiry *e)
{
    long long warned_ms = 0;
    events_on(w);
    while (expiry_running()) {
        st_result r = subscribe(w);
        while (r == ST_OK && expiry_running())
            r = next_events(w, e);
        if (r == ST_OK)
            break; /* stopping */
        if (monotonic_ms() - warned_ms > 5000) {
            log_warn("%s: %s (events published meanwhile are lost)", e->name, w->error);
            warned_ms = monotonic_ms();
        }
        redis_link_close(redis_subscriber(w));
        backends_drop_dead_links(w);
        expiry_pause(EVENT_WAIT_MS);
    }
}

const struct expiry expiry_redis_keyspace = {
    .name = "redis-keyspace",
    .store = &store_redis,
    .summary = "a key per hold with its TTL (PX); every stockd subscribes to Redis's expired "
               "events and claims the order of each: an event published while no one listens is "
               "lost",
    .promises_lag = 0,
    .strands_when = "no subscriber is connected when the key expires",
    .listen = listen,
};
