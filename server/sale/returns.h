/*
 * returns.h - an order's units given back through its strategy's own
 * discipline: a cancel, an expiry.
 *
 * A return is the order's strategy selling -qty units (store.h, struct
 * give_back): the very body its sales run - its one statement, its row
 * lock, its version loop, its lock around the shared read-then-write, its
 * script, its MULTI - with the order's state change and its return record
 * where a sale writes its ledger record. So the units go back the way that
 * strategy writes stock, and whatever protects its sales protects its
 * returns: an unsafe row's return races like its sale (a return
 * overwritten by a sale is units vanished, a sale overwritten by a return
 * is units sold twice), and the accounting shows it.
 *
 * The state change stays conditional on `held`, in the same atomic step as
 * the stock write on every store that holds orders (MySQL: the strategy's
 * transaction; Redis: its script, or the script its MULTI carries), so an
 * order is returned once: a second return finds it no longer held and
 * writes nothing, stock included. A lock row's lock lives elsewhere, but
 * its stock and its orders are both in its store, so the lock guards one
 * atomic step there too: a crash between the two is impossible by
 * construction, and the return record is written in that step.
 */
#ifndef STOCKD_RETURNS_H
#define STOCKD_RETURNS_H

#include "store/orders.h"

/* The order_give_back_fn of store/orders.h: `o` back through its strategy,
 * if it is held. */
st_result order_give_back(struct worker *w, const struct order_ref *o, const char *state,
                          const char *by_what, int hold_ms, int *returned);

/* The order_give_back_batch_fn of store/orders.h: one run of the batch's
 * strategy for all its units (an expiry: no hold_ms); when one order was
 * no longer held, nothing is written and the run goes again with the
 * orders a read finds still held. */
st_result order_give_back_batch(struct worker *w, const struct return_batch *b, const char *state,
                                const char *by_what, int *returned);

/* POST /orders/{ID}/cancel: held -> cancelled, its units back through its
 * strategy (hold_ms inside its critical section): ST_OK; cancelled
 * already: ST_OK, *duplicate; ST_PAID; ST_EXPIRED. */
st_result order_cancel(struct worker *w, const struct order_ref *o, int hold_ms, int *duplicate);

#endif
