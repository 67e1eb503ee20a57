/*
 * mysql_stock.c - the mysql store: a product's count in its `stock` row, its
 * ledger in `orders`, both written in one transaction; a hold's order is
 * that ledger row (store/mysql_orders.h), and a sale's Idempotency-Key a
 * row of `idempotency` in the same transaction (store/mysql_keys.h).
 */
#include "store/mysql_stock.h"

#include "core/trace.h"
#include "core/worker.h"
#include "store/mysql_keys.h"
#include "store/mysql_orders.h"
#include "store/store.h"

st_result stock_check(struct worker *w, const struct deduct_request *rq,
                      const struct sql_outcome *row, struct deduct_reply *out)
{
    if (!row->found)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in mysql", rq->product);
    return count_covers(w, rq, row->col[0], out);
}

st_result sale_commit(struct worker *w, const struct deduct_request *rq, enum sale_wait wait,
                      long long left, enum sql_statement write, const struct sql_value *args,
                      unsigned nargs, int *matched)
{
    struct sql_outcome done;
    *matched = 0;
    if (rq->trace) {
        trace_mark(rq->trace, TRACE_WRITE);
        rq->trace->update = sql_text(write);
    }
    st_result r = sql_exec(w, write, args, nargs, &done);
    if (r != ST_OK || done.matched == 0) {
        sql_rollback(w);
        return r;
    }
    if (wait == SALE_WAIT_INSIDE)
        critical_section_wait(rq, NULL);
    r = mysql_ledger_record(w, rq);
    if (r == ST_OK && rq->key[0])
        r = mysql_key_keep_sale(w, rq, left);
    if (r != ST_OK) {
        sql_rollback(w);
        return r;
    }
    *matched = 1;
    r = sql_commit(w);
    if (r == ST_OK)
        trace_mark(rq->trace, TRACE_COMMIT);
    return r;
}

/* ------------------------------------------------------------ the store */

static st_result read(struct worker *w, const struct deduct_request *rq, struct stock_seen *seen,
                      struct deduct_reply *out)
{
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_READ_STOCK, SQL_ARGS(SQL_I(rq->product)), &row);
    if (r == ST_OK)
        r = stock_check(w, rq, &row, out);
    if (r == ST_OK)
        *seen = (struct stock_seen){.count = row.col[0], .epoch = row.col[3]};
    return r;
}

static st_result write_if(struct worker *w, const struct deduct_request *rq,
                          const struct stock_seen *seen, long long left, long long fence)
{
    int matched;
    st_result r = sql_begin(w);
    if (r == ST_OK && !fence)
        r = sale_commit(w, rq, SALE_NO_WAIT, left, SQL_WRITE_COUNT,
                        SQL_ARGS(SQL_I(left), SQL_I(rq->product), SQL_I(seen->epoch)), &matched);
    else if (r == ST_OK)
        r = sale_commit(w, rq, SALE_NO_WAIT, left, SQL_WRITE_IF_FENCE,
                        SQL_ARGS(SQL_I(left), SQL_I(rq->product), SQL_I(fence), SQL_I(seen->epoch)),
                        &matched);
    if (r != ST_OK || matched)
        return r;
    if (fence)
        return worker_fail(w, ST_BUSY,
                           "write with fencing token %lld refused: a newer holder claimed the "
                           "row, or the product was reset",
                           fence);
    return worker_fail(w, ST_BUSY, "product %d was reset during the sale", rq->product);
}

static st_result claim_fence(struct worker *w, const struct deduct_request *rq, long long token,
                             long long *newest)
{
    struct sql_outcome claim, row;
    st_result r = sql_exec(w, SQL_CLAIM_FENCE,
                           SQL_ARGS(SQL_I(token), SQL_I(rq->product), SQL_I(token)), &claim);
    if (r != ST_OK || claim.matched == 1)
        return r;
    /* Matched nothing: a newer token claimed the row, or there is no row. */
    r = sql_exec(w, SQL_READ_STOCK, SQL_ARGS(SQL_I(rq->product)), &row);
    if (r == ST_OK && !row.found)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in mysql", rq->product);
    if (r != ST_OK)
        return r;
    *newest = row.col[2];
    return worker_fail(w, ST_BUSY, "fencing token %lld is stale: the row has seen %lld", token,
                       *newest);
}

static st_result account(struct worker *w, int product, struct store_account *out)
{
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_ACCOUNT, SQL_ARGS(SQL_I(product)), &row);
    if (r != ST_OK)
        return r;
    *out = (struct store_account){.present = row.found,
                                  .remaining = row.col[0],
                                  .initial = row.col[1],
                                  .sold = row.col[2],
                                  .orders = row.col[3]};
    return row.found ? mysql_orders_account(w, product, out) : ST_OK;
}

static st_result reset(struct worker *w, int product, long long count, long long *epoch)
{
    struct sql_outcome row;
    st_result r = sql_begin(w);
    if (r != ST_OK)
        return r;
    r = sql_exec(w, SQL_RESET_STOCK,
                 SQL_ARGS(SQL_I(product), SQL_I(count), SQL_I(count), SQL_I(count), SQL_I(count)),
                 NULL);
    if (r == ST_OK)
        r = sql_exec(w, SQL_RESET_ORDERS, SQL_ARGS(SQL_I(product)), NULL);
    if (r == ST_OK)
        r = mysql_orders_reset(w, product);
    if (r == ST_OK)
        r = sql_exec(w, SQL_READ_STOCK, SQL_ARGS(SQL_I(product)), &row);
    if (r == ST_OK)
        *epoch = row.col[3];
    if (r == ST_OK)
        return sql_commit(w);
    sql_rollback(w);
    return r;
}

const struct store store_mysql = {
    .name = "mysql",
    .backend = BACKEND_MYSQL,
    .read = read,
    .write_if = write_if,
    .claim_fence = claim_fence,
    .account = account,
    .reset = reset,
    .orders = &mysql_order_store,
    .keys = &mysql_key_store,
};
