/*
 * unit_accounting.c - the contract's arithmetic and its JSON: oversold and
 * lost_updates from initial/remaining/sold, negative stock shown as it is,
 * and the table of results to status codes and error words.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <string.h>

#include "sale/stock.h"
#include "sale/lock.h"
#include "sale/strategy.h"

static void test_formulas(void **state)
{
    (void)state;
    struct store_account exact = {
        .present = 1, .initial = 100, .remaining = 0, .sold = 100, .orders = 100};
    assert_int_equal(account_oversold(&exact), 0);
    assert_int_equal(account_lost_updates(&exact), 0);
    /* nolock: 120 sales acknowledged, the row says only 90 were deducted */
    struct store_account raced = {
        .present = 1, .initial = 100, .remaining = 10, .sold = 120, .orders = 120};
    assert_int_equal(account_oversold(&raced), 20);
    assert_int_equal(account_lost_updates(&raced), 30);
    /* a blind write below zero: remaining is reported, never clamped */
    struct store_account negative = {
        .present = 1, .initial = 5, .remaining = -3, .sold = 8, .orders = 8};
    assert_int_equal(account_oversold(&negative), 3);
    assert_int_equal(account_lost_updates(&negative), 0);
    /* held orders: 10 sold, 4 of them returned to the stock: nothing lost */
    struct store_account returned = {
        .present = 1, .initial = 10, .remaining = 4, .sold = 10, .holds = 1, .returned = 4};
    assert_int_equal(account_oversold(&returned), 0);
    assert_int_equal(account_lost_updates(&returned), 0);
    /* a return made twice: a unit from nothing, sold again */
    struct store_account twice = {
        .present = 1, .initial = 2, .remaining = 0, .sold = 5, .holds = 1, .returned = 2};
    assert_int_equal(account_oversold(&twice), 1);
    assert_int_equal(account_lost_updates(&twice), 1);
}

static void test_json(void **state)
{
    (void)state;
    struct store_account negative = {
        .present = 1, .initial = 5, .remaining = -3, .sold = 8, .orders = 7};
    json_t *doc = account_json(&negative);
    assert_int_equal(json_integer_value(json_object_get(doc, "remaining")), -3);
    assert_int_equal(json_integer_value(json_object_get(doc, "sold")), 8);
    assert_int_equal(json_integer_value(json_object_get(doc, "orders")), 7);
    assert_int_equal(json_integer_value(json_object_get(doc, "oversold")), 3);
    assert_int_equal(json_integer_value(json_object_get(doc, "lost_updates")), 0);
    assert_int_equal(json_integer_value(json_object_get(doc, "initial")), 5);
    assert_null(json_object_get(doc, "held")); /* a store that holds no orders */
    json_decref(doc);
    struct store_account orders = {.present = 1,
                                   .initial = 9,
                                   .remaining = 4,
                                   .sold = 6,
                                   .holds = 1,
                                   .held = 2,
                                   .paid = 3,
                                   .returned = 1,
                                   .stranded = 2};
    doc = account_json(&orders);
    assert_int_equal(json_integer_value(json_object_get(doc, "held")), 2);
    assert_int_equal(json_integer_value(json_object_get(doc, "paid")), 3);
    assert_int_equal(json_integer_value(json_object_get(doc, "returned")), 1);
    assert_int_equal(json_integer_value(json_object_get(doc, "stranded")), 2);
    assert_int_equal(json_integer_value(json_object_get(doc, "returned_twice")), 0);
    assert_int_equal(json_integer_value(json_object_get(doc, "lost_updates")), 0);
    json_decref(doc);
    struct store_account absent = {0};
    doc = account_json(&absent);
    assert_true(json_is_null(doc));
    json_decref(doc);
}

static void test_result_table(void **state)
{
    (void)state;
    assert_int_equal(result_status(ST_OK), 200);
    assert_int_equal(result_status(ST_SOLD_OUT), 409);
    assert_string_equal(result_word(ST_SOLD_OUT), "sold_out");
    assert_int_equal(result_status(ST_BUSY), 409);
    assert_string_equal(result_word(ST_BUSY), "busy");
    assert_int_equal(result_status(ST_BAD_REQUEST), 400);
    assert_string_equal(result_word(ST_UNKNOWN_STRATEGY), "unknown_strategy");
    assert_string_equal(result_word(ST_UNKNOWN_PRODUCT), "unknown_product");
    assert_int_equal(result_status(ST_NOT_FOUND), 404);
    assert_int_equal(result_status(ST_METHOD_NOT_ALLOWED), 405);
    assert_int_equal(result_status(ST_PAYLOAD_TOO_LARGE), 413);
    assert_int_equal(result_status(ST_BACKEND_UNAVAILABLE), 503);
    assert_string_equal(result_word(ST_BACKEND_UNAVAILABLE), "backend_unavailable");
    assert_int_equal(result_status(ST_CREATED), 201);
    assert_true(result_ok(ST_CREATED) && result_ok(ST_OK) && !result_ok(ST_EXPIRED));
    assert_string_equal(result_word(ST_EXPIRED), "expired");
    assert_string_equal(result_word(ST_ALREADY_PAID), "already_paid");
    assert_string_equal(result_word(ST_PAID), "paid");
    assert_int_equal(result_status(ST_UNKNOWN_ORDER), 404);
    assert_string_equal(result_word(ST_UNKNOWN_ORDER), "unknown_order");
}

static void test_strategy_table(void **state)
{
    (void)state;
    assert_true(strategy_count() >= 7);
    for (size_t i = 0; i < strategy_count(); i++) {
        const struct strategy *s = strategy_at(i);
        assert_true(strategy_row_sound(s));
        assert_true(!s->deduct != !s->lock); /* its own body, or a lock: exactly one */
        assert_non_null(s->summary);
        assert_ptr_equal(strategy_find(s->name), s);
        /* safe across instances implies safe in one */
        assert_true(!s->safe_multi || s->safe_single);
        for (size_t j = i + 1; j < strategy_count(); j++)
            assert_string_not_equal(s->name, strategy_at(j)->name);
    }
    assert_null(strategy_find("no-such-strategy"));
    assert_null(strategy_at(strategy_count()));
}

/* The fact /strategies publishes for `name` under `key`. */
static void expect_fact(const char *name, const char *key, const char *fact)
{
    const struct strategy *s = strategy_find(name);
    assert_non_null(s);
    json_t *o = strategy_json(s);
    assert_string_equal(json_string_value(json_object_get(o, key)), fact);
    json_decref(o);
}

/* Every row that keeps something in Redis (its store or its lock) has a
 * failover fact, and /strategies says it; a row states one only where it
 * differs from what follows from its store and lock, never "none", and
 * never without Redis. */
static void test_failover_fact(void **state)
{
    (void)state;
    const backend_set on_redis = BACKEND_BIT(BACKEND_REDIS) | BACKEND_BIT(BACKEND_REDLOCK);
    for (size_t i = 0; i < strategy_count(); i++) {
        const struct strategy *s = strategy_at(i);
        struct strategy row = *s;
        json_t *o = strategy_json(s);
        if (strategy_needs(s) & on_redis) {
            assert_int_not_equal(strategy_failover(s), FAILOVER_NONE);
            assert_non_null(json_string_value(json_object_get(o, "failover")));
            row.failover = FAILOVER_NONE; /* stated "none" for a row on Redis */
        } else {
            assert_null(json_object_get(o, "failover"));
            row.failover = FAILOVER_SAFE; /* a fact for a row that has no Redis */
        }
        assert_false(strategy_row_sound(&row));
        json_decref(o);
    }
    expect_fact("lua", "failover", "loses_sales");        /* follows: its stock in Redis */
    expect_fact("redis-lock", "failover", "two_holders"); /* follows: its lock there */
    expect_fact("redlock", "failover", "safe");           /* follows: no failover there */
    expect_fact("lua-wait", "failover", "safe");          /* stated: it waits for a replica */
    assert_int_equal(strategy_find("lua")->failover, FAILOVER_DEFAULT);
}

/* A partition does what a failover does, except to a row that settles
 * later: only there /strategies states a partition fact. */
static void test_partition_fact(void **state)
{
    (void)state;
    for (size_t i = 0; i < strategy_count(); i++) {
        const struct strategy *s = strategy_at(i);
        json_t *o = strategy_json(s);
        int own = s->settles == SETTLES_LATER && strategy_failover(s) == FAILOVER_LOSES_SALES;
        assert_int_equal(strategy_partition(s), own ? PARTITION_OVERSELLS : PARTITION_AS_FAILOVER);
        assert_int_equal(json_object_get(o, "partition") != NULL, own);
        json_decref(o);
    }
    expect_fact("lua-stream", "partition", "oversells"); /* follows: it settles later */
    assert_int_equal(strategy_partition(strategy_find("lua")), PARTITION_AS_FAILOVER);
}

/* Every row whose stock is in MySQL has a cluster fact, and /strategies
 * says it; a MySQL row with no lock, or a lock inside MySQL, must state
 * its own, and a row whose stock is elsewhere states none. */
static void test_cluster_fact(void **state)
{
    (void)state;
    for (size_t i = 0; i < strategy_count(); i++) {
        const struct strategy *s = strategy_at(i);
        struct strategy row = *s;
        json_t *o = strategy_json(s);
        if (s->store->backend == BACKEND_MYSQL) {
            assert_int_not_equal(strategy_cluster(s), CLUSTER_NONE);
            assert_non_null(json_string_value(json_object_get(o, "cluster")));
            row.cluster = CLUSTER_DEFAULT; /* unstated */
            if (!s->lock || s->lock->backend == BACKEND_MYSQL)
                assert_false(strategy_row_sound(&row));
            else
                assert_true(strategy_row_sound(&row));
        } else {
            assert_null(json_object_get(o, "cluster"));
            row.cluster = CLUSTER_SAFE; /* a fact for a row that has no MySQL stock */
            assert_false(strategy_row_sound(&row));
        }
        json_decref(o);
    }
    expect_fact("mutex", "cluster", "two_holders");    /* follows: a process's lock */
    expect_fact("zk-lock", "cluster", "safe");         /* follows: a lock outside MySQL */
    expect_fact("get-lock", "cluster", "two_holders"); /* stated: one server's lock */
    expect_fact("sql", "cluster", "conflicts_at_commit");
}

/* A row that undersells says so, and only such a row; one that refuses
 * even qty 1 with units left cannot claim that every unit sells. */
static void test_undersells_fact(void **state)
{
    (void)state;
    for (size_t i = 0; i < strategy_count(); i++) {
        const struct strategy *s = strategy_at(i);
        json_t *o = strategy_json(s);
        assert_int_equal(json_object_get(o, "undersells") != NULL,
                         s->undersells != UNDERSELLS_NEVER);
        struct strategy row = *s;
        row.undersells = UNDERSELLS_ANY_QTY;
        row.contention = CONTENTION_WAITS;
        assert_false(strategy_row_sound(&row));
        json_decref(o);
    }
    expect_fact("segmented", "undersells", "split_qty");
    expect_fact("segmented-strict", "undersells", "any_qty");
    expect_fact("segmented", "failover", "loses_sales"); /* follows: its stock in Redis */
    json_t *lua = strategy_json(strategy_find("lua"));
    assert_null(json_object_get(lua, "undersells"));
    json_decref(lua);
}

/* A row that breaks a rule is refused with that rule's own sentence: two
 * rules broken one at a time give two sentences, each about its rule. */
static void test_flaw_names_the_rule(void **state)
{
    (void)state;
    const struct strategy *s = strategy_find("segmented");
    assert_null(strategy_row_flaw(s));
    struct strategy waits = *s, derived = *s;
    waits.undersells = UNDERSELLS_ANY_QTY;
    waits.contention = CONTENTION_WAITS;
    derived.failover = FAILOVER_NONE;
    const char *flaw = strategy_row_flaw(&waits), *other = strategy_row_flaw(&derived);
    assert_non_null(flaw);
    assert_non_null(other);
    assert_non_null(strstr(flaw, "waits"));
    assert_non_null(strstr(other, "FAILOVER_NONE"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_result_table),
        cmocka_unit_test(test_strategy_table),
        cmocka_unit_test(test_failover_fact),
        cmocka_unit_test(test_partition_fact),
        cmocka_unit_test(test_cluster_fact),
        cmocka_unit_test(test_undersells_fact),
        cmocka_unit_test(test_flaw_names_the_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
