/*
 * exposition.h - stockd's figures as others read them: the Prometheus text
 * format for GET /metrics, and the JSON of the lab page.
 */
#ifndef STOCKD_EXPOSITION_H
#define STOCKD_EXPOSITION_H

#include <jansson.h>
#include <stddef.h>

/* The Prometheus text exposition (format 0.0.4), malloc'ed: the counters
 * under the strategies' and backends' names, the pool's load, the
 * backends' health, the watched products, the process. NULL when out of
 * memory. */
char *exposition_metrics(size_t *len);

/* Per strategy: requests by outcome word, and the latency histogram, as
 * the lab page reads them: {"le": [bucket bounds, seconds], "strategies":
 * {"<strategy>": {"outcomes": {word: n}, "buckets": [n...], "count": n}}}.
 * New reference. */
json_t *exposition_strategies_json(void);

#endif
