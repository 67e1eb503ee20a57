/*
 * unit_pool.c - the worker pool: every queued job runs exactly once, jobs
 * really run in parallel on different workers (the property races need),
 * and stopping drains the queue before joining.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "pool.h"

#define WORKERS 4

struct counted {
    struct job job; /* first: run() gets it back */
    atomic_int *runs;
};

static void count_run(struct job *job)
{
    atomic_fetch_add(((struct counted *)(void *)job)->runs, 1);
}

static void test_every_job_runs_once(void **state)
{
    (void)state;
    enum { JOBS = 1000 };
    static struct counted jobs[JOBS];
    atomic_int runs = 0;
    assert_int_equal(pool_start(WORKERS), 0);
    for (int i = 0; i < JOBS; i++) {
        jobs[i] = (struct counted){.job = {.run = count_run}, .runs = &runs};
        pool_submit(&jobs[i].job);
    }
    pool_stop(); /* drains the queue, then joins */
    assert_int_equal(atomic_load(&runs), JOBS);
}

/* Each job waits at a barrier sized to the number of workers: the barrier
 * only opens if that many jobs run at the same time on different workers,
 * so a pool that ran them one by one would hang here instead of passing. */
static pthread_barrier_t all_workers;

static void meet(struct job *job)
{
    pthread_barrier_wait(&all_workers);
    count_run(job);
}

static void test_jobs_run_in_parallel(void **state)
{
    (void)state;
    static struct counted jobs[WORKERS];
    atomic_int runs = 0;
    pthread_barrier_init(&all_workers, NULL, WORKERS);
    assert_int_equal(pool_start(WORKERS), 0);
    for (int i = 0; i < WORKERS; i++) {
        jobs[i] = (struct counted){.job = {.run = meet}, .runs = &runs};
        pool_submit(&jobs[i].job);
    }
    pool_stop();
    pthread_barrier_destroy(&all_workers);
    assert_int_equal(atomic_load(&runs), WORKERS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_job_runs_once),
        cmocka_unit_test(test_jobs_run_in_parallel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
