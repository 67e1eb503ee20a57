/*
 * unit_params.c - parameter validation: every malformed value is a 400 with
 * a message naming the parameter, nothing is silently defaulted or clamped,
 * and a query and a JSON body must agree; what a request's parse accepted
 * is kept with it and read again; an Idempotency-Key is 1..255
 * printable ASCII characters, else a 400 naming the header.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>
#include <string.h>

#include "api/params.h"
#include "core/worker.h"

static const struct param_spec specs[] = {
    {"product", 1, 2147483647LL, 1001, 0, NULL},
    {"qty", 1, 1000, 1, 0, NULL},
    {"count", 0, 1000000000, PARAM_REQUIRED, 0, NULL},
};

#define NSPECS 3

struct call {
    const char *method;
    struct query_arg args[HTTP_MAX_ARGS];
    unsigned nargs;
    const char *body;
};

/* The worker whose error buffer the parser writes to. */
static struct worker *w;

static st_result run(const struct call *c, long long *values)
{
    struct http_request req = {
        .method = c->method ? c->method : "POST",
        .path = "/x",
        .args = c->args,
        .nargs = c->nargs,
        .body = c->body ? c->body : "",
        .body_len = c->body ? strlen(c->body) : 0,
    };
    return params_parse(w, &req, specs, NSPECS, values);
}

static void expect_bad(const struct call *c, const char *message_part)
{
    long long v[NSPECS];
    assert_int_equal(run(c, v), ST_BAD_REQUEST);
    assert_non_null(strstr(w->error, message_part));
}

static void test_bounded_int(void **state)
{
    (void)state;
    long long v = -1;
    assert_int_equal(parse_bounded_int("1", 1, 1000, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(parse_bounded_int("1000", 1, 1000, &v), 0);
    assert_int_equal(parse_bounded_int("007", 1, 1000, &v), 0);
    assert_int_equal(v, 7);
    /* Leading zeros never make a number too long; only its value counts. */
    assert_int_equal(parse_bounded_int("0000000000000000000001", 1, 1000, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(parse_bounded_int("9223372036854775807", 1, 9223372036854775807LL, &v), 0);
    assert_int_equal(parse_bounded_int("9223372036854775808", 1, 9223372036854775807LL, &v), -1);
    const char *bad[] = {"",   "0",   "1001", "-1",  "+1",  " 1",
                         "1 ", "1e3", "0x10", "1.0", "abc", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_bounded_int(bad[i], 1, 1000, &v), -1);
    assert_int_equal(parse_bounded_int(NULL, 1, 1000, &v), -1);
}

static void test_defaults_and_required(void **state)
{
    (void)state;
    long long v[NSPECS];
    struct call c = {.args = {{"count", "5"}}, .nargs = 1};
    assert_int_equal(run(&c, v), ST_OK);
    assert_int_equal(v[0], 1001);
    assert_int_equal(v[1], 1);
    assert_int_equal(v[2], 5);
    struct call missing = {.nargs = 0};
    expect_bad(&missing, "count is required");
}

static void test_query_errors(void **state)
{
    (void)state;
    struct call unknown = {.args = {{"count", "1"}, {"colour", "red"}}, .nargs = 2};
    expect_bad(&unknown, "unknown parameter 'colour'");
    struct call twice = {.args = {{"count", "1"}, {"count", "1"}}, .nargs = 2};
    expect_bad(&twice, "count is given twice");
    struct call bare = {.args = {{"count", NULL}}, .nargs = 1};
    expect_bad(&bare, "count in the query has no value");
    struct call range = {.args = {{"count", "1"}, {"qty", "1001"}}, .nargs = 2};
    expect_bad(&range, "qty in the query must be an integer 1..1000, not '1001'");
    /* A message quotes at most 40 bytes of the value: one that cuts a
     * character in two must still be UTF-8, or the reply would lose it. */
    struct call cut = {.args = {{"count", "1"},
                                {"qty", "x\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                        "\xc3\xa9\xc3\xa9"}},
                       .nargs = 2};
    expect_bad(&cut, "qty in the query must be an integer 1..1000");
    json_t *message = json_string(w->error);
    assert_non_null(message);
    json_decref(message);
    long long v[NSPECS];
    struct http_request req = {.method = "GET", .path = "/x", .too_many_args = 1, .body = ""};
    assert_int_equal(params_parse(w, &req, specs, NSPECS, v), ST_BAD_REQUEST);
    assert_non_null(strstr(w->error, "more than 16 query parameters"));
}

static void test_body(void **state)
{
    (void)state;
    long long v[NSPECS];
    struct call ok = {.body = "{\"count\":10,\"qty\":3}"};
    assert_int_equal(run(&ok, v), ST_OK);
    assert_int_equal(v[1], 3);
    assert_int_equal(v[2], 10);
    struct call agree = {.args = {{"qty", "3"}}, .nargs = 1, .body = "{\"count\":1,\"qty\":3}"};
    assert_int_equal(run(&agree, v), ST_OK);

    struct call disagree = {.args = {{"qty", "2"}}, .nargs = 1, .body = "{\"count\":1,\"qty\":3}"};
    expect_bad(&disagree, "qty is 2 in the query but 3 in the body");
    struct call malformed = {.body = "{\"count\":"};
    expect_bad(&malformed, "body is not valid JSON");
    struct call array = {.body = "[1,2]"};
    expect_bad(&array, "body must be a JSON object");
    struct call text = {.body = "{\"count\":\"5\"}"};
    expect_bad(&text, "count in the body must be an integer");
    struct call real = {.body = "{\"count\":5.0}"};
    expect_bad(&real, "count in the body must be an integer");
    struct call dup = {.body = "{\"count\":5,\"count\":6}"};
    expect_bad(&dup, "not valid JSON");
    struct call stranger = {.body = "{\"count\":5,\"x\":1}"};
    expect_bad(&stranger, "unknown parameter 'x' in the body");
    struct call on_get = {.method = "GET", .body = "{\"count\":5}"};
    expect_bad(&on_get, "a GET request takes no body");
}

/* A request parsed once keeps its values: the same table asking again
 * reads them (the arguments changed here to show it), another table parses
 * anew, and a refusal keeps nothing. */
static void test_kept(void **state)
{
    (void)state;
    static const struct param_spec other[] = {{"qty", 1, 1000, 1, 0, NULL}};
    struct query_arg args[] = {{"count", "10"}, {"qty", "3"}};
    struct params_parsed parsed = {0};
    struct http_request req = {
        .method = "GET", .path = "/x", .args = args, .nargs = 2, .body = "", .parsed = &parsed};
    long long v[NSPECS], again[NSPECS];
    assert_int_equal(params_parse(w, &req, specs, NSPECS, v), ST_OK);
    assert_ptr_equal(parsed.specs, specs);
    args[1].value = "999";
    assert_int_equal(params_parse(w, &req, specs, NSPECS, again), ST_OK);
    assert_memory_equal(again, v, sizeof v);
    req.args = &args[1];
    req.nargs = 1;
    assert_int_equal(params_parse(w, &req, other, 1, again), ST_OK);
    assert_int_equal(again[0], 999);
    assert_ptr_equal(parsed.specs, other);

    struct params_parsed none = {0};
    args[0].key = "qty";
    req = (struct http_request){
        .method = "GET", .path = "/x", .args = args, .nargs = 2, .body = "", .parsed = &none};
    assert_int_equal(params_parse(w, &req, specs, NSPECS, v), ST_BAD_REQUEST);
    assert_null(none.specs);
}

static int setup(void **state)
{
    (void)state;
    w = worker_new();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    worker_free(w);
    return 0;
}

/* params_key() on a header as the HTTP layer hands it over: `sent`, or
 * no header at all when NULL. */
static st_result key_of(const char *sent, char key[IDEMPOTENCY_KEY_MAX + 1])
{
    struct http_request req = {.method = "POST", .path = "/x", .body = "", .idempotency_key = sent};
    return params_key(w, &req, key);
}

static void expect_bad_key(const char *sent)
{
    char key[IDEMPOTENCY_KEY_MAX + 1] = "left over";
    assert_int_equal(key_of(sent, key), ST_BAD_REQUEST);
    assert_non_null(strstr(w->error, "Idempotency-Key"));
    assert_string_equal(key, "");
}

static void test_idempotency_key(void **state)
{
    (void)state;
    char key[IDEMPOTENCY_KEY_MAX + 1] = "left over";
    assert_int_equal(key_of(NULL, key), ST_OK);
    assert_string_equal(key, "");
    assert_int_equal(key_of("!order-7f3a~", key), ST_OK);
    assert_string_equal(key, "!order-7f3a~");
    char longest[IDEMPOTENCY_KEY_MAX + 2];
    memset(longest, 'k', IDEMPOTENCY_KEY_MAX);
    longest[IDEMPOTENCY_KEY_MAX] = '\0';
    assert_int_equal(key_of(longest, key), ST_OK);
    assert_int_equal(strlen(key), IDEMPOTENCY_KEY_MAX);

    expect_bad_key("");
    longest[IDEMPOTENCY_KEY_MAX] = 'k';
    longest[IDEMPOTENCY_KEY_MAX + 1] = '\0';
    expect_bad_key(longest);
    expect_bad_key("a b");         /* 0x20 */
    expect_bad_key("a\tb");        /* a control character */
    expect_bad_key("a\x7f");       /* DEL */
    expect_bad_key("caf\xc3\xa9"); /* not ASCII */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded_int),     cmocka_unit_test(test_defaults_and_required),
        cmocka_unit_test(test_query_errors),    cmocka_unit_test(test_body),
        cmocka_unit_test(test_idempotency_key), cmocka_unit_test(test_kept),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
