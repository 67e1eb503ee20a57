/*
 * strategy.h - what a concurrency strategy is, and the table of them all.
 *
 * A strategy is one way to sell `qty` units of a product under concurrency.
 * Each lives in its own file of strategies/, which opens with its story (the
 * race, the fix, the price) and defines one `const struct strategy`: a row
 * that says everything there is to know about it - where it sells from,
 * what it claims, how it behaves under contention, when its lease runs
 * out, when its Redis primary fails over and on a multi-primary MySQL
 * cluster, what exposes its race. /strategies publishes the rows,
 * and the tests, the comparison and docs/strategies.md read them from there, so no other file
 * names a strategy to learn a property of it. Adding a strategy is
 * one file and one line of strategies/table.h (docs/adding-a-strategy.md).
 */
#ifndef STOCKD_STRATEGY_H
#define STOCKD_STRATEGY_H

#include "backend/backend.h"
#include "core/result.h"
#include "store/store.h"

#include <jansson.h>
#include <limits.h>
#include <stddef.h>

struct worker;
struct lock_kind;
struct store;
struct sale_trace;

typedef st_result (*deduct_fn)(struct worker *w, const struct deduct_request *rq,
                               struct deduct_reply *out);

/* What a contended request does. */
enum contention {
    CONTENTION_NONE,    /* nothing excludes others: the races                 */
    CONTENTION_WAITS,   /* waits its turn (a row lock, a mutex, a lock queue,
                           Redis's one thread): every unit sells, busy only
                           past lock_wait_ms                                  */
    CONTENTION_RETRIES, /* optimistic: retries, busy once retries run out     */
};

/* What happens to a lease lock when the lease runs out under its holder. */
enum lease_outcome { LEASE_SAFE = 1, LEASE_OVERSELLS };
struct lease {
    enum lease_outcome busy_holder;   /* hold_ms > ttl_ms: the holder works on */
    enum lease_outcome paused_holder; /* pause_ms > ttl_ms: the holder is frozen */
    /* What the lock's own servers do to it while it is held (make partition);
     * 0: not stated, no row. */
    enum lease_outcome clock_jump;    /* a server's wall clock jumps past the TTL */
    enum lease_outcome empty_restart; /* a server restarts without its data       */
    enum lease_outcome late_grant;    /* the grant is answered after the TTL      */
};

/* The lease of a lock that nothing guards after it runs out (no fencing):
 * the holder goes on, or wakes, and writes over a later holder's sale. */
extern const struct lease lease_expires_under_holder;

/* What a failover of the main Redis's replicated group does to a row that
 * keeps anything in Redis: a write acknowledged by the primary and not yet
 * on the replica is gone once the replica is promoted. */
enum failover_outcome {
    FAILOVER_DEFAULT,     /* unstated: what follows (strategy_failover()) */
    FAILOVER_NONE,        /* it keeps nothing in Redis: no fact          */
    FAILOVER_SAFE,        /* nothing acknowledged is lost, no two holders */
    FAILOVER_LOSES_SALES, /* the store is Redis: acknowledged sales vanish */
    FAILOVER_TWO_HOLDERS, /* the lock vanishes: a second holder oversells */
};

/* What a partition of the main Redis's group does to a row (Jepsen 2013:
 * the primary and one stockd cut from the replica, the Sentinels and the
 * other stockd; the replica promoted; healed): what a failover does, and
 * then some for a row whose orders leave Redis on their own. Derived only
 * (strategy_partition()): no row states it. */
enum partition_outcome {
    PARTITION_AS_FAILOVER, /* what strategy_failover() says: no fact of its own */
    PARTITION_OVERSELLS,   /* each side's consumer settles its side's orders
                              into MySQL: more orders than the stock counted */
};

/* Where a sale is settled when its 200 goes out. */
enum settles {
    SETTLES_AT_ONCE, /* in its store, ledger included: no fact */
    SETTLES_LATER,   /* accepted in Redis; its order reaches MySQL later, once */
};

/* Whether a sale can be refused sold_out while the product still holds
 * the units it asked for, split between places no one sale reads (the
 * segmented rows' segments): undersell. */
enum undersells {
    UNDERSELLS_NEVER,     /* refused only when the product lacks qty: no fact */
    UNDERSELLS_SPLIT_QTY, /* a qty no one place holds, though together they do */
    UNDERSELLS_ANY_QTY,   /* even qty 1: the one place it asks is empty */
};

/* What a multi-primary (Galera) cluster does to a row that keeps its stock
 * in MySQL, with one stockd per node: each node takes its own locks and
 * checks a transaction against the others' only when it commits
 * (certification), and applies their commits a moment later. */
enum cluster_outcome {
    CLUSTER_DEFAULT,             /* unstated: what follows (strategy_cluster())  */
    CLUSTER_NONE,                /* its stock is not in MySQL: no fact          */
    CLUSTER_SAFE,                /* as safe as on one server; a conflict is retried
                                    or waited out                               */
    CLUSTER_CONFLICTS_AT_COMMIT, /* safe, but a conflict with another node fails
                                    the commit: busy while stock remains        */
    CLUSTER_TWO_HOLDERS,         /* its lock is one node's (or one process's):
                                    one holder per node, oversells              */
    CLUSTER_LOSES_UPDATES,       /* nothing guards its read-then-write          */
};

/* Where a row keeps an Idempotency-Key with its sale. */
enum keeps_key {
    KEEPS_KEY_IN_STORE,  /* the store's shared atomic step that its ledger record
                            rides keeps it, when that write is the store's (the
                            MySQL commit, the Redis MULTI): no field in a row  */
    KEEPS_KEY_IN_SCRIPT, /* its sale script finds it and keeps it (lua)       */
    KEEPS_KEY_IN_BODY,   /* its own body keeps it in its transaction; the store
                            finds it before and keeps its refusals            */
};

/* Request parameters that make an unsafe strategy's race show every run. */
enum {
    EXPOSED_BY_HOLD = 1 << 0, /* a long stay between the read and the write */
    EXPOSED_BY_TTL = 1 << 1,  /* a lease shorter than that stay            */
};

struct strategy {
    const char *name;          /* the {strategy} of /stock/deduct/{strategy}  */
    const struct store *store; /* where its stock and ledger live             */
    int safe_single;           /* never oversells with one stockd instance    */
    int safe_multi;            /* never oversells with several instances      */
    const char *caveat;        /* the condition a safety claim rests on, or NULL */
    const char *summary;
    enum contention contention;
    const struct lease *lease; /* NULL: it holds no lease                     */
    /* The fault facts: stated by a row only where it differs from what
     * follows from its store and its lock (strategy_failover(),
     * strategy_cluster()), so that a new fault is a rule here and a line in
     * the rows that are the exception, not a line in every file. */
    enum failover_outcome failover; /* a primary failover of the main Redis  */
    enum settles settles;           /* a 200 is in MySQL now, or after the drain */
    enum cluster_outcome cluster;   /* a multi-primary MySQL cluster         */
    enum undersells undersells;     /* refusals while the units are there    */
    unsigned exposed_by;            /* EXPOSED_BY_*: 0 when safe everywhere         */
    int hold_per_batch;             /* hold_ms is spent once per batch, not per sale */
    int answers_later;              /* it answers through rq->later: the result its
                                       deduct returns is not the answer             */
    const char *orders_why;         /* why it cannot hold orders (store/orders.h):
                                       its ledger write is its own, not its store's
                                       shared one; NULL: it holds them              */
    enum keeps_key keeps_key;       /* where an Idempotency-Key is kept with the sale */
    deduct_fn deduct;               /* the strategy's own body, or...                */
    const struct lock_kind *lock;   /* ...a lock around the shared read-then-write   */
};

/* The body with no lock at all, on the strategy's store: the races. */
st_result sell_unlocked(struct worker *w, const struct deduct_request *rq,
                        struct deduct_reply *out);

/* Sells with strategy `s`: its own body, or its lock around read_then_write. */
st_result strategy_run(const struct strategy *s, struct worker *w, const struct deduct_request *rq,
                       struct deduct_reply *out);

/* The backends `s` needs to answer: its store's and its lock's. */
backend_set strategy_needs(const struct strategy *s);

/* What a failover of the main Redis does to `s`: its stated fact, or what
 * follows - nothing in Redis: none; its stock in Redis: the acknowledged
 * sales not yet replicated vanish (loses_sales); its lock on the main
 * Redis: the lock vanishes and a second holder takes it (two_holders); its
 * lock on the Redlock servers, which do not fail over: safe. */
enum failover_outcome strategy_failover(const struct strategy *s);

/* What a partition of the main Redis does to `s`: what a failover does,
 * except for a row that settles later and loses sales in a failover: there
 * the old primary's orders, lost from Redis at the heal, were settled into
 * MySQL by the cut-off side's consumer meanwhile (oversells). */
enum partition_outcome strategy_partition(const struct strategy *s);

/* What a multi-primary MySQL cluster does to `s`: its stated fact, or
 * what follows - stock not in MySQL: none; a lock outside MySQL (Redis,
 * Redlock, ZooKeeper): one lock for every node, safe; a lock in one
 * process's memory: one holder per node (two_holders). A MySQL row with no
 * lock, or a lock inside MySQL, states its own. */
enum cluster_outcome strategy_cluster(const struct strategy *s);

/* Why `s` cannot hold orders (POST /orders/{strategy}): its own reason, or
 * that its store keeps none; NULL when it holds them. */
const char *strategy_orders_why(const struct strategy *s);

/* Why `s` cannot keep an Idempotency-Key in its sale's atomic step, or
 * NULL when it keeps one: a row keeps it in its own script or transaction
 * (keeps_key), or else in the store's shared atomic step its ledger record
 * rides (store.h's key_store: the MySQL commit, store/mysql_keys.h; the
 * Redis MULTI, store/redis_keys.h) - unless that ledger write is its own
 * (the rows that hold no orders, strategy_orders_why()) or its store keeps
 * no keys. A key sent to a row that keeps none is checked, then ignored. */
const char *strategy_idempotent_why(const struct strategy *s);

/* The backends whose per-product state a reset clears for `s`. */
backend_set strategy_resets(const struct strategy *s);

/* The row as /strategies publishes it (new reference). */
json_t *strategy_json(const struct strategy *s);

const struct strategy *strategy_find(const char *name);
size_t strategy_count(void);
const struct strategy *strategy_at(size_t i);

/* Whether `s` is a row that can run: its own body or a lock (whole), a
 * store, claims that agree with each other. stockd refuses to start with a
 * row that is not (api_prepare()), rather than sell wrongly. */
int strategy_row_sound(const struct strategy *s);

/* The rule of strategy_row_sound() that `s` breaks, as a sentence for the
 * log, or NULL when it breaks none. */
const char *strategy_row_flaw(const struct strategy *s);

/* `s`'s position in the table: strategy_at(strategy_index(s)) == s. */
size_t strategy_index(const struct strategy *s);

#endif
