/*
 * mysql-lock - a row in a lock table, its primary key the lock.
 *
 * The race: nolock's, between any threads of any stockd instances.
 *
 * The fix: INSERT INTO locks (name, owner, expires_at) VALUES ('stock:<P>',
 * <random token>, now + ttl), outside any transaction. The primary key on
 * name lets exactly one such row exist: the INSERT that succeeds holds the
 * lock, the others fail with a duplicate key and poll with jittered backoff
 * for up to lock_wait_ms, then answer busy. The seed's table has no owner
 * and no expiry, so a holder that dies keeps everyone out forever; here a
 * waiter that finds the row past expires_at deletes it and tries again.
 * Release is DELETE ... WHERE name = ? AND owner = ?, so a holder whose row
 * expired and was taken over cannot delete the next holder's. The expiry is
 * judged by the database's clock only, never by two machines' clocks.
 *
 * The price: every attempt is a write to InnoDB (and its log), every wait a
 * poll; the slowest way to make a lock from a database. Like redis-lock, the
 * lock is a lease: if the critical section outlives ttl_ms, a waiter deletes
 * the expired row, enters, and the stock is oversold.
 */
#include "backend/mysql.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdio.h>

#define LOCK_ROW "stock:%d"

static st_result try_once(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken)
{
    char name[32];
    snprintf(name, sizeof name, LOCK_ROW, rq->product);
    for (int round = 0; round < 2; round++) {
        st_result r = sql_insert_unique(
            w, SQL_LOCK_ROW_INSERT,
            SQL_ARGS(SQL_S(name), SQL_S(held->token), SQL_I((long long)rq->ttl_ms * 1000)), taken);
        /* ST_BUSY: the row is being changed right now (a lock wait, a
         * deadlock between two waiters): not taken this time. */
        if (r != ST_OK || *taken || round == 1)
            return r == ST_BUSY ? ST_OK : r;
        /* Held: by a live holder, or by one whose lease ran out. */
        struct sql_outcome expired;
        r = sql_exec(w, SQL_LOCK_ROW_EXPIRE, SQL_ARGS(SQL_S(name)), &expired);
        if (r != ST_OK || expired.matched == 0)
            return r == ST_BUSY ? ST_OK : r;
    }
    return ST_OK;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    char name[32];
    snprintf(name, sizeof name, LOCK_ROW, rq->product);
    struct sql_outcome done;
    st_result r =
        sql_exec(w, SQL_LOCK_ROW_DELETE, SQL_ARGS(SQL_S(name), SQL_S(held->token)), &done);
    if (r != ST_OK)
        return r;
    *lost = done.matched != 1;
    return ST_OK;
}

static const struct lock_kind lock_row = {
    .name = "mysql lock row",
    .backend = BACKEND_MYSQL,
    .tokens = 1,
    .names = {LOCK_ROW},
    .try_once = try_once,
    .release = release,
};

const struct strategy strategy_mysql_lock = {
    .name = "mysql-lock",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "while the lock's TTL outlives the critical section",
    .summary = "INSERT a row into the locks table (unique key = the lock) with owner and expiry "
               "around the nolock body; DELETE by owner to release",
    .contention = CONTENTION_WAITS,
    .lease = &lease_expires_under_holder,
    .cluster = CLUSTER_SAFE,
    .lock = &lock_row,
};
