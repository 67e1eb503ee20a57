/*
 * unit_admission.c - the token bucket's arithmetic (admission_take): a full
 * bucket gives its burst at once and no more, refills one token per
 * interval and never beyond the burst, and a refusal's Retry-After is the
 * wait for the next token in whole seconds, rounded up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "api/admission.h"

#define SECOND 1000000000LL

/* Takes tokens at `now` until one is refused: how many were given. */
static int take_all(long long *tat, long long now, long long interval, long long burst)
{
    long long retry = 0;
    int given = 0;
    while (admission_take(tat, now, interval, burst, &retry))
        given++;
    assert_true(retry >= 1);
    return given;
}

static void test_a_full_bucket_gives_its_burst(void **state)
{
    (void)state;
    long long tat = 0; /* never used: full */
    assert_int_equal(take_all(&tat, 50 * SECOND, SECOND / 10, 5), 5);
    tat = 0;
    assert_int_equal(take_all(&tat, 50 * SECOND, SECOND / 10, 1), 1);
}

static void test_refill_is_one_token_per_interval(void **state)
{
    (void)state;
    long long tat = 0, now = 7 * SECOND, interval = SECOND / 100, retry = 0; /* 100/s */
    assert_int_equal(take_all(&tat, now, interval, 10), 10);
    /* Just short of one interval: still empty. */
    assert_false(admission_take(&tat, now + interval - 1, interval, 10, &retry));
    /* One interval: one token, then empty again. */
    assert_int_equal(take_all(&tat, now + interval, interval, 10), 1);
    /* 3.5 intervals later: three tokens. */
    assert_int_equal(take_all(&tat, now + interval + 7 * interval / 2, interval, 10), 3);
}

static void test_refill_stops_at_the_burst(void **state)
{
    (void)state;
    long long tat = 0, now = SECOND, interval = SECOND / 100;
    assert_int_equal(take_all(&tat, now, interval, 10), 10);
    /* An hour idle: the bucket holds the burst, no more. */
    assert_int_equal(take_all(&tat, now + 3600 * SECOND, interval, 10), 10);
}

static void test_retry_after_is_whole_seconds_rounded_up(void **state)
{
    (void)state;
    long long retry = 0;
    /* 1 token per 2.5 s: empty, the next token is 2.5 s away -> 3. */
    long long tat = 0, now = 100 * SECOND, interval = 5 * SECOND / 2;
    assert_int_equal(take_all(&tat, now, interval, 1), 1);
    assert_false(admission_take(&tat, now, interval, 1, &retry));
    assert_int_equal(retry, 3);
    /* 1 ns from the token: still a whole second. */
    assert_false(admission_take(&tat, now + interval - 1, interval, 1, &retry));
    assert_int_equal(retry, 1);
    /* Exactly two seconds away: 2, not 3. */
    assert_false(admission_take(&tat, now + interval - 2 * SECOND, interval, 1, &retry));
    assert_int_equal(retry, 2);
    /* A fast bucket's next token is far under a second away: 1. */
    tat = 0;
    assert_int_equal(take_all(&tat, now, SECOND / 1000, 3), 3);
    assert_false(admission_take(&tat, now, SECOND / 1000, 3, &retry));
    assert_int_equal(retry, 1);
}

static void test_a_refusal_changes_nothing(void **state)
{
    (void)state;
    long long tat = 0, now = SECOND, interval = SECOND / 10, retry = 0;
    assert_int_equal(take_all(&tat, now, interval, 2), 2);
    long long empty = tat;
    for (int i = 0; i < 100; i++)
        assert_false(admission_take(&tat, now, interval, 2, &retry));
    assert_true(tat == empty); /* refused buyers do not push the refill back */
    assert_int_equal(take_all(&tat, now + interval, interval, 2), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_full_bucket_gives_its_burst),
        cmocka_unit_test(test_refill_is_one_token_per_interval),
        cmocka_unit_test(test_refill_stops_at_the_burst),
        cmocka_unit_test(test_retry_after_is_whole_seconds_rounded_up),
        cmocka_unit_test(test_a_refusal_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
