/*
 * it_api.c - the contract's HTTP surface, against a running stockd.
 *
 * Proves: /health names every backend and answers 200 while they are up;
 * /ping answers a few dozen bytes naming its instance (the calibration's
 * request: no bigger than a sale's answer);
 * /metrics is valid Prometheus text (promtool) and counts the sales;
 * /strategies describes every strategy and the settings in force; reset
 * creates a product and sets its stock in both stores, clearing the
 * ledgers; GET /stock/{product} reports the accounting fields; every
 * malformed request in the contract's table gets its status and error word
 * and leaves the stock exactly as it was; a JSON body that agrees with the
 * query is accepted; every reply is application/json; and a second stockd
 * on the same port refuses to start instead of sharing the clients.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_BAD_INPUT = 8101, /* bad requests aim at it; its stock must not move */
    PRODUCT_RESET = 8102,
    PRODUCT_BODY = 8103,
};
/* A product no test ever resets. */
#define PRODUCT_NEVER_CREATED 2147483000

/* The strategies of the contract's table; later ones may be added. */
static const char *const contract_strategies[] = {
    "nolock", "mutex", "sql", "for-update", "cas", "watch", "redis-lock",
};

static void expect_backend_up(const json_t *backends, const char *name)
{
    const json_t *backend = json_object_get(backends, name);
    assert_non_null(backend);
    assert_string_equal(json_str_member(backend, "state"), "up");
}

/* GET /metrics: what promtool accepts as the Prometheus text format, with
 * the series the dashboards read; a sale shows in its counter. */
static void test_metrics(void **state)
{
    (void)state;
    reset(PRODUCT_RESET, 10);
    double before = metric("stockd_requests_total{strategy=\"sql\",outcome=\"ok\"}");
    expect_deduct("sql", PRODUCT_RESET, NULL, 200, "");
    assert_true(metric("stockd_requests_total{strategy=\"sql\",outcome=\"ok\"}") == before + 1);
    assert_true(metric("stockd_workers") > 0);
    assert_true(metric("stockd_backend_up{backend=\"mysql\"}") == 1);
    assert_true(metric("process_resident_memory_bytes") > 0);

    struct http_reply r;
    http_call("GET", "/metrics", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    char path[] = "/tmp/stockd-metrics-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(r.text);
    assert_int_equal(write(fd, r.text, len), (ssize_t)len);
    close(fd);
    http_reply_free(&r);
    char command[128];
    snprintf(command, sizeof command, "promtool check metrics < %s", path);
    int status = system(command);
    unlink(path);
    assert_int_equal(status, 0);
}

static void test_health(void **state)
{
    (void)state;
    json_t *doc = expect_ok("GET", "/health", NULL, 200);
    const json_t *backends = json_object_get(doc, "backends");
    assert_true(json_is_object(backends));
    expect_backend_up(backends, "mysql");
    expect_backend_up(backends, "redis");
    json_decref(doc);
}

/* GET /ping: the comparison's calibration measures the driver against it,
 * so it stays as small as a sale's answer, and needs no product or backend. */
static void test_ping(void **state)
{
    (void)state;
    struct http_reply r;
    http_call("GET", "/ping", NULL, &r);
    long status = r.status;
    int ok = r.json && json_is_true(json_object_get(r.json, "ok"));
    int names_itself = ok && strcmp(json_str_member(r.json, "instance"), r.instance) == 0;
    int small = r.text && strlen(r.text) < 100; /* a sale's 200 is about 90 bytes */
    http_reply_free(&r);
    assert_int_equal(status, 200);
    assert_true(ok);
    assert_true(names_itself);
    assert_true(small);
}

/* One entry of /strategies: complete, consistent, and the only one of its
 * name. */
static void expect_described(const json_t *s, int index)
{
    (void)index;
    const char *store = json_str_member(s, "store");
    assert_true(strcmp(store, "mysql") == 0 || strcmp(store, "redis") == 0 ||
                strcmp(store, "segments") == 0);
    assert_true(strlen(json_str_member(s, "name")) > 0);
    assert_true(strlen(json_str_member(s, "summary")) > 0);
    int single = json_bool_member(s, "safe_single");
    int multi = json_bool_member(s, "safe_multi");
    assert_true(single || !multi); /* safe across instances implies safe in one */
    assert_ptr_equal(find_strategy(json_str_member(s, "name")), s); /* unique */
}

static void test_strategies(void **state)
{
    (void)state;
    for_each_strategy(expect_described);
    for (size_t k = 0; k < sizeof contract_strategies / sizeof contract_strategies[0]; k++)
        if (!find_strategy(contract_strategies[k]))
            fail_msg("/strategies does not list %s", contract_strategies[k]);

    /* The contract's safety claims for its own rows. */
    assert_false(json_bool_member(find_strategy("nolock"), "safe_single"));
    assert_false(json_bool_member(find_strategy("mutex"), "safe_multi"));
    assert_true(json_bool_member(find_strategy("sql"), "safe_multi"));
    assert_string_equal(json_str_member(find_strategy("watch"), "store"), "redis");

    /* The settings in force, as stockd was started. */
    json_t *doc = expect_ok("GET", "/strategies", NULL, 200);
    json_t *settings = json_incref(json_object_get(doc, "settings"));
    json_decref(doc);
    assert_true(json_is_object(settings));
    long long attempts = json_int_member(settings, "optimistic_attempts");
    long long ttl = json_int_member(settings, "lock_ttl_ms");
    long long wait = json_int_member(settings, "lock_wait_ms");
    long long threads = json_int_member(settings, "threads");
    json_decref(settings);
    assert_true(attempts > 0);
    assert_true(ttl > 0);
    assert_int_equal(wait, 10000);
    assert_int_equal(threads, STOCKD_THREADS);
}

/* A store's figures right after a reset to `count`. */
static void expect_fresh_store(const struct store_figures *f, long long count)
{
    assert_true(f->present);
    assert_int_equal(f->initial, count);
    assert_int_equal(f->remaining, count);
    assert_int_equal(f->sold, 0);
    assert_int_equal(f->orders, 0);
    assert_int_equal(f->oversold, 0);
    assert_int_equal(f->lost_updates, 0);
}

static void expect_fresh(int product, long long count)
{
    struct account a = account(product);
    assert_int_equal(a.initial, count);
    expect_fresh_store(&a.mysql, count);
    expect_fresh_store(&a.redis, count);
    expect_fresh_store(&a.segments, count); /* the segments' sums */
}

static void test_reset_and_accounting(void **state)
{
    (void)state;
    reset(PRODUCT_RESET, 25);
    expect_fresh(PRODUCT_RESET, 25);

    /* A sale shows in its own store only: sql sells from MySQL, watch from
     * Redis. */
    expect_deduct("sql", PRODUCT_RESET, "qty=2", 200, "");
    expect_deduct("watch", PRODUCT_RESET, "qty=3", 200, "");
    struct account a = account(PRODUCT_RESET);
    assert_int_equal(a.initial, 25);
    assert_int_equal(a.mysql.remaining, 23);
    assert_int_equal(a.mysql.sold, 2);
    assert_int_equal(a.mysql.orders, 1);
    assert_int_equal(a.redis.remaining, 22);
    assert_int_equal(a.redis.sold, 3);
    assert_int_equal(a.redis.orders, 1);
    assert_int_equal(a.mysql.oversold + a.mysql.lost_updates, 0);
    assert_int_equal(a.redis.oversold + a.redis.lost_updates, 0);

    /* A reset clears the ledgers and sets both stores again. */
    reset(PRODUCT_RESET, 7);
    expect_fresh(PRODUCT_RESET, 7);

    /* Zero stock is a valid reset: the next sale is sold out. */
    reset(PRODUCT_RESET, 0);
    expect_fresh(PRODUCT_RESET, 0);
    expect_deduct("sql", PRODUCT_RESET, NULL, 409, "sold_out");
    expect_deduct("watch", PRODUCT_RESET, NULL, 409, "sold_out");
}

static void expect_unknown_product(const json_t *s, int index)
{
    (void)index;
    expect_deduct(json_str_member(s, "name"), PRODUCT_NEVER_CREATED, NULL, 404, "unknown_product");
}

static void test_unknown_product(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/stock/%d", PRODUCT_NEVER_CREATED);
    expect_error("GET", path, NULL, 404, "unknown_product");
    for_each_strategy(expect_unknown_product);
    expect_error("GET", path, NULL, 404, "unknown_product"); /* still not created */
}

/* One malformed request; "{P}" in path and body stands for the product. */
struct bad_request {
    const char *method;
    const char *path;
    const char *body;
    long status;
    const char *word;
};

static const struct bad_request bad_requests[] = {
    /* qty: an integer 1..1000, written as plain digits */
    {"POST", "/stock/deduct/sql?product={P}&qty=0", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=1001", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=-1", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=abc", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=1e3", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=%201", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty", NULL, 400, "bad_request"},
    /* product: a positive integer that fits in 31 bits */
    {"POST", "/stock/deduct/sql?product=0", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product=2147483648", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product=abc", NULL, 400, "bad_request"},
    /* hold_ms: 0..1000 */
    {"POST", "/stock/deduct/sql?product={P}&hold_ms=1001", NULL, 400, "bad_request"},
    /* unknown and repeated parameters */
    {"POST", "/stock/deduct/sql?product={P}&colour=red", NULL, 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=1&qty=2", NULL, 400, "bad_request"},
    /* JSON bodies */
    {"POST", "/stock/deduct/sql", "{\"product\":{P},\"qty\":", 400, "bad_request"},
    {"POST", "/stock/deduct/sql", "[{P},1]", 400, "bad_request"},
    {"POST", "/stock/deduct/sql", "{\"product\":\"{P}\",\"qty\":\"1\"}", 400, "bad_request"},
    {"POST", "/stock/deduct/sql?product={P}&qty=1", "{\"product\":{P},\"qty\":2}", 400,
     "bad_request"},
    {"POST", "/stock/deduct/sql", "{\"product\":{P},\"colour\":1}", 400, "bad_request"},
    {"POST", "/stock/deduct/sql", "{\"product\":{P},\"product\":{P}}", 400, "bad_request"},
    {"GET", "/stock/deduct/sql?product={P}", "{\"qty\":1}", 400, "bad_request"},
    /* paths, methods and strategies */
    {"GET", "/stock/reset?product={P}&count=1", NULL, 405, "method_not_allowed"},
    {"POST", "/stock/{P}", NULL, 405, "method_not_allowed"},
    {"GET", "/nowhere", NULL, 404, "not_found"},
    {"GET", "/index.html", NULL, 404, "not_found"},
    {"POST", "/stock/deduct/teleport?product={P}", NULL, 404, "unknown_strategy"},
    {"POST", "/stock/deduct?product={P}", NULL, 404, "unknown_strategy"},
    {"DELETE", "/stock/{P}", NULL, 405, "method_not_allowed"},
    /* reset: count 0..1,000,000,000 and required */
    {"POST", "/stock/reset?product={P}&count=1000000001", NULL, 400, "bad_request"},
    {"POST", "/stock/reset?product={P}&count=-1", NULL, 400, "bad_request"},
    {"POST", "/stock/reset?product={P}", NULL, 400, "bad_request"},
    {"POST", "/stock/reset?product=0&count=5", NULL, 400, "bad_request"},
    /* the accounting path */
    {"GET", "/stock/abc", NULL, 400, "bad_request"},
    {"GET", "/stock/0", NULL, 400, "bad_request"},
    {"GET", "/stock/2147483648", NULL, 400, "bad_request"},
    {"GET", "/stock/{P}?colour=red", NULL, 400, "bad_request"},
};

/* Copies `text` into `out` with every "{P}" replaced by `product`. */
static const char *with_product(const char *text, int product, char *out, size_t size)
{
    if (!text)
        return NULL;
    size_t len = 0;
    out[0] = '\0';
    while (*text && len + 1 < size) {
        if (strncmp(text, "{P}", 3) == 0) {
            len += (size_t)snprintf(out + len, size - len, "%d", product);
            text += 3;
        } else {
            out[len++] = *text++;
            out[len] = '\0';
        }
    }
    return out;
}

/* Sends `rq` and checks that the stock of the product did not move. */
static void expect_refused(const struct bad_request *rq)
{
    static char path[256], body[8192];
    struct account before = account(PRODUCT_BAD_INPUT);
    expect_error(rq->method, with_product(rq->path, PRODUCT_BAD_INPUT, path, sizeof path),
                 with_product(rq->body, PRODUCT_BAD_INPUT, body, sizeof body), rq->status,
                 rq->word);
    struct account after = account(PRODUCT_BAD_INPUT);
    expect_same_account(&before, &after);
}

static void test_bad_requests(void **state)
{
    (void)state;
    reset(PRODUCT_BAD_INPUT, 50);
    for (size_t i = 0; i < sizeof bad_requests / sizeof bad_requests[0]; i++)
        expect_refused(&bad_requests[i]);
    expect_fresh(PRODUCT_BAD_INPUT, 50);
}

static void expect_parameters_checked(const json_t *s, int index)
{
    (void)index;
    static const char *const queries[] = {"qty=0", "qty=1001", "hold_ms=1001", "colour=red"};
    for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
        char path[160];
        snprintf(path, sizeof path, "/stock/deduct/%s?product={P}&%s", json_str_member(s, "name"),
                 queries[q]);
        struct bad_request rq = {"POST", path, NULL, 400, "bad_request"};
        expect_refused(&rq);
    }
}

/* Parameters are checked the same way whichever strategy is asked. */
static void test_bad_requests_every_strategy(void **state)
{
    (void)state;
    reset(PRODUCT_BAD_INPUT, 50);
    for_each_strategy(expect_parameters_checked);
    expect_fresh(PRODUCT_BAD_INPUT, 50);
}

static void test_method_not_allowed_names_allowed(void **state)
{
    (void)state;
    struct http_reply r;
    http_call("GET", "/stock/reset?product=8101&count=1", NULL, &r);
    http_reply_free(&r);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.content_type, "application/json");
    assert_string_equal(r.allow, "POST");
    http_call("POST", "/health", NULL, &r);
    http_reply_free(&r);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.allow, "GET");
}

/* A body over the limit (4096 bytes by default) is refused whole. */
static void test_body_too_large(void **state)
{
    (void)state;
    reset(PRODUCT_BAD_INPUT, 50);
    static char body[5000];
    int n = snprintf(body, sizeof body, "{\"product\":%d,\"qty\":1", PRODUCT_BAD_INPUT);
    memset(body + n, ' ', sizeof body - (size_t)n - 2);
    body[sizeof body - 2] = '}';
    body[sizeof body - 1] = '\0';
    struct bad_request rq = {"POST", "/stock/deduct/sql", body, 413, "payload_too_large"};
    expect_refused(&rq);
    /* The connection is still good for the next request. */
    expect_fresh(PRODUCT_BAD_INPUT, 50);
}

/* Sends a sale of product PRODUCT_BAD_INPUT with one header whose value is
 * `size` bytes long; returns the status. */
static long deduct_with_header_of(size_t size)
{
    static char header[16 * 1024];
    assert_true(size + 16 < sizeof header);
    int n = snprintf(header, sizeof header, "X-Padding: ");
    memset(header + n, 'a', size);
    header[(size_t)n + size] = '\0';
    const char *const headers[] = {header, NULL};
    char path[96];
    snprintf(path, sizeof path, "/stock/deduct/sql?product=%d", PRODUCT_BAD_INPUT);
    struct http_reply r;
    http_call_with("POST", path, NULL, headers, &r);
    http_reply_free(&r);
    return r.status;
}

/* A second stockd on the port in use exits 1 at once ("cannot listen"),
 * where sockets with SO_REUSEPORT would have let it take half the clients
 * in silence; the first one goes on answering. */
static void test_port_in_use_refuses_a_second_stockd(void **state)
{
    (void)state;
    int status = system("timeout 20 \"${STOCKD_TEST_BIN:-build/test/stockd}\" --port "
                        "\"${STOCKD_TEST_PORT:-24080}\" >/dev/null 2>&1");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    json_decref(expect_ok("GET", "/health", NULL, 200));
}

/* Request line and headers share the connection's 8 KiB: 6 KiB of headers
 * sell, 9 KiB get libmicrohttpd's 431 and sell nothing. */
static void test_header_size_limit(void **state)
{
    (void)state;
    reset(PRODUCT_BAD_INPUT, 50);
    assert_int_equal(deduct_with_header_of(6 * 1024), 200);
    struct account before = account(PRODUCT_BAD_INPUT);
    assert_int_equal(deduct_with_header_of(9 * 1024), 431);
    struct account after = account(PRODUCT_BAD_INPUT);
    expect_same_account(&before, &after);
}

static void test_json_body_agreeing_with_query(void **state)
{
    (void)state;
    reset(PRODUCT_BODY, 20);
    char path[96], body[96];
    snprintf(path, sizeof path, "/stock/deduct/sql?product=%d&qty=2", PRODUCT_BODY);
    snprintf(body, sizeof body, "{\"product\":%d,\"qty\":2}", PRODUCT_BODY);
    json_t *doc = expect_ok("POST", path, body, 200);
    assert_string_equal(json_str_member(doc, "strategy"), "sql");
    assert_int_equal(json_int_member(doc, "product"), PRODUCT_BODY);
    assert_int_equal(json_int_member(doc, "qty"), 2);
    json_decref(doc);

    /* The body alone is enough. */
    snprintf(body, sizeof body, "{\"product\":%d,\"qty\":3}", PRODUCT_BODY);
    doc = expect_ok("POST", "/stock/deduct/sql", body, 200);
    assert_int_equal(json_int_member(doc, "product"), PRODUCT_BODY);
    assert_int_equal(json_int_member(doc, "qty"), 3);
    json_decref(doc);

    /* GET carries its parameters in the query. */
    snprintf(path, sizeof path, "/stock/deduct/sql?product=%d", PRODUCT_BODY);
    doc = expect_ok("GET", path, NULL, 200);
    assert_int_equal(json_int_member(doc, "qty"), 1);
    json_decref(doc);

    struct account a = account(PRODUCT_BODY);
    assert_int_equal(a.mysql.sold, 6);
    assert_int_equal(a.mysql.orders, 3);
    assert_int_equal(a.mysql.remaining, 14);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_ping),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_strategies),
        cmocka_unit_test(test_reset_and_accounting),
        cmocka_unit_test(test_unknown_product),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_bad_requests_every_strategy),
        cmocka_unit_test(test_method_not_allowed_names_allowed),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_header_size_limit),
        cmocka_unit_test(test_port_in_use_refuses_a_second_stockd),
        cmocka_unit_test(test_json_body_agreeing_with_query),
    };
    return cmocka_run_group_tests(tests, stockd_group_setup, stockd_group_teardown);
}
