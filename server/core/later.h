/*
 * later.h - an answer given after the call that asked for it has returned.
 *
 * A request that waits without holding a thread travels down the layers
 * and its answer comes back up from another call, often another thread:
 * a piped `lua` sale goes http -> api -> sale -> backend (the loop's Redis
 * pipe), and the pipe's reply comes back backend -> sale -> api -> http.
 * Every layer hands the one below it a `struct later` embedded in its own
 * record of the request, and gets it back in answer(), from which
 * CONTAINER_OF() finds the record again: one callback type, whatever the
 * layer, so a deferred answer reads the same at every step.
 */
#ifndef STOCKD_LATER_H
#define STOCKD_LATER_H

#include "core/result.h"

#include <stddef.h>

struct later {
    /* Called exactly once with the outcome; `why` says why it is not ST_OK
     * (NULL otherwise). What the answer carries besides (a reply document,
     * a Redis reply) lives in the record that embeds this. */
    void (*answer)(struct later *later, st_result r, const char *why);
    /* Called before another thread can reach the request, by a layer
     * that lets one answer it; NULL where no thread lets go of it. */
    void (*hand_off)(struct later *later);
};

/* The record of type `type` whose member `member` is at `ptr`. */
#define CONTAINER_OF(ptr, type, member) ((type *)(void *)(((char *)(ptr)) - offsetof(type, member)))

#endif
