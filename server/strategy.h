/*
 * strategy.h - what a concurrency strategy is, and the table of them all.
 *
 * A strategy is one way to sell `qty` units of a product under concurrency.
 * Each lives in its own strategy_*.c file, which opens with its story (the
 * race, the fix, the price) and defines one `const struct strategy`. The
 * table in strategy.c lists every one; routing, /strategies and reset all
 * walk that table, so adding a strategy is one file and one line.
 */
#ifndef STOCKD_STRATEGY_H
#define STOCKD_STRATEGY_H

#include "result.h"

#include <limits.h>
#include <stddef.h>

struct worker;
struct held_lock;
struct lock_kind;

/* Where a strategy keeps its stock and its ledger. */
enum store { STORE_MYSQL, STORE_REDIS };

/* Backends a strategy needs to answer (bit set). */
enum {
    NEEDS_MYSQL = 1 << 0,
    NEEDS_REDIS = 1 << 1,
    NEEDS_REDLOCK = 1 << 2, /* the --redlock servers */
    NEEDS_ZK = 1 << 3,      /* the --zk servers */
};

/* One sale attempt, validated by the HTTP layer. */
struct deduct_request {
    const struct strategy *strategy;
    int product;  /* 1 .. 2^31-1                                          */
    int qty;      /* 1 .. 1000                                            */
    int hold_ms;  /* time spent inside the critical section, 0 .. 1000    */
    int ttl_ms;   /* lock TTL for this request (server default if unset)  */
    int pause_ms; /* holder frozen after reading, watchdog included       */
};

/* deduct_reply.remaining when the strategy never saw the count (sql). */
#define REMAINING_UNKNOWN LLONG_MIN

/* What the sale saw, for the reply. */
struct deduct_reply {
    long long remaining; /* stock the sale left (or found, when sold out) */
    int attempts;        /* optimistic tries or lock polls used            */
    long long fence;     /* fencing token the write carried, 0 if none     */
    int lock_lost;       /* the lock had expired or changed hands by release */
};

typedef st_result (*deduct_fn)(struct worker *w, const struct deduct_request *rq,
                               struct deduct_reply *out);

struct strategy {
    const char *name;   /* the {strategy} of /stock/deduct/{strategy}      */
    enum store store;   /* where its stock and ledger live                  */
    int safe_single;    /* never oversells with one stockd instance         */
    int safe_multi;     /* never oversells with several instances           */
    const char *caveat; /* the condition a safety claim rests on, or NULL  */
    const char *summary;
    unsigned needs;               /* NEEDS_* backends                                 */
    deduct_fn deduct;             /* the strategy's own body, or...                 */
    const struct lock_kind *lock; /* ...a lock around the shared nolock body */
    /* Optional: clears the product's keys that live outside the main
     * stores (reset calls it after resetting them). */
    st_result (*reset)(struct worker *w, int product);
};

/* Sells with strategy `s`: its own body, or its lock around read_then_write. */
st_result strategy_run(const struct strategy *s, struct worker *w, const struct deduct_request *rq,
                       struct deduct_reply *out);

const struct strategy *strategy_find(const char *name);
size_t strategy_count(void);
const struct strategy *strategy_at(size_t i);
const char *store_name(enum store s);

#endif
