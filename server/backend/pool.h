/*
 * pool.h - the worker threads that run requests, behind one bounded queue.
 *
 * The HTTP loops only speak HTTP (and Redis, for a lua sale). Each request that needs a
 * backend is queued here, and the first free worker runs it start to finish
 * with its own backend connections (worker.h). Why not run such requests on
 * the loops: a keep-alive connection stays on the loop that accepted it,
 * and one loop may accept a whole burst of connections, so
 * requests that arrive together could be served one after another. With the
 * queue, the number of requests running at once is exactly
 * min(requests in flight, workers) - which is what a race needs to show,
 * every time.
 *
 * The queue is bounded: a full queue refuses a job at once (the caller
 * answers 503 overloaded) instead of letting a burst queue for minutes.
 */
#ifndef STOCKD_POOL_H
#define STOCKD_POOL_H

#include "core/result.h"

struct worker;

struct job {
    struct job *next;
    unsigned long long arrival; /* set by the pool: its place in arrival order */
    int knob;                   /* set by the pool: queued in the knob lane    */
    /* Runs on a worker thread, with that thread's worker. */
    void (*run)(struct job *job, struct worker *w);
};

/* Starts `workers` threads and a queue of at most `queue_max` waiting
 * jobs; 0 on success. A stopped pool can start again. */
int pool_start(int workers, int queue_max);

/* Queues `job`: ST_OK; ST_OVERLOADED when the queue is full;
 * ST_SHUTTING_DOWN once pool_close() was called. */
st_result pool_submit(struct job *job);

/* Queues `job` in the knob lane, for a request that waits on purpose
 * (hold_ms, pause_ms): at most `running` such jobs run at once, at most
 * `waiting` wait; beyond that ST_OVERLOADED, as pool_submit(). */
st_result pool_submit_knob(struct job *job);

/* Sets the knob lane's bounds for the next pool_start() (by default every
 * worker and queue_max). */
void pool_limit_knobs(int running, int waiting);

/* Why pool_submit() refused with `r`, for the reply's message. */
const char *pool_refusal(st_result r);

/* Refuses every later pool_submit(); queued jobs still run. */
void pool_close(void);

/* Closes the pool, lets the workers finish every queued job, then joins
 * them (each closes its backend links as it exits). */
void pool_stop(void);

/* Called by a job about to answer its request: from now on this worker
 * no longer counts as busy, so that nobody who got the answer can still
 * see it busy. Once per job; a no-op on any other thread. */
void pool_job_answering(void);

/* How loaded the pool is right now. */
struct pool_load {
    int workers; /* threads                              */
    int busy;    /* running a job                        */
    int queued;  /* jobs waiting for a worker            */
};
void pool_load(struct pool_load *out);

#endif
