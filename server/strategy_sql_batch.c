/*
 * sql-batch - many sales of one product in one transaction (group commit).
 *
 * The race: none left to fix - sql and for-update are safe. Their price is
 * the wall every flash sale hits: one transaction per sale, each holding the
 * product's row lock across its round trips, so the sales of a hot product
 * run one after another, as fast as one chain of round trips allows.
 *
 * The fix: apply many sales per transaction. A request for a product joins
 * that product's queue in this process and gives its worker back. The first
 * one to find nobody leading becomes the leader: it takes every sale waiting
 * (up to batch-max), locks the row (SELECT ... FOR UPDATE), serves them in
 * arrival order while they fit - a sale that does not fit whole is sold out,
 * never partly sold - writes the new count once, records one ledger row per
 * sale in one INSERT, commits, and only then answers each of them. Then it
 * leads the batch that gathered meanwhile, until the queue is empty. No
 * timer: while one transaction is in flight the next batch forms by itself,
 * so a lone request pays nothing extra. Exact, because a batch commits whole
 * or not at all; safe across instances, because every instance's batches
 * still take the row lock in turn.
 *
 * The price: a sale waits for its whole batch's transaction; one failure
 * fails the whole batch (every sale in it gets the same 503, or
 * outcome_unknown when the COMMIT's reply was lost); and hold_ms / pause_ms
 * are spent once per batch, inside the transaction - the longest asked for.
 */
#include "config.h"
#include "metrics.h"
#include "mysql_sale.h"
#include "sale.h"
#include "store.h"
#include "worker.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* One sale, waiting for a batch or in one. */
struct sale {
    const struct deduct_request *rq; /* rq->later answers it */
    struct deduct_reply *out;
    long long deadline_ms;
    st_result result;
    char message[256]; /* as long as a worker's error */
    struct sale *next;
};

/* The sales of one product waiting for a transaction. */
struct queue {
    int product;
    int led; /* a worker is leading its batches */
    struct sale *head, *tail;
    struct queue *next; /* in its shard */
};

/* Products spread over shards, each with its own lock, so that sales of
 * different products never wait for each other here. */
#define SHARDS 64
static struct shard {
    pthread_mutex_t lock;
    struct queue *queues; /* guarded by `lock`, as is everything in them */
} shards[SHARDS] = {[0 ... SHARDS - 1] = {PTHREAD_MUTEX_INITIALIZER, NULL}};

static struct shard *shard_of(int product)
{
    return &shards[(unsigned)product % SHARDS];
}

/* The product's queue in `sh`, made if needed; NULL when out of memory. */
static struct queue *queue_of(struct shard *sh, int product)
{
    for (struct queue *q = sh->queues; q; q = q->next)
        if (q->product == product)
            return q;
    struct queue *q = calloc(1, sizeof *q);
    if (q) {
        q->product = product;
        q->next = sh->queues;
        sh->queues = q;
    }
    return q;
}

static void drop_queue(struct shard *sh, struct queue *q)
{
    struct queue **at = &sh->queues;
    while (*at != q)
        at = &(*at)->next;
    *at = q->next;
    free(q);
}

/* Answers `s` and frees it: its request, reply and answer are gone after. */
static void answer(struct sale *s)
{
    s->rq->later->answer(s->rq->later, s->result, s->message);
    free(s);
}

static void answer_all(struct sale *chain)
{
    for (struct sale *s = chain, *next; s; s = next) {
        next = s->next;
        answer(s);
    }
}

/*
 * Takes the next batch off `q`: up to batch-max sales in arrival order. Sales
 * whose deadline passed while they waited go to *expired instead (they are
 * answered timeout: nothing was done for them). Call with the shard locked.
 */
static int take_batch(struct queue *q, struct sale **batch, struct sale **expired)
{
    struct sale **batch_end = batch, **expired_end = expired;
    int n = 0;
    long long now = monotonic_ms();
    while (q->head && n < config.batch_max) {
        struct sale *s = q->head;
        q->head = s->next;
        s->next = NULL;
        long long deadline = effective_deadline(s->deadline_ms);
        if (deadline && now >= deadline) {
            s->result = ST_TIMEOUT;
            snprintf(s->message, sizeof s->message, "the deadline passed in the batch queue");
            *expired_end = s;
            expired_end = &s->next;
            continue;
        }
        *batch_end = s;
        batch_end = &s->next;
        n++;
    }
    if (!q->head)
        q->tail = NULL;
    return n;
}

/* The longest hold and pause any sale of the batch asked for. */
static struct deduct_request batch_wait(const struct sale *batch)
{
    struct deduct_request wait = {0};
    for (const struct sale *s = batch; s; s = s->next) {
        if (s->rq->hold_ms > wait.hold_ms)
            wait.hold_ms = s->rq->hold_ms;
        if (s->rq->pause_ms > wait.pause_ms)
            wait.pause_ms = s->rq->pause_ms;
    }
    return wait;
}

/* Serves the batch from `count` in arrival order, writes what was sold and
 * its ledger rows, and commits (the row is locked, the transaction open). */
static st_result serve(struct worker *w, int product, struct sale *batch, int n, long long count,
                       long long epoch)
{
    json_t *sold = json_array();
    for (struct sale *s = batch; s; s = s->next) {
        *s->out = (struct deduct_reply){.attempts = 1, .batch = n};
        if (s->rq->qty <= count) {
            count -= s->rq->qty;
            json_array_append_new(sold, json_integer(s->rq->qty));
            s->result = ST_OK;
        } else {
            s->result = ST_SOLD_OUT;
            snprintf(s->message, sizeof s->message, "%lld left, %d asked", count, s->rq->qty);
        }
        s->out->remaining = count;
    }
    char *qtys = json_array_size(sold) ? json_dumps(sold, JSON_COMPACT) : NULL;
    json_decref(sold);
    if (!qtys) { /* nothing fits: nothing to write */
        sql_rollback(w);
        return ST_OK;
    }
    struct sql_outcome done;
    const char *name = batch->rq->strategy->name;
    st_result r =
        sql_exec(w, SQL_WRITE_COUNT, SQL_ARGS(SQL_I(count), SQL_I(product), SQL_I(epoch)), &done);
    if (r == ST_OK && done.matched != 1)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "the locked row of product %d vanished",
                        product);
    if (r == ST_OK)
        r = sql_exec(w, SQL_INSERT_ORDERS, SQL_ARGS(SQL_I(product), SQL_S(name), SQL_S(qtys)),
                     NULL);
    free(qtys);
    if (r == ST_OK)
        return sql_commit(w);
    sql_rollback(w);
    return r;
}

/* One transaction for the whole batch. On failure every sale in it gets
 * the same answer: nothing of the batch was applied (or, with
 * ST_OUTCOME_UNKNOWN, all of it may have been). */
static void run_batch(struct worker *w, int product, struct sale *batch, int n)
{
    struct deduct_request wait = batch_wait(batch);
    struct sql_outcome row;
    w->error[0] = '\0';
    st_result r = sql_begin(w);
    if (r == ST_OK)
        r = sql_exec(w, SQL_READ_STOCK_FOR_UPDATE, SQL_ARGS(SQL_I(product)), &row);
    if (r == ST_OK && !row.found)
        r = worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in mysql", product);
    if (r == ST_OK) {
        critical_section_wait(&wait, NULL);
        r = serve(w, product, batch, n, row.col[0], row.col[3]);
    } else {
        sql_rollback(w);
    }
    metrics_batch(n);
    for (struct sale *s = batch; r != ST_OK && s; s = s->next) {
        s->result = r;
        snprintf(s->message, sizeof s->message, "%s", w->error);
    }
}

/* Leads `q`'s batches, one transaction each, until nothing waits. */
static void lead(struct worker *w, struct shard *sh, struct queue *q)
{
    for (;;) {
        struct sale *batch = NULL, *expired = NULL;
        pthread_mutex_lock(&sh->lock);
        int n = take_batch(q, &batch, &expired);
        int product = q->product;
        if (n == 0 && !expired) {
            drop_queue(sh, q); /* the next sale of the product starts a queue afresh */
            pthread_mutex_unlock(&sh->lock);
            return;
        }
        pthread_mutex_unlock(&sh->lock);
        answer_all(expired);
        if (n) {
            run_batch(w, product, batch, n);
            answer_all(batch);
        }
    }
}

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    struct sale *s = calloc(1, sizeof *s);
    struct shard *sh = shard_of(rq->product);
    pthread_mutex_lock(&sh->lock);
    struct queue *q = s ? queue_of(sh, rq->product) : NULL;
    int leads = 0;
    if (q) {
        *s = (struct sale){.rq = rq, .out = out, .deadline_ms = w->deadline_ms};
        if (q->tail)
            q->tail->next = s;
        else
            q->head = s;
        q->tail = s;
        leads = !q->led;
        q->led = 1;
    }
    pthread_mutex_unlock(&sh->lock);
    if (!q) {
        free(s);
        rq->later->answer(rq->later, ST_BACKEND_UNAVAILABLE, "sql-batch: out of memory");
    } else if (leads) {
        lead(w, sh, q);
    }
    return ST_LATER;
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
    .deduct = deduct,
};
