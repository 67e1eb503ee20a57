/*
 * backend.h - the table of every backend stockd talks to.
 *
 * A backend is a server stockd holds connections to: MySQL, the main Redis,
 * the Redlock servers, ZooKeeper. Each one is a file of its own (the
 * connections and the commands: backend/mysql.c, backend/redis.c, redlock.c,
 * backend/zookeeper.c) that defines one `const struct backend`, and the table in
 * backend.c lists them, the way strategy.c lists strategies. Everything that
 * has to go over every backend - the health probes, dropping dead links
 * before a request, closing a thread's links, clearing a product's lock
 * state on reset - walks the table instead of naming backends.
 *
 * A worker (worker.h) keeps one slot per backend, indexed by enum
 * backend_id, that the backend's file fills with its own per-thread
 * connections on first use. So worker.c knows nothing about any backend:
 * the dependency runs from the backends to the worker, never back.
 */
#ifndef STOCKD_BACKEND_H
#define STOCKD_BACKEND_H

#include "core/backend_id.h"
#include "core/result.h"

#include <jansson.h>

struct worker;

struct backend {
    const char *name; /* as /health, /strategies and /metrics name it */
    /* Whether stockd is set up to use it; NULL: always (the stores). */
    int (*configured)(void);
    /* Connects this worker if needed and asks the server something. */
    st_result (*ping)(struct worker *w);
    /* Before a request: drops this worker's links that the server closed
     * while they were idle (a zero-timeout poll, no round trip). */
    void (*drop_if_closed)(struct worker *w);
    /* Closes and frees this worker's links: its thread is done. */
    void (*close)(struct worker *w);
    /* Deletes lock state of one product: `names` are the keys, rows or
     * nodes that the lock kinds living on this backend declared, already
     * formatted for the product. NULL: nothing lives there. */
    st_result (*clear)(struct worker *w, const char *const *names, int count);
    /* Optional: adds details (its servers) to the backend's /health entry. */
    void (*describe)(json_t *state);
};

/* The backend `id`; never NULL. */
const struct backend *backend_at(enum backend_id id);

/* Whether backend `id` is configured. */
int backend_configured(enum backend_id id);

/* The backends of `set`, by name, as a JSON array (new reference). */
json_t *backend_set_json(backend_set set);

/* Every backend's drop_if_closed on this worker. */
void backends_drop_dead_links(struct worker *w);

/* Every backend's close on this worker: call before worker_free(). */
void backends_close(struct worker *w);

#endif
