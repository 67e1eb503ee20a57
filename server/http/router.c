/*
 * router.c - one table registers every endpoint.
 *
 * A route matches its path exactly or, for a prefix route, anything below
 * it ("/stock/deduct/" matches "/stock/deduct/cas"). The first matching row
 * wins, so exact paths come before the prefixes that would also match them.
 */
#include "http/router.h"

#include "api/race.h"

#include <stdio.h>
#include <string.h>

enum { GET = 1, POST = 2 };

static const struct route {
    const char *path;
    int prefix;
    unsigned methods;
    unsigned flags;
    handler_fn handler;               /* runs on a worker, or... */
    page_fn page;                     /* ...is answered on the HTTP thread */
    arrival_fn on_arrival;            /* tried on the HTTP thread before `handler` */
    const struct param_table *params; /* its parameters, when some may wait */
} routes[] = {
    {"/health", 0, GET, 0, NULL, api_health, NULL, NULL},
    {"/ping", 0, GET, 0, NULL, api_ping, NULL, NULL},
    {"/strategies", 0, GET, 0, NULL, api_strategies, NULL, NULL},
    {"/metrics", 0, GET, 0, NULL, api_metrics, NULL, NULL},
    {"/openapi.json", 0, GET, 0, NULL, api_asset, NULL, NULL},
    {"/", 0, GET, 0, NULL, api_asset, NULL, NULL}, /* the live lab page */
    {"/lab/state", 0, GET, 0, NULL, api_lab_state, NULL, NULL},
    {"/lab/race", 0, POST, ROUTE_CHANGES_STATE | ROUTE_ADMIN, api_race, NULL, NULL,
     &api_race_params},
    {"/lab/", 1, GET, 0, NULL, api_asset, NULL, NULL},
    {"/stock/reset", 0, POST, ROUTE_CHANGES_STATE | ROUTE_ADMIN, api_reset, NULL, NULL, NULL},
    /* No name ("/stock/deduct", "/stock/deduct/"): unknown_strategy. */
    {"/stock/deduct", 0, GET | POST, ROUTE_CHANGES_STATE, api_deduct, NULL, NULL,
     &api_deduct_params},
    {"/stock/deduct/", 0, GET | POST, ROUTE_CHANGES_STATE, api_deduct, NULL, NULL,
     &api_deduct_params},
    {"/stock/deduct/", 1, GET | POST, ROUTE_CHANGES_STATE, api_deduct, NULL, api_deduct_on_arrival,
     &api_deduct_params},
    {"/stock/", 1, GET, 0, api_stock, NULL, NULL, NULL},
};

static int path_matches(const struct route *r, const char *path)
{
    size_t len = strlen(r->path);
    if (strncmp(path, r->path, len) != 0)
        return 0;
    return r->prefix ? path[len] != '\0' : path[len] == '\0';
}

static unsigned method_bit(const char *method)
{
    if (strcmp(method, "GET") == 0)
        return GET;
    if (strcmp(method, "POST") == 0)
        return POST;
    return 0;
}

void route_find(const char *method, const char *path, struct route_match *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct route *r = &routes[i];
        if (!path_matches(r, path))
            continue;
        out->row = i;
        if (method_bit(method) & r->methods) {
            out->handler = r->handler;
            out->page = r->page;
            out->on_arrival = r->on_arrival;
            out->params = r->params;
            out->flags = r->flags;
            out->result = ST_OK;
            return;
        }
        snprintf(out->allow, sizeof out->allow, "%s%s%s", r->methods & GET ? "GET" : "",
                 r->methods == (GET | POST) ? ", " : "", r->methods & POST ? "POST" : "");
        out->result = ST_METHOD_NOT_ALLOWED;
        return;
    }
    out->result = ST_NOT_FOUND;
}

size_t route_count(void)
{
    return sizeof routes / sizeof routes[0];
}
