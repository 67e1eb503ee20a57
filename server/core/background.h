/*
 * background.h - the threads of one concern that run beside the requests:
 * the health probes, the products sampler, the Redis Cluster's map keeper,
 * the order stream's consumers.
 *
 * Each such concern has one `struct background`: the lock that guards the
 * threads' state and their owner's, the condition they pause on, whether
 * they are asked to stop, and the threads to join. Written once here so
 * that every such thread starts, pauses and stops the same way: a start
 * that fails says which thread in the log, a stop wakes every pause at once
 * and joins every thread started, and the same concern may start again
 * after its stop. Initialise with BACKGROUND_INIT; `lock` may guard the
 * owner's state too.
 */
#ifndef STOCKD_BACKGROUND_H
#define STOCKD_BACKGROUND_H

#include <pthread.h>

#define BACKGROUND_THREADS_MAX 64

struct background {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC; signalled under `lock` */
    int stopping;        /* guarded by `lock` */
    int made;            /* `wake` is made: a thread may have started, a stop has work */
    int threads;
    pthread_t thread[BACKGROUND_THREADS_MAX];
};
#define BACKGROUND_INIT                                                                            \
    {                                                                                              \
        .lock = PTHREAD_MUTEX_INITIALIZER                                                          \
    }

/* Starts one more thread of `bg` running main(arg); the first one since
 * the last stop makes `wake` and clears `stopping`. -1, after logging that
 * `name` ("the products sampler") cannot start, when it cannot; the ones
 * already started still stop with background_stop(). */
int background_start(struct background *bg, const char *name, void *(*main)(void *), void *arg);

/* A thread's pause: waits `ms` unless a stop comes first; returns whether
 * it is still not stopping. */
int background_pause(struct background *bg, long long ms);

/* Whether a stop has been asked, read under the lock. */
int background_stopping(struct background *bg);

/* Sets `stopping`, wakes every pause, joins every thread started, and
 * unmakes `wake`. Does nothing when no thread was started. */
void background_stop(struct background *bg);

#endif
