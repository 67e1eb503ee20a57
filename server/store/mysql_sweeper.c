/*
 * mysql_sweeper - held MySQL orders past their deadline, swept.
 *
 * Every stockd sweeps every --sweep-ms: in one transaction it claims the
 * held orders whose deadline NOW(6) has passed, `FOR UPDATE SKIP LOCKED`,
 * so that any number of instances sweep at once, each taking the orders the
 * others have not locked, none waiting on another; then it expires each
 * one, gives its units back and records the return, and commits. A
 * sweeper killed mid-batch commits nothing: its orders are still held, and
 * the next sweep, here or elsewhere, takes them. A payment racing the sweep
 * waits on the order's row lock and then finds it expired (or the sweep
 * finds it paid): one winner.
 *
 * The lag it promises: an order whose deadline has passed is in the next
 * sweep of any live instance - two rounds and a second for a slow server.
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
    st_result r = mysql_orders_sweep(w, e->name, returned);
    return r == ST_OK ? mysql_keys_expire(w) : r;
}

const struct expiry expiry_mysql_sweeper = {
    .name = "mysql-sweeper",
    .store = &store_mysql,
    .summary = "every stockd, every sweep_ms: SELECT ... FOR UPDATE SKIP LOCKED the held orders "
               "past their deadline (NOW(6)), expire them and return their units in one "
               "transaction",
    .promises_lag = 1,
    .sweep = sweep,
};
