/*
 * unit_router.c - the endpoint table: every contract path reaches its
 * handler, a known path with the wrong method is 405 with the right Allow
 * header, anything else is 404.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <string.h>

#include "api/race.h"
#include "http/router.h"

static void expect_route(const char *method, const char *path, handler_fn handler)
{
    struct route_match m;
    route_find(method, path, &m);
    assert_int_equal(m.result, ST_OK);
    assert_ptr_equal(m.handler, handler);
    assert_null(m.page);
}

/* An endpoint answered on the HTTP thread, never queued behind the work. */
static void expect_page(const char *method, const char *path, page_fn page)
{
    struct route_match m;
    route_find(method, path, &m);
    assert_int_equal(m.result, ST_OK);
    assert_ptr_equal(m.page, page);
    assert_null(m.handler);
}

static void expect_flags(const char *method, const char *path, unsigned flags)
{
    struct route_match m;
    route_find(method, path, &m);
    assert_int_equal(m.result, ST_OK);
    assert_int_equal(m.flags, flags);
}

static void expect_refused(const char *method, const char *path, st_result r, const char *allow)
{
    struct route_match m;
    route_find(method, path, &m);
    assert_int_equal(m.result, r);
    assert_null(m.handler);
    assert_string_equal(m.allow, allow);
}

static void test_contract_paths(void **state)
{
    (void)state;
    expect_page("GET", "/health", api_health);
    expect_page("GET", "/ping", api_ping);
    expect_page("GET", "/strategies", api_strategies);
    expect_page("GET", "/metrics", api_metrics);
    expect_page("GET", "/", api_asset); /* the live lab page */
    expect_page("GET", "/lab/lab.js", api_asset);
    expect_page("GET", "/lab/state", api_lab_state);
    expect_route("POST", "/lab/race", api_race);
    expect_route("POST", "/stock/reset", api_reset);
    expect_route("GET", "/stock/deduct/nolock", api_deduct);
    expect_route("POST", "/stock/deduct/redis-lock", api_deduct);
    /* No name, with or without the slash: unknown_strategy, whatever the method. */
    expect_route("GET", "/stock/deduct", api_deduct);
    expect_route("GET", "/stock/deduct/", api_deduct);
    expect_route("POST", "/stock/deduct/", api_deduct);
    expect_route("GET", "/stock/1001", api_stock);
}

static void test_guards(void **state)
{
    (void)state;
    expect_flags("POST", "/stock/reset", ROUTE_CHANGES_STATE | ROUTE_ADMIN);
    /* A named deduct may be refused by the sold-out flag on arrival. */
    expect_flags("GET", "/stock/deduct/sql", ROUTE_CHANGES_STATE | ROUTE_SOLD_OUT_FLAG);
    expect_flags("POST", "/stock/deduct/sql", ROUTE_CHANGES_STATE | ROUTE_SOLD_OUT_FLAG);
    expect_flags("POST", "/stock/deduct", ROUTE_CHANGES_STATE); /* no name: unknown_strategy */
    expect_flags("POST", "/lab/race", ROUTE_CHANGES_STATE | ROUTE_ADMIN);
    expect_flags("GET", "/stock/1001", 0);
    expect_flags("GET", "/strategies", 0);
}

static void test_wrong_method(void **state)
{
    (void)state;
    expect_refused("GET", "/stock/reset", ST_METHOD_NOT_ALLOWED, "POST");
    expect_refused("POST", "/health", ST_METHOD_NOT_ALLOWED, "GET");
    expect_refused("POST", "/ping", ST_METHOD_NOT_ALLOWED, "GET");
    expect_refused("GET", "/lab/race", ST_METHOD_NOT_ALLOWED, "POST");
    expect_refused("DELETE", "/stock/deduct/sql", ST_METHOD_NOT_ALLOWED, "GET, POST");
    expect_refused("PUT", "/stock/1001", ST_METHOD_NOT_ALLOWED, "GET");
}

static void test_not_found(void **state)
{
    (void)state;
    expect_refused("GET", "/index.html", ST_NOT_FOUND, "");
    expect_refused("GET", "/lab", ST_NOT_FOUND, "");
    expect_refused("GET", "/stock", ST_NOT_FOUND, "");
    expect_refused("GET", "/stock/", ST_NOT_FOUND, "");
    expect_refused("GET", "/healthz", ST_NOT_FOUND, "");
    expect_refused("GET", "/health/", ST_NOT_FOUND, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract_paths),
        cmocka_unit_test(test_guards),
        cmocka_unit_test(test_wrong_method),
        cmocka_unit_test(test_not_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
