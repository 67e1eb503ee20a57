/*
 * it_stream.c - lua-stream: accepted in Redis, settled into MySQL exactly
 * once, against the real stack.
 *
 * Proves:
 *   - sold under load, every unit sells once in Redis, and the consumer
 *     inside stockd settles the stream: MySQL's ledger and stock end equal
 *     to Redis's, the stream empty; each 200 carries an order id, and each
 *     id is in MySQL once;
 *   - a replayed entry (the same order id streamed again) inserts nothing
 *     and sells nothing twice;
 *   - a consumer killed -9 before its COMMIT, and one killed after its
 *     COMMIT and before its XACK (held there by --stream-hold, so the kill
 *     lands in that window every run): a new consumer claims the pending
 *     entries (XAUTOCLAIM) and MySQL ends with every order exactly once;
 *   - two consumer processes share the group without writing an order
 *     twice;
 *   - a poison entry (unparsable, unknown product) goes to orders:dead with
 *     its reason and leaves the stream;
 *   - an order from before a reset never lands after it;
 *   - with MySQL down, sales are still accepted and the stream drains once
 *     MySQL is back.
 * The stockd of the second group settles nothing itself
 * (--stream-consumers 0): its tests run consumer processes of their own.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_LOAD = 9501,
    PRODUCT_REPLAY = 9502,
    PRODUCT_BEFORE_COMMIT = 9503,
    PRODUCT_BEFORE_ACK = 9504,
    PRODUCT_TWO = 9505,
    PRODUCT_EPOCH = 9506,
    PRODUCT_MYSQL_DOWN = 9507,
    PRODUCT_UNKNOWN = 9599, /* never reset: in no store */
};

#define CLAIM_MS "300"

/* One sale, which must be a 200; its order id into `order`. */
static void sell(int product, char order[64])
{
    char path[96];
    snprintf(path, sizeof path, "/stock/deduct/lua-stream?product=%d", product);
    json_t *doc = expect_ok("POST", path, NULL, 200);
    snprintf(order, 64, "%s", json_str_member(doc, "order"));
    json_decref(doc);
}

/* How many orders rows carry `order`. */
static long rows_of(const char *order)
{
    char sql[160], out[64];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM orders WHERE order_id = '%s'", order);
    assert_int_equal(stack_mysql(sql, out, sizeof out), 0);
    return atol(out);
}

static void expect_once_each(char orders[][64], int n)
{
    for (int i = 0; i < n; i++)
        if (rows_of(orders[i]) != 1) {
            fprintf(stderr, "order %s is in mysql %ld times\n", orders[i], rows_of(orders[i]));
            fail();
        }
}

/* MySQL's and Redis's figures agree: every accepted unit settled once. */
static void expect_stores_agree(int product, long long initial, long long sold)
{
    struct account a = account(product);
    assert_int_equal(a.redis.sold, sold);
    assert_int_equal(a.mysql.sold, sold);
    assert_int_equal(a.mysql.remaining, initial - sold);
    assert_int_equal(a.redis.remaining, initial - sold);
    assert_int_equal(a.mysql.oversold, 0);
    assert_int_equal(a.mysql.lost_updates, 0);
}

static void start_consumer(struct consumer_process *c, const char *hold)
{
    const char *args[] = {"--stream-claim-ms", CLAIM_MS, hold ? "--stream-hold" : NULL, hold, NULL};
    assert_int_equal(consumer_start(c, args), 0);
}

/* ------------------------------------------------ the consumer in stockd */

static void test_sells_once_and_settles(void **state)
{
    (void)state;
    reset(PRODUCT_LOAD, 300);
    struct tally t = drive("lua-stream", PRODUCT_LOAD, 400, 8, NULL);
    print_tally("lua-stream", &t);
    assert_int_equal(t.ok, 300);
    assert_int_equal(t.sold_out, 100);
    expect_stream_drained(PRODUCT_LOAD, 300);
    expect_stores_agree(PRODUCT_LOAD, 300, 300);
    char out[64];
    assert_int_equal(stack_mysql("SELECT COUNT(*) - COUNT(DISTINCT order_id) FROM orders"
                                 " WHERE product_id = 9501",
                                 out, sizeof out),
                     0);
    assert_int_equal(atol(out), 0);
}

static void test_the_row_says_it_settles_later(void **state)
{
    (void)state;
    const json_t *row = find_strategy("lua-stream");
    assert_non_null(row);
    assert_string_equal(json_str_member(row, "settles"), "async");
    assert_string_equal(json_str_member(row, "failover"), "loses_sales");
    assert_null(json_object_get(find_strategy("lua"), "settles"));
}

/* ----------------------------------------------- consumers of their own */

static void test_replayed_entry_is_a_noop(void **state)
{
    (void)state;
    char orders[3][64], args[256], out[256], epoch[32];
    reset(PRODUCT_REPLAY, 10);
    for (int i = 0; i < 3; i++)
        sell(PRODUCT_REPLAY, orders[i]);
    struct consumer_process c;
    start_consumer(&c, NULL);
    expect_stream_drained(PRODUCT_REPLAY, 3);
    /* The first order streamed again, as a retried send would. */
    assert_int_equal(redis_cli("GET stock:{9502}:epoch", epoch, sizeof epoch), 0);
    epoch[strcspn(epoch, "\n")] = '\0';
    snprintf(args, sizeof args, "XADD orders:stream '*' order %s product 9502 qty 1 epoch %s",
             orders[0], epoch);
    assert_int_equal(redis_cli(args, out, sizeof out), 0);
    expect_stream_drained(PRODUCT_REPLAY, 3);
    assert_int_equal(consumer_stop(&c), 0);
    expect_once_each(orders, 3);
    struct account a = account(PRODUCT_REPLAY);
    assert_int_equal(a.mysql.remaining, 7);
    assert_int_equal(a.mysql.sold, 3);
}

/* A consumer held at `hold` with `n` orders in its batch is killed -9;
 * a new one settles them, each once. `committed`: what MySQL has then. */
static void kill_in_window(int product, const char *hold, const char *line, long long committed)
{
    char orders[5][64];
    reset(product, 10);
    for (int i = 0; i < 5; i++)
        sell(product, orders[i]);
    struct consumer_process held, next;
    start_consumer(&held, hold);
    assert_int_equal(consumer_wait_log(&held, line, STREAM_DRAIN_MS), 0);
    consumer_kill(&held);
    long long length, settled, accepted;
    stream_figures(product, &length, &settled, &accepted);
    assert_int_equal(length, 5);
    assert_int_equal(settled, committed);
    assert_int_equal(accepted, 5);
    start_consumer(&next, NULL);
    expect_stream_drained(product, 5);
    assert_int_equal(consumer_stop(&next), 0);
    expect_once_each(orders, 5);
    expect_stores_agree(product, 10, 5);
}

static void test_consumer_killed_before_commit(void **state)
{
    (void)state;
    kill_in_window(PRODUCT_BEFORE_COMMIT, "commit", "holding 5 orders before commit", 0);
}

static void test_consumer_killed_after_commit_before_ack(void **state)
{
    (void)state;
    kill_in_window(PRODUCT_BEFORE_ACK, "ack", "holding 5 orders committed, before ack", 5);
}

static void test_two_consumers_share_the_group(void **state)
{
    (void)state;
    const char *args[] = {"--stream-batch", "4", "--stream-consumers", "2", NULL};
    struct consumer_process a, b;
    reset(PRODUCT_TWO, 300);
    assert_int_equal(consumer_start(&a, args), 0);
    assert_int_equal(consumer_start(&b, args), 0);
    struct tally t = drive("lua-stream", PRODUCT_TWO, 300, 8, NULL);
    assert_int_equal(t.ok, 300);
    expect_stream_drained(PRODUCT_TWO, 300);
    assert_int_equal(consumer_stop(&a), 0);
    assert_int_equal(consumer_stop(&b), 0);
    expect_stores_agree(PRODUCT_TWO, 300, 300);
    char out[64];
    assert_int_equal(stack_mysql("SELECT COUNT(DISTINCT order_id) FROM orders"
                                 " WHERE product_id = 9505",
                                 out, sizeof out),
                     0);
    assert_int_equal(atol(out), 300);
}

static void test_poison_goes_to_dead_letters(void **state)
{
    (void)state;
    char before[32], after[32], out[4096];
    assert_int_equal(redis_cli("XLEN orders:dead", before, sizeof before), 0);
    assert_int_equal(redis_cli("XADD orders:stream '*' garbage 1", out, sizeof out), 0);
    assert_int_equal(redis_cli("XADD orders:stream '*' order poison-9599 product 9599 qty 1 "
                               "epoch 0",
                               out, sizeof out),
                     0);
    struct consumer_process c;
    start_consumer(&c, NULL);
    long long length = -1, deadline = now_ms() + STREAM_DRAIN_MS;
    do {
        assert_int_equal(redis_cli("XLEN orders:stream", out, sizeof out), 0);
        length = atoll(out);
    } while (length && now_ms() < deadline && (sleep_ms(50), 1));
    assert_int_equal(consumer_stop(&c), 0);
    assert_int_equal(length, 0);
    assert_int_equal(redis_cli("XLEN orders:dead", after, sizeof after), 0);
    assert_int_equal(atol(after) - atol(before), 2);
    assert_int_equal(redis_cli("XREVRANGE orders:dead + - COUNT 2", out, sizeof out), 0);
    assert_non_null(strstr(out, "unparsable"));
    assert_non_null(strstr(out, "product 9599 is not in mysql"));
    assert_int_equal(rows_of("poison-9599"), 0);
}

static void test_reset_fences_orders_of_the_old_epoch(void **state)
{
    (void)state;
    char orders[5][64];
    reset(PRODUCT_EPOCH, 10);
    for (int i = 0; i < 3; i++)
        sell(PRODUCT_EPOCH, orders[i]);
    reset(PRODUCT_EPOCH, 10); /* the three are still in the stream */
    for (int i = 3; i < 5; i++)
        sell(PRODUCT_EPOCH, orders[i]);
    struct consumer_process c;
    start_consumer(&c, NULL);
    expect_stream_drained(PRODUCT_EPOCH, 2);
    assert_int_equal(consumer_stop(&c), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rows_of(orders[i]), 0);
    expect_once_each(orders + 3, 2);
    expect_stores_agree(PRODUCT_EPOCH, 10, 2);
}

static void test_mysql_down_sales_accepted_then_drained(void **state)
{
    (void)state;
    char orders[5][64];
    reset(PRODUCT_MYSQL_DOWN, 10);
    struct consumer_process c;
    start_consumer(&c, NULL);
    assert_int_equal(stack_stop_one("mysql"), 0);
    for (int i = 0; i < 5; i++)
        sell(PRODUCT_MYSQL_DOWN, orders[i]);
    char out[32];
    assert_int_equal(redis_cli("XLEN orders:stream", out, sizeof out), 0);
    assert_int_equal(atol(out), 5);
    assert_int_equal(stack_start_one("mysql"), 0);
    expect_stream_drained(PRODUCT_MYSQL_DOWN, 5);
    assert_int_equal(consumer_stop(&c), 0);
    expect_once_each(orders, 5);
    expect_stores_agree(PRODUCT_MYSQL_DOWN, 10, 5);
}

static int no_consumer_setup(void **state)
{
    const char *args[] = {"--stream-consumers", "0", NULL};
    return http_group_setup(state) == 0 && stockd_start(args) == 0 ? 0 : -1;
}

/* MySQL back up whatever a test did. */
static int mysql_back(void **state)
{
    (void)state;
    return stack_start_one("mysql");
}

int main(void)
{
    const struct CMUnitTest inside[] = {
        cmocka_unit_test(test_sells_once_and_settles),
        cmocka_unit_test(test_the_row_says_it_settles_later),
    };
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_replayed_entry_is_a_noop),
        cmocka_unit_test(test_consumer_killed_before_commit),
        cmocka_unit_test(test_consumer_killed_after_commit_before_ack),
        cmocka_unit_test(test_two_consumers_share_the_group),
        cmocka_unit_test(test_poison_goes_to_dead_letters),
        cmocka_unit_test(test_reset_fences_orders_of_the_old_epoch),
        cmocka_unit_test_teardown(test_mysql_down_sales_accepted_then_drained, mysql_back),
    };
    int failed = cmocka_run_group_tests_name("the consumer inside stockd", inside,
                                             stockd_group_setup, stockd_group_teardown);
    failed += cmocka_run_group_tests_name("consumer processes", alone, no_consumer_setup,
                                          stockd_group_teardown);
    return failed ? 1 : 0;
}
