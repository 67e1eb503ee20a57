/*
 * redis_stock.h - the pieces of a sale on Redis that strategies compose.
 *
 * The redis store (`store_redis`, store.h) keeps a product's count in
 * stock:{P}, what reset set it to in stock:{P}:initial, and its ledger in
 * the hash ledger:{P} (sold, orders). A sale is written to Redis together
 * with its ledger entry in one of two places: redis_sale_exec() (MULTI/EXEC)
 * or redis_sale_script (one script).
 */
#ifndef STOCKD_REDIS_SALE_H
#define STOCKD_REDIS_SALE_H

#include "backend/redis.h"
#include "store/redis_orders.h"
#include "store/store.h"

struct redis_stock {
    char stock[REDIS_KEY_MAX];   /* stock:{P}, the count                   */
    char initial[REDIS_KEY_MAX]; /* stock:{P}:initial, written by every reset */
    char epoch[REDIS_KEY_MAX];   /* stock:{P}:epoch, MySQL's epoch at reset */
    char ledger[REDIS_KEY_MAX];  /* ledger:{P}, sold/orders                */
};

void redis_stock_keys(struct redis_stock *k, int product);

/* WATCH `watched`, then GET stock:{P}, in one round trip; the count into
 * out->remaining. ST_UNKNOWN_PRODUCT when the key is absent, ST_SOLD_OUT
 * when the count cannot cover qty; on any failure nothing stays watched. */
st_result redis_watch_and_read(struct worker *w, const struct deduct_request *rq,
                               const struct redis_stock *k, const char *watched,
                               struct deduct_reply *out);

/* MULTI; SET stock:{P} left; HINCRBY ledger:{P} sold qty; HINCRBY ledger:{P}
 * orders 1; for a hold, the EVAL that writes its order (redis_orders.h);
 * EXEC - in one round trip, applied together or not at all. A return
 * (rq->give_back) is MULTI, the EVAL of its order's state change and the
 * SET of `left`, EXEC: ST_EXPIRED, nothing written, when the order was no
 * longer held.
 * ST_BUSY (with no message: the caller knows what it watched) when EXEC
 * was aborted because a WATCHed key changed; ST_OUTCOME_UNKNOWN when
 * EXEC's reply was lost. */
st_result redis_sale_exec(struct worker *w, const struct deduct_request *rq,
                          const struct redis_stock *k, long long left);

/* The whole sale as one Lua script (lua, lua-wait): it checks the count,
 * DECRBYs it and records the sale in the ledger, answering {1, left} when
 * sold, {0, count} when short, {-1, 0} when the product is not in Redis. */
extern struct redis_script redis_sale_script;

/* The same sale that also appends the order to the order stream with
 * XADD (lua-stream: order_stream.h), in the same atomic step: the order
 * id, the product, the qty and the product's epoch (stock:{P}:epoch). */
extern struct redis_script redis_stream_sale_script;

/* The same sale that also writes its held order (redis_orders.h). */
extern struct redis_script redis_hold_sale_script;

/* A return (sale/returns.h) as one script (lua): the order's state
 * change if it is still held, its units back (INCRBY), {1, count}; else
 * {-3, 0} and nothing. */
extern struct redis_script redis_return_script;

/* The same sale with an Idempotency-Key (lua): idem:{P}:<key>, under the
 * product's hash tag, holds the request's fingerprint and the answer it
 * got (sold 1 or 0, the count, the order it streamed or ""), kept
 * --idempotency-ttl-s. A key it holds already answers its kept answer
 * again, {sold, count, 1, order}, and sells nothing; a key held with
 * another fingerprint answers {-2, 0}. The check, the sale and the key are
 * one script: the key exists if and only if its sale - or its refusal -
 * does. */
extern struct redis_script redis_keyed_sale_script;

/* The same hold with an Idempotency-Key: the keyed sale script's key,
 * kept with the hold's order id. */
extern struct redis_script redis_keyed_hold_sale_script;
/* The same keyed sale that streams its order (lua-stream), the key and
 * its fingerprint in the stream entry, so that MySQL keeps the key with
 * the settled order (order_stream.h). */
extern struct redis_script redis_keyed_stream_sale_script;

/* One sale's script, keys and arguments, as the script takes them (argv):
 * stock:{P}, ledger:{P}, qty - and for a sale that settles later, its
 * epoch key and the stream too, then a new order id and the product; for a
 * hold, its order's keys, then its id, ttl, seller and expiry; for a
 * return, its order's keys, then its id and state; for a keyed sale, its
 * key's, then the fingerprint and the key's ttl in ms. */
struct redis_script_args {
    struct redis_script *script;
    int nkeys, argc;
    char stock[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX], epoch[REDIS_KEY_MAX], qty[16], product[16];
    struct redis_hold hold;                             /* a hold's keys and ttl */
    char idem[REDIS_KEY_MAX + IDEMPOTENCY_KEY_MAX];     /* a keyed sale's idem:{P}:<key> */
    char fingerprint[KEY_FINGERPRINT_MAX], key_ttl[24]; /* and what it keeps there      */
    const char *argv[16];
};

/* The arguments of rq's sale; a sale that settles later gets its order id
 * here, in out->order. */
void redis_script_args_of(struct redis_script_args *a, const struct deduct_request *rq,
                          struct deduct_reply *out);

/* One redis store's figures for a product whose count, initial and ledger
 * are these keys (one slot), in one round trip. */
st_result redis_stock_account(struct worker *w, const char *stock, const char *initial,
                              const char *ledger, struct store_account *out);

/* One redis store's reset, for a product whose count, initial and ledger
 * are these keys: the count and the initial set to `count` and, unless
 * `epoch_key` is NULL, `epoch` into it, and the ledger emptied, in one
 * MULTI/EXEC. */
st_result redis_stock_reset_keys(struct worker *w, const char *stock, const char *initial,
                                 const char *ledger, long long count, const char *epoch_key,
                                 long long epoch);

/* What the script answered for one sale, sent in a write of `batch`
 * sales, into *out (no order id unless sold); the error in w. */
st_result redis_script_result(struct worker *w, const struct deduct_request *rq,
                              const redisReply *reply, int batch, struct deduct_reply *out);

#endif
