/*
 * unit_pool.c - the worker pool: every queued job runs exactly once, on a
 * worker of its own thread; jobs really run in parallel on different
 * workers (the property races need); the queue is bounded; a closed pool
 * refuses new jobs; stopping drains the queue before joining; and knob
 * jobs take no more than their share of the workers, wait beyond it, are
 * refused beyond their own queue, and never hold up a plain job.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "backend/pool.h"
#include "core/worker.h"

#define WORKERS 4

struct counted {
    struct job job; /* first: run() gets it back */
    atomic_int *runs;
};

static void count_run(struct job *job, struct worker *w)
{
    assert_non_null(w);
    atomic_fetch_add(((struct counted *)(void *)job)->runs, 1);
}

static void test_every_job_runs_once(void **state)
{
    (void)state;
    enum { JOBS = 1000 };
    static struct counted jobs[JOBS];
    atomic_int runs = 0;
    assert_int_equal(pool_start(WORKERS, JOBS), 0);
    for (int i = 0; i < JOBS; i++) {
        jobs[i] = (struct counted){.job = {.run = count_run}, .runs = &runs};
        assert_int_equal(pool_submit(&jobs[i].job), ST_OK);
    }
    pool_stop(); /* drains the queue, then joins */
    assert_int_equal(atomic_load(&runs), JOBS);
}

/* Each job waits at a barrier sized to the number of workers: the barrier
 * only opens if that many jobs run at the same time on different workers,
 * so a pool that ran them one by one would hang here instead of passing. */
static pthread_barrier_t all_workers;

static void meet(struct job *job, struct worker *w)
{
    pthread_barrier_wait(&all_workers);
    count_run(job, w);
}

static void test_jobs_run_in_parallel(void **state)
{
    (void)state;
    static struct counted jobs[WORKERS];
    atomic_int runs = 0;
    pthread_barrier_init(&all_workers, NULL, WORKERS);
    assert_int_equal(pool_start(WORKERS, WORKERS), 0);
    for (int i = 0; i < WORKERS; i++) {
        jobs[i] = (struct counted){.job = {.run = meet}, .runs = &runs};
        assert_int_equal(pool_submit(&jobs[i].job), ST_OK);
    }
    pool_stop();
    pthread_barrier_destroy(&all_workers);
    assert_int_equal(atomic_load(&runs), WORKERS);
}

/* Jobs that hold every worker until released, so the queue fills up. */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opened = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void held(struct job *job, struct worker *w)
{
    pthread_mutex_lock(&gate);
    while (!gate_open)
        pthread_cond_wait(&opened, &gate);
    pthread_mutex_unlock(&gate);
    count_run(job, w);
}

static void open_gate(void)
{
    pthread_mutex_lock(&gate);
    gate_open = 1;
    pthread_cond_broadcast(&opened);
    pthread_mutex_unlock(&gate);
}

/* Waits until `n` workers have taken a job off the queue. */
static void wait_busy(int n)
{
    struct pool_load load;
    do
        pool_load(&load);
    while (load.busy < n);
}

static void test_full_queue_refuses(void **state)
{
    (void)state;
    enum { QUEUE = 3 };
    static struct counted jobs[WORKERS + QUEUE + 1];
    atomic_int runs = 0;
    gate_open = 0;
    assert_int_equal(pool_start(WORKERS, QUEUE), 0);
    for (int i = 0; i < WORKERS + QUEUE + 1; i++)
        jobs[i] = (struct counted){.job = {.run = held}, .runs = &runs};
    for (int i = 0; i < WORKERS; i++) {
        assert_int_equal(pool_submit(&jobs[i].job), ST_OK);
        wait_busy(i + 1);
    }
    for (int i = WORKERS; i < WORKERS + QUEUE; i++)
        assert_int_equal(pool_submit(&jobs[i].job), ST_OK);
    struct pool_load load;
    pool_load(&load);
    assert_int_equal(load.queued, QUEUE);
    assert_int_equal(pool_submit(&jobs[WORKERS + QUEUE].job), ST_OVERLOADED);

    pool_close();
    assert_int_equal(pool_submit(&jobs[WORKERS + QUEUE].job), ST_SHUTTING_DOWN);
    open_gate();
    pool_stop(); /* what was accepted still runs */
    assert_int_equal(atomic_load(&runs), WORKERS + QUEUE);
}

/* Two of four workers for knob jobs, one may wait: the third waits, the
 * fourth is refused, and plain jobs still run on the other two workers
 * while the knob jobs hold theirs. */
static void test_knob_jobs_keep_to_their_share(void **state)
{
    (void)state;
    enum { SHARE = 2 };
    static struct counted knobs[SHARE + 2], plain[2];
    atomic_int knob_runs = 0, plain_runs = 0;
    gate_open = 0;
    pool_limit_knobs(SHARE, 1);
    assert_int_equal(pool_start(WORKERS, 16), 0);
    for (int i = 0; i < SHARE + 2; i++)
        knobs[i] = (struct counted){.job = {.run = held}, .runs = &knob_runs};
    for (int i = 0; i < SHARE; i++) {
        assert_int_equal(pool_submit_knob(&knobs[i].job), ST_OK);
        wait_busy(i + 1);
    }
    assert_int_equal(pool_submit_knob(&knobs[SHARE].job), ST_OK); /* waits */
    assert_int_equal(pool_submit_knob(&knobs[SHARE + 1].job), ST_OVERLOADED);
    struct pool_load load;
    pool_load(&load);
    assert_int_equal(load.busy, SHARE); /* two workers idle, the knob job waits */
    assert_int_equal(load.queued, 1);
    for (int i = 0; i < 2; i++) {
        plain[i] = (struct counted){.job = {.run = count_run}, .runs = &plain_runs};
        assert_int_equal(pool_submit(&plain[i].job), ST_OK);
    }
    while (atomic_load(&plain_runs) < 2) /* they pass the waiting knob job */
        pool_load(&load);
    assert_int_equal(atomic_load(&knob_runs), 0);
    open_gate();
    pool_stop();
    pool_limit_knobs(WORKERS, 16);
    assert_int_equal(atomic_load(&knob_runs), SHARE + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_job_runs_once),
        cmocka_unit_test(test_jobs_run_in_parallel),
        cmocka_unit_test(test_full_queue_refuses),
        cmocka_unit_test(test_knob_jobs_keep_to_their_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
