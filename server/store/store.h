/*
 * store.h - where a strategy's stock and ledger live.
 *
 * A store keeps, per product, the count, what reset set it to, and a
 * ledger of acknowledged sales written in the same atomic step as the
 * deduction (contract: "Accounting"). There are three: MySQL
 * (store/mysql_stock.c), Redis (store/redis_stock.c) and Redis split into
 * segments (store/redis_segments.c), whose figures are its segments' sums. The shared sale body
 * (read_then_write in sale.c) and every lock wrapped around it see a store
 * only through this interface, so a lock row can name either store.
 *
 * Every store keeps a reset epoch: reset moves it on, a read returns it,
 * and a write applies only if it is unchanged. So a sale that read the
 * count before a reset can never write after it.
 */
#ifndef STOCKD_STORE_H
#define STOCKD_STORE_H

#include "backend/backend.h"
#include "core/later.h"
#include "core/result.h"

#include <jansson.h>
#include <limits.h>

struct worker;
struct strategy;
struct sale_trace;
struct order_store;

/* An order id: "<store letter><product>-<16 lowercase hex>" (store/orders.h). */
#define ORDER_ID_MAX 40

/* A hold: a sale whose ledger record is an order that waits for its
 * payment, or gives its units back after ttl_ms (store/orders.h). */
struct hold {
    char order[ORDER_ID_MAX + 1]; /* "" for a plain sale                          */
    int ttl_ms;                   /* its deadline, from the store's clock          */
    const char *expiry;           /* the expiry mechanism's name (store/expiry.h) */
};

/* A return: an order's units given back through its strategy's own sale
 * body, as a sale of -qty units (sale/returns.h), so that they go back
 * the way that strategy writes stock - its statement, its lock, its
 * script, or its unprotected read-then-write. Where the ledger record of
 * a sale goes, the store writes instead the order's state change,
 * conditional on `held`, and its return record; when the order is no
 * longer held, that step refuses ST_EXPIRED and the whole write is undone,
 * so an order is returned once, however many try. */
struct give_back {
    char order[ORDER_ID_MAX + 1]; /* "" for a sale                          */
    const char *state;            /* what it leaves `held` for: "expired" or "cancelled" */
    const char *by_what;          /* the return record's witness: "cancel", a mechanism */
    /* Further orders of the same product and strategy returned in the same
     * step, each claimed the same way (a sweeper's batch: qty is their
     * units summed); the mysql store only. */
    const char *const *more;
    int more_count;
};

/* The longest Idempotency-Key the contract allows. A key is kept by the
 * store beside the sale it was sent with, in the same atomic step, with
 * the answer its client was given (store/mysql_keys.h; on Redis, the keyed
 * sale script of redis_stock.h). */
#define IDEMPOTENCY_KEY_MAX 255

/* One sale attempt, validated by the HTTP layer. */
struct deduct_request {
    const struct strategy *strategy; /* the row (sale/strategy.h): stores do not read it */
    const char *seller;              /* its name, as the ledger records the sale          */
    int streams_order;               /* its 200 settles later, through the order stream   */
    struct later *later;             /* a row that answers later: answered here, once,  */
                                     /* after its deduct_reply is filled (later.h)      */
    int product;                     /* 1 .. 2^31-1                                          */
    int qty;                         /* 1 .. 1000; a return: -1000 .. -1 (give_back)      */
    int hold_ms;                     /* time spent inside the critical section, 0 .. 1000    */
    int ttl_ms;                      /* lock TTL for this request (server default if unset)  */
    int pause_ms;                    /* holder frozen after reading, watchdog included       */
    struct sale_trace *trace;        /* what the sale did, when trace=1 asked; else NULL     */
    struct hold hold;                /* the order it holds, or hold.order "" for a sale      */
    struct give_back give_back;      /* the order it returns (qty < 0), or "" for a sale   */

    /* Its Idempotency-Key, "" when none came or its row keeps none
     * (strategy_idempotent_why()). */
    char key[IDEMPOTENCY_KEY_MAX + 1];
};

/* deduct_reply.remaining when the strategy never saw the count (sql). */
#define REMAINING_UNKNOWN LLONG_MIN

/* What the sale saw, for the reply. */
struct deduct_reply {
    long long remaining;    /* stock the sale left (or found, when sold out) */
    int attempts;           /* optimistic tries or lock polls used            */
    long long fence;        /* fencing token the write carried, 0 if none     */
    int lock_lost;          /* the lock had expired or changed hands by release */
    long long lock_wait_us; /* time spent taking the lock                 */
    int batch;              /* sales applied in the same transaction, or 0 */
    char order[40];         /* the order id of a sale that settles later, or "" */
    int replayed;           /* the answer is the one its key's first request got */
};

/* What a lock hands the body it guards (NULL when there is no lock). */
struct guard {
    long long fence;        /* fencing token handed out with the lock, 0 if none */
    long long newest_fence; /* the store's newest token, when it refused ours    */
    /* Stops (1) or resumes (0) the lock's background renewal; NULL when
     * nothing renews it. */
    void (*freeze)(struct guard *g, int frozen);
};

/* Waits inside a critical section: hold_ms with the holder busy (a lock's
 * watchdog keeps renewing), then pause_ms with the holder frozen (the
 * watchdog freezes too, as in a GC or VM pause). `g` may be NULL. */
void critical_section_wait(const struct deduct_request *rq, struct guard *g);

/* Records the count the sale found and answers ST_SOLD_OUT when it cannot
 * cover qty. */
st_result count_covers(struct worker *w, const struct deduct_request *rq, long long count,
                       struct deduct_reply *out);

/* What a key's request asked, as the store keeps it beside the key: the
 * same key with another fingerprint is ST_KEY_REUSED. */
#define KEY_FINGERPRINT_MAX 128
void key_fingerprint(char out[KEY_FINGERPRINT_MAX], const struct deduct_request *rq);

/* The answer a store kept with a key, given again: `kept` (ST_OK, or the
 * refusal ST_SOLD_OUT or ST_BUSY with `message`) and the `remaining` it
 * showed, into *out, marked replayed. */
st_result key_replay(struct worker *w, st_result kept, long long remaining, const char *message,
                     struct deduct_reply *out);

/* The answer to a key sent before with another fingerprint. */
st_result key_reused(struct worker *w);

/* The answer to a sale that found its key kept, as it was about to keep
 * it, by another request with the same key that sold first: ST_IN_PROGRESS
 * (its retry gets that request's answer). */
st_result key_taken(struct worker *w);

/* The answer kept with the Idempotency-Key of a request that is no sale -
 * an order's pay or cancel (api/orders.c), safe to repeat by itself (its
 * transition is conditional on the order's state), whose key makes a
 * repeat the first answer again. */
struct kept_answer {
    st_result result;  /* ST_OK, a refusal, or ST_KEY_REUSED when found */
    int duplicate;     /* the answer said "duplicate": true            */
    char message[256]; /* a refusal's                                  */
};

/* What a store keeps Idempotency-Keys with, for the rows whose sale keeps
 * its key in the store's shared atomic step (the MySQL commit the ledger
 * row rides, the Redis MULTI): the key looked up before the sale, and
 * what follows a sale that did not sell. */
struct key_store {
    /* *found 0: no answer for rq->key; else *found 1 and the kept answer
     * again (key_replay()), or ST_KEY_REUSED. */
    st_result (*find)(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out,
                      int *found);
    /* After `refused` (ST_SOLD_OUT, ST_BUSY, or key_taken()'s
     * ST_IN_PROGRESS; its message in w): the refusal kept as the key's
     * answer where the store keeps it, or the answer another request with
     * the key got first, or the refusal as it was. */
    st_result (*after_refusal)(struct worker *w, const struct deduct_request *rq, st_result refused,
                               struct deduct_reply *out);
    /* A request that is no sale, on `product`: *found 1 and the answer
     * kept with `key` (ST_KEY_REUSED when kept for another fingerprint),
     * or *found 0. */
    st_result (*find_answer)(struct worker *w, int product, const char *key,
                             const char *fingerprint, struct kept_answer *out, int *found);
    /* Keeps `a` with `key`, unless an answer is kept already (*kept 0). */
    st_result (*keep_answer)(struct worker *w, int product, const char *key,
                             const char *fingerprint, const struct kept_answer *a, int *kept);
};

/* What a read saw, for the write that follows it. */
struct stock_seen {
    long long count;
    long long epoch;
};

/* One store's figures for a product; the orders' (holds), beside the
 * sales', in a store that holds orders (store/orders.h says what each is). */
struct store_account {
    int present; /* the store has the product */
    long long initial, remaining, sold, orders;
    int holds; /* the figures below are the store's */
    long long held, paid, returned, refunds_due, stranded, returned_twice, paid_and_returned;
};

struct store {
    const char *name;        /* as /stock/{p} and /strategies name it */
    enum backend_id backend; /* the backend it lives on             */
    /* Reads the count and checks that it covers rq->qty: ST_UNKNOWN_PRODUCT
     * or ST_SOLD_OUT (out->remaining then has the count) otherwise. On
     * ST_OK, write_if() must follow. */
    st_result (*read)(struct worker *w, const struct deduct_request *rq, struct stock_seen *seen,
                      struct deduct_reply *out);
    /* Writes `left` and records the sale in the ledger, in one atomic step,
     * only if the product was not reset since `seen` and, with a fencing
     * token, only while no newer token claimed the product: ST_BUSY, with
     * nothing changed, otherwise. */
    st_result (*write_if)(struct worker *w, const struct deduct_request *rq,
                          const struct stock_seen *seen, long long left, long long fence);
    /* Claims fencing token `token` on the product before the read: from
     * then on, holders of older tokens cannot write. ST_BUSY when a token
     * at least as new got there first (*newest then says which). NULL: the
     * store cannot fence. */
    st_result (*claim_fence)(struct worker *w, const struct deduct_request *rq, long long token,
                             long long *newest);
    st_result (*account)(struct worker *w, int product, struct store_account *out);
    /* Adds what the store's figures are made of to `into`, the store's
     * object in GET /stock/{P} (the segments store: each segment); NULL
     * when they are one count and one ledger. */
    st_result (*describe)(struct worker *w, int product, json_t *into);
    /* Creates the product if absent, sets its count and initial to `count`,
     * empties its ledger and moves its epoch on, in one atomic step. The
     * stores reset in table order: MySQL says where its epoch moved to in
     * *epoch, and Redis keeps that number for the orders it streams to
     * MySQL (order_stream.h), which MySQL refuses once its epoch moves on. */
    st_result (*reset)(struct worker *w, int product, long long count, long long *epoch);
    /* Its orders' transitions (store/orders.h); NULL when it holds none. */
    const struct order_store *orders;
    /* Its Idempotency-Keys; NULL when it keeps none. */
    const struct key_store *keys;
};

extern const struct store store_mysql;
extern const struct store store_redis;
extern const struct store store_segments; /* store/redis_segments.h */

#endif
