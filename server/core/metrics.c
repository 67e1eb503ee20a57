/*
 * metrics.c - the counters and histograms, as relaxed atomics.
 */
#include "core/metrics.h"

#include <stdatomic.h>

const double metrics_latency_le[METRICS_LATENCY_BOUNDS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
const double metrics_batch_le[METRICS_BATCH_BOUNDS] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

struct histogram {
    atomic_ullong bucket[METRICS_LATENCY_BOUNDS + 1];
    atomic_ullong count;
    atomic_ullong sum;
};

_Static_assert(METRICS_BATCH_BOUNDS <= METRICS_LATENCY_BOUNDS, "one histogram shape for both");

static atomic_ullong requests[METRICS_STRATEGIES][ST_RESULT_COUNT];
static struct histogram latency[METRICS_STRATEGIES], lock_wait[METRICS_STRATEGIES],
    batches[METRICS_STRATEGIES];
static atomic_ullong locks_lost[METRICS_STRATEGIES], attempts[METRICS_STRATEGIES];
static atomic_ullong reconnects[METRICS_BACKENDS];
static atomic_int in_flight;
static atomic_ullong http_events[HTTP_EVENT_COUNT];

static void add(atomic_ullong *counter, unsigned long long n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

static unsigned long long get(atomic_ullong *counter)
{
    return atomic_load_explicit(counter, memory_order_relaxed);
}

static void observe(struct histogram *h, const double *le, size_t bounds, double value,
                    unsigned long long sum)
{
    size_t i = 0;
    while (i < bounds && value > le[i])
        i++;
    add(&h->bucket[i], 1);
    add(&h->count, 1);
    add(&h->sum, sum);
}

static void read_histogram(struct histogram *h, struct histogram_reading *out)
{
    for (size_t b = 0; b <= METRICS_LATENCY_BOUNDS; b++)
        out->bucket[b] = get(&h->bucket[b]);
    out->count = get(&h->count);
    out->sum = get(&h->sum);
}

void metrics_deduct(size_t strategy, st_result r, long long elapsed_us)
{
    add(&requests[strategy][r], 1);
    observe(&latency[strategy], metrics_latency_le, METRICS_LATENCY_BOUNDS,
            (double)elapsed_us / 1e6, (unsigned long long)elapsed_us);
}

void metrics_lock(size_t strategy, long long wait_us, int lost)
{
    observe(&lock_wait[strategy], metrics_latency_le, METRICS_LATENCY_BOUNDS, (double)wait_us / 1e6,
            (unsigned long long)wait_us);
    if (lost)
        add(&locks_lost[strategy], 1);
}

void metrics_attempts(size_t strategy, int n)
{
    add(&attempts[strategy], (unsigned long long)n);
}

void metrics_reconnect(int backend)
{
    add(&reconnects[backend], 1);
}

void metrics_batch(size_t strategy, int sales)
{
    observe(&batches[strategy], metrics_batch_le, METRICS_BATCH_BOUNDS, sales,
            (unsigned long long)sales);
}

void metrics_in_flight(int delta)
{
    atomic_fetch_add_explicit(&in_flight, delta, memory_order_relaxed);
}

void metrics_http(enum http_event e)
{
    add(&http_events[e], 1);
}

unsigned long long metrics_http_of(enum http_event e)
{
    return get(&http_events[e]);
}

unsigned long long metrics_requests(size_t strategy, st_result r)
{
    return get(&requests[strategy][r]);
}

void metrics_latency(size_t strategy, struct histogram_reading *out)
{
    read_histogram(&latency[strategy], out);
}

void metrics_lock_wait(size_t strategy, struct histogram_reading *out)
{
    read_histogram(&lock_wait[strategy], out);
}

unsigned long long metrics_locks_lost(size_t strategy)
{
    return get(&locks_lost[strategy]);
}

unsigned long long metrics_attempts_of(size_t strategy)
{
    return get(&attempts[strategy]);
}

unsigned long long metrics_reconnects(int backend)
{
    return get(&reconnects[backend]);
}

void metrics_batches(size_t strategy, struct histogram_reading *out)
{
    read_histogram(&batches[strategy], out);
}

int metrics_in_flight_now(void)
{
    return atomic_load_explicit(&in_flight, memory_order_relaxed);
}
