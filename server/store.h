/*
 * store.h - where a strategy's stock and ledger live.
 *
 * A store keeps, per product, the count, what reset set it to, and a
 * ledger of acknowledged sales written in the same atomic step as the
 * deduction (contract: "Accounting"). There are two: MySQL
 * (mysql_sale.c) and Redis (redis_sale.c). The shared sale body
 * (read_then_write in sale.c) and every lock wrapped around it see a store
 * only through this interface, so a lock row can name either store.
 *
 * Every store keeps a reset epoch: reset moves it on, a read returns it,
 * and a write applies only if it is unchanged. So a sale that read the
 * count before a reset can never write after it.
 */
#ifndef STOCKD_STORE_H
#define STOCKD_STORE_H

#include "backend.h"
#include "result.h"
#include "strategy.h"

struct worker;

/* What a read saw, for the write that follows it. */
struct stock_seen {
    long long count;
    long long epoch;
};

/* One store's figures for a product. */
struct store_account {
    int present; /* the store has the product */
    long long initial, remaining, sold, orders;
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
    /* Creates the product if absent, sets its count and initial to `count`,
     * empties its ledger and moves its epoch on, in one atomic step. The
     * stores reset in table order: MySQL says where its epoch moved to in
     * *epoch, and Redis keeps that number for the orders it streams to
     * MySQL (order_stream.h), which MySQL refuses once its epoch moves on. */
    st_result (*reset)(struct worker *w, int product, long long count, long long *epoch);
};

extern const struct store store_mysql;
extern const struct store store_redis;

#endif
