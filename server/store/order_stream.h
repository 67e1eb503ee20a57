/*
 * order_stream.h - the order stream: orders accepted in Redis, settled
 * into MySQL exactly once.
 *
 * lua-stream's script deducts in Redis, records the sale in the Redis
 * ledger and appends the order (an id stockd made, product, qty, the
 * product's reset epoch) to the stream orders:stream, in one atomic step:
 * there is no moment where a sale is deducted and not queued. Consumers of
 * the group `settle` (XREADGROUP) take the orders in batches and settle
 * each batch in one MySQL transaction: the orders rows (the order id is a
 * unique key, so an entry delivered twice inserts nothing the second time)
 * and the stock decremented by exactly what the new rows sell. They
 * COMMIT, then XACK (and XDEL) the batch. A consumer that dies leaves its
 * entries pending: after --stream-claim-ms another one takes them over
 * (XAUTOCLAIM) and settles them again - a no-op for what had committed.
 *
 * The epoch: the row of the product is locked (FOR UPDATE) for the batch
 * and an order whose epoch is not the row's is fenced, counted and
 * acknowledged, never written: a reset waits for a batch in flight, and an
 * order from before a reset never lands after it.
 *
 * A poison entry (unparsable, a product MySQL does not have) is appended
 * to orders:dead with its reason and counted, in the same step as its
 * XACK: never retried forever, never dropped silently.
 */
#ifndef STOCKD_ORDER_STREAM_H
#define STOCKD_ORDER_STREAM_H

#include "core/result.h"

#include <jansson.h>
#include <stdio.h>

struct worker;

#define ORDER_STREAM_KEY "orders:stream"
#define ORDER_DEAD_KEY "orders:dead"
#define ORDER_GROUP "settle"
#define ORDER_ID_MAX 40

/* A new order id, unique across processes and restarts: this process's
 * random prefix and a counter. */
void order_stream_new_id(char out[ORDER_ID_MAX]);

/* Starts `consumers` consumer threads (0: none); 0, or -1 after logging. */
int order_stream_start(int consumers);
void order_stream_stop(void);

/* The stream as GET /stock/{product} shows it beside the stores: its
 * length, entries pending in the group, the oldest unsettled entry's age,
 * the dead letters (new reference into *out). */
st_result order_stream_status(struct worker *w, json_t **out);

/* The consumers' figures for GET /metrics. */
void order_stream_render(FILE *out);

/* The stream as this process's consumers last sampled it, for the live
 * page: {"length", "lag_ms"}, both null when no consumer runs here (new
 * reference). */
json_t *order_stream_json(void);

#endif
