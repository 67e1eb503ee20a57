/*
 * redis_route.h - a round trip to Redis as commands and replies, and its
 * routing over a Redis Cluster's nodes (redis_route.c says how).
 *
 * redis.c owns the links and sends; this file decides where a round trip
 * goes and whether it goes again, through the `send` it is given, so that
 * the decision can be read apart from the sending.
 */
#ifndef STOCKD_REDIS_ROUTE_H
#define STOCKD_REDIS_ROUTE_H

#include "core/result.h"
#include "core/worker.h"

#include <hiredis/hiredis.h>

/* How a broken read is reported: a read-only request changed nothing; a
 * request that commits a sale may have. */
enum request_kind { READS, COMMITS };

/* One round trip: `count` commands (argcs/argvs), their replies. */
struct redis_trip {
    enum request_kind kind;
    int count;
    const int *argcs;
    const char *const *const *argvs;
    redisReply **replies;
};

/* What routing needs of the worker's links: `send` makes one round trip
 * over the link to node `node` (on failure, no reply is left to free);
 * `wait_ms` says how long the worker may still wait for Redis; `last` is
 * the node the worker's last round trip went to (-1: none). */
struct redis_route {
    st_result (*send)(struct worker *w, int node, const struct redis_trip *trip);
    int (*wait_ms)(const struct worker *w);
    int *last;
};

/* Sends `trip` to the node that serves its keys' slot, following the
 * cluster's redirects (redis_route.c). */
st_result redis_routed_round_trip(struct worker *w, const struct redis_route *route,
                                  const struct redis_trip *trip);

/* Frees `count` replies (NULLs allowed). */
void redis_free_replies(redisReply **replies, int count);

#endif
