/*
 * exposition.c - the /metrics text and the lab page's per-strategy JSON.
 *
 * Everything here is read when a scrape or the page asks for it: counters
 * (metrics.h), the pool's load, the health probes' last answers, and the
 * products' last sample. Nothing queries a store.
 */
#include "api/exposition.h"

#include "api/admission.h"
#include "api/products.h"
#include "backend/backend.h"
#include "backend/health.h"
#include "backend/pool.h"
#include "core/metrics.h"
#include "sale/strategy.h"
#include "store/order_stream.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void header(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's series; `labels` is "" or `strategy="x"`. */
static void histogram_lines(FILE *out, const char *name, const char *labels,
                            const struct histogram_reading *h, const double *le, size_t bounds,
                            double sum_scale)
{
    const char *comma = labels[0] ? "," : "";
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    unsigned long long cumulative = 0;
    for (size_t b = 0; b <= bounds; b++) {
        cumulative += h->bucket[b];
        if (b < bounds)
            fprintf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, comma, le[b], cumulative);
        else
            fprintf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, comma, cumulative);
    }
    fprintf(out, "%s_sum%s%s%s %.6f\n", name, open, labels, close, (double)h->sum * sum_scale);
    fprintf(out, "%s_count%s%s%s %llu\n", name, open, labels, close, h->count);
}

static void render_requests(FILE *out)
{
    header(out, "stockd_requests_total", "counter",
           "Deduct requests by strategy and outcome (ok, or the contract's error word).");
    for (size_t i = 0; i < strategy_count(); i++)
        for (int r = 0; r < ST_RESULT_COUNT; r++) {
            unsigned long long n = metrics_requests(i, (st_result)r);
            if (n || r == ST_OK)
                fprintf(out, "stockd_requests_total{strategy=\"%s\",outcome=\"%s\"} %llu\n",
                        strategy_at(i)->name, result_word((st_result)r), n);
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

static int combines(const struct strategy *s)
{
    return s->answers_later;
}

static int optimistic(const struct strategy *s)
{
    return s->contention == CONTENTION_RETRIES;
}

/* A per-strategy histogram, for every strategy `wanted` says has one. */
/* What a histogram's values are: its bucket bounds, and the factor from
 * what metrics.h sums to the unit shown. */
struct shape {
    const double *le;
    size_t bounds;
    double sum_scale;
};

static const struct shape in_seconds = {metrics_latency_le, METRICS_LATENCY_BOUNDS, 1e-6},
                          in_sales = {metrics_batch_le, METRICS_BATCH_BOUNDS, 1};

static void render_per_strategy(FILE *out, const char *name, const char *help,
                                const struct shape *shape,
                                void (*read)(size_t, struct histogram_reading *),
                                int (*wanted)(const struct strategy *))
{
    header(out, name, "histogram", help);
    for (size_t i = 0; i < strategy_count(); i++) {
        if (!wanted(strategy_at(i)))
            continue;
        char labels[64];
        struct histogram_reading h;
        read(i, &h);
        snprintf(labels, sizeof labels, "strategy=\"%s\"", strategy_at(i)->name);
        histogram_lines(out, name, labels, &h, shape->le, shape->bounds, shape->sum_scale);
    }
}

/* A per-strategy counter, for every strategy `wanted` says has one. */
static void render_counter(FILE *out, const char *name, const char *help,
                           unsigned long long (*read)(size_t),
                           int (*wanted)(const struct strategy *))
{
    header(out, name, "counter", help);
    for (size_t i = 0; i < strategy_count(); i++)
        if (wanted(strategy_at(i)))
            fprintf(out, "%s{strategy=\"%s\"} %llu\n", name, strategy_at(i)->name, read(i));
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

static void render_http(FILE *out)
{
    static const char *const reason[HTTP_EVENT_COUNT] = {
        [HTTP_PROTOCOL_ERROR] = "protocol_error",
        [HTTP_HEAD_DEADLINE] = "head_deadline",
        [HTTP_CLIENT_GONE] = "client_gone",
    };
    header(out, "stockd_http_dropped_total", "counter",
           "Connections or requests dropped without an answer: libmicrohttpd's protocol errors, "
           "requests not whole in time, queued requests whose client had gone.");
    for (int e = 0; e < HTTP_EVENT_COUNT; e++)
        fprintf(out, "stockd_http_dropped_total{reason=\"%s\"} %llu\n", reason[e],
                metrics_http_of((enum http_event)e));
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
                    backend_at((enum backend_id)id)->name, metrics_reconnects(id));
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

char *exposition_metrics(size_t *len)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, len);
    if (!out)
        return NULL;
    render_requests(out);
    render_per_strategy(out, "stockd_request_duration_seconds",
                        "Deduct latency by strategy, from arrival to reply.", &in_seconds,
                        metrics_latency, every);
    render_per_strategy(out, "stockd_lock_wait_seconds",
                        "Time spent taking the lock, by lock strategy.", &in_seconds,
                        metrics_lock_wait, locks);
    render_counter(out, "stockd_lock_lost_total",
                   "Locks found expired or taken over by the time they were released.",
                   metrics_locks_lost, locks);
    render_counter(out, "stockd_optimistic_attempts_total",
                   "Tries of the optimistic strategies, retries included.", metrics_attempts_of,
                   optimistic);
    render_per_strategy(out, "stockd_batch_size",
                        "Sales per batch: per sql-batch transaction, per lua pipeline.", &in_sales,
                        metrics_batches, combines);
    admission_render(out);
    render_load(out);
    render_http(out);
    render_backends(out);
    products_render(out);
    order_stream_render(out);
    render_process(out);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

json_t *exposition_strategies_json(void)
{
    json_t *doc = json_object(), *le = json_array();
    for (size_t b = 0; b < METRICS_LATENCY_BOUNDS; b++)
        json_array_append_new(le, json_real(metrics_latency_le[b]));
    for (size_t i = 0; i < strategy_count(); i++) {
        json_t *outcomes = json_object(), *buckets = json_array();
        for (int r = 0; r < ST_RESULT_COUNT; r++) {
            unsigned long long n = metrics_requests(i, (st_result)r);
            if (n)
                json_object_set_new(outcomes, result_word((st_result)r),
                                    json_integer((json_int_t)n));
        }
        struct histogram_reading h;
        metrics_latency(i, &h);
        for (size_t b = 0; b <= METRICS_LATENCY_BOUNDS; b++)
            json_array_append_new(buckets, json_integer((json_int_t)h.bucket[b]));
        json_object_set_new(doc, strategy_at(i)->name,
                            json_pack("{s:o, s:o, s:I}", "outcomes", outcomes, "buckets", buckets,
                                      "count", (json_int_t)h.count));
    }
    return json_pack("{s:o, s:o}", "le", le, "strategies", doc);
}
