/*
 * it_recovery.c - backends that go away and come back, and an orderly stop.
 *
 * Proves, with a running stockd that is not restarted while its backends
 * come and go:
 *   - with Redis stopped, /health answers 503 naming redis down (MySQL up);
 *     the strategies that need Redis (watch, redis-lock, and lua on the
 *     HTTP loops' own pipes) answer 503 backend_unavailable and change
 *     nothing, while a MySQL-only strategy (sql) still sells; once Redis is
 *     back, /health is 200 and they sell again;
 *   - the same for MySQL: sql and redis-lock (its stock is in MySQL) answer
 *     503 and change nothing, watch (Redis only) still sells, and all is
 *     well once MySQL is back;
 *   - after a backend restart, no worker (and no loop's pipe) answers 503
 *     because of a connection left over from before the restart: every
 *     one sells again at once (a 503 means "a backend is down", and it no
 *     longer is);
 *   - a batch of sales that shares one transaction fails whole when MariaDB
 *     dies under it: every sale in it answers 503, none is in the ledger;
 * and, with a stockd of its own: SIGTERM while a sale is held in its
 * critical section lets that sale finish with 200, and stockd exits 0; the
 * sale is in the ledger after a restart.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_WATCH = 8601, /* sold by watch: Redis only        */
    PRODUCT_SQL = 8602,   /* sold by sql: MySQL only          */
    PRODUCT_LOCK = 8603,  /* sold by redis-lock: needs both   */
    PRODUCT_WARM = 8604,  /* load that touches every worker   */
    PRODUCT_GRACEFUL = 8605,
    PRODUCT_LUA = 8606,    /* sold by lua: Redis only, on the loops */
    PRODUCTS_BATCH = 8610, /* + the strategy's index */
};

/* Requests that reach every stockd worker: the driver keeps as many
 * requests in flight as stockd has workers, and stockd hands each one to
 * a free worker. */
#define WARM_THREADS STOCKD_THREADS
#define WARM_REQUESTS 64
#define SETTLE_MS 10000

static const char *state_of(const json_t *health, const char *backend)
{
    const json_t *b = json_object_get(json_object_get(health, "backends"), backend);
    const char *state = json_string_value(json_object_get(b, "state"));
    return state ? state : "(missing)";
}

/*
 * /health: 200 with MySQL and Redis up when `down` is NULL; otherwise 503
 * backend_unavailable, `down` reported down and named in the message, the
 * other one up.
 */
static int health_as_expected(const char *down, long status, const json_t *doc)
{
    static const char *const core[] = {"mysql", "redis"};
    int as_expected = status == (down ? 503 : 200);
    for (size_t i = 0; i < sizeof core / sizeof core[0]; i++) {
        int is_down = down && strcmp(core[i], down) == 0;
        as_expected = as_expected && strcmp(state_of(doc, core[i]), is_down ? "down" : "up") == 0;
    }
    if (down) {
        const char *error = json_string_value(json_object_get(doc, "error"));
        const char *message = json_string_value(json_object_get(doc, "message"));
        as_expected = as_expected && error && strcmp(error, "backend_unavailable") == 0 &&
                      message && strstr(message, down);
    }
    return as_expected;
}

/* The probes run in the background: /health shows a change within
 * HEALTH_SETTLE_MS. */
static void expect_health(const char *down)
{
    long status;
    json_t *doc = NULL;
    long long deadline = now_ms() + HEALTH_SETTLE_MS;
    for (;;) {
        json_decref(doc);
        http_get("/health", NULL, &status, &doc);
        if (health_as_expected(down, status, doc) || now_ms() >= deadline)
            break;
        sleep_ms(50);
    }
    int as_expected = health_as_expected(down, status, doc);
    if (!as_expected)
        print_reply("GET", "/health", status, doc);
    json_decref(doc);
    if (!as_expected)
        fail_msg("/health: expected %s%s", down ? "503 naming down: " : "200 with all up",
                 down ? down : "");
}

/* Sells WARM_REQUESTS units of PRODUCT_WARM from as many connections as
 * stockd has workers: every request must succeed. */
static void expect_every_worker_sells(const char *strategy)
{
    struct tally t = drive(strategy, PRODUCT_WARM, WARM_REQUESTS, WARM_THREADS, NULL);
    if (t.ok != WARM_REQUESTS)
        print_tally(strategy, &t);
    assert_int_equal(t.ok, WARM_REQUESTS);
}

/* Expects `product`'s accounting to show `sold` units sold from `store`
 * and its stock to have moved by exactly that. */
static void expect_sold(int product, const char *store, long long sold)
{
    struct account a = account(product);
    const struct store_figures *f = account_store(&a, store);
    assert_int_equal(f->sold, sold);
    assert_int_equal(f->remaining, f->initial - sold);
}

/* One sale of the outage tests: through `strategy`, of `product`, whose
 * stock is in `store`; `query` is added to the sale made during the outage. */
struct sale {
    const char *strategy;
    int product;
    const char *store;
    const char *query;
};

static const struct sale watch = {"watch", PRODUCT_WATCH, "redis", NULL};
static const struct sale sql = {"sql", PRODUCT_SQL, "mysql", NULL};
static const struct sale redis_lock = {"redis-lock", PRODUCT_LOCK, "mysql", NULL};
static const struct sale lua = {"lua", PRODUCT_LUA, "redis", NULL};

/*
 * `backend` stops: /health names it down, the two `cut` sales answer 503
 * backend_unavailable and change nothing, the `survivor` still sells (and
 * GET /stock of its product, which reads both stores, answers 503). Once
 * `backend` is back, /health is 200, stockd still runs, and the cut sales
 * sell again. The sales go through the test thread's one keep-alive
 * connection; the restart tests below load every worker.
 */
static void expect_outage(const char *backend, const struct sale cut[2],
                          const struct sale *survivor)
{
    reset(survivor->product, 10);
    struct account before[2];
    for (int i = 0; i < 2; i++) {
        reset(cut[i].product, 10);
        before[i] = account(cut[i].product);
    }

    assert_int_equal(stack_stop_one(backend), 0);
    expect_health(backend);
    for (int i = 0; i < 2; i++)
        expect_deduct(cut[i].strategy, cut[i].product, cut[i].query, 503, "backend_unavailable");
    expect_deduct(survivor->strategy, survivor->product, NULL, 200, "");
    char path[32];
    snprintf(path, sizeof path, "/stock/%d", survivor->product);
    expect_error("GET", path, NULL, 503, "backend_unavailable");

    assert_int_equal(stack_start_one(backend), 0);
    expect_health(NULL);
    assert_true(stockd_running());
    /* The 503s changed nothing; the survivor's sale went through. */
    for (int i = 0; i < 2; i++) {
        const struct account after = account(cut[i].product);
        expect_same_account(&before[i], &after);
    }
    expect_sold(survivor->product, survivor->store, 1);

    for (int i = 0; i < 2; i++)
        expect_deduct(cut[i].strategy, cut[i].product, NULL, 200, "");
    for (int i = 0; i < 2; i++)
        expect_sold(cut[i].product, cut[i].store, 1);
}

static void test_redis_outage(void **state)
{
    (void)state;
    const struct sale cut[2] = {watch, redis_lock};
    expect_outage("redis", cut, &sql);
}

static void test_redis_outage_on_the_loops(void **state)
{
    (void)state;
    const struct sale cut[2] = {lua, watch};
    expect_outage("redis", cut, &sql);
}

static void test_mysql_outage(void **state)
{
    (void)state;
    /* redis-lock takes its Redis lock, then MySQL fails under it: with a
     * one-minute TTL, a lock it failed to release would turn the sale after
     * the outage away. */
    struct sale lock_held = redis_lock;
    lock_held.query = "ttl_ms=60000";
    const struct sale cut[2] = {sql, lock_held};
    expect_outage("mysql", cut, &watch);
}

/* Every worker opens its connection to `backend` (by selling through
 * `strategy`), the backend restarts, and every worker must sell again. */
static void expect_workers_survive_restart(const char *backend, const char *strategy)
{
    reset(PRODUCT_WARM, 2 * WARM_REQUESTS);
    expect_every_worker_sells(strategy);
    assert_int_equal(stack_stop_one(backend), 0);
    assert_int_equal(stack_start_one(backend), 0);
    expect_every_worker_sells(strategy);
    expect_health(NULL);
}

static void test_workers_survive_redis_restart(void **state)
{
    (void)state;
    expect_workers_survive_restart("redis", "watch");
}

static void test_loops_survive_redis_restart(void **state)
{
    (void)state;
    expect_workers_survive_restart("redis", "lua");
}

static void test_workers_survive_mysql_restart(void **state)
{
    (void)state;
    expect_workers_survive_restart("mysql", "sql");
}

/* After a test that stopped a backend: the backends run again (even when
 * the test failed half-way), and the next test gets a stockd without
 * connections from before the outage. Restarting stockd also checks that it
 * still stops cleanly after its connections broke and reconnected. */
static int back_to_normal(void **state)
{
    (void)state;
    int redis = stack_start_one("redis");
    int mysql = stack_start_one("mysql");
    int stopped = stockd_stop();
    int started = stockd_start(NULL);
    return redis == 0 && mysql == 0 && stopped == 0 && started == 0 ? 0 : -1;
}

/* ------------------------------------------------ a batch that fails */

#define WAITING 3

/*
 * For every strategy that spends hold_ms once per batch (its "hold" in
 * /strategies): a first sale holds its batch's transaction open 1 s, three
 * more join the queue meanwhile and form the next batch, which holds its
 * transaction open 2 s (hold_ms and pause_ms). MariaDB is killed inside
 * that window. The first sale sold; every sale of the failed batch gets
 * the same 503 backend_unavailable, and none of them is in the ledger.
 */
static void expect_batch_fails_whole(const json_t *s, int index)
{
    if (strcmp(json_str_member(s, "hold"), "per_batch") != 0)
        return;
    const char *name = json_str_member(s, "name");
    int product = PRODUCTS_BATCH + index;
    reset(product, 100);
    struct background first, next[WAITING];
    start_background(&first, name, product, "hold_ms=1000");
    assert_int_equal(wait_metric("stockd_in_flight_requests", 2, SETTLE_MS), 0);
    /* Its batch has formed: the next sales cannot join it. */
    assert_int_equal(wait_row_locked(product, SETTLE_MS), 0);
    for (int i = 0; i < WAITING; i++)
        start_background(&next[i], name, product, "hold_ms=1000&pause_ms=1000");
    assert_int_equal(wait_metric("stockd_in_flight_requests", 2 + WAITING, SETTLE_MS), 0);
    assert_int_equal(finish_background(&first), 200); /* the next batch starts now */
    http_reply_free(&first.reply);
    assert_int_equal(stack_kill_one("mysql"), 0);
    for (int i = 0; i < WAITING; i++) {
        assert_int_equal(finish_background(&next[i]), 503);
        assert_string_equal(reply_word(&next[i].reply), "backend_unavailable");
        http_reply_free(&next[i].reply);
    }
    assert_int_equal(stack_start_one("mysql"), 0);
    expect_sold(product, "mysql", 1);
}

static void test_a_failed_batch_fails_every_sale_in_it(void **state)
{
    (void)state;
    for_each_strategy(expect_batch_fails_whole);
}

/* ------------------------------------------------------- orderly stop */

/* How long the sale stays in its critical section, and when SIGTERM comes. */
#define HELD_MS 500
#define SIGNAL_AFTER_MS 200

static void test_sigterm_finishes_requests_in_flight(void **state)
{
    (void)state;
    reset(PRODUCT_GRACEFUL, 5);
    struct background sale;
    char held[32];
    snprintf(held, sizeof held, "hold_ms=%d", HELD_MS);
    start_background(&sale, "sql", PRODUCT_GRACEFUL, held);
    sleep_ms(SIGNAL_AFTER_MS);
    int stopped = stockd_stop(); /* SIGTERM, then the exit status */
    long status = finish_background(&sale);
    if (status != 200)
        print_error("the held sale got %ld %s\n", status, sale.reply.failure);
    http_reply_free(&sale.reply);
    assert_int_equal(status, 200);
    assert_int_equal(stopped, 0);

    /* The sale is in the store, not in the process that made it. */
    assert_int_equal(stockd_start(NULL), 0);
    expect_sold(PRODUCT_GRACEFUL, "mysql", 1);
}

int main(void)
{
    const struct CMUnitTest outages[] = {
        cmocka_unit_test_teardown(test_redis_outage, back_to_normal),
        cmocka_unit_test_teardown(test_redis_outage_on_the_loops, back_to_normal),
        cmocka_unit_test_teardown(test_mysql_outage, back_to_normal),
        cmocka_unit_test_teardown(test_workers_survive_redis_restart, back_to_normal),
        cmocka_unit_test_teardown(test_loops_survive_redis_restart, back_to_normal),
        cmocka_unit_test_teardown(test_workers_survive_mysql_restart, back_to_normal),
        cmocka_unit_test_teardown(test_a_failed_batch_fails_every_sale_in_it, back_to_normal),
    };
    const struct CMUnitTest stopping[] = {
        cmocka_unit_test(test_sigterm_finishes_requests_in_flight),
    };
    int failed = cmocka_run_group_tests_name("backend outages", outages, stockd_group_setup,
                                             stockd_group_teardown);
    failed += cmocka_run_group_tests_name("orderly stop", stopping, stockd_group_setup,
                                          stockd_group_teardown);
    return failed ? 1 : 0;
}
