/*
 * sql-batch - many sales of one product in one transaction (group commit).
 *
 * The race: none left to fix - sql and for-update are safe. Their price is
 * the wall every flash sale hits: one transaction per sale, each holding the
 * product's row lock across its round trips, so the sales of a hot product
 * run one after another, as fast as one chain of round trips allows.
 *
 * The fix: apply many sales per transaction. A request for a product joins
 * that product's queue in this process and gives its worker back
 * (combine.h); the leader takes every sale waiting (up to batch-max), locks
 * the row (SELECT ... FOR UPDATE), serves them in arrival order while they
 * fit - a sale that does not fit whole is sold out, never partly sold -
 * writes the new count once, records one ledger row per sale in one INSERT,
 * commits, and only then answers each of them. No timer: while one
 * transaction is in flight the next batch forms by itself, so a lone
 * request pays nothing extra. Exact, because a batch commits whole or not
 * at all; safe across instances, because every instance's batches still
 * take the row lock in turn.
 *
 * Each sale's Idempotency-Key row is inserted in its batch's transaction,
 * with the answer the batch gives it (a refusal's too): the key commits
 * with the sale or not at all. A key another request kept first takes its
 * sale out of the batch (in_progress), and the batch runs again without it.
 *
 * The price: a sale waits for its whole batch's transaction; one failure
 * fails the whole batch (every sale in it gets the same 503, or
 * outcome_unknown when the COMMIT's reply was lost); and hold_ms / pause_ms
 * are spent once per batch, inside the transaction - the longest asked for.
 */
#include "core/metrics.h"
#include "core/trace.h"
#include "core/worker.h"
#include "sale/combine.h"
#include "sale/sale.h"
#include "sale/strategy.h"
#include "store/mysql_keys.h"
#include "store/mysql_stock.h"
#include "store/store.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* The longest hold and pause any sale of the batch asked for. */
static struct deduct_request batch_wait(const struct combined_sale *batch)
{
    struct deduct_request wait = {0};
    for (const struct combined_sale *s = batch; s; s = s->next) {
        if (s->rq->hold_ms > wait.hold_ms)
            wait.hold_ms = s->rq->hold_ms;
        if (s->rq->pause_ms > wait.pause_ms)
            wait.pause_ms = s->rq->pause_ms;
    }
    return wait;
}

/* Stamps `mark` on the trace of every sale of the batch that asked for one. */
static void trace_batch(struct combined_sale *batch, enum trace_mark mark)
{
    for (struct combined_sale *s = batch; s; s = s->next)
        trace_mark(s->rq->trace, mark);
}

/* What the batch's one write wrote, in the trace of each sale it carried. */
static void trace_written(struct combined_sale *batch, long long count)
{
    for (struct combined_sale *s = batch; s; s = s->next)
        if (s->rq->trace && s->result == ST_OK) {
            s->rq->trace->wrote = count;
            s->rq->trace->update = sql_text(SQL_WRITE_COUNT);
        }
}

/* Keeps each keyed sale's answer in the batch's open transaction
 * (mysql_keys.h); *taken the first whose key another request kept first. */
static st_result keep_keys(struct worker *w, struct combined_sale *batch,
                           struct combined_sale **taken)
{
    for (struct combined_sale *s = batch; s; s = s->next) {
        if (!s->rq->key[0] || s->result == ST_IN_PROGRESS)
            continue;
        int kept;
        st_result r = mysql_key_keep(w, s->rq, s->result, s->out->remaining,
                                     s->result == ST_OK ? "" : s->message, &kept);
        if (r != ST_OK || !kept) {
            *taken = r == ST_OK ? s : NULL;
            return r;
        }
    }
    return ST_OK;
}

/* Serves the batch from `count` in arrival order, writes what was sold, its
 * ledger rows and its keys' rows, and commits (the row is locked, the
 * transaction open). A sale whose key another request kept first is
 * *taken: the transaction is rolled back, for the batch to run without it. */
static st_result serve(struct worker *w, int product, struct combined_sale *batch, int n,
                       long long count, long long epoch, struct combined_sale **taken)
{
    json_t *sold = json_array();
    int keyed = 0;
    for (struct combined_sale *s = batch; s; s = s->next) {
        if (s->result == ST_IN_PROGRESS) /* out of the batch: its key is another's */
            continue;
        keyed |= s->rq->key[0] != '\0';
        *s->out = (struct deduct_reply){.attempts = 1, .batch = n};
        s->result = count_covers(w, s->rq, count, s->out);
        if (s->result == ST_OK) {
            count -= s->rq->qty;
            json_array_append_new(sold, json_integer(s->rq->qty));
        } else {
            snprintf(s->message, sizeof s->message, "%s", w->error);
        }
        s->out->remaining = count;
    }
    char *qtys = json_array_size(sold) ? json_dumps(sold, JSON_COMPACT) : NULL;
    json_decref(sold);
    if (!qtys && !keyed) { /* nothing fits, nothing to keep: nothing to write */
        sql_rollback(w);
        return ST_OK;
    }
    st_result r = ST_OK;
    trace_batch(batch, TRACE_WRITE);
    if (qtys) {
        struct sql_outcome done;
        r = sql_exec(w, SQL_WRITE_COUNT, SQL_ARGS(SQL_I(count), SQL_I(product), SQL_I(epoch)),
                     &done);
        if (r == ST_OK && done.matched != 1)
            r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "the locked row of product %d vanished",
                            product);
        if (r == ST_OK)
            r = sql_exec(w, SQL_INSERT_ORDERS,
                         SQL_ARGS(SQL_I(product), SQL_S(batch->rq->seller), SQL_S(qtys)), NULL);
        free(qtys);
    }
    if (r == ST_OK && keyed)
        r = keep_keys(w, batch, taken);
    if (r != ST_OK || *taken) {
        sql_rollback(w);
        return r;
    }
    r = sql_commit(w);
    if (r == ST_OK) {
        trace_written(batch, count);
        trace_batch(batch, TRACE_COMMIT);
    }
    return r;
}

/* One transaction for the batch; *taken as serve() says. */
static st_result transaction(struct worker *w, int product, struct combined_sale *batch, int n,
                             struct combined_sale **taken)
{
    struct deduct_request wait = batch_wait(batch);
    struct sql_outcome row;
    st_result r = sql_begin(w);
    if (r == ST_OK)
        r = sql_exec(w, SQL_READ_STOCK_FOR_UPDATE, SQL_ARGS(SQL_I(product)), &row);
    if (r == ST_OK && !row.found)
        r = worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in mysql", product);
    if (r != ST_OK) {
        sql_rollback(w);
        return r;
    }
    trace_batch(batch, TRACE_LOCK_ACQUIRED); /* the row lock */
    critical_section_wait(&wait, NULL);
    return serve(w, product, batch, n, row.col[0], row.col[3], taken);
}

/* One transaction for the whole batch - again without a sale whose key
 * another request kept first, answered in_progress (its retry gets that
 * request's answer). On failure every sale in it gets the same answer:
 * nothing of the batch was applied (or, with ST_OUTCOME_UNKNOWN, all of it
 * may have been). */
static void run_batch(struct worker *w, int product, struct combined_sale *batch, int n)
{
    struct combined_sale *taken;
    st_result r;
    do {
        taken = NULL;
        r = transaction(w, product, batch, n, &taken);
        if (taken) {
            taken->result = key_taken(w);
            snprintf(taken->message, sizeof taken->message, "%s", w->error);
        }
    } while (r == ST_OK && taken);
    metrics_batch(strategy_index(batch->rq->strategy), n);
    if (r != ST_OK)
        combined_fail_all(w, batch, r);
}

static const struct combiner one_transaction = {.run = run_batch};

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return combine(&one_transaction, w, rq, out);
}
const struct strategy strategy_sql_batch = {
    .name = "sql-batch",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "concurrent sales of one product applied in one transaction: row locked once, "
               "count written once, one multi-row ledger INSERT (group commit)",
    .contention = CONTENTION_WAITS, /* in its batch queue, then on the row lock */
    .hold_per_batch = 1,
    .answers_later = 1,
    .cluster = CLUSTER_CONFLICTS_AT_COMMIT,
    .orders_why =
        "its sales share one ledger insert per batch (JSON_TABLE), which carries no order",
    .keeps_key = KEEPS_KEY_IN_BODY, /* each sale's key row, in its batch's transaction */
    .deduct = deduct,
};
