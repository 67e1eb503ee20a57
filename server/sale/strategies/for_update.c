/*
 * for-update - pessimistic: lock the row, then read, then write.
 *
 * The race: nolock's read is a plain snapshot read; nothing stops another
 * transaction from writing the row between the read and the write.
 *
 * The fix: START TRANSACTION; SELECT ... FOR UPDATE takes the row's
 * exclusive lock before reading, so the value read stays true until COMMIT;
 * then UPDATE, INSERT the ledger row, COMMIT. Every instance, every thread,
 * queues on the same row lock inside the database.
 *
 * The price: the row is locked for the whole read-compute-write, round trips
 * included (and hold_ms); sales of one product run one at a time. A waiter
 * that exceeds innodb_lock_wait_timeout (from lock_wait_ms) answers busy.
 */
#include "core/worker.h"
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/mysql_stock.h"
#include "store/store.h"

#include <assert.h>

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    out->attempts = 1;
    struct sql_outcome row;
    st_result r = sql_begin(w);
    if (r != ST_OK)
        return r;
    r = sql_exec(w, SQL_READ_STOCK_FOR_UPDATE, SQL_ARGS(SQL_I(rq->product)), &row);
    if (r == ST_OK)
        r = stock_check(w, rq, &row, out);
    if (r != ST_OK) {
        sql_rollback(w);
        return r;
    }
    critical_section_wait(rq, NULL);
    long long left = row.col[0] - rq->qty;
    /* The row is locked since the read: a reset waits for the commit, so
     * the epoch read is still the row's. */
    int matched;
    r = sale_commit(w, rq, SALE_NO_WAIT, left, SQL_WRITE_COUNT,
                    SQL_ARGS(SQL_I(left), SQL_I(rq->product), SQL_I(row.col[3])), &matched);
    assert(r != ST_OK || matched);
    out->remaining = r == ST_OK ? left : REMAINING_UNKNOWN;
    return r;
}

const struct strategy strategy_for_update = {
    .name = "for-update",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "transaction with SELECT ... FOR UPDATE (pessimistic row lock)",
    .contention = CONTENTION_WAITS, /* on the row lock */
    .cluster = CLUSTER_CONFLICTS_AT_COMMIT,
    .deduct = deduct,
};
