/*
 * sale.h - the pieces that strategy files compose instead of copying.
 *
 * read_then_write() is the `nolock` body: the race itself, and what every
 * lock strategy wraps. sale_commit() is the one place a MySQL sale is
 * written together with its ledger row.
 */
#ifndef STOCKD_SALE_H
#define STOCKD_SALE_H

#include "mysql_store.h"
#include "strategy.h"

/* Waits inside a critical section: hold_ms with the holder busy (a lock's
 * watchdog keeps renewing), then pause_ms with the holder frozen (the
 * watchdog freezes too, as in a GC or VM pause). `held` may be NULL. */
void critical_section_wait(const struct deduct_request *rq, struct held_lock *held);

/*
 * SELECT the count; sold out if it is short; wait in the critical section;
 * then write read-minus-qty and record the sale in one transaction. Safe
 * only when something outside keeps other writers away: the lock strategies
 * wrap exactly this. When `held` carries a fencing token, the read first
 * claims the token on the row and the write applies only if no newer token
 * has claimed it since; a stale holder gets ST_BUSY and changes nothing.
 */
st_result read_then_write(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          struct deduct_reply *out);

/* Whether sale_commit() waits in the critical section between the write
 * and the commit (with the row locked). */
enum sale_wait { SALE_NO_WAIT, SALE_WAIT_INSIDE };

/*
 * Inside an open transaction: runs `write`; if it matched a row, waits as
 * asked, records the sale in the ledger and commits. If it matched nothing,
 * rolls back and returns `no_match`. Any failure rolls back: nothing is
 * half-written.
 */
st_result sale_commit(struct worker *w, const struct deduct_request *rq, enum sale_wait wait,
                      enum sql_statement write, const struct sql_value *args, unsigned nargs,
                      st_result no_match);

typedef st_result (*attempt_fn)(struct worker *w, const struct deduct_request *rq,
                                struct deduct_reply *out);

/* The optimistic strategies' loop: runs `attempt` while it answers ST_BUSY
 * (someone wrote in between), sleeping a jittered, growing backoff between
 * tries, up to optimistic_attempts; then ST_BUSY, "<what> changed under
 * every one of N attempts". */
st_result optimistic_retry(struct worker *w, const struct deduct_request *rq,
                           struct deduct_reply *out, attempt_fn attempt, const char *what);

/* Records the count the sale found and answers ST_SOLD_OUT when it cannot
 * cover qty. */
st_result count_covers(struct worker *w, const struct deduct_request *rq, long long count,
                       struct deduct_reply *out);

/* Reads the product's count into *count (ST_UNKNOWN_PRODUCT if absent) and
 * decides whether qty can be sold from it (ST_SOLD_OUT if not). */
st_result stock_check(struct worker *w, const struct deduct_request *rq,
                      const struct sql_outcome *row, struct deduct_reply *out);

#endif
