/*
 * router.h - the table of every endpoint: path, methods, handler.
 */
#ifndef STOCKD_ROUTER_H
#define STOCKD_ROUTER_H

#include "api.h"

/* What a request resolved to: a handler, or a result that says why not
 * (ST_NOT_FOUND, or ST_METHOD_NOT_ALLOWED with `allow` filled in). */
struct route_match {
    handler_fn handler;
    st_result result;
    char allow[32]; /* the Allow header for a 405 */
};

void route_find(const char *method, const char *path, struct route_match *out);

#endif
