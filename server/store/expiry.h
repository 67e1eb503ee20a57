/*
 * expiry.h - the expiry mechanisms: what gives a held order's units back
 * once its deadline has passed, as rows with facts, like the strategies.
 *
 * Each mechanism lives in its own file (mysql_sweeper.c, redis_zset.c,
 * redis_keyspace.c) and defines one `const struct expiry`; the table in
 * expiry.c lists them, GET /expiry publishes them, and a hold names one
 * (`expiry=`, by default the first of its store's). Every one claims an
 * order with the same transition, conditional on `held` (orders.h), so two
 * mechanisms, two instances or a payment racing one end with one winner;
 * and every one decides by the store's clock, never stockd's.
 *
 * What a row states: the lag it promises between a deadline and the return
 * (or none), and the fault that strands units (or none). A mechanism runs
 * in every stockd whose --sweep-ms is not 0, on threads of its own
 * (core/background.h) with connections of their own.
 */
#ifndef STOCKD_EXPIRY_H
#define STOCKD_EXPIRY_H

#include "core/result.h"
#include "store/orders.h"
#include "store/store.h"

#include <jansson.h>

struct worker;
struct expiry;

/* One round of a sweeper: the held orders of its store past their
 * deadline, returned; *returned how many. */
typedef st_result (*sweep_fn)(struct worker *w, const struct expiry *e, int *returned);

/* A listener's whole life on its own thread, until expiry_running() says
 * no: it owns `w`'s connections. */
typedef void (*listen_fn)(struct worker *w, const struct expiry *e);

struct expiry {
    const char *name;          /* as `expiry=` and GET /orders/{ID} name it   */
    const struct store *store; /* whose orders it returns                     */
    const char *summary;
    int promises_lag;         /* 1: the lag is sweep_lag_ms() (orders.h)     */
    const char *strands_when; /* the fault that strands units, or NULL       */
    sweep_fn sweep;           /* run every --sweep-ms, or...                 */
    listen_fn listen;         /* ...a thread of its own                       */
};

const struct expiry *expiry_find(const char *name);

/* The mechanism a hold on `store` gets when it names none: the first of
 * that store's in the table; NULL when the store holds no orders. */
const struct expiry *expiry_default(const struct store *store);

/* The lag `e` promises, in ms; -1 when it promises none. */
long long expiry_lag_ms(const struct expiry *e);

/* The rows as GET /expiry publishes them (new reference). */
json_t *expiry_json(void);

/* Starts every mechanism whose store's backend is configured, when
 * --sweep-ms is not 0, returning orders through `give_back`; 0, or -1
 * after saying why. */
int expiry_start(order_give_back_fn give_back, order_give_back_batch_fn give_back_batch);
void expiry_stop(void);

/* Returns order `id`, if it is still held, through its strategy, as `e`'s
 * expiry: *returned 1 when this call did. The caller found it due by its
 * store's clock. */
st_result expiry_return_one(struct worker *w, const struct expiry *e, const char *id,
                            int *returned);

/* expiry_return_one() for each of `ids` (a JSON array of order ids), the
 * first failure answered once every one was tried: *returned how many. */
st_result expiry_return_each(struct worker *w, const struct expiry *e, json_t *ids, int *returned);

/* Returns the due orders `due` (a JSON array of {o: order id, p: product,
 * s: strategy, q: qty}) as `e`'s expiry, each product's orders of one
 * strategy in one batch (order_give_back_batch_fn), the first failure
 * answered once every batch was tried: *returned how many. */
st_result expiry_return_batches(struct worker *w, const struct expiry *e, json_t *due,
                                int *returned);

/* Whether the mechanisms are still to run (a listener's loop asks). */
int expiry_running(void);

/* A listener's pause of `ms`, cut short by the stop: 1 while running. */
int expiry_pause(long long ms);

#endif
