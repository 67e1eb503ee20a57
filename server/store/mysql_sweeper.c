/*
 * mysql_sweeper - held MySQL orders past their deadline, swept.
 *
 * Every stockd sweeps every --sweep-ms: it reads the held orders whose
 * deadline NOW(6) has passed, the oldest hundred, and returns them through
 * their strategy (sale/returns.h), a product's orders of one strategy in
 * one batch: one run of that strategy's body gives all their units back
 * the way it writes stock, in the transaction that expires each order,
 * conditional on `held`, and records each return. (One transaction per
 * order costs a sweeper that falls behind its promised lag when two sweep
 * at once under load.) So any number of instances sweep at once: two that
 * take the same order both try, and the second finds it no longer held:
 * its batch writes nothing, and runs again with the orders still held
 * (sale/returns.h), a round fewer each time one was taken. A sweeper killed
 * mid-batch has committed the returns before the kill and nothing of the
 * one it was in: the rest are still held, and the next sweep, here or
 * elsewhere, takes them. A payment racing the sweep waits on the order's
 * row lock and then finds it expired (or the sweep finds it paid): one
 * winner.
 *
 * The lag it promises: an order whose deadline has passed is in the next
 * sweep of any live instance - two rounds and a second for a slow server.
 *
 * The due orders are read without FOR UPDATE SKIP LOCKED, the usual way
 * to keep two sweepers off each other's rows, because a row lock lasts as
 * long as the transaction that took it, and a return's transaction is its
 * strategy's: it opens at the strategy's write, after its lock and its
 * read. Locked first, the due rows would be held across that lock's wait,
 * and a cancel holding the lock (a Redis, ZooKeeper or process lock, which
 * MySQL cannot see) while it waits on one of those rows would wait on the
 * sweeper as the sweeper waits on it, until MySQL's lock wait timeout
 * refused the cancel or the lock's lease ran out under its holder. Nor
 * can the claim skip a taken order inside that transaction: a
 * read-then-write row counts the units it writes back before the
 * transaction opens.
 *
 * Each sweep also deletes a batch of Idempotency-Keys older than
 * --idempotency-ttl-s (mysql_keys.h): the one thread that already visits
 * MySQL on a clock, so a key's retention needs none of its own.
 */
#include "store/expiry.h"
#include "store/mysql_keys.h"
#include "store/mysql_orders.h"

static st_result sweep(struct worker *w, const struct expiry *e, int *returned)
{
    json_t *due;
    st_result r = mysql_orders_due(w, &due);
    if (r == ST_OK)
        r = expiry_return_batches(w, e, due, returned);
    json_decref(due);
    return r == ST_OK ? mysql_keys_expire(w) : r;
}

const struct expiry expiry_mysql_sweeper = {
    .name = "mysql-sweeper",
    .store = &store_mysql,
    .summary = "every stockd, every sweep_ms: the held orders past their deadline (NOW(6)), "
               "each expired and its units returned through its strategy, in one transaction "
               "conditional on held",
    .promises_lag = 1,
    .sweep = sweep,
};
