/*
 * sql - let the database do the check and the write in one statement.
 *
 * The race: nolock computes the new count in the server, from a value that
 * may already be stale when it is written.
 *
 * The fix: UPDATE stock SET count = count - ? WHERE id = ? AND count >= ?.
 * InnoDB row-locks the row for the statement, evaluates the condition on the
 * current value, and either deducts or matches nothing. The ledger row goes
 * into the same transaction. No read, so nothing to be stale.
 *
 * The price: one statement and a short transaction - usually the cheapest
 * safe answer. Writers to one row still queue on its row lock, for as long
 * as the transaction lasts (hold_ms keeps it open to show that).
 */
#include "core/worker.h"
#include "sale/strategy.h"
#include "store/mysql_stock.h"
#include "store/store.h"

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    out->attempts = 1;
    int matched = 0;
    st_result r = sql_begin(w);
    if (r == ST_OK)
        r = sale_commit(w, rq, SALE_WAIT_INSIDE, REMAINING_UNKNOWN, SQL_DEDUCT_IF_ENOUGH,
                        SQL_ARGS(SQL_I(rq->qty), SQL_I(rq->product), SQL_I(rq->qty)), &matched);
    if (r != ST_OK || matched)
        return r;
    /* Matched nothing: too little stock, or no such product. Tell which. */
    struct sql_outcome row;
    r = sql_exec(w, SQL_READ_STOCK, SQL_ARGS(SQL_I(rq->product)), &row);
    if (r == ST_OK)
        r = stock_check(w, rq, &row, out);
    return r == ST_OK ? worker_fail(w, ST_BUSY, "stock changed while checking; try again") : r;
}

const struct strategy strategy_sql = {
    .name = "sql",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "one statement: UPDATE ... SET count = count - ? WHERE id = ? AND count >= ?",
    .contention = CONTENTION_WAITS, /* on the row lock */
    .cluster = CLUSTER_CONFLICTS_AT_COMMIT,
    .deduct = deduct,
};
