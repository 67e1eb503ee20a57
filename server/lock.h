/*
 * lock.h - a lock strategy is a lock kind plus the shared nolock body.
 *
 * deduct_under_lock() acquires, runs read_then_write(), and releases, so
 * every lock guards the very same read-then-write and differs only in how
 * it excludes other holders. A lock kind answers three questions: how to
 * take it (within lock_wait_ms, else ST_BUSY), how to give it back (and
 * whether it was still ours), and, optionally, how to freeze its
 * background renewal during a simulated pause.
 */
#ifndef STOCKD_LOCK_H
#define STOCKD_LOCK_H

#include "strategy.h"

struct worker;

struct held_lock {
    const struct lock_kind *kind;
    char token[33];   /* this holder's identity, from the OS random source */
    long long fence;  /* fencing token handed out with the lock, 0 if none */
    int attempts;     /* tries it took to acquire                          */
    void *state;      /* the kind's own bookkeeping (watchdog, node path)  */
};

struct lock_kind {
    st_result (*acquire)(struct worker *w, const struct deduct_request *rq, struct held_lock *held);
    /* Sets *lost when the lock had expired or belonged to someone else. */
    st_result (*release)(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost);
    /* Optional: stop (1) or resume (0) background renewal. */
    void (*freeze)(struct held_lock *held, int frozen);
};

st_result deduct_under_lock(const struct lock_kind *kind, struct worker *w,
                            const struct deduct_request *rq, struct deduct_reply *out);

/* Retries `try_once` with jittered, growing sleeps until it succeeds, fails,
 * or lock_wait_ms has passed (then ST_BUSY, "not acquired within N ms").
 * try_once sets *taken when it got the lock. */
st_result lock_poll(struct worker *w, struct held_lock *held, const char *what,
                    st_result (*try_once)(struct worker *, const struct deduct_request *,
                                          struct held_lock *, int *taken),
                    const struct deduct_request *rq);

#endif
