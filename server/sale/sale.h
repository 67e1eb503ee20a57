/*
 * sale.h - the sale body every lock guards, and the pieces strategies share.
 *
 * read_then_write() is the `nolock` body: the race itself, and what every
 * lock strategy wraps, on whichever store the strategy's row names.
 */
#ifndef STOCKD_SALE_H
#define STOCKD_SALE_H

#include "store/store.h"

struct store;

/*
 * Reads the count from `store`; sold out if it is short; waits in the
 * critical section; then writes read-minus-qty and records the sale, in one
 * atomic step - unless the product was reset in between. Safe only when
 * something outside keeps other writers away: the lock strategies wrap
 * exactly this. When `g` carries a fencing token, the read first claims
 * the token on the product and the write applies only if no newer token
 * has claimed it since; a stale holder gets ST_BUSY and changes nothing.
 */
st_result read_then_write(const struct store *store, struct worker *w,
                          const struct deduct_request *rq, struct guard *g,
                          struct deduct_reply *out);

typedef st_result (*attempt_fn)(struct worker *w, const struct deduct_request *rq,
                                struct deduct_reply *out);

/* The optimistic strategies' loop: runs `attempt` while it answers ST_BUSY
 * (someone wrote in between), sleeping a jittered, growing backoff between
 * tries, up to optimistic_attempts; then ST_BUSY, "<what> changed under
 * every one of N attempts". The request's deadline is checked before every
 * retry. */
st_result optimistic_retry(struct worker *w, const struct deduct_request *rq,
                           struct deduct_reply *out, attempt_fn attempt, const char *what);

#endif
