/*
 * it_zoo_redis.c - the Redis lock zoo (lua, redis-nolock, setnx-expire,
 * getset, reentrant-lock, redlock, fenced), against a running stockd.
 *
 * Proves:
 *   - /strategies lists the seven with their store and claims;
 *   - redis-nolock oversells and loses updates in every run once hold_ms
 *     widens its GET..SET window, while lua with the same hold_ms does not
 *     (its hold is spent before the script, outside any critical section);
 *   - for every strategy that holds a lease, what its "lease" row in
 *     /strategies says: a critical section longer than the lease
 *     (hold_ms > ttl_ms, "busy_holder") and a pause longer than it
 *     (pause_ms > ttl_ms, the watchdog frozen too, "paused_holder") either
 *     never oversell ("safe": reentrant-lock's watchdog renews a busy
 *     holder's lease; fenced's store refuses stale tokens) or oversell in
 *     every run (the plain leases);
 *   - reentrant-lock waiters are woken by the release (pub/sub), not by
 *     the holder's TTL running out;
 *   - reset also clears the product's keys on the redlock servers;
 *   - redlock keeps selling with one of its three servers down (health
 *     says redlock is down), answers 503 without a majority, and sells
 *     again once the servers are back, without a restart.
 *
 * The exposed runs are made to fail every time, not sometimes: ttl_ms 100
 * against hold_ms or pause_ms 300 means every holder loses its lease two
 * hundred milliseconds before it writes, while the next one reads. So each
 * holder reads the count before its predecessor's write lands and writes
 * after it, overwriting that sale (a lost update); the count holder k (from
 * 1) reads is the stock, or what a holder at least two places before it
 * wrote: the count that one read, less one. By induction holder k reads at
 * least LEASE_STOCK - (k - 1) / 2, more than zero for every k up to twice
 * the stock: with every request in flight at once (a waiter is always
 * there when a lease runs out), each holder sells, and more than
 * LEASE_STOCK holders sell more than there was. That holds for any stock
 * and in every run, so a stock of four proves it as well as a larger one,
 * and one run as well as several; the small stock keeps the runs short,
 * since a lease that serialises its holders spends a TTL or a hold on each.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sized for a small (2-core) machine. */
#define STOCK 20
#define REQUESTS 40 /* twice the stock */
#define THREADS 8
#define RUNS 3
/* The lease runs: twice the stock, every request in flight at once, so that
 * a waiter is always there to take a lease that runs out. */
#define LEASE_STOCK 4
#define LEASE_REQUESTS (2 * LEASE_STOCK)

/* 100 ms, not less: a watchdog renewing every TTL/3 must outlast any stall of
 * its thread on a busy two-core machine (lab/plan.py says more). */
#define HOLD_OVER_TTL "ttl_ms=100&hold_ms=300"
#define PAUSE_OVER_TTL "ttl_ms=100&pause_ms=300"

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_REDIS_NOLOCK = 8810,
    PRODUCT_LUA_HOLD = 8811,
    PRODUCT_PUBSUB = 8840,
    PRODUCT_REDLOCK_RESET = 8841,
    PRODUCT_REDLOCK_OUTAGE = 8842,
    PRODUCTS_HOLD = 8850,  /* + index in /strategies */
    PRODUCTS_PAUSE = 8875, /* + index in /strategies */
};

static void print_run(const char *strategy, const char *query, const struct tally *t,
                      const struct store_figures *f)
{
    char what[96];
    snprintf(what, sizeof what, "%s %s", strategy, query ? query : "");
    print_tally(what, t);
    fprintf(stderr, "  sold %lld, remaining %lld, oversold %lld, lost updates %lld\n", f->sold,
            f->remaining, f->oversold, f->lost_updates);
}

/* One load run on a fresh product; the strategy's store afterwards. */
static struct store_figures load_run(const char *strategy, int product, int stock, int requests,
                                     int threads, const char *query, struct tally *t)
{
    const json_t *s = find_strategy(strategy);
    assert_non_null(s);
    reset(product, stock);
    *t = drive(strategy, product, requests, threads, query);
    struct account a = account(product);
    struct store_figures f = *account_store(&a, json_str_member(s, "store"));
    print_run(strategy, query, t, &f);
    assert_int_equal(t->other, 0);
    assert_int_equal(t->ok + t->sold_out + t->busy, requests);
    assert_true(f.present);
    assert_int_equal(f.sold, t->ok); /* every 200 is in the ledger, and only those */
    assert_int_equal(f.orders, t->ok);
    return f;
}

static void test_claims(void **state)
{
    (void)state;
    static const struct claim claims[] = {
        /* name, store, safe_single, safe_multi, caveat */
        {"lua", "redis", 1, 1, 0},
        {"redis-nolock", "redis", 0, 0, 0},
        {"setnx-expire", "mysql", 0, 0, 1},
        {"getset", "mysql", 0, 0, 1},
        {"reentrant-lock", "mysql", 1, 1, 1},
        {"redlock", "mysql", 1, 1, 1},
        {"fenced", "mysql", 1, 1, 0},
    };
    expect_claims(claims, sizeof claims / sizeof claims[0]);
}

static void test_redis_nolock_races_every_exposed_run(void **state)
{
    (void)state;
    for (int run = 0; run < RUNS; run++) {
        struct tally t;
        struct store_figures f = load_run("redis-nolock", PRODUCT_REDIS_NOLOCK, STOCK, REQUESTS,
                                          THREADS, "hold_ms=150", &t);
        assert_true(t.ok > STOCK);
        assert_true(f.oversold > 0);
        assert_true(f.lost_updates > 0);
    }
    /* The same hold outside lua's script changes nothing. */
    struct tally t;
    struct store_figures f =
        load_run("lua", PRODUCT_LUA_HOLD, STOCK, REQUESTS, THREADS, "hold_ms=150", &t);
    assert_int_equal(t.ok, STOCK);
    assert_int_equal(f.oversold, 0);
    assert_int_equal(f.lost_updates, 0);
}

/* The lease's run being checked: its query, what /strategies says of that
 * case ("busy_holder" or "paused_holder"), and its products. */
static const char *expiry_query, *expiry_case;
static int expiry_base;

/* For a strategy that holds a lease: one run with the lease running out
 * under the holder, showing what its "lease" row says: "safe" (nothing
 * oversold, every 200 out of the stock) or "oversells" (more sold than
 * there was, as the top comment shows it must). */
static void expect_lease_outcome(const json_t *s, int index)
{
    const json_t *lease = json_object_get(s, "lease");
    if (!json_is_object(lease))
        return;
    const char *name = json_str_member(s, "name");
    int safe = strcmp(json_str_member(lease, expiry_case), "safe") == 0;
    struct tally t;
    struct store_figures f = load_run(name, expiry_base + index, LEASE_STOCK, LEASE_REQUESTS,
                                      LEASE_REQUESTS, expiry_query, &t);
    if (safe) {
        assert_true(t.ok >= 1);
        assert_int_equal(f.oversold, 0);
        assert_int_equal(f.lost_updates, 0);
        assert_int_equal(f.remaining, LEASE_STOCK - t.ok);
    } else {
        assert_true(t.ok > LEASE_STOCK);
        assert_true(f.oversold > 0);
        assert_true(f.lost_updates > 0);
    }
}

static void test_hold_longer_than_ttl(void **state)
{
    (void)state;
    expiry_query = HOLD_OVER_TTL, expiry_case = "busy_holder", expiry_base = PRODUCTS_HOLD;
    for_each_strategy(expect_lease_outcome);
}

static void test_pause_longer_than_ttl(void **state)
{
    (void)state;
    expiry_query = PAUSE_OVER_TTL, expiry_case = "paused_holder", expiry_base = PRODUCTS_PAUSE;
    for_each_strategy(expect_lease_outcome);
}

static void test_reentrant_waiters_woken_by_release(void **state)
{
    (void)state;
    /* The TTL is stockd's default (seconds): a waiter that missed the
     * release would sleep until the TTL ran out. Eight holds of 50 ms in a
     * row take well under a second when each release wakes the waiters. */
    long long start = now_ms();
    struct tally t;
    struct store_figures f =
        load_run("reentrant-lock", PRODUCT_PUBSUB, STOCK, THREADS, THREADS, "hold_ms=50", &t);
    long long elapsed = now_ms() - start;
    fprintf(stderr, "8 reentrant-lock sales of 50 ms each took %lld ms\n", elapsed);
    assert_int_equal(t.ok, THREADS);
    assert_int_equal(f.lost_updates, 0);
    assert_true(elapsed < 3000);
}

#define MAX_REDLOCK 9

/* The redlock servers' ports, from STOCKD_REDLOCK (host:port,...); asserts
 * that there are at least three. */
static int redlock_ports(int ports[MAX_REDLOCK])
{
    const char *list = getenv("STOCKD_REDLOCK");
    int n = 0;
    while (list && *list && n < MAX_REDLOCK) {
        const char *colon = strchr(list, ':');
        if (!colon)
            break;
        ports[n++] = atoi(colon + 1);
        list = strchr(colon, ',');
        list = list ? list + 1 : NULL;
    }
    assert_true(n >= 3);
    return n;
}

static void test_reset_clears_redlock_servers(void **state)
{
    (void)state;
    int ports[MAX_REDLOCK];
    int n = redlock_ports(ports);
    reset(PRODUCT_REDLOCK_RESET, STOCK);
    /* A lock that would outlive lock_wait_ms on every server. */
    for (int i = 0; i < n; i++) {
        char cmd[160];
        snprintf(cmd, sizeof cmd,
                 "redis-cli -h 127.0.0.1 -p %d SET 'lock:{%d}:redlock' left-behind PX 600000 "
                 ">/dev/null",
                 ports[i], PRODUCT_REDLOCK_RESET);
        assert_int_equal(system(cmd), 0);
    }
    reset(PRODUCT_REDLOCK_RESET, STOCK);
    long long start = now_ms();
    expect_deduct("redlock", PRODUCT_REDLOCK_RESET, NULL, 200, "");
    assert_true(now_ms() - start < 2000);
}

static void test_redlock_outage(void **state)
{
    (void)state;
    int ports[MAX_REDLOCK];
    redlock_ports(ports);
    char first[32], second[32];
    snprintf(first, sizeof first, "redlock-%d", ports[1]);
    snprintf(second, sizeof second, "redlock-%d", ports[2]);

    /* Gather what happens while servers are down, then restart them before
     * any assertion can end the test with a server stopped. */
    int stopped_one = stack_stop_one(first);
    struct tally minority;
    reset(PRODUCT_REDLOCK_OUTAGE, 5);
    minority = drive("redlock", PRODUCT_REDLOCK_OUTAGE, 10, 4, NULL);
    struct account after_minority = account(PRODUCT_REDLOCK_OUTAGE);
    char one_down_state[16];
    long one_down_status = backend_health("redlock", "down", one_down_state);

    int stopped_two = stack_stop_one(second);
    char word[32] = "";
    long majority_status = deduct("redlock", PRODUCT_REDLOCK_OUTAGE, NULL, word);

    int started_one = stack_start_one(first);
    int started_two = stack_start_one(second);
    assert_int_equal(stopped_one, 0);
    assert_int_equal(stopped_two, 0);
    assert_int_equal(started_one, 0);
    assert_int_equal(started_two, 0);

    print_tally("one server down", &minority);
    assert_int_equal(minority.other, 0);
    assert_int_equal(minority.ok, 5);
    assert_int_equal(minority.sold_out, 5);
    assert_int_equal(after_minority.mysql.oversold, 0);
    assert_int_equal(after_minority.mysql.lost_updates, 0);
    assert_int_equal(one_down_status, 503);
    assert_string_equal(one_down_state, "down");
    assert_int_equal(majority_status, 503);
    assert_string_equal(word, "backend_unavailable");

    /* Back without a restart of stockd. */
    reset(PRODUCT_REDLOCK_OUTAGE, 5);
    expect_deduct("redlock", PRODUCT_REDLOCK_OUTAGE, NULL, 200, "");
    char up_state[16] = "";
    backend_health("redlock", "up", up_state);
    assert_string_equal(up_state, "up");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims),
        cmocka_unit_test(test_redis_nolock_races_every_exposed_run),
        cmocka_unit_test(test_hold_longer_than_ttl),
        cmocka_unit_test(test_pause_longer_than_ttl),
        cmocka_unit_test(test_reentrant_waiters_woken_by_release),
        cmocka_unit_test(test_reset_clears_redlock_servers),
        cmocka_unit_test(test_redlock_outage),
    };
    return cmocka_run_group_tests_name("zoo-redis", tests, stockd_group_setup,
                                       stockd_group_teardown);
}
