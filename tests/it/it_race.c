/*
 * it_race.c - traced sales (trace=1) and the race driver (POST /lab/race),
 * against a real stack.
 *
 * The races show every run because the buyers wait inside the critical
 * section (hold_ms) long enough for every other buyer to read the same
 * count; the one-run-at-a-time check waits on the in-flight gauge until
 * the first run's buyers are inside stockd.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define PRODUCT_TRACE 1970
#define PRODUCT_RACE 1971

static const json_t *trace_of(const json_t *doc)
{
    const json_t *t = json_object_get(doc, "trace");
    assert_non_null(t);
    return t;
}

static long long at(const json_t *trace, const char *mark)
{
    return json_int_member(json_object_get(trace, "t_us"), mark);
}

/* Two nolock buyers holding 300 ms after the read: both read 10, both
 * write 9, and the trace's moments come in order. */
static void test_trace_nolock_shows_the_lost_update(void **state)
{
    (void)state;
    reset(PRODUCT_TRACE, 10);
    struct background a, b;
    start_background(&a, "nolock", PRODUCT_TRACE, "hold_ms=300&trace=1");
    start_background(&b, "nolock", PRODUCT_TRACE, "hold_ms=300&trace=1");
    assert_int_equal(finish_background(&a), 200);
    assert_int_equal(finish_background(&b), 200);
    const json_t *ta = trace_of(a.reply.json), *tb = trace_of(b.reply.json);
    for (int i = 0; i < 2; i++) {
        const json_t *t = i ? tb : ta;
        assert_int_equal(json_int_member(t, "read"), 10);
        assert_int_equal(json_int_member(t, "wrote"), 9);
        assert_true(at(t, "arrival") <= at(t, "read"));
        assert_true(at(t, "read") + 300000 <= at(t, "write"));
        assert_true(at(t, "write") <= at(t, "commit"));
        assert_true(at(t, "commit") <= at(t, "answer"));
        assert_null(json_object_get(t, "lock_acquired"));
        assert_null(json_object_get(t, "lock_token"));
    }
    /* Each read before the other's write: the second write lost the first. */
    assert_true(at(ta, "read") < at(tb, "write") && at(tb, "read") < at(ta, "write"));
    http_reply_free(&a.reply);
    http_reply_free(&b.reply);
    struct account acc = account(PRODUCT_TRACE);
    assert_int_equal(acc.mysql.sold, 2);
    assert_int_equal(acc.mysql.remaining, 9);
}

/* sql reads nothing into the server: the trace names its conditional
 * update and claims no read. */
static void test_trace_sql_names_the_conditional_update(void **state)
{
    (void)state;
    reset(PRODUCT_TRACE, 1);
    json_t *doc = expect_ok("POST", "/stock/deduct/sql?product=1970&trace=1", NULL, 200);
    const json_t *t = trace_of(doc);
    assert_non_null(strstr(json_str_member(t, "update"), "count >= "));
    assert_null(json_object_get(t, "read"));
    assert_null(json_object_get(t, "wrote"));
    assert_true(at(t, "write") <= at(t, "commit"));
    json_decref(doc);
    /* Sold out: it read the count to say so. */
    struct http_reply r;
    http_call("POST", "/stock/deduct/sql?product=1970&trace=1", NULL, &r);
    assert_int_equal(r.status, 409);
    assert_int_equal(json_int_member(json_object_get(r.json, "trace"), "read"), 0);
    http_reply_free(&r);
}

/* fenced: the token the write carried and the lock holder's identity. */
static void test_trace_fenced_shows_the_fence(void **state)
{
    (void)state;
    reset(PRODUCT_TRACE, 5);
    json_t *doc = expect_ok("POST", "/stock/deduct/fenced?product=1970&trace=1", NULL, 200);
    const json_t *t = trace_of(doc);
    assert_true(json_int_member(t, "fence") > 0);
    assert_int_equal(json_int_member(t, "fence"), json_int_member(doc, "fence"));
    assert_int_equal(strlen(json_str_member(t, "lock_token")), 32);
    assert_true(at(t, "lock_acquired") <= at(t, "read"));
    assert_int_equal(json_int_member(t, "read"), 5);
    assert_int_equal(json_int_member(t, "wrote"), 4);
    json_decref(doc);
}

static void test_no_trace_unless_asked(void **state)
{
    (void)state;
    reset(PRODUCT_TRACE, 5);
    const char *paths[] = {"/stock/deduct/nolock?product=1970",
                           "/stock/deduct/nolock?product=1970&trace=0"};
    for (size_t i = 0; i < 2; i++) {
        json_t *doc = expect_ok("POST", paths[i], NULL, 200);
        assert_null(json_object_get(doc, "trace"));
        json_decref(doc);
    }
}

static void test_bad_trace_values(void **state)
{
    (void)state;
    reset(PRODUCT_TRACE, 5);
    struct account before = account(PRODUCT_TRACE);
    const char *queries[] = {"trace=2", "trace=yes", "trace=-1", "trace=", "trace=1&trace=1"};
    char path[128];
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        snprintf(path, sizeof path, "/stock/deduct/nolock?product=1970&%s", queries[i]);
        expect_error("POST", path, NULL, 400, "bad_request");
    }
    expect_error("POST", "/stock/deduct/nolock?product=1970", "{\"trace\":true}", 400,
                 "bad_request");
    expect_error("POST", "/stock/deduct/nolock?product=1970&trace=1", "{\"trace\":0}", 400,
                 "bad_request");
    struct account after = account(PRODUCT_TRACE);
    expect_same_account(&before, &after);
}

static void test_race_bounds(void **state)
{
    (void)state;
    const char *bodies[] = {
        "{\"strategy\":\"nolock\",\"buyers\":0}",
        "{\"strategy\":\"nolock\",\"buyers\":65}",
        "{\"strategy\":\"nolock\",\"units\":0}",
        "{\"strategy\":\"nolock\",\"units\":1001}",
        "{\"strategy\":\"nolock\",\"buyers\":64,\"hold_ms\":1000}",
        "{\"strategy\":\"nolock\",\"colour\":1}",
        "{\"strategy\":7}",
        "{\"buyers\":12}",
        "[1]",
        "",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        expect_error("POST", "/lab/race", bodies[i], 400, "bad_request");
    expect_error("POST", "/lab/race", "{\"strategy\":\"nope\"}", 404, "unknown_strategy");
    struct http_reply r;
    const char *cross[] = {"Sec-Fetch-Site: cross-site", NULL};
    http_call_with("POST", "/lab/race", "{\"strategy\":\"nolock\"}", cross, &r);
    assert_int_equal(r.status, 403);
    http_reply_free(&r);
    expect_error("GET", "/lab/race", NULL, 405, "method_not_allowed");
}

/* Checks one run's reply: the history has a line per buyer, each with its
 * times and trace; returns how many sold. */
static long long expect_history(const json_t *doc, long long buyers)
{
    const json_t *history = json_object_get(doc, "history");
    assert_int_equal(json_array_size(history), buyers);
    long long sold = 0;
    for (size_t i = 0; i < json_array_size(history); i++) {
        const json_t *h = json_array_get(history, i);
        assert_int_equal(json_int_member(h, "id"), (long long)i);
        assert_true(json_int_member(h, "invoke_us") < json_int_member(h, "complete_us"));
        const json_t *t = trace_of(h);
        assert_true(json_int_member(h, "invoke_us") <= at(t, "arrival") + 1000);
        assert_true(at(t, "answer") <= json_int_member(h, "complete_us"));
        sold += json_int_member(h, "status") == 200;
    }
    return sold;
}

static json_t *race(const char *body)
{
    return expect_ok("POST", "/lab/race", body, 200);
}

/* nolock with every buyer holding after its read oversells every run;
 * sql never does. */
static void test_race_nolock_oversells_sql_does_not(void **state)
{
    (void)state;
    for (int run = 0; run < 2; run++) {
        json_t *doc = race("{\"strategy\":\"nolock\",\"buyers\":12,\"units\":6,\"hold_ms\":200,"
                           "\"product\":1971}");
        assert_string_equal(json_str_member(doc, "strategy"), "nolock");
        assert_int_equal(json_int_member(doc, "initial"), 6);
        assert_int_equal(expect_history(doc, 12), 12);
        const json_t *ledger = json_object_get(doc, "ledger");
        assert_int_equal(json_int_member(ledger, "sold"), 12);
        assert_true(json_int_member(ledger, "oversold") == 6);
        assert_true(json_int_member(ledger, "lost_updates") > 0);
        json_decref(doc);
    }
    json_t *doc = race("{\"strategy\":\"sql\",\"buyers\":12,\"units\":6,\"hold_ms\":20,"
                       "\"product\":1971}");
    assert_int_equal(expect_history(doc, 12), 6);
    const json_t *ledger = json_object_get(doc, "ledger");
    assert_int_equal(json_int_member(ledger, "sold"), 6);
    assert_int_equal(json_int_member(ledger, "oversold"), 0);
    assert_int_equal(json_int_member(ledger, "lost_updates"), 0);
    assert_int_equal(json_int_member(ledger, "remaining"), 0);
    json_decref(doc);
}

/* fenced under a pause longer than its lease: a superseded holder's write
 * is refused, and its trace shows the write sent, never committed, and no
 * count written. */
static void test_race_fenced_refused_writes_write_nothing(void **state)
{
    (void)state;
    json_t *doc = race("{\"strategy\":\"fenced\",\"buyers\":4,\"units\":6,\"ttl_ms\":100,"
                       "\"pause_ms\":300,\"product\":1971}");
    long long sold = expect_history(doc, 4), refused = 0;
    const json_t *history = json_object_get(doc, "history");
    for (size_t i = 0; i < json_array_size(history); i++) {
        const json_t *h = json_array_get(history, i), *t = trace_of(h);
        assert_true(json_int_member(t, "fence") > 0);
        if (json_int_member(h, "status") == 200) {
            assert_int_equal(json_int_member(t, "read") - 1, json_int_member(t, "wrote"));
            continue;
        }
        assert_string_equal(json_str_member(h, "error"), "busy");
        if (json_object_get(json_object_get(t, "t_us"), "write")) {
            assert_null(json_object_get(json_object_get(t, "t_us"), "commit"));
            assert_null(json_object_get(t, "wrote"));
            refused++;
        }
    }
    assert_true(refused > 0);
    const json_t *ledger = json_object_get(doc, "ledger");
    assert_int_equal(json_int_member(ledger, "sold"), sold);
    assert_int_equal(json_int_member(ledger, "oversold"), 0);
    assert_int_equal(json_int_member(ledger, "lost_updates"), 0);
    json_decref(doc);
}

static void *first_run(void *cls)
{
    struct http_reply *r = cls;
    http_call("POST", "/lab/race",
              "{\"strategy\":\"nolock\",\"buyers\":4,\"units\":4,\"hold_ms\":800,"
              "\"product\":1971}",
              r);
    http_thread_done();
    return NULL;
}

/* A second run while one is in flight: 409 busy, and the first one ends
 * whole. */
static void test_race_one_at_a_time(void **state)
{
    (void)state;
    struct http_reply first;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, first_run, &first), 0);
    /* The run and its four buyers are in flight. */
    assert_int_equal(wait_metric("stockd_in_flight_requests", 5, 10000), 0);
    expect_error("POST", "/lab/race", "{\"strategy\":\"sql\",\"product\":1971}", 409, "busy");
    pthread_join(t, NULL);
    assert_int_equal(first.status, 200);
    assert_int_equal(expect_history(first.json, 4), 4);
    http_reply_free(&first);
}

/* SIGTERM while a race runs: a new race is refused, the running one is
 * answered whole, and stockd exits 0 (the sanitizers report nothing). */
static void test_a_stop_during_a_race(void **state)
{
    (void)state;
    struct http_reply first;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, first_run, &first), 0);
    assert_int_equal(wait_metric("stockd_in_flight_requests", 5, 10000), 0);
    stockd_signal_stop();
    /* Until stockd has seen the signal, a second race meets the running one
     * (409 busy); the first answer after it is the refusal, on a connection
     * stockd then closes (the running race keeps it draining). */
    struct http_reply r = {0};
    long long deadline = now_ms() + 5000;
    do {
        http_reply_free(&r);
        http_call("POST", "/lab/race", "{\"strategy\":\"sql\",\"product\":1971}", &r);
    } while (r.status == 409 && strcmp(reply_word(&r), "busy") == 0 && now_ms() < deadline);
    assert_int_equal(r.status, 503);
    assert_string_equal(reply_word(&r), "shutting_down");
    http_reply_free(&r);
    pthread_join(t, NULL);
    assert_int_equal(first.status, 200);
    assert_int_equal(expect_history(first.json, 4), 4);
    http_reply_free(&first);
    assert_int_equal(stockd_wait_stop(), 0);
    assert_int_equal(stockd_start(NULL), 0); /* for the group's teardown */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_nolock_shows_the_lost_update),
        cmocka_unit_test(test_trace_sql_names_the_conditional_update),
        cmocka_unit_test(test_trace_fenced_shows_the_fence),
        cmocka_unit_test(test_no_trace_unless_asked),
        cmocka_unit_test(test_bad_trace_values),
        cmocka_unit_test(test_race_bounds),
        cmocka_unit_test(test_race_nolock_oversells_sql_does_not),
        cmocka_unit_test(test_race_fenced_refused_writes_write_nothing),
        cmocka_unit_test(test_race_one_at_a_time),
        cmocka_unit_test(test_a_stop_during_a_race),
    };
    return cmocka_run_group_tests(tests, stockd_group_setup, stockd_group_teardown);
}
