/*
 * stock.h - a product across every store: the contract's "Accounting", and
 * reset.
 *
 * Each store reports, per product: initial, remaining, sold (sum of qty in
 * its ledger, holds included) and orders, and a store that holds orders
 * the units held, paid and returned (store/orders.h), from which
 *   oversold     = max(0, sold - returned - initial)
 *   lost_updates = max(0, sold - returned - (initial - remaining))
 * (returned is 0 where nothing was held). remaining is never clamped: an
 * oversold stock shows below zero.
 */
#ifndef STOCKD_STOCK_H
#define STOCKD_STOCK_H

#include "core/result.h"
#include "store/store.h"

#include <jansson.h>
#include <stddef.h>

struct worker;

/* The stores, in the order /stock/{product} lists them. */
#define STORE_COUNT 3
const struct store *store_at(size_t i);

long long account_oversold(const struct store_account *a);
long long account_lost_updates(const struct store_account *a);

/* The store's figures as the contract's JSON object, or JSON null when the
 * store does not have the product. New reference. */
json_t *account_json(const struct store_account *a);

/* The product's accounting in every store, as GET /stock/{product} answers
 * it, into `reply`; ST_UNKNOWN_PRODUCT when no store has it. */
st_result stock_accounting(struct worker *w, int product, json_t *reply);

/* Creates the product if absent and sets it to `count` in every store,
 * emptying its ledgers and moving its epochs on; then deletes its lock
 * state in every lock backend - exactly the names the lock kinds declare,
 * never a pattern. Each step is atomic by itself; a failure stops the reset
 * with 503, and running it again completes it. */
st_result stock_reset(struct worker *w, int product, long long count);

#endif
