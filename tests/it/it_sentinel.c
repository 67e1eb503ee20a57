/*
 * it_sentinel.c - the main Redis as a replicated group: Sentinel, and the
 * rows that wait for a replica.
 *
 * Proves, against the test stack's real servers:
 *   - lua-wait and redis-lock-wait sell (200) while the main Redis's
 *     replica acknowledges; with the replica held back (CLIENT PAUSE WRITE
 *     on it: it reads the replication stream but applies nothing, so WAIT
 *     gets no acknowledgement) lua-wait answers 503 outcome_unknown (the
 *     sale ran on the primary: it is in the ledger) and redis-lock-wait
 *     503 backend_unavailable "lock not replicated" with nothing sold and
 *     the lock given back; once the replica goes on, both sell again;
 *   - a stockd given --redis-sentinel sells through the primary the
 *     Sentinels name, and /health shows that primary; a wrong master name,
 *     or no Sentinel answering, is a start-up error (exit 1);
 *   - a switchover (SENTINEL FAILOVER: the primary is demoted, the replica
 *     promoted) is followed without a restart, by the workers (watch) and
 *     by the loops' pipes (lua);
 *   - a demoted primary's READONLY answers 503 backend_unavailable with
 *     nothing sold, and stockd sells again once the group has a primary;
 *   - a crash of the primary (kill -9) answers 503 backend_unavailable
 *     while there is no primary, every answer well inside the request's
 *     deadline, and the first 200s on the new primary come within 2 s of
 *     the Sentinels' promotion, without a restart.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_WAIT = 9201,
    PRODUCT_PAUSED = 9202,
    PRODUCT_PAUSED_LOCK = 9203,
    PRODUCT_GROUP = 9204,
    PRODUCT_SWITCH = 9205,
    PRODUCT_READONLY = 9206,
    PRODUCT_CRASH = 9207,
};

#define STOCK 1000
/* The sentinel stockd's request deadline: no answer may come later. */
#define REQUEST_TIMEOUT_MS 3000
/* How long the group may take to have a primary again. */
#define FAILOVER_BOUND_MS 15000
/* The goal: selling again within this long of the promotion. */
#define FOLLOW_MS 2000

/* ------------------------------------------------------------ helpers */

static int env_port(const char *name, int which)
{
    const char *list = getenv(name);
    if (!list)
        fail_msg("%s is not set: run under tests/run", name);
    for (int i = 0; i < which && list; i++) {
        list = strchr(list, ' ');
        list = list ? list + 1 : NULL;
    }
    if (!list)
        fail_msg("%s has no entry %d", name, which);
    return atoi(list);
}

/* A deduct's reply: its status, error word and message. */
struct answer {
    long status;
    char word[32];
    char message[256];
    long long took_ms;
};

static struct answer sell(const char *strategy, int product)
{
    char path[128];
    snprintf(path, sizeof path, "/stock/deduct/%s?product=%d", strategy, product);
    struct http_reply r;
    long long start = now_ms();
    http_call("POST", path, NULL, &r);
    struct answer a = {.status = r.status, .took_ms = now_ms() - start};
    snprintf(a.word, sizeof a.word, "%s", reply_word(&r));
    const char *message = r.json ? json_string_value(json_object_get(r.json, "message")) : NULL;
    snprintf(a.message, sizeof a.message, "%s", message ? message : r.failure);
    http_reply_free(&r);
    return a;
}

static void expect_answer(const struct answer *a, long status, const char *word, const char *says)
{
    if (a->status != status || strcmp(a->word, word) != 0 || (says && !strstr(a->message, says)))
        print_error("expected %ld %s (%s), got %ld %s: %s\n", status, word, says ? says : "",
                    a->status, a->word, a->message);
    assert_int_equal(a->status, status);
    assert_string_equal(a->word, word);
    if (says)
        assert_non_null(strstr(a->message, says));
}

/* A sale sent while there is no primary: a 503 at once, backend_unavailable
 * (nothing sent) or outcome_unknown (sent on a connection whose server had
 * died, its reply lost). */
static void expect_refused_at_once(const struct answer *a)
{
    if (strcmp(a->word, "outcome_unknown") != 0)
        expect_answer(a, 503, "backend_unavailable", NULL);
    assert_int_equal(a->status, 503);
    assert_true(a->took_ms < REQUEST_TIMEOUT_MS);
}

/* ------------------------------------------- the rows that wait for a replica */

static int replica_port(void)
{
    return env_port("STACK_REDIS_REPLICA_PORT", 0);
}

static int unpause_replica(void **state)
{
    (void)state;
    char out[64];
    return redis_cli_at(replica_port(), "CLIENT UNPAUSE", out, sizeof out);
}

static void test_wait_rows_sell_while_the_replica_acknowledges(void **state)
{
    (void)state;
    reset(PRODUCT_WAIT, STOCK);
    struct answer a = sell("lua-wait", PRODUCT_WAIT);
    expect_answer(&a, 200, "", NULL);
    a = sell("redis-lock-wait", PRODUCT_WAIT);
    expect_answer(&a, 200, "", NULL);
    struct account after = account(PRODUCT_WAIT);
    assert_int_equal(after.redis.sold, 1);
    assert_int_equal(after.mysql.sold, 1);
    assert_int_equal(after.redis.oversold + after.mysql.oversold, 0);
}

static void test_wait_rows_refuse_what_no_replica_acknowledged(void **state)
{
    (void)state;
    reset(PRODUCT_PAUSED, STOCK);
    reset(PRODUCT_PAUSED_LOCK, STOCK);
    char out[64];
    redis_at(replica_port(), "CLIENT PAUSE 20000 WRITE", out, sizeof out);

    /* The sale ran on the primary: outcome_unknown, and in the ledger. */
    struct answer a = sell("lua-wait", PRODUCT_PAUSED);
    expect_answer(&a, 503, "outcome_unknown", "not replicated: 0 of 1 replicas acknowledged");
    assert_int_equal(account(PRODUCT_PAUSED).redis.sold, 1);

    /* The lock was not replicated: given back, nothing sold. */
    struct account before = account(PRODUCT_PAUSED_LOCK);
    a = sell("redis-lock-wait", PRODUCT_PAUSED_LOCK);
    expect_answer(&a, 503, "backend_unavailable",
                  "lock not replicated: 0 of 1 replicas acknowledged within");
    struct account after = account(PRODUCT_PAUSED_LOCK);
    expect_same_account(&before, &after);
    char exists[64];
    snprintf(exists, sizeof exists, "EXISTS lock:{%d}", PRODUCT_PAUSED_LOCK);
    assert_int_equal(redis_int_at(atoi(getenv("STOCKD_REDIS_PORT")), exists), 0);

    assert_int_equal(unpause_replica(NULL), 0);
    a = sell("lua-wait", PRODUCT_PAUSED);
    expect_answer(&a, 200, "", NULL);
    a = sell("redis-lock-wait", PRODUCT_PAUSED_LOCK);
    expect_answer(&a, 200, "", NULL);
    assert_int_equal(account(PRODUCT_PAUSED).redis.sold, 2);
    assert_int_equal(account(PRODUCT_PAUSED_LOCK).mysql.sold, 1);
}

/* ------------------------------------------------------------ Sentinel */

static char sentinel_list[256];

static int sentinel(int i)
{
    return env_port("STACK_SENTINEL_PORTS", i);
}

static const char *sentinels(void)
{
    const char *ports = getenv("STACK_SENTINEL_PORTS");
    sentinel_list[0] = '\0';
    for (const char *p = ports; p && *p;) {
        size_t n = strlen(sentinel_list);
        snprintf(sentinel_list + n, sizeof sentinel_list - n, "%s127.0.0.1:%d", n ? "," : "",
                 atoi(p));
        p = strchr(p, ' ');
        p = p ? p + 1 : NULL;
    }
    return sentinel_list;
}

/* The group's other server. */
static int other_server(int port)
{
    int first = env_port("STACK_HA_PORTS", 0);
    return port == first ? env_port("STACK_HA_PORTS", 1) : first;
}

/* The primary the Sentinels name now: asked of one directly, each time. */
static int named_primary(void)
{
    char out[128];
    if (redis_cli_at(sentinel(0), "SENTINEL get-master-addr-by-name stockd", out, sizeof out) != 0)
        return 0;
    const char *nl = strchr(out, '\n');
    return nl ? atoi(nl + 1) : 0;
}

/* /health's primary for the main Redis, as "host:port" ("" if none). */
static void health_primary(char *out, size_t size)
{
    long status;
    json_t *doc;
    http_get("/health", NULL, &status, &doc);
    const json_t *redis = json_object_get(json_object_get(doc, "backends"), "redis");
    const char *primary = json_string_value(json_object_get(redis, "primary"));
    snprintf(out, size, "%s", primary ? primary : "");
    json_decref(doc);
}

/* Waits until the group is whole again: the named primary has its replica
 * online (a switchover or a restart leaves it re-syncing for a while). */
static int settled_primary(void)
{
    long long deadline = now_ms() + FAILOVER_BOUND_MS;
    for (;;) {
        int primary = named_primary();
        char out[2048] = "";
        if (primary && redis_cli_at(primary, "INFO replication", out, sizeof out) == 0 &&
            strstr(out, "role:master") && strstr(out, "state=online"))
            return primary;
        if (now_ms() > deadline)
            fail_msg("the group has no primary with an online replica: %s", out);
        sleep_ms(50);
    }
}

/* Waits until /health shows `port` as the primary stockd uses. */
static void wait_health_primary(int port, long long deadline)
{
    char shown[64], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    for (health_primary(shown, sizeof shown); strcmp(shown, want) != 0;
         health_primary(shown, sizeof shown)) {
        if (now_ms() > deadline)
            fail_msg("/health shows the primary '%s', not %s", shown, want);
        sleep_ms(20);
    }
}

static int sentinel_group_setup(void **state)
{
    if (http_group_setup(state) != 0 || !getenv("STACK_SENTINEL_PORTS"))
        return -1;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", REQUEST_TIMEOUT_MS);
    const char *args[] = {"--redis-sentinel",
                          sentinels(),
                          "--redis-master-name",
                          "stockd",
                          "--request-timeout-ms",
                          timeout,
                          "--connect-timeout-ms",
                          "200",
                          NULL};
    return stockd_start(args);
}

/* Sells with lua (a loop's pipe) and watch (a worker) until both answer
 * 200, every answer inside the request's deadline and 200 or 503; when
 * both first sold, on the monotonic clock. `saw_503` counts the 503s. */
static long long sell_until_both_sell(int product, long long deadline, int *saw_503)
{
    int lua_ok = 0, watch_ok = 0;
    while (!(lua_ok && watch_ok)) {
        if (now_ms() > deadline)
            fail_msg("no 200 from %s within the bound", lua_ok ? "watch" : "lua");
        const char *strategy = lua_ok ? "watch" : "lua";
        struct answer a = sell(strategy, product);
        if (a.took_ms > REQUEST_TIMEOUT_MS + 1000)
            fail_msg("%s took %lld ms: past the request's deadline", strategy, a.took_ms);
        if (a.status == 200) {
            *(lua_ok ? &watch_ok : &lua_ok) = 1;
            continue;
        }
        if (a.status != 503)
            fail_msg("%s answered %ld %s: %s", strategy, a.status, a.word, a.message);
        (*saw_503)++;
        sleep_ms(20);
    }
    return now_ms();
}

static void test_a_wrong_master_name_or_no_sentinel_is_a_start_up_error(void **state)
{
    (void)state;
    const char *wrong_name[] = {"--redis-sentinel", sentinels(), "--redis-master-name",
                                "no-such-group", NULL};
    assert_int_equal(stockd_exit_status(wrong_name), 1);
    const char *no_sentinel[] = {"--redis-sentinel", "127.0.0.1:1", NULL};
    assert_int_equal(stockd_exit_status(no_sentinel), 1);
}

static void test_sells_through_the_primary_the_sentinels_name(void **state)
{
    (void)state;
    int primary = stack_ha_primary();
    assert_int_equal(primary, settled_primary());
    char shown[64], want[64];
    health_primary(shown, sizeof shown);
    snprintf(want, sizeof want, "127.0.0.1:%d", primary);
    assert_string_equal(shown, want);

    reset(PRODUCT_GROUP, STOCK);
    const char *strategies[] = {"lua", "watch", "lua-wait", "redis-lock-wait"};
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
        struct answer a = sell(strategies[i], PRODUCT_GROUP);
        expect_answer(&a, 200, "", NULL);
    }
    char key[64];
    snprintf(key, sizeof key, "HGET ledger:{%d} sold", PRODUCT_GROUP);
    assert_int_equal(redis_int_at(primary, key), 3);
}

/* SENTINEL FAILOVER, asked again while the Sentinels are not ready for
 * one (a failover just before: INPROG or NOGOOD). */
static void switch_over(void)
{
    char out[256] = "";
    long long deadline = now_ms() + FAILOVER_BOUND_MS;
    while (redis_cli_at(sentinel(0), "SENTINEL FAILOVER stockd", out, sizeof out) != 0 ||
           strncmp(out, "OK", 2) != 0) {
        if (now_ms() > deadline)
            fail_msg("SENTINEL FAILOVER kept answering: %s", out);
        sleep_ms(200);
    }
}

static void test_follows_a_switchover(void **state)
{
    (void)state;
    reset(PRODUCT_SWITCH, STOCK);
    int old = settled_primary(), primary = other_server(old);
    switch_over();
    /* The Sentinels announce the switch (+switch-master) once the old
     * primary is told to follow the new one; until then it still takes
     * writes, and stockd, like any Sentinel client, still sells there. */
    long long deadline = now_ms() + FAILOVER_BOUND_MS;
    wait_health_primary(primary, deadline);
    int saw_503 = 0;
    sell_until_both_sell(PRODUCT_SWITCH, deadline, &saw_503);
    /* Stockd sells on the new primary now, on the loops and the workers. */
    char key[64];
    snprintf(key, sizeof key, "HGET ledger:{%d} orders", PRODUCT_SWITCH);
    long long orders = redis_int_at(primary, key);
    struct answer a = sell("lua", PRODUCT_SWITCH);
    expect_answer(&a, 200, "", NULL);
    a = sell("watch", PRODUCT_SWITCH);
    expect_answer(&a, 200, "", NULL);
    assert_int_equal(redis_int_at(primary, key), orders + 2);
}

/* Swaps the group's roles by hand while the Sentinels are frozen (for
 * less than their 2 s tilt trigger), so nothing but stockd sees it. */
static void demote(int primary, int replica)
{
    char out[128], args[64];
    redis_at(replica, "REPLICAOF NO ONE", out, sizeof out);
    snprintf(args, sizeof args, "REPLICAOF 127.0.0.1 %d", replica);
    redis_at(primary, args, out, sizeof out);
}

static void test_a_demoted_primarys_readonly_sells_nothing(void **state)
{
    (void)state;
    int primary = settled_primary(), replica = other_server(primary);
    wait_health_primary(primary, now_ms() + FAILOVER_BOUND_MS);
    reset(PRODUCT_READONLY, STOCK);
    char sold_key[64];
    snprintf(sold_key, sizeof sold_key, "HGET ledger:{%d} sold", PRODUCT_READONLY);
    struct answer a = sell("watch", PRODUCT_READONLY); /* every link is connected */
    expect_answer(&a, 200, "", NULL);
    a = sell("lua", PRODUCT_READONLY);
    expect_answer(&a, 200, "", NULL);

    /* Replication is asynchronous: a replica promoted behind its primary
     * would make the demoted one resync from it and drop what it had not
     * received (the reset above). So the replica first acknowledges every
     * write, before the Sentinels are frozen (their clock keeps running). */
    assert_int_equal(redis_int_at(primary, "WAIT 1 5000"), 1);
    assert_int_equal(stack_freeze_one("sentinel"), 0);
    demote(primary, replica);
    struct answer on_worker = sell("watch", PRODUCT_READONLY);
    struct answer on_loop = sell("lua", PRODUCT_READONLY);
    long long sold = redis_int_at(replica, sold_key);
    demote(replica, primary); /* back as it was */
    assert_int_equal(stack_thaw_one("sentinel"), 0);

    expect_answer(&on_worker, 503, "backend_unavailable", NULL);
    expect_answer(&on_loop, 503, "backend_unavailable", NULL);
    assert_non_null(strstr(on_worker.message, "READONLY") ? on_worker.message : on_loop.message);
    assert_int_equal(sold, 2); /* the two sales before, nothing since */

    int saw_503 = 0;
    sell_until_both_sell(PRODUCT_READONLY, now_ms() + FAILOVER_BOUND_MS, &saw_503);
    assert_int_equal(redis_int_at(primary, sold_key), 4);
}

static void test_follows_a_crash_of_the_primary(void **state)
{
    (void)state;
    int old = settled_primary();
    wait_health_primary(old, now_ms() + FAILOVER_BOUND_MS);
    reset(PRODUCT_CRASH, STOCK);
    struct answer a = sell("lua", PRODUCT_CRASH);
    expect_answer(&a, 200, "", NULL);

    char name[32];
    snprintf(name, sizeof name, "ha-%d", old);
    assert_int_equal(stack_kill_one(name), 0);
    long long killed = now_ms(), deadline = killed + FAILOVER_BOUND_MS;

    /* No primary: 503 at once, never a wait past the deadline. The killed
     * server's close may reach stockd after the next sale was written on its
     * connection (a loaded kernel delivers loopback packets late): that sale
     * is outcome_unknown, as it should be - sent, its reply lost. */
    a = sell("lua", PRODUCT_CRASH);
    expect_refused_at_once(&a);
    a = sell("watch", PRODUCT_CRASH);
    expect_refused_at_once(&a);

    while (named_primary() == old) {
        if (now_ms() > deadline)
            fail_msg("the Sentinels promoted nothing within %d ms", FAILOVER_BOUND_MS);
        a = sell("lua", PRODUCT_CRASH);
        if (a.status != 503 || a.took_ms > REQUEST_TIMEOUT_MS)
            fail_msg("with no primary: %ld %s after %lld ms", a.status, a.word, a.took_ms);
        sleep_ms(20);
    }
    long long promoted = now_ms();
    int saw_503 = 0;
    long long selling = sell_until_both_sell(PRODUCT_CRASH, deadline, &saw_503);
    print_message("primary killed; promoted after %lld ms; selling again %lld ms later\n",
                  promoted - killed, selling - promoted);
    assert_true(selling - promoted <= FOLLOW_MS);

    /* The old primary comes back as the new one's replica. */
    assert_int_equal(stack_start_one(name), 0);
    char key[64];
    snprintf(key, sizeof key, "HGET ledger:{%d} orders", PRODUCT_CRASH);
    assert_true(redis_int_at(other_server(old), key) >= 2);
}

int main(void)
{
    const struct CMUnitTest waiting[] = {
        cmocka_unit_test(test_wait_rows_sell_while_the_replica_acknowledges),
        cmocka_unit_test_teardown(test_wait_rows_refuse_what_no_replica_acknowledged,
                                  unpause_replica),
    };
    const struct CMUnitTest starting[] = {
        cmocka_unit_test(test_a_wrong_master_name_or_no_sentinel_is_a_start_up_error),
    };
    const struct CMUnitTest following[] = {
        cmocka_unit_test(test_sells_through_the_primary_the_sentinels_name),
        cmocka_unit_test(test_follows_a_switchover),
        cmocka_unit_test(test_a_demoted_primarys_readonly_sells_nothing),
        cmocka_unit_test(test_follows_a_crash_of_the_primary),
    };
    int failed =
        cmocka_run_group_tests_name("wait", waiting, stockd_group_setup, stockd_group_teardown);
    failed +=
        cmocka_run_group_tests_name("start", starting, http_group_setup, stockd_group_teardown);
    failed += cmocka_run_group_tests_name("sentinel", following, sentinel_group_setup,
                                          stockd_group_teardown);
    return failed ? 1 : 0;
}
