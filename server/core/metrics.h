/*
 * metrics.h - what stockd counts while it runs.
 *
 * Counting is on the request path, so it costs one relaxed atomic add per
 * figure and takes no lock: counters and histogram buckets are atomics in
 * fixed arrays indexed by strategy (its place in the strategy table) and
 * result. This module knows nothing else - no names, no table - so that
 * anything may count, the stores included; exposition.c renders the
 * figures for GET /metrics and the lab page.
 */
#ifndef STOCKD_METRICS_H
#define STOCKD_METRICS_H

#include "core/result.h"

#include <stddef.h>

/* The most strategies and backends counted (strategy.c and backend.c
 * check that theirs fit). */
#define METRICS_STRATEGIES 32
#define METRICS_BACKENDS 8

/* Latency buckets: upper bounds in seconds, from 0.5 ms to 10 s, then +Inf. */
#define METRICS_LATENCY_BOUNDS 14
extern const double metrics_latency_le[METRICS_LATENCY_BOUNDS];
/* Sales per batch (combine.h): upper bounds, then +Inf. */
#define METRICS_BATCH_BOUNDS 9
extern const double metrics_batch_le[METRICS_BATCH_BOUNDS];

/* A histogram as read: buckets not cumulative, the last one +Inf. */
struct histogram_reading {
    unsigned long long bucket[METRICS_LATENCY_BOUNDS + 1];
    unsigned long long count;
    unsigned long long sum; /* microseconds, or sales for the batch sizes */
};

/* One deduct request of strategy number `strategy`, answered `r` after
 * `elapsed_us` from its arrival. */
void metrics_deduct(size_t strategy, st_result r, long long elapsed_us);

/* A lock strategy's sale took `wait_us` to get its lock, and found it
 * expired or taken over at release when `lost`. */
void metrics_lock(size_t strategy, long long wait_us, int lost);

/* An optimistic strategy's sale took `attempts` tries. */
void metrics_attempts(size_t strategy, int attempts);

/* A worker connected to backend number `backend` again, after its link had
 * failed or been dropped. */
void metrics_reconnect(int backend);

/* One batch of strategy `strategy` (a transaction, a pipeline: combine.h)
 * carried `sales` sales. */
void metrics_batch(size_t strategy, int sales);

/* Requests between their first byte and their reply (http.c keeps it). */
void metrics_in_flight(int delta);

/* What happened to HTTP connections outside any answered request. */
enum http_event {
    HTTP_PROTOCOL_ERROR, /* libmicrohttpd gave up on a connection: a request
                            it could not parse, a client gone mid-request */
    HTTP_HEAD_DEADLINE,  /* closed: no whole request in time              */
    HTTP_CLIENT_GONE,    /* a queued request dropped: its client had gone  */
    HTTP_EVENT_COUNT
};
void metrics_http(enum http_event e);

/* Reading them back. */
unsigned long long metrics_http_of(enum http_event e);
unsigned long long metrics_requests(size_t strategy, st_result r);
void metrics_latency(size_t strategy, struct histogram_reading *out);
void metrics_lock_wait(size_t strategy, struct histogram_reading *out);
unsigned long long metrics_locks_lost(size_t strategy);
unsigned long long metrics_attempts_of(size_t strategy);
unsigned long long metrics_reconnects(int backend);
void metrics_batches(size_t strategy, struct histogram_reading *out);
int metrics_in_flight_now(void);

#endif
