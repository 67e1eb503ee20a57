/*
 * api.h - the endpoints of the contract, one handler each.
 *
 * A handler fills `reply` (a JSON object the router created) and returns a
 * result. On ST_OK the router adds "ok":true; otherwise it adds "ok":false,
 * the contract's error word and the worker's message, and picks the status
 * from the result. So a handler never builds an error document itself, and
 * the fields it put in `reply` (strategy, product, qty...) stay in it.
 */
#ifndef STOCKD_API_H
#define STOCKD_API_H

#include "params.h"
#include "result.h"

#include <jansson.h>

struct worker;

typedef st_result (*handler_fn)(struct worker *w, const struct http_request *req, json_t *reply);

st_result api_health(struct worker *w, const struct http_request *req, json_t *reply);
st_result api_strategies(struct worker *w, const struct http_request *req, json_t *reply);
st_result api_reset(struct worker *w, const struct http_request *req, json_t *reply);
st_result api_stock(struct worker *w, const struct http_request *req, json_t *reply);
st_result api_deduct(struct worker *w, const struct http_request *req, json_t *reply);

#endif
