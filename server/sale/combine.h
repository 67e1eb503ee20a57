/*
 * combine.h - sales that share one trip to their store (flat combining).
 *
 * Some work can be shared by sales that arrive together: one transaction
 * for many sales of a product (sql-batch), one pipelined write of many
 * scripts (lua). A strategy that shares hands each sale to combine(): the
 * sale joins its queue and its worker goes back to the pool. The first sale
 * to find nobody leading that queue leads it: it takes every sale waiting
 * (up to batch-max, in arrival order), has the strategy run them as one
 * batch, answers each through rq->later, and leads again until the queue is
 * empty. There is no timer: while one batch is in flight the next one forms
 * by itself, so a lone sale waits for nobody.
 *
 * A sale that arrives on a thread that must not block (an HTTP thread:
 * worker.must_not_block) only joins: when its queue has no leader, a job on
 * the worker pool leads it. At load, when a batch is always in flight, a
 * sale then costs no hand-off between threads at all.
 *
 * A strategy that combines sets `answers_later` in its row.
 */
#ifndef STOCKD_COMBINE_H
#define STOCKD_COMBINE_H

#include "sale/sale.h"
#include "sale/strategy.h"

struct worker;

/* One sale, waiting for a batch or in one. */
struct combined_sale {
    const struct deduct_request *rq; /* rq->later answers it */
    struct deduct_reply *out;
    long long deadline_ms; /* the request's own, as its worker had it */
    st_result result;      /* what the batch did for it */
    char message[256];     /* and why, when not ST_OK (as long as a worker's error) */
    struct combined_sale *next;
};

struct combiner {
    /* Runs the `n` sales of `batch` (a chain in arrival order) as one batch
     * and sets each one's result, message and *out. `key` is the queue's.
     * While it runs, the worker's deadline is the earliest of the batch's. */
    void (*run)(struct worker *w, int key, struct combined_sale *batch, int n);
    /* Sales of different products share a queue (and a batch) too. */
    int across_products;
};

/* Queues the sale of `rq` on `c` and leads its queue if nobody does (or
 * has a pool worker lead it). The answer goes through rq->later; ST_OK says
 * only that the sale was handed on. */
st_result combine(const struct combiner *c, struct worker *w, const struct deduct_request *rq,
                  struct deduct_reply *out);

/* Gives every sale of `batch` the same result (a failure of the batch as a
 * whole), with the worker's error as the message. */
void combined_fail_all(struct worker *w, struct combined_sale *batch, st_result r);

#endif
