/*
 * sale.c - the shared sale body, on any store.
 */
#include "sale/sale.h"

#include "core/config.h"
#include "core/trace.h"
#include "core/worker.h"
#include "store/store.h"

#include <assert.h>

st_result read_then_write(const struct store *store, struct worker *w,
                          const struct deduct_request *rq, struct guard *g,
                          struct deduct_reply *out)
{
    long long token = g ? g->fence : 0;
    assert(!token || store->claim_fence); /* strategy.c checks every row */
    out->fence = token;
    st_result r = token ? store->claim_fence(w, rq, token, &g->newest_fence) : ST_OK;
    struct stock_seen seen;
    if (r == ST_OK)
        r = store->read(w, rq, &seen, out);
    if (r != ST_OK)
        return r;

    critical_section_wait(rq, g);

    /* A write refused leaves the stock as it was: its reply does not
     * report the count it would have left. */
    long long left = seen.count - rq->qty;
    r = store->write_if(w, rq, &seen, left, token);
    out->remaining = r == ST_OK ? left : REMAINING_UNKNOWN;
    if (r == ST_OK && rq->trace)
        rq->trace->wrote = left;
    return r;
}

/* Before retry `attempt` (1-based): random in [0, 2^attempt) ms, at most 32. */
static void optimistic_backoff(struct worker *w, int attempt)
{
    assert(attempt >= 1);
    int ceiling = attempt >= 5 ? 32 : 1 << attempt;
    sleep_ms(worker_random(w, ceiling));
}

st_result optimistic_retry(struct worker *w, const struct deduct_request *rq,
                           struct deduct_reply *out, attempt_fn attempt, const char *what)
{
    for (int n = 1;; n++) {
        out->attempts = n;
        st_result r = attempt(w, rq, out);
        if (r != ST_BUSY)
            return r;
        if (n >= config.optimistic_attempts)
            return worker_fail(w, ST_BUSY, "%s changed under every one of %d attempts", what, n);
        optimistic_backoff(w, n);
        r = worker_check_deadline(w);
        if (r != ST_OK)
            return r;
    }
}
