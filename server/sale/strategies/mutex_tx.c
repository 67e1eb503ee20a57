/*
 * mutex-tx - the right mutex around the wrong span: released before COMMIT.
 *
 * The race: the seed's transaction pitfall (Spring's @Transactional around
 * a method that locks inside). The transaction opens first, the mutex is
 * taken inside it, and released when the method returns - before the
 * framework COMMITs. In that gap the next holder gets the mutex and reads
 * the count; under REPEATABLE READ (InnoDB's default) a plain SELECT sees
 * committed data only, so it reads the count from before the previous sale.
 * Its UPDATE then waits for the previous holder's row lock and, once that
 * commits, overwrites it with a value computed from the stale read: one
 * deduction vanishes, and the stale count lets it sell what is gone.
 *
 * Here: START TRANSACTION; lock; SELECT; UPDATE count = read - qty; INSERT
 * the ledger row; unlock; COMMIT. hold_ms is spent where the framework
 * spends its time, between the unlock and the COMMIT, so every request that
 * waited at the mutex reads a stale count: with two requests in flight and
 * hold_ms > 0 the failure shows every time, not only sometimes. (MariaDB
 * 11.6+ with innodb_snapshot_isolation=ON refuses that stale write instead;
 * the request then fails with 503 rather than overselling.)
 *
 * The fix (mutex): take the lock before the transaction starts and release
 * it after COMMIT, so the lock covers everything the next holder can see -
 * or let the database lock the row (for-update, sql). READ UNCOMMITTED
 * "works" by reading dirty data, which is worse.
 *
 * The price: mutex's - every sale of the process in single file - and
 * still wrong.
 *
 * An Idempotency-Key is kept right all the same: its row is inserted in
 * the same transaction as the sale, so it commits with it or not at all.
 * The mutex's race is on the count, never on the key.
 */
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/mysql_keys.h"
#include "store/mysql_stock.h"
#include "store/store.h"

#include <pthread.h>

static pthread_mutex_t sale_mutex = PTHREAD_MUTEX_INITIALIZER;

/* The "method" the mutex guards: read, write, ledger (and a key's row,
 * mysql_keys.h) - no COMMIT. */
static st_result locked_body(struct worker *w, const struct deduct_request *rq,
                             struct deduct_reply *out)
{
    struct stock_seen seen;
    struct sql_outcome done;
    st_result r = store_mysql.read(w, rq, &seen, out);
    if (r != ST_OK)
        return r;
    out->remaining = seen.count - rq->qty;
    r = sql_exec(w, SQL_WRITE_COUNT,
                 SQL_ARGS(SQL_I(out->remaining), SQL_I(rq->product), SQL_I(seen.epoch)), &done);
    if (r == ST_OK && done.matched == 0)
        return worker_fail(w, ST_BUSY, "product %d was reset during the sale", rq->product);
    if (r == ST_OK)
        r = sql_exec(w, SQL_INSERT_ORDER,
                     SQL_ARGS(SQL_I(rq->product), SQL_S(rq->seller), SQL_I(rq->qty)), NULL);
    if (r == ST_OK && rq->key[0])
        r = mysql_key_keep_sale(w, rq, out->remaining);
    return r;
}

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    out->attempts = 1;
    st_result r = sql_begin(w); /* the framework opens the transaction... */
    if (r != ST_OK)
        return r;
    r = mutex_lock_within_wait(w, &sale_mutex); /* ...then the method locks */
    if (r == ST_OK) {
        r = locked_body(w, rq, out);
        pthread_mutex_unlock(&sale_mutex); /* the method returns */
    }
    if (r != ST_OK) {
        sql_rollback(w);
        return r;
    }
    critical_section_wait(rq, NULL); /* the framework's way to COMMIT */
    return sql_commit(w);
}

const struct strategy strategy_mutex_tx = {
    .name = "mutex-tx",
    .store = &store_mysql,
    .safe_single = 0,
    .safe_multi = 0,
    .summary = "a process mutex inside a transaction, released before COMMIT: the next holder "
               "reads the count from before the previous sale",
    .contention = CONTENTION_WAITS, /* on the mutex, released too early */
    .exposed_by = EXPOSED_BY_HOLD,
    .cluster = CLUSTER_TWO_HOLDERS,
    .orders_why = "its body writes its ledger row itself, between the mutex and the COMMIT, not "
                  "through the store's shared write",
    .keeps_key = KEEPS_KEY_IN_BODY, /* in its transaction, with its ledger row */
    .deduct = deduct,
};
