/*
 * orders.h - an order: units held by a sale, then paid, or given back once.
 *
 * A hold is a sale whose ledger record carries an order (store.h, struct
 * hold): the strategy deducts exactly as it sells, and its store writes the
 * order in the same atomic step as the deduction, so a held unit is never
 * both in the stock and in an order. From `held` an order leaves once, by a
 * transition conditional on `held` (a payment racing its expiry, two
 * cancels, two sweepers: one winner):
 *
 *   held -> paid       a payment before the deadline, by the store's clock
 *   held -> expired    its expiry mechanism (store/expiry.h), after the
 *                      deadline: the units back in the stock
 *   held -> cancelled  a cancel: the units back in the stock
 *
 * A payment that finds the order paid with another payment id, expired,
 * cancelled or past its deadline is recorded as a refund due, once per
 * payment id; a repeated callback or cancel is answered as the first was,
 * with `duplicate`, and changes nothing. Every return of units is recorded
 * with its order, so a second return of the same order is counted, not
 * prevented out of sight.
 *
 * An order id names its store and product ("m1001-9f2c0a1b2c3d4e5f": MySQL,
 * product 1001), so /orders/{ID} finds the store and, on Redis, the
 * product's hash tag, with no lookup; stockd makes ids at random, with no
 * coordination between workers or instances.
 */
#ifndef STOCKD_ORDERS_H
#define STOCKD_ORDERS_H

#include "core/result.h"
#include "store/store.h"

#include <jansson.h>
#include <stddef.h>

struct worker;

/* An order id, parsed. */
struct order_ref {
    char id[ORDER_ID_MAX + 1];
    const struct store *store;
    int product;
};

/* The states an order is in, as the stores record and the API names them. */
enum order_state { ORDER_HELD = 1, ORDER_PAID, ORDER_EXPIRED, ORDER_CANCELLED };

/* The longest strategy name an order records (the MySQL column's width). */
#define ORDER_STRATEGY_MAX 32

/* What a return needs of an order, read from its store as it keeps it:
 * the store's words made typed, so that the layers above read fields,
 * not GET /orders/{ID}'s document. */
struct order_facts {
    enum order_state state; /* 0 for a state the store names no known way */
    char strategy[ORDER_STRATEGY_MAX + 1];
    long long qty; /* 0 when the store has none */
};

/* The transitions of a store that holds orders (store.h, `orders`). Each
 * answers, beside its result, whether it was a repeat of an earlier one
 * that changed nothing (*duplicate). */
struct order_store {
    char letter; /* the first character of its order ids */
    /* held before its deadline -> paid: ST_OK; paid with `payment` already:
     * ST_OK, duplicate; paid with another: ST_ALREADY_PAID; expired,
     * cancelled or past its deadline: ST_EXPIRED (the order left as it is);
     * both refusals record `payment` refund due, once. */
    st_result (*pay)(struct worker *w, const struct order_ref *o, const char *payment,
                     int *duplicate);
    /* The order as GET /orders/{ID} answers it, into `reply`. */
    st_result (*get)(struct worker *w, const struct order_ref *o, json_t *reply);
    /* The order's state, strategy and qty: ST_UNKNOWN_ORDER when there is
     * no such order. */
    st_result (*facts)(struct worker *w, const struct order_ref *o, struct order_facts *out);
    /* A held order's deadline, by the store's clock, in ms since the epoch. */
    st_result (*deadline)(struct worker *w, const struct order_ref *o, long long *ms);
};

/* Gives order `o`'s units back through its strategy if it is held, the
 * order leaving `held` for `state` ("expired", "cancelled"), the return
 * recorded as `by_what`'s, hold_ms spent inside the strategy's critical
 * section: *returned 1 when this call returned it, 0 when it was not held
 * or another return won. Implemented above the stores (sale/returns.h),
 * handed down to the expiry mechanisms (expiry_start()). */
typedef st_result (*order_give_back_fn)(struct worker *w, const struct order_ref *o,
                                        const char *state, const char *by_what, int hold_ms,
                                        int *returned);

/* Orders returned in one step of their strategy: one product's, one
 * strategy's, their units summed (a sweeper's batch, from its due list). */
struct return_batch {
    const struct order_ref *orders;
    int count;
    const char *strategy;
    long long qty;
};

/* Returns the batch's orders still held in one run of their strategy's
 * body (one that another return took makes the run write nothing, and it
 * goes again without it): *returned how many.
 * Implemented above the stores (sale/returns.h). */
typedef st_result (*order_give_back_batch_fn)(struct worker *w, const struct return_batch *b,
                                              const char *state, const char *by_what,
                                              int *returned);

/* A new order id for `product` in `store` (which holds orders). */
void order_id_make(char out[ORDER_ID_MAX + 1], const struct store *store, int product);

/* Parses `text` as an order id: 0 with *out filled, or -1 when it is not
 * one (the letter of no store, a product out of range, not 16 hex). */
int order_id_parse(const char *text, struct order_ref *out);

/* The state a store names `name` ("held", "paid", "expired",
 * "cancelled"), or 0 for none of them. */
enum order_state order_state_parse(const char *name);

/* Whether `text` is a payment id: 1..64 characters of [A-Za-z0-9._:-]. */
int payment_id_valid(const char *text);
#define PAYMENT_ID_MAX 64

/* The lag a sweeper promises between a deadline and the return: two of its
 * rounds (--sweep-ms, or its default when this instance runs none) and a
 * second for a store that answers slowly. */
long long sweep_lag_ms(void);

/* How long past its deadline a held order of a mechanism that promises no
 * lag (redis-keyspace) counts as stranded. */
#define KEYSPACE_STRANDED_MS 1000

#endif
