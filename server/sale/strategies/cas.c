/*
 * cas - optimistic: read a version, write only if it is still that version.
 *
 * The race: nolock writes a value computed from a read that may be stale.
 *
 * The fix: read count and version; UPDATE ... SET count = ?, version =
 * version + 1 WHERE id = ? AND version = ?. If someone wrote in between, the
 * version moved, the UPDATE matches nothing, and this request retries from
 * the read (jittered backoff), up to optimistic_attempts times, then answers
 * busy. The ledger row is in the write's transaction. A reset moves the
 * version on too (never back to 0), so a write prepared before a reset
 * cannot match after it.
 *
 * The price: no lock is held while computing, but every conflict costs a
 * full retry; under heavy contention on one row most work is wasted and some
 * requests give up busy even though stock remains.
 */
#include "core/trace.h"
#include "core/worker.h"
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/mysql_stock.h"
#include "store/store.h"

static st_result attempt_once(struct worker *w, const struct deduct_request *rq,
                              struct deduct_reply *out)
{
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_READ_STOCK, SQL_ARGS(SQL_I(rq->product)), &row);
    if (r == ST_OK)
        r = stock_check(w, rq, &row, out);
    if (r != ST_OK)
        return r;
    critical_section_wait(rq, NULL);
    long long left = row.col[0] - rq->qty, version = row.col[1];
    r = sql_begin(w);
    if (r != ST_OK)
        return r;
    out->remaining = left;
    if (rq->trace)
        rq->trace->version = version;
    int matched;
    r = sale_commit(w, rq, SALE_NO_WAIT, left, SQL_WRITE_IF_VERSION,
                    SQL_ARGS(SQL_I(left), SQL_I(rq->product), SQL_I(version)), &matched);
    if (r == ST_OK && !matched)
        return worker_fail(w, ST_BUSY, "version %lld changed before the write", version);
    if (r == ST_OK && rq->trace)
        rq->trace->wrote = left;
    return r;
}

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return optimistic_retry(w, rq, out, attempt_once, "version");
}

const struct strategy strategy_cas = {
    .name = "cas",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "version column compare-and-set with bounded, jittered retry (optimistic)",
    .contention = CONTENTION_RETRIES,
    .cluster = CLUSTER_SAFE,
    .deduct = deduct,
};
