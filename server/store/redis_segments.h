/*
 * redis_segments.h - the segments store: a product's stock split into
 * --segments parts, each with its own count and ledger under its own hash
 * tag, so that on a Redis Cluster each part is on a different primary.
 *
 * Segment i of product P keeps
 *   stock:{P:n}          its remaining count
 *   stock:{P:n}:initial  what reset gave it
 *   ledger:{P:n}         hash: sold, orders (its own sales)
 * where n is the first number whose tag "P:n" hashes (CRC16) into the
 * middle half of the i-th of `segments` equal slot ranges: the ranges
 * `redis-cli --cluster create` gives that many primaries, so the segments
 * land on different primaries without asking the cluster, and the keys of
 * a product never depend on a map that can move. On a single Redis the tags
 * change nothing: every segment is on the one server.
 */
#ifndef STOCKD_REDIS_SEGMENTS_H
#define STOCKD_REDIS_SEGMENTS_H

#include "core/result.h"
#include "store/store.h"

struct worker;

/* The most segments a product may be split into (--segments). */
#define SEGMENTS_MAX 16

extern const struct store store_segments;

/* Sells rq->qty units from one segment, chosen round robin per process,
 * with the sale script on that segment alone. With `fall_through`, a
 * segment that cannot cover qty passes the sale to the next, until one
 * sells or every one has refused (ST_SOLD_OUT); without, its refusal is
 * the answer. A sale never takes units from two segments. out->remaining
 * is left unknown: a segment's count is not the product's. */
st_result segments_sell(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out,
                        int fall_through);

#endif
