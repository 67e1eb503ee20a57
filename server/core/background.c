/*
 * background.c - starting, pausing and stopping a concern's background
 * threads (background.h says why there is one way).
 *
 * A pause is a timed wait on `wake` under `lock`, so a stop that sets
 * `stopping` and broadcasts under the same lock ends every pause at once:
 * no thread sleeps through its stop, and a stop waits for no period.
 */
#include "core/background.h"

#include "core/log.h"
#include "core/worker.h"

#include <assert.h>
#include <string.h>

/* Makes `wake` and clears `stopping`, before the first thread starts. */
static void background_make(struct background *bg)
{
    assert(!bg->made && bg->threads == 0);
    cond_init_monotonic(&bg->wake);
    bg->stopping = 0;
    bg->made = 1;
}

int background_start(struct background *bg, const char *name, void *(*main)(void *), void *arg)
{
    if (!bg->made)
        background_make(bg);
    assert(bg->threads < BACKGROUND_THREADS_MAX);
    int err = pthread_create(&bg->thread[bg->threads], NULL, main, arg);
    if (err != 0) {
        log_error("cannot start %s: %s", name, strerror(err));
        return -1;
    }
    bg->threads++;
    return 0;
}

int background_pause(struct background *bg, long long ms)
{
    struct timespec until = time_in_ms(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&bg->lock);
    while (!bg->stopping && pthread_cond_timedwait(&bg->wake, &bg->lock, &until) == 0)
        ;
    int go_on = !bg->stopping;
    pthread_mutex_unlock(&bg->lock);
    return go_on;
}

int background_stopping(struct background *bg)
{
    pthread_mutex_lock(&bg->lock);
    int stopping = bg->stopping;
    pthread_mutex_unlock(&bg->lock);
    return stopping;
}

void background_stop(struct background *bg)
{
    if (!bg->made)
        return;
    pthread_mutex_lock(&bg->lock);
    bg->stopping = 1;
    pthread_cond_broadcast(&bg->wake);
    pthread_mutex_unlock(&bg->lock);
    for (int i = 0; i < bg->threads; i++)
        pthread_join(bg->thread[i], NULL);
    bg->threads = 0;
    pthread_cond_destroy(&bg->wake);
    bg->made = 0;
}
