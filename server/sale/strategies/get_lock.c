/*
 * get-lock - MySQL's named lock, GET_LOCK() / RELEASE_LOCK().
 *
 * The race: nolock's, between any threads of any stockd instances.
 *
 * The fix: SELECT GET_LOCK('<db>.stock:<P>', lock_wait_ms / 1000) on the
 * worker's own connection. The server keeps one holder per name and queues
 * the others inside the call - no polling - until the holder releases or
 * the timeout passes (0 → busy). The lock belongs to the connection, not to
 * a transaction: the body's START TRANSACTION ... COMMIT on the same
 * connection neither takes nor drops it. RELEASE_LOCK says whether it was
 * still ours. If the connection dies, the server frees the lock at once, so
 * a crashed holder blocks nobody, and a release that fails closes the
 * connection on purpose (the lock has no TTL to end it); and the body can
 * never carry on over a new connection (a failed statement ends the sale),
 * so a write never happens without the lock.
 *
 * The price: a round trip to lock and one to unlock, and a database
 * connection held by every waiter for as long as it waits. The lock lives
 * in one server: it is exactly as available as that server, and on a
 * replica set it does not travel to the replicas. MariaDB waits to the
 * microsecond; MySQL 8 rounds the wait to whole seconds.
 */
#include "backend/mysql.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdio.h>

/* The lock's name, qualified by the database in SQL: "<db>.stock:<P>". */
static void lock_name(char out[32], int product)
{
    snprintf(out, 32, "stock:%d", product);
}

static st_result acquire(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    held->attempts = 1;
    char name[32];
    lock_name(name, rq->product);
    long long wait = lock_wait_deadline(w) - monotonic_ms();
    struct sql_outcome got;
    st_result r =
        sql_exec(w, SQL_GET_LOCK, SQL_ARGS(SQL_S(name), SQL_I(wait > 0 ? wait : 0)), &got);
    if (r != ST_OK)
        return r;
    /* 1: ours; 0: timed out; NULL (read as 0): an error such as a kill. */
    if (!got.found || got.col[0] != 1)
        return lock_wait_expired(w, "GET_LOCK");
    return ST_OK;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    (void)held;
    char name[32];
    lock_name(name, rq->product);
    struct sql_outcome done;
    st_result r = sql_exec(w, SQL_RELEASE_LOCK, SQL_ARGS(SQL_S(name)), &done);
    if (r != ST_OK) {
        /* Not sent (the deadline had passed) or not answered: the lock
         * would stay with this connection, which outlives the request, and
         * no TTL ends it. Closing the session frees it at once. */
        sql_drop_session(w);
        return r;
    }
    /* 1: released; 0: someone else's; NULL: nobody's (our connection was
     * lost and the server freed it). */
    *lost = !done.found || done.col[0] != 1;
    return ST_OK;
}

/* Held by the connection: nothing outlives it, nothing for a reset. */
static const struct lock_kind named_lock = {
    .name = "GET_LOCK",
    .backend = BACKEND_MYSQL,
    .acquire = acquire,
    .release = release,
};

const struct strategy strategy_get_lock = {
    .name = "get-lock",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "MySQL named lock GET_LOCK(name, timeout) / RELEASE_LOCK on the worker's "
               "connection, around the nolock body",
    .contention = CONTENTION_WAITS,
    .cluster = CLUSTER_TWO_HOLDERS,
    .lock = &named_lock,
};
