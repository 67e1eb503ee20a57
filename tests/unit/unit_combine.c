/*
 * unit_combine.c - the queues that let sales share one trip to their store:
 * a lone sale is run at once by its own worker; sales that arrive while a
 * batch is in flight form the next batch, whole and in arrival order; no
 * batch is larger than batch-max; a sale whose deadline passed in the queue
 * is answered timeout and never run; every sale is answered exactly once;
 * queues of different products are apart; and a sale from a thread that
 * must not block only joins: a pool worker leads for it (or, when the pool
 * refuses, the sale gets the pool's answer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <string.h>

#include "backend/pool.h"
#include "core/config.h"
#include "core/later.h"
#include "core/worker.h"
#include "sale/combine.h"

#define SALES 16

/* One sale as the API layer would hand it over, and what it was answered. */
struct test_sale {
    struct later later; /* the answer gets it back */
    struct deduct_request rq;
    struct deduct_reply out;
    int answers;
    int hand_offs;         /* combine() let another thread answer it      */
    int answered_unhanded; /* it was answered before it was handed off  */
    st_result result;
};

static void record_answer(struct later *later, st_result r, const char *message)
{
    (void)message;
    struct test_sale *t = CONTAINER_OF(later, struct test_sale, later);
    t->answers++;
    t->answered_unhanded |= t->hand_offs == 0;
    t->result = r;
}

static void record_hand_off(struct later *later)
{
    CONTAINER_OF(later, struct test_sale, later)->hand_offs++;
}

static struct test_sale sales[SALES];

static void prepare(int index, int product)
{
    sales[index] =
        (struct test_sale){.later = {.answer = record_answer, .hand_off = record_hand_off}};
    sales[index].rq =
        (struct deduct_request){.later = &sales[index].later, .product = product, .qty = index + 1};
}

/* What the runs saw: each batch's size, and the sales in order. */
static int batch_sizes[SALES], batches;
static int order[SALES], ran;

/* While `gate` is closed, a batch that starts with a sale of GATED waits
 * in its run: the test queues more sales meanwhile, as requests arriving
 * during a transaction. */
#define GATED 1001
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_changed = PTHREAD_COND_INITIALIZER;
static int gate_closed, first_batch_running;

static void run_recording(struct worker *w, int key, struct combined_sale *batch, int n)
{
    (void)w;
    (void)key;
    pthread_mutex_lock(&gate_lock);
    if (batch->rq->product == GATED) {
        first_batch_running = 1;
        pthread_cond_broadcast(&gate_changed);
        while (gate_closed)
            pthread_cond_wait(&gate_changed, &gate_lock);
    }
    pthread_mutex_unlock(&gate_lock);

    batch_sizes[batches++] = n;
    int counted = 0;
    for (struct combined_sale *s = batch; s; s = s->next, counted++) {
        order[ran++] = s->rq->qty - 1; /* the sale's index */
        s->result = ST_OK;
        s->out->batch = n;
    }
    assert_int_equal(counted, n);
}

static const struct combiner by_product = {.run = run_recording};
static const struct combiner across = {.run = run_recording, .across_products = 1};

static int reset_state(void **state)
{
    (void)state;
    batches = ran = 0;
    gate_closed = first_batch_running = 0;
    config.batch_max = 128;
    return 0;
}

static void test_lone_sale_runs_at_once(void **state)
{
    (void)state;
    struct worker *w = worker_new();
    prepare(0, GATED);
    assert_int_equal(combine(&by_product, w, &sales[0].rq, &sales[0].out), ST_OK);
    /* The sale's own worker led it: answered before combine() returned. */
    assert_int_equal(sales[0].answers, 1);
    assert_int_equal(sales[0].result, ST_OK);
    assert_int_equal(batches, 1);
    assert_int_equal(batch_sizes[0], 1);
    worker_free(w);
}

struct leader {
    const struct combiner *c;
    int index;
};

static void *lead_first_sale(void *arg)
{
    struct leader *l = arg;
    struct worker *w = worker_new();
    combine(l->c, w, &sales[l->index].rq, &sales[l->index].out);
    worker_free(w);
    return NULL;
}

/* Sale 0 leads from another thread, and is held in its run. */
static pthread_t hold_a_leader(const struct combiner *c)
{
    static struct leader l;
    l = (struct leader){c, 0};
    gate_closed = 1;
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, lead_first_sale, &l), 0);
    pthread_mutex_lock(&gate_lock);
    while (!first_batch_running)
        pthread_cond_wait(&gate_changed, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
    return thread;
}

/* Lets the held leader go on, and waits until it has led everything. */
static void release_the_leader(pthread_t thread)
{
    pthread_mutex_lock(&gate_lock);
    gate_closed = 0;
    pthread_cond_broadcast(&gate_changed);
    pthread_mutex_unlock(&gate_lock);
    pthread_join(thread, NULL);
}

/* Sale 0 leads and is held; sales 1..waiting-1 are queued meanwhile (each
 * returns at once: a leader exists); then the leader goes on. */
static void queue_behind_a_running_batch(const struct combiner *c, int waiting)
{
    pthread_t thread = hold_a_leader(c);
    struct worker *w = worker_new();
    for (int i = 1; i < waiting; i++) {
        assert_int_equal(combine(c, w, &sales[i].rq, &sales[i].out), ST_OK);
        assert_int_equal(sales[i].answers, 0);   /* queued, not run: its worker is free */
        assert_int_equal(sales[i].hand_offs, 1); /* before the leader could reach it */
    }
    worker_free(w);
    release_the_leader(thread);
}

static void expect_every_sale_answered_once(int count)
{
    for (int i = 0; i < count; i++) {
        assert_int_equal(sales[i].answers, 1);
        assert_false(sales[i].answered_unhanded);
    }
}

static void test_sales_arriving_meanwhile_form_the_next_batch(void **state)
{
    (void)state;
    for (int i = 0; i < SALES; i++)
        prepare(i, GATED);
    queue_behind_a_running_batch(&by_product, SALES);
    assert_int_equal(batches, 2);
    assert_int_equal(batch_sizes[0], 1);
    assert_int_equal(batch_sizes[1], SALES - 1);
    for (int i = 0; i < SALES; i++)
        assert_int_equal(order[i], i); /* arrival order */
    expect_every_sale_answered_once(SALES);
    assert_int_equal(sales[SALES - 1].out.batch, SALES - 1);
}

static void test_no_batch_exceeds_batch_max(void **state)
{
    (void)state;
    config.batch_max = 4;
    for (int i = 0; i < SALES; i++)
        prepare(i, GATED);
    queue_behind_a_running_batch(&by_product, SALES);
    /* 1 (the leader's), then the 15 that waited: 4, 4, 4, 3. */
    int expected[] = {1, 4, 4, 4, 3};
    assert_int_equal(batches, 5);
    for (int b = 0; b < batches; b++)
        assert_int_equal(batch_sizes[b], expected[b]);
    expect_every_sale_answered_once(SALES);
}

static void test_expired_sale_is_never_run(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        prepare(i, GATED);
    pthread_t thread = hold_a_leader(&by_product);
    struct worker *w = worker_new();
    w->deadline_ms = monotonic_ms() - 1; /* already past */
    combine(&by_product, w, &sales[1].rq, &sales[1].out);
    w->deadline_ms = 0;
    combine(&by_product, w, &sales[2].rq, &sales[2].out);
    worker_free(w);
    release_the_leader(thread);

    assert_int_equal(sales[1].result, ST_TIMEOUT);
    assert_int_equal(ran, 2); /* sales 0 and 2 */
    assert_int_equal(order[1], 2);
    expect_every_sale_answered_once(3);
}

static void test_products_queue_apart(void **state)
{
    (void)state;
    /* A batch of product GATED is held in flight; a sale of another
     * product does not queue behind it: it leads its own queue and is
     * answered while the first batch still runs. */
    prepare(0, GATED);
    prepare(1, GATED + 1);
    pthread_t thread = hold_a_leader(&by_product);
    struct worker *w = worker_new();
    combine(&by_product, w, &sales[1].rq, &sales[1].out);
    worker_free(w);
    assert_int_equal(sales[1].answers, 1);
    assert_int_equal(sales[0].answers, 0);
    release_the_leader(thread);
    expect_every_sale_answered_once(2);
}

static void test_across_products_one_batch(void **state)
{
    (void)state;
    for (int i = 0; i < SALES; i++)
        prepare(i, GATED + i);
    queue_behind_a_running_batch(&across, SALES);
    assert_int_equal(batches, 2);
    assert_int_equal(batch_sizes[1], SALES - 1);
    expect_every_sale_answered_once(SALES);
}

static void test_a_thread_that_must_not_block_only_joins(void **state)
{
    (void)state;
    prepare(0, GATED);
    struct worker w = {.must_not_block = 1};
    assert_int_equal(pool_start(2, 16), 0);
    gate_closed = 1; /* the run waits: the answer cannot come from this thread */
    assert_int_equal(combine(&by_product, &w, &sales[0].rq, &sales[0].out), ST_OK);
    assert_int_equal(sales[0].answers, 0);
    pthread_mutex_lock(&gate_lock);
    while (!first_batch_running) /* a pool worker is leading */
        pthread_cond_wait(&gate_changed, &gate_lock);
    gate_closed = 0;
    pthread_cond_broadcast(&gate_changed);
    pthread_mutex_unlock(&gate_lock);
    pool_stop(); /* runs what was queued, then joins */
    expect_every_sale_answered_once(1);
    assert_int_equal(sales[0].result, ST_OK);
}

static void test_a_refused_leader_answers_the_queue(void **state)
{
    (void)state;
    prepare(0, GATED);
    struct worker w = {.must_not_block = 1};
    assert_int_equal(pool_start(1, 16), 0);
    pool_close();
    assert_int_equal(combine(&by_product, &w, &sales[0].rq, &sales[0].out), ST_OK);
    expect_every_sale_answered_once(1);
    assert_int_equal(sales[0].result, ST_SHUTTING_DOWN);
    assert_int_equal(ran, 0);
    pool_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lone_sale_runs_at_once, reset_state),
        cmocka_unit_test_setup(test_sales_arriving_meanwhile_form_the_next_batch, reset_state),
        cmocka_unit_test_setup(test_no_batch_exceeds_batch_max, reset_state),
        cmocka_unit_test_setup(test_expired_sale_is_never_run, reset_state),
        cmocka_unit_test_setup(test_products_queue_apart, reset_state),
        cmocka_unit_test_setup(test_across_products_one_batch, reset_state),
        cmocka_unit_test_setup(test_a_thread_that_must_not_block_only_joins, reset_state),
        cmocka_unit_test_setup(test_a_refused_leader_answers_the_queue, reset_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
