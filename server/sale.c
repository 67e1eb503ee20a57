/*
 * sale.c - the shared sale bodies on MySQL.
 */
#include "sale.h"

#include "config.h"
#include "lock.h"
#include "worker.h"

#include <assert.h>

void critical_section_wait(const struct deduct_request *rq, struct held_lock *held)
{
    sleep_ms(rq->hold_ms);
    if (rq->pause_ms <= 0)
        return;
    int freezable = held && held->kind && held->kind->freeze;
    if (freezable)
        held->kind->freeze(held, 1);
    sleep_ms(rq->pause_ms);
    if (freezable)
        held->kind->freeze(held, 0);
}

st_result stock_check(struct worker *w, const struct deduct_request *rq,
                      const struct sql_outcome *row, struct deduct_reply *out)
{
    if (!row->found)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in mysql", rq->product);
    return count_covers(w, rq, row->col[0], out);
}

st_result count_covers(struct worker *w, const struct deduct_request *rq, long long count,
                       struct deduct_reply *out)
{
    out->remaining = count;
    if (count < rq->qty)
        return worker_fail(w, ST_SOLD_OUT, "%lld left, %d asked", count, rq->qty);
    return ST_OK;
}

st_result sale_commit(struct worker *w, const struct deduct_request *rq, enum sale_wait wait,
                      enum sql_statement write, const struct sql_value *args, unsigned nargs,
                      st_result no_match)
{
    struct sql_outcome done;
    st_result r = sql_exec(w, write, args, nargs, &done);
    if (r == ST_OK && done.matched == 0)
        r = no_match;
    if (r == ST_OK && wait == SALE_WAIT_INSIDE)
        critical_section_wait(rq, NULL);
    if (r == ST_OK)
        r = sql_exec(w, SQL_INSERT_ORDER,
                     SQL_ARGS(SQL_I(rq->product), SQL_S(rq->strategy->name), SQL_I(rq->qty)), NULL);
    if (r == ST_OK)
        return sql_commit(w);
    sql_rollback(w);
    return r;
}

/* Claims the fencing token on the row before reading: from now on, any
 * holder with an older token is refused the write. */
static st_result claim_fence(struct worker *w, const struct deduct_request *rq, long long token)
{
    struct sql_outcome claim, row;
    st_result r = sql_exec(w, SQL_CLAIM_FENCE,
                           SQL_ARGS(SQL_I(token), SQL_I(rq->product), SQL_I(token)), &claim);
    if (r != ST_OK || claim.matched == 1)
        return r;
    /* Matched nothing: a newer token claimed the row, or there is no row. */
    r = sql_exec(w, SQL_READ_STOCK, SQL_ARGS(SQL_I(rq->product)), &row);
    if (r == ST_OK && !row.found)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in mysql", rq->product);
    if (r == ST_OK)
        r = worker_fail(w, ST_BUSY, "fencing token %lld is stale: a newer holder came first",
                        token);
    return r;
}

st_result read_then_write(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          struct deduct_reply *out)
{
    long long token = held ? held->fence : 0;
    out->fence = token;
    st_result r = token ? claim_fence(w, rq, token) : ST_OK;
    struct sql_outcome row;
    if (r == ST_OK)
        r = sql_exec(w, SQL_READ_STOCK, SQL_ARGS(SQL_I(rq->product)), &row);
    if (r == ST_OK)
        r = stock_check(w, rq, &row, out);
    if (r != ST_OK)
        return r;

    critical_section_wait(rq, held);

    long long left = row.col[0] - rq->qty;
    r = sql_begin(w);
    if (r != ST_OK)
        return r;
    out->remaining = left;
    if (!token)
        return sale_commit(w, rq, SALE_NO_WAIT, SQL_WRITE_COUNT,
                           SQL_ARGS(SQL_I(left), SQL_I(rq->product)), ST_UNKNOWN_PRODUCT);
    r = sale_commit(w, rq, SALE_NO_WAIT, SQL_WRITE_IF_FENCE,
                    SQL_ARGS(SQL_I(left), SQL_I(rq->product), SQL_I(token)), ST_BUSY);
    if (r == ST_BUSY)
        worker_fail(w, ST_BUSY,
                    "write with fencing token %lld refused: a newer holder claimed "
                    "the row",
                    token);
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
    }
}
