/*
 * router.c - one table registers every endpoint.
 *
 * A route matches its path exactly or, for a prefix route, anything below
 * it ("/stock/deduct/" matches "/stock/deduct/cas"); a {} in a path stands
 * for one segment of any name ("/orders/{}/pay"). The first matching row
 * wins, so exact paths come before the prefixes that would also match them.
 * A route may take its methods in rows of their own, one after the other
 * (the same path, another handler): a method none of them takes is a 405
 * naming all they take.
 */
#include "http/router.h"

#include "api/orders.h"
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
    {"/stock/deduct/", 1, GET | POST, ROUTE_CHANGES_STATE | ROUTE_SOLD_OUT_FLAG, api_deduct, NULL,
     api_deduct_on_arrival, &api_deduct_params},
    {"/stock/", 1, GET, 0, api_stock, NULL, NULL, NULL},
    /* POST /orders/{strategy} holds, GET /orders/{ID} reads: one path, a
     * row per method; /orders/{ID}/pay and /cancel change the order. */
    {"/orders/{}/pay", 0, POST, ROUTE_CHANGES_STATE, api_orders_post, NULL, NULL, NULL},
    {"/orders/{}/cancel", 0, POST, ROUTE_CHANGES_STATE, api_orders_post, NULL, NULL,
     &api_cancel_params},
    {"/orders/", 1, POST, ROUTE_CHANGES_STATE, api_orders_post, NULL, NULL, &api_hold_params},
    {"/orders/", 1, GET, 0, api_orders_get, NULL, NULL, NULL},
    {"/expiry", 0, GET, 0, NULL, api_expiry, NULL, NULL},
};

static int path_matches(const struct route *r, const char *path)
{
    const char *any = strstr(r->path, "{}");
    if (any) { /* "/orders/{}/pay": one segment, any name, in place of the {} */
        size_t head = (size_t)(any - r->path);
        if (strncmp(path, r->path, head) != 0)
            return 0;
        const char *segment = path + head, *end = strchrnul(segment, '/');
        return end > segment && strcmp(end, any + 2) == 0;
    }
    size_t len = strlen(r->path);
    if (strncmp(path, r->path, len) != 0)
        return 0;
    return r->prefix ? path[len] != '\0' : path[len] == '\0';
}

/* Whether rows `a` and `b` are the same route (rows for other methods). */
static int same_route(const struct route *a, const struct route *b)
{
    return a->prefix == b->prefix && strcmp(a->path, b->path) == 0;
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
    unsigned taken = 0; /* the methods the route's rows take */
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct route *r = &routes[i];
        if (taken ? !same_route(&routes[out->row], r) : !path_matches(r, path))
            continue;
        if (!taken)
            out->row = i;
        taken |= r->methods;
        if (method_bit(method) & r->methods) {
            out->row = i;
            out->handler = r->handler;
            out->page = r->page;
            out->on_arrival = r->on_arrival;
            out->params = r->params;
            out->flags = r->flags;
            out->result = ST_OK;
            return;
        }
    }
    if (!taken) {
        out->result = ST_NOT_FOUND;
        return;
    }
    snprintf(out->allow, sizeof out->allow, "%s%s%s", taken & GET ? "GET" : "",
             taken == (GET | POST) ? ", " : "", taken & POST ? "POST" : "");
    out->result = ST_METHOD_NOT_ALLOWED;
}

size_t route_count(void)
{
    return sizeof routes / sizeof routes[0];
}
