/*
 * keys_running.c - the keys running here, a hash set under one mutex.
 *
 * The set holds one entry per keyed sale in flight, a few hundred at most:
 * chains off a fixed table are short, and a mutex held for a string
 * compare or two costs less than the sale's round trip to its store.
 */
#include "api/keys_running.h"

#include "core/worker.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 1024

struct running {
    struct running *next;
    char key[]; /* NUL-terminated */
};

static struct running *buckets[BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a: any spread will do, the keys are the clients'. */
static unsigned bucket_of(const char *key)
{
    unsigned h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)key; *c; c++)
        h = (h ^ *c) * 16777619u;
    return h % BUCKETS;
}

static struct running **find(struct running **at, const char *key)
{
    while (*at && strcmp((*at)->key, key) != 0)
        at = &(*at)->next;
    return at;
}

st_result keys_running_begin(struct worker *w, const char *key)
{
    assert(key && *key);
    size_t len = strlen(key) + 1;
    struct running *entry = malloc(sizeof *entry + len);
    if (!entry)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "out of memory keeping an Idempotency-Key");
    memcpy(entry->key, key, len);
    pthread_mutex_lock(&lock);
    struct running **at = find(&buckets[bucket_of(key)], key);
    int taken = *at != NULL;
    if (!taken) {
        entry->next = NULL;
        *at = entry;
    }
    pthread_mutex_unlock(&lock);
    if (!taken)
        return ST_OK;
    free(entry);
    return worker_fail(w, ST_IN_PROGRESS,
                       "a request with this Idempotency-Key is still running; retry later");
}

void keys_running_end(const char *key)
{
    pthread_mutex_lock(&lock);
    struct running **at = find(&buckets[bucket_of(key)], key);
    struct running *done = *at;
    assert(done); /* every end follows its begin */
    if (done)
        *at = done->next;
    pthread_mutex_unlock(&lock);
    free(done);
}
