/*
 * it_zoo_sql.c - the ZooKeeper and MySQL lock strategies (zk-lock,
 * mysql-lock, get-lock) and the transaction pitfall (mutex-tx), against a
 * running stockd.
 *
 * Proves:
 *   - /strategies lists the four with their claims;
 *   - mutex-tx (the mutex released before COMMIT) oversells and loses
 *     updates in every run once hold_ms keeps the commit pending;
 *   - a real deadlock (ER_LOCK_DEADLOCK from InnoDB, a for-update sale the
 *     victim of a cycle with another session) answers 409 busy, never 500
 *     or 503, and writes nothing; the next sale goes through;
 *   - with a short lock_wait_ms, every strategy that takes a lock answers
 *     busy to those that wait on a holder longer than that, and leaves
 *     nothing behind: the next sale goes through at once (zk-lock: a waiter
 *     that gives up deletes its node);
 *   - ZooKeeper stopped under stockd: zk-lock answers 503
 *     backend_unavailable, /health says zookeeper is down, reset and the
 *     MySQL locks still work; once ZooKeeper is back, zk-lock sells again
 *     without a restart, even though a holder lost ZooKeeper mid-sale.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Sized for a small (2-core) machine. */
#define STOCK 20
#define REQUESTS 40 /* twice the stock */
#define THREADS 8
#define RUNS 3

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_MUTEX_TX = 8710,
    PRODUCT_OUTAGE = 8730,
    PRODUCT_OUTAGE_MYSQL = 8731, /* sold by get-lock while ZooKeeper is down */
    PRODUCTS_BUSY = 8750,        /* + index in /strategies */
    PRODUCT_DEADLOCK = 8790,     /* for-update's sale, and the other side's next product */
};

/* Asserts that `product` sold `sold` units from MySQL, that its stock moved
 * by exactly that, and that no update was lost. */
static void expect_mysql_sold(int product, long long sold)
{
    struct account a = account(product);
    assert_int_equal(a.mysql.sold, sold);
    assert_int_equal(a.mysql.remaining, STOCK - sold);
    assert_int_equal(a.mysql.lost_updates, 0);
}

static void test_claims(void **state)
{
    (void)state;
    static const struct claim claims[] = {
        /* name, store, safe_single, safe_multi, caveat */
        {"mutex-tx", "mysql", 0, 0, 0},
        {"zk-lock", "mysql", 1, 1, 1},
        {"mysql-lock", "mysql", 1, 1, 1},
        {"get-lock", "mysql", 1, 1, 0},
    };
    expect_claims(claims, sizeof claims / sizeof claims[0]);
}

static void test_mutex_tx_oversells_every_exposed_run(void **state)
{
    (void)state;
    for (int run = 0; run < RUNS; run++) {
        reset(PRODUCT_MUTEX_TX, STOCK);
        struct tally t = drive("mutex-tx", PRODUCT_MUTEX_TX, REQUESTS, THREADS, "hold_ms=20");
        struct account a = account(PRODUCT_MUTEX_TX);
        print_tally("mutex-tx hold_ms=20", &t);
        fprintf(stderr, "  sold %lld, remaining %lld, oversold %lld, lost updates %lld\n",
                a.mysql.sold, a.mysql.remaining, a.mysql.oversold, a.mysql.lost_updates);
        assert_int_equal(t.other, 0);
        assert_int_equal(a.mysql.sold, t.ok);
        assert_true(t.ok > STOCK);
        assert_true(a.mysql.oversold > 0);
        assert_true(a.mysql.lost_updates > 0);
    }
}

/* The second group runs stockd with a short lock_wait_ms. */
#define SHORT_WAIT_MS "150"

struct holder {
    const char *strategy;
    int product;
    const char *query;
    struct tally result;
};

static void *hold(void *arg)
{
    struct holder *h = arg;
    h->result = drive(h->strategy, h->product, 1, 1, h->query);
    return NULL;
}

/* For every strategy that takes a lock (its "lock" in /strategies): one
 * holder keeps the lock 700 ms; once it surely holds it, three more ask,
 * and each gives up after 150 ms; then nothing is left behind: the next
 * sale is not kept waiting. */
static void expect_busy_and_nothing_left(const json_t *s, int index)
{
    if (!json_is_string(json_object_get(s, "lock")))
        return;
    const char *name = json_str_member(s, "name");
    int product = PRODUCTS_BUSY + index;
    reset(product, STOCK);
    struct holder h = {name, product, "hold_ms=700", {0}};
    pthread_t id;
    assert_int_equal(pthread_create(&id, NULL, hold, &h), 0);
    sleep_ms(200);
    struct tally t = drive(name, product, 3, 3, NULL);
    pthread_join(id, NULL);
    print_tally(name, &t);
    assert_int_equal(h.result.ok, 1);
    assert_int_equal(t.busy, 3);
    expect_deduct(name, product, NULL, 200, "");
    struct account a = account(product);
    const struct store_figures *f = account_store(&a, json_str_member(s, "store"));
    assert_int_equal(f->sold, 2);
    assert_int_equal(f->remaining, STOCK - 2);
}

static void test_locks_answer_busy_and_leave_nothing(void **state)
{
    (void)state;
    for_each_strategy(expect_busy_and_nothing_left);
}

static void test_zookeeper_outage(void **state)
{
    (void)state;
    reset(PRODUCT_OUTAGE, STOCK);
    expect_deduct("zk-lock", PRODUCT_OUTAGE, NULL, 200, "");

    /* A holder is inside its critical section when ZooKeeper goes. */
    struct holder h = {"zk-lock", PRODUCT_OUTAGE, "hold_ms=800", {0}};
    pthread_t id;
    assert_int_equal(pthread_create(&id, NULL, hold, &h), 0);
    sleep_ms(200);
    int stopped = stack_stop_one("zk");
    pthread_join(id, NULL);

    /* Gather what happens while it is down, then restart it before any
     * assertion can end the test with ZooKeeper stopped. */
    char zk_word[32] = "", lock_word[32] = "";
    long zk_status = deduct("zk-lock", PRODUCT_OUTAGE, NULL, zk_word);
    char zk_state[16];
    long health_status = backend_health("zookeeper", "down", zk_state);
    char path[64];
    snprintf(path, sizeof path, "/stock/reset?product=%d&count=5", PRODUCT_OUTAGE_MYSQL);
    struct http_reply r;
    http_call("POST", path, NULL, &r);
    long reset_status = r.status;
    http_reply_free(&r);
    long lock_status = deduct("get-lock", PRODUCT_OUTAGE_MYSQL, NULL, lock_word);
    int started = stack_start_one("zk");

    assert_int_equal(stopped, 0);
    assert_int_equal(started, 0);
    print_tally("holder through the outage", &h.result);
    assert_int_equal(h.result.ok, 1); /* the sale was made: 200 */
    assert_int_equal(zk_status, 503);
    assert_string_equal(zk_word, "backend_unavailable");
    assert_int_equal(health_status, 503);
    assert_string_equal(zk_state, "down");
    assert_int_equal(reset_status, 200);
    assert_int_equal(lock_status, 200);

    /* Back without a restart; the client reconnects by itself, so allow it
     * a few seconds. The holder's node, which it could not delete, must not
     * keep the lock: with lock_wait_ms at 10 s a leftover would be busy. */
    long status = 0;
    char word[32];
    for (int i = 0; i < 20 && status != 200; i++) {
        if (i)
            sleep_ms(250);
        status = deduct("zk-lock", PRODUCT_OUTAGE, NULL, word);
    }
    assert_int_equal(status, 200);
    expect_deduct("zk-lock", PRODUCT_OUTAGE, NULL, 200, "");
    char up_state[16];
    assert_int_equal(backend_health("zookeeper", "up", up_state),
                     200); /* probed in the background */
    expect_mysql_sold(PRODUCT_OUTAGE, 4);
}

/*
 * A real deadlock, from one MariaDB: a for-update sale holds its product's
 * row for 2 s (hold_ms and pause_ms); meanwhile a session of the test's
 * writes 50 orders of the next product (so that it weighs more: InnoDB
 * rolls back the lighter side of a cycle), locks the gap where the sale's
 * order would go, and asks for the row. The sale closes the cycle when it
 * inserts its order; InnoDB rolls it back with ER_LOCK_DEADLOCK (1213).
 * The sale answers 409 busy - never 500, never 503 - and wrote nothing (the
 * other side then reads the count untouched); the next sale goes through.
 * Were the other side late (after the 2 s) or the victim, the sale would
 * answer 200 and this test would fail, never pass by chance.
 */
static void test_a_deadlock_is_busy_and_writes_nothing(void **state)
{
    (void)state;
    reset(PRODUCT_DEADLOCK, STOCK);
    struct background sale;
    start_background(&sale, "for-update", PRODUCT_DEADLOCK, "hold_ms=1000&pause_ms=1000");
    assert_int_equal(wait_row_locked(PRODUCT_DEADLOCK, 1000), 0);
    char sql[640], out[512];
    snprintf(sql, sizeof sql,
             "START TRANSACTION;"
             " INSERT INTO orders (product_id, strategy, qty)"
             "  SELECT %d, 'other side', 1 FROM seq_1_to_50;"
             " SELECT COUNT(*) FROM orders WHERE product_id = %d FOR UPDATE;"
             " SELECT count FROM stock WHERE product_id = %d FOR UPDATE;"
             " ROLLBACK",
             PRODUCT_DEADLOCK + 1, PRODUCT_DEADLOCK, PRODUCT_DEADLOCK);
    int other_side = stack_mysql(sql, out, sizeof out);
    long status = finish_background(&sale);
    print_message("other side: %s; sale: %ld %s\n", out, status,
                  sale.reply.text ? sale.reply.text : sale.reply.failure);
    assert_int_equal(other_side, 0);
    assert_int_equal(status, 409);
    assert_string_equal(reply_word(&sale.reply), "busy");
    assert_non_null(strstr(json_str_member(sale.reply.json, "message"), "Deadlock"));
    http_reply_free(&sale.reply);
    char untouched[32];
    snprintf(untouched, sizeof untouched, "0\n%d", STOCK);
    assert_non_null(strstr(out, untouched));
    expect_mysql_sold(PRODUCT_DEADLOCK, 0);
    expect_deduct("for-update", PRODUCT_DEADLOCK, NULL, 200, "");
    expect_mysql_sold(PRODUCT_DEADLOCK, 1);
}

static int short_wait_setup(void **state)
{
    (void)state;
    static const char *const args[] = {"--lock-wait-ms", SHORT_WAIT_MS, NULL};
    return stockd_start(args);
}

int main(void)
{
    const struct CMUnitTest defaults[] = {
        cmocka_unit_test(test_claims),
        cmocka_unit_test(test_mutex_tx_oversells_every_exposed_run),
        cmocka_unit_test(test_zookeeper_outage),
        cmocka_unit_test(test_a_deadlock_is_busy_and_writes_nothing),
    };
    const struct CMUnitTest short_wait[] = {
        cmocka_unit_test(test_locks_answer_busy_and_leave_nothing),
    };
    int failed =
        cmocka_run_group_tests_name("zoo-sql", defaults, stockd_group_setup, stockd_group_teardown);
    failed += cmocka_run_group_tests_name("zoo-sql, short lock wait", short_wait, short_wait_setup,
                                          stockd_group_teardown);
    return failed;
}
