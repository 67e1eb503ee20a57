/*
 * pool.h - the worker threads that run requests.
 *
 * libmicrohttpd's threads only speak HTTP. Each request that reaches a
 * handler is queued here, and the first free worker runs it start to finish
 * with its own backend connections. Why not run handlers on libmicrohttpd's
 * threads directly: a keep-alive connection stays on the thread that
 * accepted it, and one thread may accept a whole burst of connections, so
 * requests that arrive together could be served one after another. With the
 * queue, the number of requests running at once is exactly
 * min(requests in flight, workers) - which is what a race needs to show,
 * every time.
 */
#ifndef STOCKD_POOL_H
#define STOCKD_POOL_H

struct job {
    struct job *next;
    void (*run)(struct job *job);
};

/* Starts `count` workers; 0 on success. A stopped pool can start again. */
int pool_start(int count);

/* Queues `job`; a worker calls job->run(job). */
void pool_submit(struct job *job);

/* Lets the workers finish every queued job, then joins them (their
 * per-thread backend connections close as they exit). */
void pool_stop(void);

#endif
