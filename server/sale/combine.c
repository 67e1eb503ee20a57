/*
 * combine.c - the queues of sales that share one trip to their store.
 *
 * A queue belongs to one combiner and one key (the product, or 0 for a
 * combiner whose batches mix products). Queues live in shards, each with
 * its own lock, so that sales of different queues never wait for each
 * other here; a queue exists only while it has a leader, and the leader
 * drops it when it finds it empty.
 */
#include "sale/combine.h"

#include "backend/pool.h"
#include "core/config.h"
#include "core/later.h"
#include "core/worker.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct queue {
    struct job lead_job; /* a pool worker leads through it */
    const struct combiner *owner;
    int key;
    struct combined_sale *head, *tail;
    struct queue *next; /* in its shard */
};

#define SHARDS 64
static struct shard {
    pthread_mutex_t lock;
    struct queue *queues; /* guarded by `lock`, as is everything in them */
} shards[SHARDS] = {[0 ... SHARDS - 1] = {PTHREAD_MUTEX_INITIALIZER, NULL}};

static struct shard *shard_of(const struct combiner *c, int key)
{
    return &shards[((uintptr_t)c / sizeof(void *) + (unsigned)key) % SHARDS];
}

static struct queue *find_queue(struct shard *sh, const struct combiner *c, int key)
{
    for (struct queue *q = sh->queues; q; q = q->next)
        if (q->owner == c && q->key == key)
            return q;
    return NULL;
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
static void answer(struct combined_sale *s)
{
    s->rq->later->answer(s->rq->later, s->result, s->message);
    free(s);
}

static void answer_all(struct combined_sale *chain)
{
    for (struct combined_sale *s = chain, *next; s; s = next) {
        next = s->next;
        answer(s);
    }
}

void combined_fail_all(struct worker *w, struct combined_sale *batch, st_result r)
{
    for (struct combined_sale *s = batch; s; s = s->next) {
        s->result = r;
        snprintf(s->message, sizeof s->message, "%s", w->error);
    }
}

/*
 * Takes the next batch off `q`: up to batch-max sales in arrival order. Sales
 * whose deadline passed while they waited go to *expired instead (they are
 * answered timeout: nothing was done for them). Sets *earliest to the
 * earliest deadline in the batch. Call with the shard locked.
 */
static int take_batch(struct queue *q, struct combined_sale **batch, struct combined_sale **expired,
                      long long *earliest)
{
    struct combined_sale **batch_end = batch, **expired_end = expired;
    int n = 0;
    long long now = monotonic_ms();
    *earliest = 0;
    while (q->head && n < config.batch_max) {
        struct combined_sale *s = q->head;
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
        if (s->deadline_ms && (!*earliest || s->deadline_ms < *earliest))
            *earliest = s->deadline_ms;
        *batch_end = s;
        batch_end = &s->next;
        n++;
    }
    if (!q->head)
        q->tail = NULL;
    return n;
}

/* Leads `q`'s batches until nothing waits; the worker's own deadline is
 * put back afterwards. */
static void lead(struct worker *w, struct shard *sh, struct queue *q)
{
    long long own_deadline = w->deadline_ms;
    for (;;) {
        struct combined_sale *batch = NULL, *expired = NULL;
        long long earliest;
        pthread_mutex_lock(&sh->lock);
        int n = take_batch(q, &batch, &expired, &earliest);
        const struct combiner *c = q->owner;
        int key = q->key;
        if (n == 0 && !expired) {
            drop_queue(sh, q); /* the next sale starts a queue afresh */
            pthread_mutex_unlock(&sh->lock);
            break;
        }
        pthread_mutex_unlock(&sh->lock);
        answer_all(expired);
        if (n) {
            w->deadline_ms = earliest;
            w->error[0] = '\0';
            c->run(w, key, batch, n);
            answer_all(batch);
        }
    }
    w->deadline_ms = own_deadline;
}

/* A pool worker leading a queue for a thread that must not block. */
static void lead_for_another(struct job *job, struct worker *w)
{
    struct queue *q = CONTAINER_OF(job, struct queue, lead_job);
    lead(w, shard_of(q->owner, q->key), q);
}

/* The pool refused the leading job (full, or stopping): every sale that
 * joined the queue meanwhile gets that answer, and the queue goes. */
static void refuse_queue(struct worker *w, struct shard *sh, struct queue *q, st_result r)
{
    pthread_mutex_lock(&sh->lock);
    struct combined_sale *all = q->head;
    drop_queue(sh, q);
    pthread_mutex_unlock(&sh->lock);
    worker_fail(w, r, "%s", pool_refusal(r));
    combined_fail_all(w, all, r);
    answer_all(all);
}

st_result combine(const struct combiner *c, struct worker *w, const struct deduct_request *rq,
                  struct deduct_reply *out)
{
    int key = c->across_products ? 0 : rq->product;
    struct combined_sale *s = calloc(1, sizeof *s);
    struct shard *sh = shard_of(c, key);
    struct queue *q = NULL;
    int leads = 0;
    rq->later->hand_off(rq->later); /* once queued, the leader may answer it */
    pthread_mutex_lock(&sh->lock);
    if (s) {
        q = find_queue(sh, c, key);
        if (!q && (q = calloc(1, sizeof *q)) != NULL) {
            *q = (struct queue){
                .lead_job = {.run = lead_for_another}, .owner = c, .key = key, .next = sh->queues};
            sh->queues = q;
            leads = 1; /* a new queue has no leader yet: this sale's worker */
        }
    }
    if (q) {
        *s = (struct combined_sale){.rq = rq, .out = out, .deadline_ms = w->deadline_ms};
        if (q->tail)
            q->tail->next = s;
        else
            q->head = s;
        q->tail = s;
    }
    pthread_mutex_unlock(&sh->lock);
    if (!q) {
        free(s);
        rq->later->answer(rq->later, ST_BACKEND_UNAVAILABLE, "out of memory");
    } else if (leads && !w->must_not_block) {
        lead(w, sh, q);
    } else if (leads) {
        st_result r = pool_submit(&q->lead_job);
        if (r != ST_OK)
            refuse_queue(w, sh, q, r);
    }
    return ST_OK;
}
