/*
 * pool.c - a fixed set of worker threads around one bounded FIFO queue,
 * and a second, smaller one for the requests that wait on purpose.
 *
 * A request with hold_ms or pause_ms sleeps on its worker by design. Left in
 * the one queue, a burst of them (whose clients may be long gone) would
 * take every worker for seconds, and every other request would wait behind
 * them. So they queue in a lane of their own: at most `knob_running` of
 * them run at once, whatever waits, and the rest of the workers stay free
 * for everything else. A worker takes the older of the two queues' heads
 * (each job carries its arrival number), the knob lane's only while it has
 * a free share.
 */
#include "backend/pool.h"

#include "backend/backend.h"
#include "core/log.h"
#include "core/worker.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
/* A FIFO queue of jobs. */
struct lane {
    struct job *head, *tail;
    int queued, limit;
};
/* Guarded by queue_lock: */
static struct lane plain, knobs;
static int queue_limit, closed, running_threads;  /* queue_limit: both lanes together */
static int knob_running, knob_running_limit = -1; /* -1: every worker */
static int knob_queue_limit = -1;                 /* -1: queue_max     */
static unsigned long long arrivals;
/* Workers running a job: counted outside the lock, which a finished job
 * then need not take. */
static atomic_int busy;
static pthread_t *threads;
static int thread_count;
/* Whether this thread is a worker counted in `busy` right now. */
static __thread int counted_busy;

static void lane_push(struct lane *l, struct job *job)
{
    job->next = NULL;
    if (l->tail)
        l->tail->next = job;
    else
        l->head = job;
    l->tail = job;
    l->queued++;
}

static struct job *lane_pop(struct lane *l)
{
    struct job *job = l->head;
    l->head = job->next;
    if (!l->head)
        l->tail = NULL;
    l->queued--;
    return job;
}

/* The lane whose head a worker may take now (the older head of the two),
 * or NULL. Under queue_lock. */
static struct lane *ready_lane(void)
{
    int knob_ready = knobs.head && knob_running < knob_running_limit;
    if (plain.head && (!knob_ready || plain.head->arrival < knobs.head->arrival))
        return &plain;
    return knob_ready ? &knobs : NULL;
}

/* Next job, or NULL once closed and both queues are empty. */
static struct job *next_job(void)
{
    pthread_mutex_lock(&queue_lock);
    struct lane *l;
    while (!(l = ready_lane()) && !(closed && !plain.head && !knobs.head))
        pthread_cond_wait(&queue_ready, &queue_lock);
    struct job *job = l ? lane_pop(l) : NULL;
    if (job) {
        knob_running += job->knob;
        atomic_fetch_add_explicit(&busy, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&queue_lock);
    return job;
}

/* A knob job's worker is free again: the lane may start another. */
static void knob_done(void)
{
    pthread_mutex_lock(&queue_lock);
    knob_running--;
    if (knobs.head)
        pthread_cond_broadcast(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
}

static void *worker_main(void *unused)
{
    (void)unused;
    struct worker *w = worker_new();
    for (struct job *job; (job = next_job()) != NULL;) {
        counted_busy = 1;
        int knob = job->knob; /* `job` may be freed once it has run */
        job->run(job, w);
        pool_job_answering();
        if (knob)
            knob_done();
    }
    backends_close(w);
    worker_free(w);
    return NULL;
}

int pool_start(int workers, int queue_max)
{
    assert(workers > 0 && queue_max > 0 && !threads);
    pthread_mutex_lock(&queue_lock);
    assert(!plain.head && !knobs.head); /* a stopped pool has drained its queues */
    closed = 0;
    queue_limit = plain.limit = queue_max;
    knobs.limit = knob_queue_limit > 0 ? knob_queue_limit : queue_max;
    if (knob_running_limit <= 0 || knob_running_limit > workers)
        knob_running_limit = workers;
    running_threads = workers;
    pthread_mutex_unlock(&queue_lock);
    threads = calloc((size_t)workers, sizeof *threads);
    if (!threads)
        return -1;
    for (thread_count = 0; thread_count < workers; thread_count++) {
        if (pthread_create(&threads[thread_count], NULL, worker_main, NULL) != 0) {
            log_error("cannot start worker thread %d", thread_count);
            pool_stop();
            return -1;
        }
    }
    return 0;
}

const char *pool_refusal(st_result r)
{
    return r == ST_OVERLOADED ? "every worker is busy and the queue is full" : "stockd is stopping";
}

void pool_limit_knobs(int running, int waiting)
{
    pthread_mutex_lock(&queue_lock);
    knob_running_limit = running;
    knob_queue_limit = waiting;
    pthread_mutex_unlock(&queue_lock);
}

static st_result submit(struct lane *l, struct job *job, int knob)
{
    job->knob = knob;
    pthread_mutex_lock(&queue_lock);
    st_result r = closed ? ST_SHUTTING_DOWN
                  : l->queued >= l->limit || plain.queued + knobs.queued >= queue_limit
                      ? ST_OVERLOADED
                      : ST_OK;
    if (r == ST_OK) {
        job->arrival = arrivals++;
        lane_push(l, job);
        /* A knob job may not be takeable yet: every waiting worker looks. */
        if (knob)
            pthread_cond_broadcast(&queue_ready);
        else
            pthread_cond_signal(&queue_ready);
    }
    pthread_mutex_unlock(&queue_lock);
    return r;
}

st_result pool_submit(struct job *job)
{
    return submit(&plain, job, 0);
}

st_result pool_submit_knob(struct job *job)
{
    return submit(&knobs, job, 1);
}

void pool_close(void)
{
    pthread_mutex_lock(&queue_lock);
    closed = 1;
    pthread_cond_broadcast(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
}

void pool_stop(void)
{
    pool_close();
    for (int i = 0; i < thread_count; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    threads = NULL;
    thread_count = 0;
    pthread_mutex_lock(&queue_lock);
    running_threads = 0;
    pthread_mutex_unlock(&queue_lock);
}

void pool_job_answering(void)
{
    if (counted_busy) {
        counted_busy = 0;
        atomic_fetch_sub_explicit(&busy, 1, memory_order_relaxed);
    }
}

void pool_load(struct pool_load *out)
{
    pthread_mutex_lock(&queue_lock);
    *out = (struct pool_load){.workers = running_threads,
                              .busy = atomic_load_explicit(&busy, memory_order_relaxed),
                              .queued = plain.queued + knobs.queued};
    pthread_mutex_unlock(&queue_lock);
}
