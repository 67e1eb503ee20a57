/*
 * metrics.c - counters, histograms and their rendering.
 */
#include "metrics.h"

#include "health.h"
#include "pool.h"
#include "products.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Latency bucket bounds in seconds, from 0.5 ms to 10 s. */
static const double latency_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                    0.1,    0.25,  0.5,    1,     2.5,  5,     10};
/* Sales per sql-batch transaction. */
static const double batch_le[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

#define LATENCY_BUCKETS (COUNT_OF(latency_le) + 1) /* the last one is +Inf */
_Static_assert(COUNT_OF(batch_le) < LATENCY_BUCKETS, "a histogram holds the batch buckets too");

struct histogram {
    atomic_ullong bucket[LATENCY_BUCKETS]; /* not cumulative: rendering adds up */
    atomic_ullong count;
    atomic_ullong sum; /* microseconds, or sales for the batch histogram */
};

static atomic_ullong requests[STRATEGY_MAX][ST_RESULT_COUNT];
static struct histogram latency[STRATEGY_MAX], lock_wait[STRATEGY_MAX], batches;
static atomic_ullong lock_lost[STRATEGY_MAX], optimistic_attempts[STRATEGY_MAX];
static atomic_ullong reconnects[BACKEND_COUNT];
static atomic_int in_flight;

static void add(atomic_ullong *counter, unsigned long long n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

static unsigned long long get(atomic_ullong *counter)
{
    return atomic_load_explicit(counter, memory_order_relaxed);
}

static void observe(struct histogram *h, const double *le, size_t n, double value,
                    unsigned long long sum)
{
    size_t i = 0;
    while (i < n && value > le[i])
        i++;
    add(&h->bucket[i], 1);
    add(&h->count, 1);
    add(&h->sum, sum);
}

void metrics_deduct(const struct strategy *s, st_result r, long long elapsed_us,
                    const struct deduct_reply *out)
{
    size_t i = strategy_index(s);
    add(&requests[i][r], 1);
    observe(&latency[i], latency_le, COUNT_OF(latency_le), (double)elapsed_us / 1e6,
            (unsigned long long)elapsed_us);
    if (!out)
        return;
    if (s->lock && out->attempts > 0)
        observe(&lock_wait[i], latency_le, COUNT_OF(latency_le), (double)out->lock_wait_us / 1e6,
                (unsigned long long)out->lock_wait_us);
    if (out->lock_lost)
        add(&lock_lost[i], 1);
    if (s->contention == CONTENTION_RETRIES)
        add(&optimistic_attempts[i], (unsigned long long)out->attempts);
}

void metrics_reconnect(enum backend_id id)
{
    add(&reconnects[id], 1);
}

void metrics_batch(int sales)
{
    observe(&batches, batch_le, COUNT_OF(batch_le), sales, (unsigned long long)sales);
}

void metrics_in_flight(int delta)
{
    atomic_fetch_add_explicit(&in_flight, delta, memory_order_relaxed);
}

int metrics_in_flight_now(void)
{
    return atomic_load_explicit(&in_flight, memory_order_relaxed);
}

/* ------------------------------------------------------------ rendering */

static void header(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's series; `labels` is "" or `strategy="x"`. */
static void histogram_lines(FILE *out, const char *name, const char *labels, struct histogram *h,
                            const double *le, size_t n, double sum_scale)
{
    const char *comma = labels[0] ? "," : "";
    unsigned long long cumulative = 0;
    for (size_t b = 0; b <= n; b++) {
        cumulative += get(&h->bucket[b]);
        if (b < n)
            fprintf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, comma, le[b], cumulative);
        else
            fprintf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, comma, cumulative);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    fprintf(out, "%s_sum%s%s%s %.6f\n", name, open, labels, close,
            (double)get(&h->sum) * sum_scale);
    fprintf(out, "%s_count%s%s%s %llu\n", name, open, labels, close, get(&h->count));
}

static void render_requests(FILE *out)
{
    header(out, "stockd_requests_total", "counter",
           "Deduct requests by strategy and outcome (ok, or the contract's error word).");
    for (size_t i = 0; i < strategy_count(); i++)
        for (int r = 0; r < ST_RESULT_COUNT; r++) {
            unsigned long long n = get(&requests[i][r]);
            if (n || r == ST_OK)
                fprintf(out, "stockd_requests_total{strategy=\"%s\",outcome=\"%s\"} %llu\n",
                        strategy_at(i)->name, result_word((st_result)r), n);
        }
}

/* A per-strategy histogram, for every strategy `wanted` says has one. */
static void render_per_strategy(FILE *out, const char *name, const char *help, struct histogram *h,
                                int (*wanted)(const struct strategy *))
{
    header(out, name, "histogram", help);
    for (size_t i = 0; i < strategy_count(); i++) {
        if (!wanted(strategy_at(i)))
            continue;
        char labels[64];
        snprintf(labels, sizeof labels, "strategy=\"%s\"", strategy_at(i)->name);
        histogram_lines(out, name, labels, &h[i], latency_le, COUNT_OF(latency_le), 1e-6);
    }
}

static int every(const struct strategy *s)
{
    (void)s;
    return 1;
}

static int locks(const struct strategy *s)
{
    return s->lock != NULL;
}

static int optimistic(const struct strategy *s)
{
    return s->contention == CONTENTION_RETRIES;
}

/* A per-strategy counter, for every strategy `wanted` says has one. */
static void render_counter(FILE *out, const char *name, const char *help, atomic_ullong *c,
                           int (*wanted)(const struct strategy *))
{
    header(out, name, "counter", help);
    for (size_t i = 0; i < strategy_count(); i++)
        if (wanted(strategy_at(i)))
            fprintf(out, "%s{strategy=\"%s\"} %llu\n", name, strategy_at(i)->name, get(&c[i]));
}

static void render_load(FILE *out)
{
    struct pool_load load;
    pool_load(&load);
    header(out, "stockd_queue_depth", "gauge", "Requests waiting for a worker.");
    fprintf(out, "stockd_queue_depth %d\n", load.queued);
    header(out, "stockd_workers", "gauge", "Worker threads.");
    fprintf(out, "stockd_workers %d\n", load.workers);
    header(out, "stockd_workers_busy", "gauge", "Workers running a request.");
    fprintf(out, "stockd_workers_busy %d\n", load.busy);
    header(out, "stockd_in_flight_requests", "gauge",
           "Requests between their first byte and their reply.");
    fprintf(out, "stockd_in_flight_requests %d\n", metrics_in_flight_now());
}

static void render_backends(FILE *out)
{
    header(out, "stockd_backend_up", "gauge", "1 when the backend answered its last health probe.");
    for (int id = 0; id < BACKEND_COUNT; id++)
        if (backend_configured((enum backend_id)id))
            fprintf(out, "stockd_backend_up{backend=\"%s\"} %d\n",
                    backend_at((enum backend_id)id)->name, health_up((enum backend_id)id));
    header(out, "stockd_backend_reconnects_total", "counter",
           "Connections a worker opened again after its link failed or was dropped.");
    for (int id = 0; id < BACKEND_COUNT; id++)
        if (backend_configured((enum backend_id)id))
            fprintf(out, "stockd_backend_reconnects_total{backend=\"%s\"} %llu\n",
                    backend_at((enum backend_id)id)->name, get(&reconnects[id]));
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory stream's own */
}

static void render_process(FILE *out)
{
    long pages = 0, resident = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm) {
        if (fscanf(statm, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(statm);
    }
    header(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    fprintf(out, "process_resident_memory_bytes %ld\n", resident * sysconf(_SC_PAGESIZE));
    header(out, "process_open_fds", "gauge", "Number of open file descriptors.");
    fprintf(out, "process_open_fds %d\n", open_fds());
}

char *metrics_render(size_t *len)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, len);
    if (!out)
        return NULL;
    render_requests(out);
    render_per_strategy(out, "stockd_request_duration_seconds",
                        "Deduct latency by strategy, from arrival to reply.", latency, every);
    render_per_strategy(out, "stockd_lock_wait_seconds",
                        "Time spent taking the lock, by lock strategy.", lock_wait, locks);
    render_counter(out, "stockd_lock_lost_total",
                   "Locks found expired or taken over by the time they were released.", lock_lost,
                   locks);
    render_counter(out, "stockd_optimistic_attempts_total",
                   "Tries of the optimistic strategies, retries included.", optimistic_attempts,
                   optimistic);
    header(out, "stockd_batch_size", "histogram", "Sales per sql-batch transaction.");
    histogram_lines(out, "stockd_batch_size", "", &batches, batch_le, COUNT_OF(batch_le), 1);
    render_load(out);
    render_backends(out);
    products_render(out);
    render_process(out);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

json_t *metrics_strategies_json(void)
{
    json_t *doc = json_object(), *le = json_array();
    for (size_t b = 0; b < COUNT_OF(latency_le); b++)
        json_array_append_new(le, json_real(latency_le[b]));
    for (size_t i = 0; i < strategy_count(); i++) {
        json_t *outcomes = json_object(), *buckets = json_array();
        for (int r = 0; r < ST_RESULT_COUNT; r++)
            if (get(&requests[i][r]))
                json_object_set_new(outcomes, result_word((st_result)r),
                                    json_integer((json_int_t)get(&requests[i][r])));
        for (size_t b = 0; b < LATENCY_BUCKETS; b++)
            json_array_append_new(buckets, json_integer((json_int_t)get(&latency[i].bucket[b])));
        json_object_set_new(doc, strategy_at(i)->name,
                            json_pack("{s:o, s:o, s:I}", "outcomes", outcomes, "buckets", buckets,
                                      "count", (json_int_t)get(&latency[i].count)));
    }
    return json_pack("{s:o, s:o}", "le", le, "strategies", doc);
}
