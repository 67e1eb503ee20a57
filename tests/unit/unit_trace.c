/*
 * unit_trace.c - a sale's trace as its reply shows it: only what was
 * filled in, never a guess; the moments stamped on the monotonic clock in
 * order; nothing stamped without a trace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <string.h>

#include "core/trace.h"
#include "core/worker.h"

static void test_empty_trace_has_only_its_arrival(void **state)
{
    (void)state;
    struct sale_trace t;
    trace_begin(&t, 1234);
    json_t *o = trace_json(&t, 0, 0, 0);
    assert_int_equal(json_object_size(o), 1);
    json_t *times = json_object_get(o, "t_us");
    assert_int_equal(json_object_size(times), 1);
    assert_int_equal(json_integer_value(json_object_get(times, "arrival")), 1234);
    json_decref(o);
}

static void test_what_was_filled_and_nothing_else(void **state)
{
    (void)state;
    struct sale_trace t;
    trace_begin(&t, monotonic_us());
    trace_mark(&t, TRACE_READ);
    t.read = 0; /* a count of 0 is a value, not "unknown" */
    trace_mark(&t, TRACE_WRITE);
    trace_mark(&t, TRACE_COMMIT);
    t.wrote = -1;
    t.update = "UPDATE ...";
    memcpy(t.lock_token, "0123456789abcdef0123456789abcdef", 33);
    json_t *o = trace_json(&t, 3, 12, 0);
    json_t *times = json_object_get(o, "t_us");
    assert_int_equal(json_object_size(times), 4);
    assert_null(json_object_get(times, "lock_acquired"));
    assert_null(json_object_get(times, "answer"));
    long long arrival = json_integer_value(json_object_get(times, "arrival"));
    long long read = json_integer_value(json_object_get(times, "read"));
    long long write = json_integer_value(json_object_get(times, "write"));
    long long commit = json_integer_value(json_object_get(times, "commit"));
    assert_true(arrival <= read && read <= write && write <= commit);
    assert_int_equal(json_integer_value(json_object_get(o, "read")), 0);
    assert_int_equal(json_integer_value(json_object_get(o, "wrote")), -1);
    assert_string_equal(json_string_value(json_object_get(o, "update")), "UPDATE ...");
    assert_int_equal(json_integer_value(json_object_get(o, "fence")), 12);
    assert_int_equal(json_integer_value(json_object_get(o, "attempts")), 3);
    assert_int_equal(strlen(json_string_value(json_object_get(o, "lock_token"))), 32);
    assert_null(json_object_get(o, "version"));
    assert_null(json_object_get(o, "batch"));
    json_decref(o);
}

static void test_no_trace_no_stamp(void **state)
{
    (void)state;
    trace_mark(NULL, TRACE_READ); /* a sale asked for no trace: nothing happens */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_trace_has_only_its_arrival),
        cmocka_unit_test(test_what_was_filled_and_nothing_else),
        cmocka_unit_test(test_no_trace_no_stamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
