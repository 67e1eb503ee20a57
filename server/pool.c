/*
 * pool.c - a fixed set of worker threads around one FIFO queue.
 */
#include "pool.h"

#include "log.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
static struct job *head, *tail; /* guarded by queue_lock */
static int stopping;            /* guarded by queue_lock */
static pthread_t *threads;
static int thread_count;

/* Next job, or NULL once stopping and the queue is empty. */
static struct job *next_job(void)
{
    pthread_mutex_lock(&queue_lock);
    while (!head && !stopping)
        pthread_cond_wait(&queue_ready, &queue_lock);
    struct job *job = head;
    if (job) {
        head = job->next;
        if (!head)
            tail = NULL;
    }
    pthread_mutex_unlock(&queue_lock);
    return job;
}

static void *worker_main(void *unused)
{
    (void)unused;
    for (struct job *job; (job = next_job()) != NULL;)
        job->run(job);
    return NULL;
}

int pool_start(int count)
{
    assert(count > 0 && !threads);
    pthread_mutex_lock(&queue_lock);
    assert(!head); /* a stopped pool has drained its queue */
    stopping = 0;
    pthread_mutex_unlock(&queue_lock);
    threads = calloc((size_t)count, sizeof *threads);
    if (!threads)
        return -1;
    for (thread_count = 0; thread_count < count; thread_count++) {
        if (pthread_create(&threads[thread_count], NULL, worker_main, NULL) != 0) {
            log_error("cannot start worker thread %d", thread_count);
            pool_stop();
            return -1;
        }
    }
    return 0;
}

void pool_submit(struct job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&queue_lock);
    assert(!stopping);
    if (tail)
        tail->next = job;
    else
        head = job;
    tail = job;
    pthread_cond_signal(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
}

void pool_stop(void)
{
    pthread_mutex_lock(&queue_lock);
    stopping = 1;
    pthread_cond_broadcast(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
    for (int i = 0; i < thread_count; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    threads = NULL;
    thread_count = 0;
}
