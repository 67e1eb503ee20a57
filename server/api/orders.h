/*
 * orders.h - the order endpoints (the contract's "Orders and retries"):
 *
 *   POST /orders/{strategy}?product&qty&ttl_ms[&expiry]  hold: 201
 *   POST /orders/{ID}/pay?payment=PID                     pay
 *   POST /orders/{ID}/cancel                              cancel
 *   GET  /orders/{ID}                                     the order
 *   GET  /expiry                                          the expiry mechanisms
 *
 * A hold is the strategy's own sale with an order on it (store/orders.h
 * says what happens to it after); every other route finds the order's
 * store from its id.
 */
#ifndef STOCKD_API_ORDERS_H
#define STOCKD_API_ORDERS_H

#include "api/api.h"

/* On a worker. */
st_result api_orders_post(struct worker *w, const struct http_request *req, json_t *reply);
extern const struct param_table api_hold_params;   /* a hold's: hold_ms waits */
extern const struct param_table api_cancel_params; /* a cancel's: hold_ms waits */
st_result api_orders_get(struct worker *w, const struct http_request *req, json_t *reply);

/* On the HTTP thread: the expiry mechanisms' rows and this instance's
 * --sweep-ms. */
void api_expiry(const struct http_request *req, struct page *out);

#endif
