/*
 * unit_admission.c - the token bucket's arithmetic (admission_take): a full
 * bucket gives its burst at once and no more, refills one token per
 * interval and never beyond the burst, and a refusal's Retry-After is the
 * wait for the next token in whole seconds, rounded up. And the sold-out
 * flag's bookkeeping (admission_check/answered/reset, no recheck due): it
 * refuses only buyers of more than the refused sale found, a sale or a
 * local reset lowers it, a sale admitted before that reset cannot raise it
 * again, and a product past the table is never refused. And the flag's
 * look (admission_flag_refuses), which answers from prebuilt bytes: it
 * counts and moves nothing, names the generation a reset moves, and leaves
 * a recheck due to admission_check().
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "api/admission.h"
#include "core/config.h"
#include "store/store.h"

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

/* The flag on, its recheck far away: every refusal here is from memory. */
static int flag_on(void **state)
{
    (void)state;
    config.sold_out_flag = 1;
    config.sold_out_recheck_ms = 600000;
    config.admit_rate = 0;
    return 0;
}

static st_result check(int product, int qty, struct admission_ticket *t)
{
    long long retry = 0;
    return admission_check(0, product, qty, t, &retry);
}

static void test_the_flag_refuses_only_what_the_store_refused(void **state)
{
    (void)state;
    struct admission_ticket t, u;
    assert_int_equal(check(101, 2, &t), ST_OK);
    admission_answered(&t, ST_SOLD_OUT, 2, 1); /* 1 unit was left */
    assert_int_equal(check(101, 2, &u), ST_SOLD_OUT);
    assert_int_equal(check(101, 5, &u), ST_SOLD_OUT);
    assert_int_equal(check(101, 1, &u), ST_OK); /* the last unit may still sell */
    admission_answered(&u, ST_OK, 1, 0);
    assert_int_equal(check(101, 5, &u), ST_OK); /* a sale lowers the flag */
    /* A strategy that never saw the count: the refused qty itself. */
    assert_int_equal(check(102, 3, &t), ST_OK);
    admission_answered(&t, ST_SOLD_OUT, 3, REMAINING_UNKNOWN);
    assert_int_equal(check(102, 3, &u), ST_SOLD_OUT);
    assert_int_equal(check(102, 2, &u), ST_OK);
}

static void test_a_reset_here_lowers_it_for_good(void **state)
{
    (void)state;
    struct admission_ticket before, t;
    assert_int_equal(check(201, 1, &before), ST_OK); /* admitted before the reset */
    assert_int_equal(check(201, 1, &t), ST_OK);
    admission_answered(&t, ST_SOLD_OUT, 1, 0);
    assert_int_equal(check(201, 1, &t), ST_SOLD_OUT);
    admission_reset(201);
    assert_int_equal(check(201, 1, &t), ST_OK);
    /* The sale from before the reset answers the old epoch's sold_out late. */
    admission_answered(&before, ST_SOLD_OUT, 1, 0);
    assert_int_equal(check(201, 1, &t), ST_OK);
}

static void test_the_look_moves_nothing(void **state)
{
    (void)state;
    struct admission_ticket t, seen;
    assert_false(admission_flag_refuses(301, 1, &seen)); /* never met: no slot */
    assert_int_equal(seen.slot, -1);
    assert_int_equal(check(301, 1, &t), ST_OK);
    assert_false(admission_flag_refuses(301, 1, &seen)); /* met, the flag down */
    assert_int_equal(seen.slot, t.slot);
    admission_answered(&t, ST_SOLD_OUT, 1, 0);
    assert_true(admission_flag_refuses(301, 1, &seen));
    assert_int_equal(seen.slot, t.slot);
    assert_int_equal(seen.gen, t.gen);
    assert_true(admission_flag_refuses(301, 1, &seen)); /* looking twice counts nothing */
    /* A reset moves the generation a kept answer is keyed by. */
    admission_reset(301);
    assert_false(admission_flag_refuses(301, 1, &seen));
    assert_int_equal(seen.slot, t.slot);
    assert_int_not_equal(seen.gen, t.gen);
    assert_int_equal(check(301, 1, &t), ST_OK); /* and the product sells again */
}

static void test_a_recheck_due_is_left_to_the_check(void **state)
{
    (void)state;
    config.sold_out_recheck_ms = 0; /* every period over at once */
    struct admission_ticket t, seen;
    assert_int_equal(check(401, 1, &t), ST_OK);
    admission_answered(&t, ST_SOLD_OUT, 1, 0);
    assert_false(admission_flag_refuses(401, 1, &seen)); /* a recheck is due */
    assert_int_equal(check(401, 1, &t), ST_OK);          /* the check lets it through */
}

static void test_past_the_table_nothing_is_refused(void **state)
{
    (void)state;
    struct admission_ticket t;
    /* Claim every slot; products 1000000.. then find none. */
    for (int p = 1000000; p < 1000000 + 2 * ADMISSION_PRODUCTS; p++)
        assert_int_equal(check(p, 1, &t), ST_OK);
    int untracked = 0;
    for (int p = 3000000; p < 3000100; p++) {
        assert_int_equal(check(p, 1, &t), ST_OK);
        untracked += t.slot < 0;
        admission_answered(&t, ST_SOLD_OUT, 1, 0);
        assert_int_equal(check(p, 1, &t), t.slot < 0 ? ST_OK : ST_SOLD_OUT);
    }
    assert_true(untracked > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_full_bucket_gives_its_burst),
        cmocka_unit_test(test_refill_is_one_token_per_interval),
        cmocka_unit_test(test_refill_stops_at_the_burst),
        cmocka_unit_test(test_retry_after_is_whole_seconds_rounded_up),
        cmocka_unit_test(test_a_refusal_changes_nothing),
        cmocka_unit_test_setup(test_the_flag_refuses_only_what_the_store_refused, flag_on),
        cmocka_unit_test_setup(test_a_reset_here_lowers_it_for_good, flag_on),
        cmocka_unit_test_setup(test_the_look_moves_nothing, flag_on),
        cmocka_unit_test_setup(test_a_recheck_due_is_left_to_the_check, flag_on),
        cmocka_unit_test_setup(test_past_the_table_nothing_is_refused, flag_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
