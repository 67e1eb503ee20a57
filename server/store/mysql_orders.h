/*
 * mysql_orders.h - orders in the mysql store (store/orders.h): a hold is the
 * sale's `orders` ledger row with its order id, state, deadline and expiry
 * mechanism on it; returns go to `order_returns`, payments to `payments`.
 *
 * Every transition is one transaction whose first statement is
 * conditional on the state the order leaves, so concurrent payments,
 * cancels and sweepers of any number of instances end with one winner;
 * the deadline is compared with NOW(6), the server's clock.
 */
#ifndef STOCKD_MYSQL_ORDERS_H
#define STOCKD_MYSQL_ORDERS_H

#include "core/result.h"
#include "store/orders.h"
#include "store/store.h"

struct worker;

extern const struct order_store mysql_order_store;

/* Inside the sale's open transaction: the sale's ledger row, with the
 * order on it when rq holds one. */
st_result mysql_ledger_record(struct worker *w, const struct deduct_request *rq);

/* The product's order figures into `a` (a->holds set). */
st_result mysql_orders_account(struct worker *w, int product, struct store_account *a);

/* Inside the reset's open transaction: the product's returns and payments
 * deleted (its orders go with its ledger). */
st_result mysql_orders_reset(struct worker *w, int product);

/* One sweep (the mysql-sweeper, store/expiry.h): in one transaction, the
 * held orders past their deadline that no other sweeper holds, at most a
 * hundred, each expired and its units back; *returned how many. */
st_result mysql_orders_sweep(struct worker *w, const char *by_what, int *returned);

#endif
