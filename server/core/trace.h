/*
 * trace.h - what one sale did, for a deduct asked with trace=1.
 *
 * A class sees a strategy's race in the trace of each sale: the value it
 * read, the value it wrote or the conditional update it ran, its lock
 * token, and when each step happened on the server's one monotonic clock.
 * The request carries a pointer to its trace (deduct_request.trace), NULL
 * when none was asked for, so the shared places that know a step fill it
 * in - the store reads (count_covers), the writes (sale_commit,
 * redis_sale_exec), the lock composition (lock.c), the Lua script's result
 * and the batch - and with no trace the whole cost is one NULL test per
 * step: no allocation, no clock read. A field nobody filled is left out
 * of the reply, never guessed.
 */
#ifndef STOCKD_TRACE_H
#define STOCKD_TRACE_H

#include <jansson.h>
#include <limits.h>

/* The moments of a sale, in the order they happen. */
enum trace_mark {
    TRACE_ARRIVAL,       /* the request's first byte          */
    TRACE_LOCK_ACQUIRED, /* the lock (or the row lock) is held */
    TRACE_READ,          /* the count was read                 */
    TRACE_WRITE,         /* the write was sent                 */
    TRACE_COMMIT,        /* the write is committed             */
    TRACE_ANSWER,        /* the reply is built                 */
    TRACE_MARKS
};

/* A value the sale did not learn. */
#define TRACE_UNKNOWN LLONG_MIN

struct sale_trace {
    long long t_us[TRACE_MARKS]; /* monotonic microseconds; 0: not reached */
    long long read;              /* the count the sale read                */
    long long wrote;             /* the count it wrote, or the store reported after */
    long long version;           /* the version its compare-and-set carried */
    const char *update;          /* the statement or script that did the deduction */
    char lock_token[33];         /* the lock holder's identity, "" if none */
};

/* An empty trace for a request that arrived at `arrived_us`. */
void trace_begin(struct sale_trace *t, long long arrived_us);

/* Stamps `mark` with the time now - when a trace was asked for. */
void trace_mark(struct sale_trace *t, enum trace_mark mark);

/* The trace as the reply's "trace" object, with the reply's own
 * attempts, fence and batch (new reference). */
json_t *trace_json(const struct sale_trace *t, int attempts, long long fence, int batch);

#endif
