/*
 * redis_route.c - a round trip on the main Redis when it is a Redis
 * Cluster: to which node it goes, and whether it goes again.
 *
 * The main link stands for every node (redis_cluster.h): each worker
 * keeps a link per node, and a round trip on the main link goes over the
 * one to the node serving its keys' slot. One whose commands have no key
 * (WAIT, UNWATCH, SCRIPT LOAD) goes where the worker's last one went: WAIT
 * speaks for that connection's writes, and a script is loaded on the node
 * that answered NOSCRIPT. A round trip every reply of which redirects
 * (MOVED, ASK: nothing ran) is sent once more, where the redirect says.
 * One every reply of which is TRYAGAIN (a script whose keys a slot's
 * migration has split: nothing ran either) is sent again from the map
 * after TRYAGAIN_PAUSE_MS, until the request's deadline: the migration
 * moves the rest of the keys within milliseconds, and a sale that waited
 * for it is a sale, not a 503.
 *
 * So a round trip goes in tries: a try is sent from the map, then once
 * more where a MOVED or an ASK sends it; a try that ends in TRYAGAIN is
 * followed by another from the map until the wait allowed has passed. One
 * function makes a try, another decides whether to try again, so the loop
 * that strings them together is bounded by that wait, and a try by one
 * redirect. Sending is redis.c's (struct redis_route).
 */
#include "backend/redis_route.h"

#include "backend/redis_cluster.h"

#include <stdlib.h>
#include <string.h>

/* How long a round trip refused with TRYAGAIN waits before it is sent again. */
#define TRYAGAIN_PAUSE_MS 5

void redis_free_replies(redisReply **replies, int count)
{
    for (int i = 0; i < count; i++) {
        if (replies[i])
            freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

/* The slot a round trip's commands share, or SLOT_NO_KEY when none has a
 * key, or SLOT_SPLIT when they span slots. */
static int round_trip_slot(const struct redis_trip *trip)
{
    int slot = SLOT_NO_KEY;
    for (int i = 0; i < trip->count; i++) {
        int s = redis_cluster_command_slot(trip->argcs[i], trip->argvs[i]);
        if (s == SLOT_SPLIT || (s >= 0 && slot >= 0 && s != slot))
            return SLOT_SPLIT;
        if (s >= 0)
            slot = s;
    }
    return slot;
}

/* Whether every reply redirects, the same way to the same node (into
 * *node): then nothing ran. Each MOVED among them updates the map. */
static enum redis_redirect all_redirected(redisReply **replies, int count, int *node)
{
    enum redis_redirect kind = REDIRECT_NONE;
    int same = 1;
    for (int i = 0; i < count; i++) {
        int to = -1;
        enum redis_redirect k = redis_cluster_redirect(replies[i], &to);
        if (i == 0)
            kind = k, *node = to;
        else if (k != kind || to != *node)
            same = 0;
    }
    return same ? kind : REDIRECT_NONE;
}

/* The round trip after an ASK: each command behind an ASKING (which holds
 * for the next command only); the ASKINGs' replies are dropped. */
static st_result asking_round_trip(struct worker *w, const struct redis_route *route, int node,
                                   const struct redis_trip *trip)
{
    static const char *const asking[] = {"ASKING"};
    int count = trip->count;
    int *both_argcs = calloc(2 * (size_t)count, sizeof *both_argcs);
    const char *const **both_argvs = calloc(2 * (size_t)count, sizeof *both_argvs);
    redisReply **got = calloc(2 * (size_t)count, sizeof *got);
    st_result r = ST_OK;
    if (!both_argcs || !both_argvs || !got) {
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: out of memory for ASKING");
    } else {
        for (int i = 0; i < count; i++) {
            both_argcs[2 * i] = 1, both_argvs[2 * i] = asking;
            both_argcs[2 * i + 1] = trip->argcs[i], both_argvs[2 * i + 1] = trip->argvs[i];
        }
        const struct redis_trip both = {trip->kind, 2 * count, both_argcs, both_argvs, got};
        r = route->send(w, node, &both);
        for (int i = 0; r == ST_OK && i < count; i++) {
            freeReplyObject(got[2 * i]);
            trip->replies[i] = got[2 * i + 1];
        }
    }
    free(both_argcs);
    free(both_argvs);
    free(got);
    return r;
}

/* One send of `trip` to `node`, behind ASKINGs after an ASK. A failure
 * other than the request's own timeout may mean the node is gone: its
 * slots are looked for elsewhere. */
static st_result send_once(struct worker *w, const struct redis_route *route, int node,
                           const struct redis_trip *trip, int asking)
{
    *route->last = node;
    st_result r = asking ? asking_round_trip(w, route, node, trip) : route->send(w, node, trip);
    if (r != ST_OK && r != ST_TIMEOUT)
        redis_cluster_suspect();
    return r;
}

/* One try: `trip` sent to `node`, and once more where a MOVED or an ASK
 * says when every reply redirects (nothing ran). *left: the redirect the
 * replies still carry - REDIRECT_TRYAGAIN, or one the try does not follow
 * again (its replies are the caller's). */
static st_result one_try(struct worker *w, const struct redis_route *route, int node,
                         const struct redis_trip *trip, enum redis_redirect *left)
{
    enum redis_redirect redirect = REDIRECT_NONE;
    for (int sent = 0; sent < 2; sent++) {
        if (sent)
            redis_free_replies(trip->replies, trip->count); /* nothing ran: there, once more */
        st_result r = send_once(w, route, node, trip, redirect == REDIRECT_ASK);
        if (r != ST_OK)
            return r;
        redirect = all_redirected(trip->replies, trip->count, &node);
        if (redirect == REDIRECT_NONE || redirect == REDIRECT_TRYAGAIN)
            break;
    }
    *left = redirect;
    return ST_OK;
}

/* After a try whose replies are all TRYAGAIN (nothing ran): whether to try
 * again from the map, after a pause, for as long as one backend wait from
 * the first TRYAGAIN (*give_up, 0 until then: io-timeout-ms, or less when
 * the request's deadline comes first). When not, the TRYAGAIN replies are
 * the caller's error; a round trip with no key has no slot to wait for. */
static int again_after_pause(struct worker *w, const struct redis_route *route,
                             const struct redis_trip *trip, int slot, long long *give_up)
{
    long long now = monotonic_ms();
    if (!*give_up)
        *give_up = now + route->wait_ms(w);
    if (slot == SLOT_NO_KEY || now >= *give_up)
        return 0;
    redis_free_replies(trip->replies, trip->count);
    sleep_ms((int)(*give_up - now < TRYAGAIN_PAUSE_MS ? *give_up - now : TRYAGAIN_PAUSE_MS));
    return 1;
}

/* Tries `trip` first at `node`, then from the map while its slot's keys
 * are split by a migration (again_after_pause() bounds it). */
static st_result tries(struct worker *w, const struct redis_route *route,
                       const struct redis_trip *trip, int slot, int node)
{
    long long give_up = 0;
    for (;;) {
        enum redis_redirect left;
        st_result r = one_try(w, route, node, trip, &left);
        if (r != ST_OK || left != REDIRECT_TRYAGAIN ||
            !again_after_pause(w, route, trip, slot, &give_up))
            return r;
        node = redis_cluster_node_of(slot);
        if (node < 0)
            return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis cluster: slot %d has no primary",
                               slot);
    }
}

/* Commands of different slots in one read-only round trip (the order
 * stream's status): one at a time, each to its own node. */
static st_result one_by_one(struct worker *w, const struct redis_route *route,
                            const struct redis_trip *trip)
{
    memset(trip->replies, 0, sizeof *trip->replies * (size_t)trip->count);
    for (int i = 0; i < trip->count; i++) {
        const struct redis_trip one = {trip->kind, 1, &trip->argcs[i], &trip->argvs[i],
                                       &trip->replies[i]};
        st_result r = redis_routed_round_trip(w, route, &one);
        if (r != ST_OK) {
            redis_free_replies(trip->replies, i);
            return r;
        }
    }
    return ST_OK;
}

st_result redis_routed_round_trip(struct worker *w, const struct redis_route *route,
                                  const struct redis_trip *trip)
{
    int slot = round_trip_slot(trip);
    if (slot == SLOT_SPLIT && (trip->count == 1 || trip->kind == COMMITS))
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "redis cluster: the keys of one %s are in different slots",
                           trip->count == 1 ? "command" : "transaction");
    if (slot == SLOT_SPLIT)
        return one_by_one(w, route, trip);
    int node = slot >= 0           ? redis_cluster_node_of(slot)
               : *route->last >= 0 ? *route->last
                                   : redis_cluster_any_node();
    if (node < 0) {
        redis_cluster_suspect();
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis cluster: slot %d has no primary",
                           slot);
    }
    return tries(w, route, trip, slot, node);
}
