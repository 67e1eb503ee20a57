/*
 * stock.h - per-store accounting and reset, the contract's "Accounting".
 *
 * Each store reports, per product: initial, remaining, sold (sum of qty in
 * its ledger) and orders, from which
 *   oversold     = max(0, sold - initial)
 *   lost_updates = max(0, sold - (initial - remaining))
 * remaining is never clamped: an oversold stock shows below zero.
 */
#ifndef STOCKD_STOCK_H
#define STOCKD_STOCK_H

#include "result.h"

#include <jansson.h>

struct worker;

struct store_account {
    int present; /* the store has the product */
    long long initial, remaining, sold, orders;
};

long long account_oversold(const struct store_account *a);
long long account_lost_updates(const struct store_account *a);

/* The store's figures as the contract's JSON object, or JSON null when the
 * store does not have the product. New reference. */
json_t *account_json(const struct store_account *a);

st_result mysql_account(struct worker *w, int product, struct store_account *out);
st_result redis_account(struct worker *w, int product, struct store_account *out);

/* Creates the product if absent and sets it to `count` in every store,
 * clearing its ledgers, version, fence and lock keys. MySQL commits only
 * after Redis has been reset, so a Redis failure leaves MySQL untouched. */
st_result stock_reset(struct worker *w, int product, long long count);

#endif
