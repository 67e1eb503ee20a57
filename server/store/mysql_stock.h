/*
 * mysql_stock.h - the pieces of a sale on MySQL that strategies compose.
 *
 * The mysql store (`store_mysql`, store.h) keeps a product's count in its
 * `stock` row and its ledger in `orders`; sale_commit() is the one place a
 * MySQL sale is written together with its ledger row.
 */
#ifndef STOCKD_MYSQL_SALE_H
#define STOCKD_MYSQL_SALE_H

#include "backend/mysql.h"
#include "store/store.h"

/* Reads the product's count from a SQL_READ_STOCK row (ST_UNKNOWN_PRODUCT
 * if absent) and decides whether qty can be sold from it (ST_SOLD_OUT if
 * not). */
st_result stock_check(struct worker *w, const struct deduct_request *rq,
                      const struct sql_outcome *row, struct deduct_reply *out);

/* Whether sale_commit() waits in the critical section between the write
 * and the commit (with the row locked). */
enum sale_wait { SALE_NO_WAIT, SALE_WAIT_INSIDE };

/*
 * Inside an open transaction: runs `write`; if it matched a row, waits as
 * asked, records the sale in the ledger - and its Idempotency-Key with the
 * answer it gets (`left`, or REMAINING_UNKNOWN when the sale never saw the
 * count) - and commits (*matched = 1). If it matched nothing, rolls back
 * and answers ST_OK with *matched = 0, for the caller to say why. Any
 * failure rolls back: nothing is half-written. A key another request
 * recorded first is ST_IN_PROGRESS, its sale rolled back.
 */
st_result sale_commit(struct worker *w, const struct deduct_request *rq, enum sale_wait wait,
                      long long left, enum sql_statement write, const struct sql_value *args,
                      unsigned nargs, int *matched);

#endif
