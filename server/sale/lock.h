/*
 * lock.h - a lock strategy is a lock kind plus the shared sale body.
 *
 * A lock strategy names its lock kind in its table row (`.lock`), and
 * deduct_under_lock() acquires, runs read_then_write() on the row's store,
 * and releases: every lock guards the very same read-then-write and differs
 * only in how it excludes other holders. A lock kind answers: where it
 * lives (a backend, and the names a reset must delete there), how to take
 * it (one try, polled until lock_wait_ms; or a wait of its own), how to give
 * it back (and whether it was still ours), and, optionally, how to freeze
 * its background renewal during a simulated pause and what to forget when
 * the product turned out not to exist.
 */
#ifndef STOCKD_LOCK_H
#define STOCKD_LOCK_H

#include "backend/backend.h"
#include "backend/redis.h"
#include "sale/sale.h"

#include <pthread.h>

struct worker;

struct held_lock {
    const struct lock_kind *kind;
    char token[33];     /* this holder's identity, from the OS random source */
    struct guard guard; /* what the body sees: the fencing token, the freeze */
    int attempts;       /* tries it took to acquire                          */
    void *state;        /* the kind's own bookkeeping (watchdog, node path)  */
    /* Set by release when the body was refused for a reason release has
     * just removed (fenced: a token counter that had fallen behind the
     * store's and has caught up): deduct_under_lock() runs one more round. */
    int again;
};

/* The most names one lock kind keeps per product, and their longest text. */
#define LOCK_NAMES_MAX 4
#define LOCK_NAME_MAX 64

struct lock_kind {
    const char *name; /* for messages: "redis lock not acquired within 5000 ms" */
    /* Where the lock lives: BACKEND_COUNT for a lock in the process. */
    enum backend_id backend;
    /* What a reset deletes there, as printf formats of the product id
     * ("lock:{%d}"): keys, lock-table rows or nodes. NULL-terminated. */
    const char *names[LOCK_NAMES_MAX + 1];
    /* The lock holds held->token as its holder's identity: a trace shows
     * it. (A mutex or GET_LOCK knows its holder without one.) */
    int tokens;
    /* It hands out fencing tokens (held->guard.fence): the store must
     * claim them. */
    int fences;
    /* One attempt to take the lock, setting *taken. deduct_under_lock()
     * repeats it with jittered, growing sleeps for up to lock_wait_ms, then
     * answers ST_BUSY. */
    st_result (*try_once)(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                          int *taken);
    /* Instead of try_once, for locks that wait in their own way (a mutex,
     * a ZooKeeper watch, a pub/sub message): take it before
     * lock_wait_deadline() or answer lock_wait_expired(). */
    st_result (*acquire)(struct worker *w, const struct deduct_request *rq, struct held_lock *held);
    /* Sets *lost when the lock had expired or belonged to someone else. */
    st_result (*release)(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost);
    /* Optional: stop (1) or resume (0) background renewal. */
    void (*freeze)(struct held_lock *held, int frozen);
    /* Optional: after release, when the body found no such product: delete
     * what taking the lock left behind that outlives it (a fence counter,
     * a queue's parent node), so unknown products leave nothing. */
    void (*forget)(struct worker *w, const struct deduct_request *rq, struct held_lock *held);
};

/* redis-lock's lock (SET NX PX, compare-and-delete release), which
 * redis-lock-wait follows with a WAIT. */
extern const struct lock_kind lock_redis_set_nx;

st_result deduct_under_lock(const struct lock_kind *kind, const struct store *store,
                            struct worker *w, const struct deduct_request *rq,
                            struct deduct_reply *out);

/* When a lock wait that starts now must end: lock_wait_ms from now, or the
 * request's own deadline if that comes first. */
long long lock_wait_deadline(struct worker *w);

/* Why a lock wait ended without the lock: ST_TIMEOUT when the request's
 * deadline was reached, else ST_BUSY ("<what> not acquired within ..."). */
st_result lock_wait_expired(struct worker *w, const char *what);

/* Locks `mutex`, waiting until lock_wait_deadline() (then
 * lock_wait_expired()). */
st_result mutex_lock_within_wait(struct worker *w, pthread_mutex_t *mutex);

/* Releases a Redis lease: deletes `key` on `link` only if it still holds
 * `token` (a Lua compare-and-delete), so a holder whose lease expired
 * cannot delete the next holder's. *lost says it was no longer ours. */
st_result redis_lease_release(struct worker *w, struct redis_link *link, const char *key,
                              const char *token, int *lost);

/* The `which`-th name of `kind`'s state for `product` (kind->names[which]
 * filled in): the one text the lock uses and a reset deletes. */
void lock_state_name(char out[LOCK_NAME_MAX], const struct lock_kind *kind, int which, int product);

#endif
