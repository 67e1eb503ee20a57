/*
 * metrics.h - what stockd counts while it runs, for GET /metrics (the
 * Prometheus text format) and the live lab page.
 *
 * Counting is on the request path, so it costs one relaxed atomic add per
 * figure and takes no lock: counters and histogram buckets are atomics in
 * fixed arrays indexed by strategy and result. Gauges (queue depth, workers
 * busy, in flight, backends up) are read when a scrape asks for them. The
 * accounting of the products being watched comes from products.h, which
 * samples the stores in the background: a scrape never queries a store.
 */
#ifndef STOCKD_METRICS_H
#define STOCKD_METRICS_H

#include "backend.h"
#include "result.h"
#include "strategy.h"

#include <jansson.h>
#include <stddef.h>

/* One deduct request with a known strategy, answered `r` after `elapsed_us`
 * from its arrival; `out` (may be NULL) says what the sale saw. */
void metrics_deduct(const struct strategy *s, st_result r, long long elapsed_us,
                    const struct deduct_reply *out);

/* A worker connected to backend `id` again, after its link had failed or
 * been dropped. */
void metrics_reconnect(enum backend_id id);

/* One sql-batch transaction applied `sales` sales. */
void metrics_batch(int sales);

/* Requests between their first byte and their reply (http.c keeps it). */
void metrics_in_flight(int delta);
int metrics_in_flight_now(void);

/* The Prometheus text exposition (format 0.0.4), malloc'ed; NULL when out
 * of memory. */
char *metrics_render(size_t *len);

/* Per strategy: requests by outcome word, and the latency histogram, as
 * the lab page reads them: {"le": [bucket bounds, seconds], "strategies":
 * {"<strategy>": {"outcomes": {word: n}, "buckets": [n...], "count": n}}}.
 * New reference. */
json_t *metrics_strategies_json(void);

#endif
