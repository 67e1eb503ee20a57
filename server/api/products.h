/*
 * products.h - the products being watched, and their accounting, sampled
 * in the background.
 *
 * A product is watched from its first deduct or reset on: the last
 * PRODUCTS_WATCHED distinct ones, plus the seed product. A thread of its
 * own reads their accounting from the stores' own ledgers every
 * PRODUCTS_PERIOD_MS and keeps it, so /metrics and the lab page show the
 * race as it happens without ever querying a store themselves.
 */
#ifndef STOCKD_PRODUCTS_H
#define STOCKD_PRODUCTS_H

#include <jansson.h>
#include <stdio.h>

#define PRODUCTS_WATCHED 8
#define PRODUCTS_PERIOD_MS 500
/* The product a request means when it names none (the seed product):
 * always watched. */
#define DEFAULT_PRODUCT 1001

/* Marks `product` as watched: a few relaxed atomics, no lock. */
void products_watch(int product);

/* Starts and stops the sampling thread; 0 on success. */
int products_start(void);
void products_stop(void);

/* The last sample as Prometheus gauges (stockd_product_*{product,store}). */
void products_render(FILE *out);

/* The last sample for the lab page: [{"product": P, "age_ms": n, "<store>":
 * {initial, remaining, sold, orders, oversold, lost_updates} or null}, ...].
 * New reference. */
json_t *products_json(void);

#endif
