/*
 * pool.c - a fixed set of worker threads around one bounded FIFO queue.
 */
#include "pool.h"

#include "backend.h"
#include "log.h"
#include "worker.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
/* Guarded by queue_lock: */
static struct job *head, *tail;
static int queued, queue_limit, closed, running_threads;
/* Workers running a job: counted outside the lock, which a finished job
 * then need not take. */
static atomic_int busy;
static pthread_t *threads;
static int thread_count;
/* Whether this thread is a worker counted in `busy` right now. */
static __thread int counted_busy;

/* Next job, or NULL once closed and the queue is empty. */
static struct job *next_job(void)
{
    pthread_mutex_lock(&queue_lock);
    while (!head && !closed)
        pthread_cond_wait(&queue_ready, &queue_lock);
    struct job *job = head;
    if (job) {
        head = job->next;
        if (!head)
            tail = NULL;
        queued--;
        atomic_fetch_add_explicit(&busy, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&queue_lock);
    return job;
}

static void *worker_main(void *unused)
{
    (void)unused;
    struct worker *w = worker_new();
    for (struct job *job; (job = next_job()) != NULL;) {
        counted_busy = 1;
        job->run(job, w);
        pool_job_answering();
    }
    backends_close(w);
    worker_free(w);
    return NULL;
}

int pool_start(int workers, int queue_max)
{
    assert(workers > 0 && queue_max > 0 && !threads);
    pthread_mutex_lock(&queue_lock);
    assert(!head && queued == 0); /* a stopped pool has drained its queue */
    closed = 0;
    queue_limit = queue_max;
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

st_result pool_submit(struct job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&queue_lock);
    st_result r = closed ? ST_SHUTTING_DOWN : queued >= queue_limit ? ST_OVERLOADED : ST_OK;
    if (r == ST_OK) {
        if (tail)
            tail->next = job;
        else
            head = job;
        tail = job;
        queued++;
        pthread_cond_signal(&queue_ready);
    }
    pthread_mutex_unlock(&queue_lock);
    return r;
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
                              .queued = queued};
    pthread_mutex_unlock(&queue_lock);
}
