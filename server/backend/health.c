/*
 * health.c - the background probes and what they last saw.
 */
#include "backend/health.h"

#include "core/background.h"
#include "core/log.h"
#include "core/worker.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct probe {
    enum backend_id id;
    int running; /* its probe thread was started */
    /* Guarded by `lock`: */
    int answered; /* a probe has finished at least once     */
    int up;
    long long at_ms; /* when the last probe finished         */
    char message[256];
};

static struct probe probes[BACKEND_COUNT];
/* The probe threads; `probing.lock` guards the probes' answers, and
 * `probing.wake` is signalled at each answer as well as at the stop. */
static struct background probing = BACKGROUND_INIT;

static void record(struct probe *p, st_result r, const char *message)
{
    pthread_mutex_lock(&probing.lock);
    int was_up = p->up, first = !p->answered;
    p->answered = 1;
    p->up = r == ST_OK;
    p->at_ms = monotonic_ms();
    snprintf(p->message, sizeof p->message, "%s", r == ST_OK ? "" : message);
    pthread_cond_broadcast(&probing.wake);
    pthread_mutex_unlock(&probing.lock);
    if (!first && was_up != (r == ST_OK))
        log_info("health: %s is %s%s%s", backend_at(p->id)->name, r == ST_OK ? "up" : "down",
                 r == ST_OK ? "" : ": ", r == ST_OK ? "" : message);
}

static void *probe_main(void *arg)
{
    struct probe *p = arg;
    const struct backend *b = backend_at(p->id);
    struct worker *w = worker_new();
    do {
        w->error[0] = '\0';
        if (b->drop_if_closed)
            b->drop_if_closed(w);
        st_result r = b->ping(w);
        record(p, r, w->error);
    } while (background_pause(&probing, HEALTH_PERIOD_MS));
    backends_close(w);
    worker_free(w);
    return NULL;
}

static int all_answered(void)
{
    for (int id = 0; id < BACKEND_COUNT; id++)
        if (probes[id].running && !probes[id].answered)
            return 0;
    return 1;
}

int health_start(void)
{
    for (int id = 0; id < BACKEND_COUNT; id++) {
        probes[id] = (struct probe){.id = (enum backend_id)id};
        if (!backend_configured((enum backend_id)id))
            continue;
        char name[64];
        snprintf(name, sizeof name, "the %s health probe", backend_at((enum backend_id)id)->name);
        if (background_start(&probing, name, probe_main, &probes[id]) != 0)
            return -1; /* health_stop() stops the probes already started */
        probes[id].running = 1;
    }
    /* The first answers, so that /health is right from the first request. */
    pthread_mutex_lock(&probing.lock);
    while (!all_answered())
        pthread_cond_wait(&probing.wake, &probing.lock);
    pthread_mutex_unlock(&probing.lock);
    return 0;
}

void health_stop(void)
{
    background_stop(&probing);
    for (int id = 0; id < BACKEND_COUNT; id++)
        probes[id].running = 0;
}

json_t *health_json(int *all_up, char *down, size_t down_size)
{
    json_t *states = json_object();
    long long now = monotonic_ms(), oldest = 0;
    size_t listed = 0;
    *all_up = 1;
    down[0] = '\0';
    pthread_mutex_lock(&probing.lock);
    for (int id = 0; id < BACKEND_COUNT; id++) {
        const struct probe *p = &probes[id];
        if (!p->running)
            continue;
        const struct backend *b = backend_at(p->id);
        long long age = now - p->at_ms;
        json_t *state =
            json_pack("{s:s, s:I}", "state", p->up ? "up" : "down", "age_ms", (json_int_t)age);
        if (!p->up) {
            json_object_set_new(state, "message", json_string(p->message));
            if (listed < down_size)
                listed += (size_t)snprintf(down + listed, down_size - listed, "%s%s",
                                           listed ? ", " : "", b->name);
        }
        if (b->describe)
            b->describe(state);
        json_object_set_new(states, b->name, state);
        *all_up &= p->up;
        oldest = age > oldest ? age : oldest;
    }
    pthread_mutex_unlock(&probing.lock);
    json_t *doc = json_pack("{s:b, s:I}", "ok", *all_up, "age_ms", (json_int_t)oldest);
    json_object_set_new(doc, "backends", states);
    return doc;
}

int health_up(enum backend_id id)
{
    pthread_mutex_lock(&probing.lock);
    int up = probes[id].running && probes[id].up;
    pthread_mutex_unlock(&probing.lock);
    return up;
}
