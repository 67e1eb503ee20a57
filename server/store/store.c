/*
 * store.c - the steps every store and every sale body share: the teaching
 * knobs' wait inside the critical section, the check that the count
 * read covers the sale, and an Idempotency-Key's fingerprint and replayed
 * answer, which each store keeps its own way (mysql_keys.c, the Redis sale
 * script).
 *
 * They live here, below the sale bodies, because the stores take them too:
 * MySQL's one-statement sale waits between its write and its COMMIT, with
 * the row locked, and both stores judge the count they read.
 */
#include "store/store.h"

#include "core/trace.h"
#include "core/worker.h"

#include <assert.h>
#include <stdio.h>

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

void key_fingerprint(char out[KEY_FINGERPRINT_MAX], const struct deduct_request *rq)
{
    if (rq->hold.order[0]) /* a hold asks for its deadline and mechanism too */
        snprintf(out, KEY_FINGERPRINT_MAX, "hold %s %d %d %d %s", rq->seller, rq->product, rq->qty,
                 rq->hold.ttl_ms, rq->hold.expiry);
    else
        snprintf(out, KEY_FINGERPRINT_MAX, "deduct %s %d %d", rq->seller, rq->product, rq->qty);
}

st_result key_replay(struct worker *w, st_result kept, long long remaining, const char *message,
                     struct deduct_reply *out)
{
    assert(kept == ST_OK || kept == ST_SOLD_OUT || kept == ST_BUSY); /* the answers kept */
    out->remaining = remaining;
    out->attempts = 1;
    out->replayed = 1;
    return kept == ST_OK ? ST_OK : worker_fail(w, kept, "%s", message);
}

st_result key_reused(struct worker *w)
{
    return worker_fail(w, ST_KEY_REUSED,
                       "this Idempotency-Key was sent before with another strategy, product or "
                       "qty; a new purchase needs a new key");
}

st_result key_taken(struct worker *w)
{
    return worker_fail(w, ST_IN_PROGRESS,
                       "another request with this Idempotency-Key sold first; retry for its "
                       "answer");
}
