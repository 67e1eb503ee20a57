/*
 * it_zoo_redis.c - the Redis lock zoo (lua, redis-nolock, setnx-expire,
 * getset, reentrant-lock, redlock, fenced), against a running stockd.
 *
 * Proves:
 *   - /strategies lists the seven with their store and claims;
 *   - lua, reentrant-lock, redlock and fenced sell exactly the stock when
 *     demand is twice the stock, over several runs: no oversell, no lost
 *     update, their 200 responses equal to their ledger's sold;
 *   - redis-nolock oversells and loses updates in every run once hold_ms
 *     widens its GET..SET window, while lua with the same hold_ms does not
 *     (its hold is spent before the script, outside any critical section);
 *   - a critical section longer than the lease (hold_ms > ttl_ms): the
 *     plain leases (redis-lock, setnx-expire, getset, redlock) oversell in
 *     every run; reentrant-lock (its watchdog renews the TTL) and fenced
 *     (MySQL refuses the stale token) never do;
 *   - a pause longer than the lease (pause_ms > ttl_ms, the watchdog frozen
 *     too): only fenced stays safe, the five others oversell in every run;
 *   - reentrant-lock waiters are woken by the release (pub/sub), not by
 *     the holder's TTL running out;
 *   - reset also clears the product's keys on the redlock servers;
 *   - redlock keeps selling with one of its three servers down (health
 *     says redlock is down), answers 503 without a majority, and sells
 *     again once the servers are back, without a restart.
 *
 * The exposed runs are made to fail every time, not sometimes: ttl_ms 50
 * against hold_ms or pause_ms 150 means every holder loses its lease a
 * hundred milliseconds before it writes, while the next one reads.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Sized for a small (2-core) machine. */
#define STOCK 20
#define REQUESTS 40 /* twice the stock */
#define THREADS 8
#define RUNS 3
#define EXPOSED_RUNS 2

#define HOLD_OVER_TTL "ttl_ms=50&hold_ms=150"
#define PAUSE_OVER_TTL "ttl_ms=50&pause_ms=150"

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCTS_SAFE = 8800, /* + index in safe_locks[] */
    PRODUCT_REDIS_NOLOCK = 8810,
    PRODUCT_LUA_HOLD = 8811,
    PRODUCTS_HOLD = 8820,  /* + index in expiry[] */
    PRODUCTS_PAUSE = 8830, /* + index in expiry[] */
    PRODUCT_PUBSUB = 8840,
    PRODUCT_REDLOCK_RESET = 8841,
    PRODUCT_REDLOCK_OUTAGE = 8842,
};

static const char *const safe_locks[] = {"lua", "reentrant-lock", "redlock", "fenced"};
#define SAFE_LOCKS (sizeof safe_locks / sizeof safe_locks[0])

/* How each lock fares when its lease expires under the holder. */
static const struct {
    const char *strategy;
    int safe_hold;  /* never oversells with hold_ms > ttl_ms  */
    int safe_pause; /* never oversells with pause_ms > ttl_ms */
} expiry[] = {
    {"redis-lock", 0, 0},     {"setnx-expire", 0, 0}, {"getset", 0, 0},
    {"reentrant-lock", 1, 0}, {"redlock", 0, 0},      {"fenced", 1, 1},
};
#define EXPIRY (sizeof expiry / sizeof expiry[0])

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void print_run(const char *strategy, const char *query, const struct tally *t,
                      const struct store_figures *f)
{
    fprintf(stderr,
            "%s %s: %d ok, %d sold_out, %d busy, %d other%s%s | sold %lld, remaining %lld, "
            "oversold %lld, lost updates %lld\n",
            strategy, query ? query : "", t->ok, t->sold_out, t->busy, t->other,
            t->other ? ": " : "", t->other ? t->first_other : "", f->sold, f->remaining,
            f->oversold, f->lost_updates);
}

static const json_t *find_strategy(const char *name)
{
    size_t i;
    const json_t *s;
    json_array_foreach(strategy_list(), i, s)
    {
        if (strcmp(json_str_member(s, "name"), name) == 0)
            return s;
    }
    return NULL;
}

/*
 * drive() with a new connection for every request. stockd's worker threads
 * each serve the connections they accepted, one request at a time, and a
 * burst of connections opened at once can all land on one worker: kept
 * alive, they would then be served one after the other for the whole run,
 * and a race could not show. A new connection per request is accepted by a
 * worker that is free at that moment, so requests really overlap.
 */
struct fresh_driver {
    char path[160];
    int requests;
    atomic_int next;
    pthread_mutex_t lock;
    struct tally totals;
};

static void *fresh_driver_thread(void *arg)
{
    struct fresh_driver *d = arg;
    struct tally mine = {0};
    while (atomic_fetch_add(&d->next, 1) < d->requests) {
        struct http_reply r;
        http_call("POST", d->path, NULL, &r);
        const char *error = json_string_value(json_object_get(r.json, "error"));
        if (r.status == 200)
            mine.ok++;
        else if (r.status == 409 && error && strcmp(error, "sold_out") == 0)
            mine.sold_out++;
        else if (r.status == 409 && error && strcmp(error, "busy") == 0)
            mine.busy++;
        else if (mine.other++ == 0)
            snprintf(mine.first_other, sizeof mine.first_other, "%ld %.24s %.120s", r.status,
                     error ? error : "", r.failure);
        http_reply_free(&r);
        http_thread_done();
    }
    pthread_mutex_lock(&d->lock);
    d->totals.ok += mine.ok;
    d->totals.sold_out += mine.sold_out;
    d->totals.busy += mine.busy;
    if (mine.other && !d->totals.other)
        memcpy(d->totals.first_other, mine.first_other, sizeof mine.first_other);
    d->totals.other += mine.other;
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static struct tally drive_fresh(const char *strategy, int product, int requests, int threads,
                                const char *query)
{
    struct fresh_driver d = {.requests = requests};
    snprintf(d.path, sizeof d.path, "/stock/deduct/%s?product=%d%s%s", strategy, product,
             query ? "&" : "", query ? query : "");
    atomic_init(&d.next, 0);
    pthread_mutex_init(&d.lock, NULL);
    pthread_t ids[THREADS];
    if (threads > THREADS)
        threads = THREADS;
    for (int i = 0; i < threads; i++)
        assert_int_equal(pthread_create(&ids[i], NULL, fresh_driver_thread, &d), 0);
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    pthread_mutex_destroy(&d.lock);
    return d.totals;
}

/* One load run on a fresh product; the strategy's store afterwards. */
static struct store_figures load_run(const char *strategy, int product, int stock, int requests,
                                     int threads, const char *query, struct tally *t)
{
    const json_t *s = find_strategy(strategy);
    assert_non_null(s);
    reset(product, stock);
    *t = drive_fresh(strategy, product, requests, threads, query);
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

static void expect_claims(const char *name, const char *store, int safe_single, int safe_multi,
                          int caveat)
{
    const json_t *s = find_strategy(name);
    if (!s)
        fprintf(stderr, "/strategies does not list %s\n", name);
    assert_non_null(s);
    assert_string_equal(json_str_member(s, "store"), store);
    assert_int_equal(json_bool_member(s, "safe_single"), safe_single);
    assert_int_equal(json_bool_member(s, "safe_multi"), safe_multi);
    assert_int_equal(json_object_get(s, "caveat") != NULL, caveat);
}

static void test_claims(void **state)
{
    (void)state;
    expect_claims("lua", "redis", 1, 1, 0);
    expect_claims("redis-nolock", "redis", 0, 0, 0);
    expect_claims("setnx-expire", "mysql", 0, 0, 1);
    expect_claims("getset", "mysql", 0, 0, 1);
    expect_claims("reentrant-lock", "mysql", 1, 1, 1);
    expect_claims("redlock", "mysql", 1, 1, 1);
    expect_claims("fenced", "mysql", 1, 1, 0);
}

static void test_safe_locks_never_oversell(void **state)
{
    (void)state;
    for (size_t i = 0; i < SAFE_LOCKS; i++)
        for (int run = 0; run < RUNS; run++) {
            struct tally t;
            struct store_figures f = load_run(safe_locks[i], PRODUCTS_SAFE + (int)i, STOCK,
                                              REQUESTS, THREADS, "hold_ms=5", &t);
            assert_int_equal(t.busy, 0); /* lock_wait_ms is far longer than the queue */
            assert_int_equal(t.ok, STOCK);
            assert_int_equal(t.sold_out, REQUESTS - STOCK);
            assert_int_equal(f.remaining, 0);
            assert_int_equal(f.oversold, 0);
            assert_int_equal(f.lost_updates, 0);
        }
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

/* Runs every lock of expiry[] with `query`; `pause` picks the column. */
static void expiry_runs(int base, const char *query, int pause)
{
    for (size_t i = 0; i < EXPIRY; i++) {
        int safe = pause ? expiry[i].safe_pause : expiry[i].safe_hold;
        for (int run = 0; run < EXPOSED_RUNS; run++) {
            struct tally t;
            struct store_figures f =
                load_run(expiry[i].strategy, base + (int)i, STOCK, REQUESTS, THREADS, query, &t);
            if (safe) {
                assert_true(t.ok >= 1);
                assert_int_equal(f.oversold, 0);
                assert_int_equal(f.lost_updates, 0);
                assert_int_equal(f.remaining, STOCK - t.ok);
            } else {
                assert_true(t.ok > STOCK);
                assert_true(f.oversold > 0);
                assert_true(f.lost_updates > 0);
            }
        }
    }
}

static void test_hold_longer_than_ttl(void **state)
{
    (void)state;
    expiry_runs(PRODUCTS_HOLD, HOLD_OVER_TTL, 0);
}

static void test_pause_longer_than_ttl(void **state)
{
    (void)state;
    expiry_runs(PRODUCTS_PAUSE, PAUSE_OVER_TTL, 1);
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

/* The redlock servers, from STOCKD_REDLOCK (host:port,...). */
static int redlock_ports(int ports[], int max)
{
    const char *list = getenv("STOCKD_REDLOCK");
    int n = 0;
    while (list && *list && n < max) {
        const char *colon = strchr(list, ':');
        if (!colon)
            break;
        ports[n++] = atoi(colon + 1);
        list = strchr(colon, ',');
        list = list ? list + 1 : NULL;
    }
    return n;
}

static void test_reset_clears_redlock_servers(void **state)
{
    (void)state;
    int ports[9];
    int n = redlock_ports(ports, 9);
    assert_true(n >= 3);
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

/* The redlock row of /health: its state, and its status code. */
static long redlock_health(char state_out[16])
{
    long status;
    json_t *health;
    http_get("/health", NULL, &status, &health);
    const json_t *row = json_object_get(json_object_get(health, "backends"), "redlock");
    const json_t *st = json_object_get(row, "state");
    snprintf(state_out, 16, "%s", json_is_string(st) ? json_string_value(st) : "");
    json_decref(health);
    return status;
}

static void test_redlock_outage(void **state)
{
    (void)state;
    int ports[9];
    int n = redlock_ports(ports, 9);
    assert_true(n >= 3);
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
    long one_down_status = redlock_health(one_down_state);

    int stopped_two = stack_stop_one(second);
    char word[32] = "";
    long majority_status = deduct("redlock", PRODUCT_REDLOCK_OUTAGE, NULL, word);

    int started_one = stack_start_one(first);
    int started_two = stack_start_one(second);
    assert_int_equal(stopped_one, 0);
    assert_int_equal(stopped_two, 0);
    assert_int_equal(started_one, 0);
    assert_int_equal(started_two, 0);

    fprintf(stderr, "one server down: %d ok, %d sold_out, %d busy, %d other%s%s\n", minority.ok,
            minority.sold_out, minority.busy, minority.other, minority.other ? ": " : "",
            minority.other ? minority.first_other : "");
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
    for (int i = 0; i < 20 && strcmp(up_state, "up") != 0; i++) {
        if (i)
            sleep_ms(250); /* each worker drops its dead connections on first use */
        redlock_health(up_state);
    }
    assert_string_equal(up_state, "up");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims),
        cmocka_unit_test(test_safe_locks_never_oversell),
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
