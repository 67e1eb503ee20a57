/*
 * mysql_orders.h - orders in the mysql store (store/orders.h): a hold is the
 * sale's `orders` ledger row with its order id, state, deadline and expiry
 * mechanism on it; returns go to `order_returns`, payments to `payments`.
 *
 * Every transition is conditional on the state the order leaves, so
 * concurrent payments, cancels and sweepers of any number of instances
 * end with one winner: a payment is one transaction; a return rides the
 * transaction of its strategy's stock write (mysql_ledger_record()), so
 * the state change and the units back commit together or not at all. The
 * deadline is compared with NOW(6), the server's clock.
 */
#ifndef STOCKD_MYSQL_ORDERS_H
#define STOCKD_MYSQL_ORDERS_H

#include "core/result.h"
#include "store/orders.h"
#include "store/store.h"

#include <jansson.h>

struct worker;

extern const struct order_store mysql_order_store;

/* Inside the sale's open transaction: the sale's ledger row, with the
 * order on it when rq holds one; for a return (rq->give_back), the
 * order's state change, conditional on `held` (ST_EXPIRED when it was not:
 * the caller rolls back), and its return record. */
st_result mysql_ledger_record(struct worker *w, const struct deduct_request *rq);

/* The product's order figures into `a` (a->holds set). */
st_result mysql_orders_account(struct worker *w, int product, struct store_account *a);

/* Inside the reset's open transaction: the product's returns and payments
 * deleted (its orders go with its ledger). */
st_result mysql_orders_reset(struct worker *w, int product);

/* The held orders past their deadline (NOW(6)), the oldest hundred, as a
 * JSON array (new reference) of {o: order id, p: product, s: strategy, q:
 * qty}, for the mysql-sweeper to return through their strategies
 * (store/expiry.h). */
st_result mysql_orders_due(struct worker *w, json_t **due);

#endif
