/*
 * router.h - the table of every endpoint: path, methods, how it runs and
 * what it guards.
 */
#ifndef STOCKD_ROUTER_H
#define STOCKD_ROUTER_H

#include "api/api.h"

/* What an endpoint is. */
enum {
    ROUTE_CHANGES_STATE = 1 << 0, /* sells or resets: refused to cross-site requests */
    ROUTE_ADMIN = 1 << 1,         /* needs the admin token when one is set          */
    ROUTE_SOLD_OUT_FLAG = 1 << 2, /* a deduct the sold-out flag may refuse on arrival */
};

/* What a request resolved to: a handler (on a worker) or a page (on the
 * HTTP thread), or a result that says why not (ST_NOT_FOUND, or
 * ST_METHOD_NOT_ALLOWED with `allow` filled in). A route's on_arrival is
 * tried first on the HTTP thread (api.h, arrival_fn). */
struct route_match {
    handler_fn handler;
    page_fn page;
    arrival_fn on_arrival;
    unsigned flags;
    st_result result;
    char allow[32];                   /* the Allow header for a 405 */
    size_t row;                       /* the row of the table that matched the path */
    const struct param_table *params; /* the parameters that may make it wait, or NULL */
};

void route_find(const char *method, const char *path, struct route_match *out);

/* How many rows the table has: tests/unit/unit_openapi.c checks that
 * web/openapi.json reaches each one. */
size_t route_count(void);

#endif
