/*
 * store.c - the steps every store and every sale body share: the teaching
 * knobs' wait inside the critical section, and the check that the count
 * read covers the sale.
 *
 * They live here, below the sale bodies, because the stores take them too:
 * MySQL's one-statement sale waits between its write and its COMMIT, with
 * the row locked, and both stores judge the count they read.
 */
#include "store/store.h"

#include "core/trace.h"
#include "core/worker.h"

void critical_section_wait(const struct deduct_request *rq, struct guard *g)
{
    sleep_ms(rq->hold_ms);
    if (rq->pause_ms <= 0)
        return;
    int freezable = g && g->freeze;
    if (freezable)
        g->freeze(g, 1);
    sleep_ms(rq->pause_ms);
    if (freezable)
        g->freeze(g, 0);
}

st_result count_covers(struct worker *w, const struct deduct_request *rq, long long count,
                       struct deduct_reply *out)
{
    out->remaining = count;
    if (rq->trace) {
        trace_mark(rq->trace, TRACE_READ);
        rq->trace->read = count;
    }
    if (count < rq->qty)
        return worker_fail(w, ST_SOLD_OUT, "%lld left, %d asked", count, rq->qty);
    return ST_OK;
}
