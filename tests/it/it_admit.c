/*
 * it_admit.c - admission in front of the strategies, against the real
 * stack: the token bucket (--admit-rate) and the sold-out flag
 * (--sold-out-flag).
 *
 * Proves:
 *   - past a product's burst, deducts are answered 429 throttled with a
 *     Retry-After header, and the stores' figures do not move; the refusals
 *     are counted in /metrics;
 *   - once a product was seen sold out, the flag answers sold_out with Redis
 *     stopped: no backend call was made; a buyer of fewer units than the
 *     refused one still reaches the store; a reset through the same
 *     instance clears the flag at once;
 *   - the flag's refusal, sent from a response each loop built once, is
 *     the reply built for a request the old way (a keyed one) on the wire:
 *     status, body and headers; another qty has its own; after a reset
 *     the product sells again and is refused again; many products sold
 *     out at once each get their own;
 *   - a reset through a second instance reaches the first: its flag lets a
 *     sale through within --sold-out-recheck-ms, which sells, and the flag
 *     is down from then on.
 */
#include "harness.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PRODUCT_BUCKET 960001
#define PRODUCT_FLAG 960101
#define PRODUCT_FEWER 960102
#define PRODUCT_REMOTE 960201
#define PRODUCT_BYTES 960301
#define PRODUCT_AGAIN 960302
#define PRODUCT_MANY 961000

/* The deduct of `product` by lua with `query`: its status, its reply (to
 * free), and 1 in *flagged when the flag answered it. */
static long sale(int product, const char *query, struct http_reply *r)
{
    char path[192];
    snprintf(path, sizeof path, "/stock/deduct/lua?product=%d%s%s", product, *query ? "&" : "",
             query);
    http_call("POST", path, NULL, r);
    return r->status;
}

static int flagged(const struct http_reply *r)
{
    return r->json && json_is_true(json_object_get(r->json, "sold_out_flag"));
}

/* ------------------------------------------------------------- bucket */

static int bucket_setup(void **state)
{
    static const char *const args[] = {"--admit-rate", "1", "--admit-burst", "3", NULL};
    return http_group_setup(state) == 0 && stockd_start(args) == 0 ? 0 : -1;
}

static void test_past_the_burst_is_throttled(void **state)
{
    (void)state;
    reset(PRODUCT_BUCKET, 100);
    long long started = now_ms();
    /* A full bucket: the burst is admitted, whatever the clock. */
    for (int i = 0; i < 3; i++)
        expect_deduct("lua", PRODUCT_BUCKET, "", 200, "");
    /* Then one token a second: within the seconds this took, at most that
     * many more are admitted before the first 429. */
    int extra = 0;
    for (;;) {
        struct account before = account(PRODUCT_BUCKET);
        struct http_reply r;
        long status = sale(PRODUCT_BUCKET, "", &r);
        if (status == 429) {
            assert_string_equal(reply_word(&r), "throttled");
            assert_string_equal(r.retry_after, "1"); /* 1 token/s: under a second away */
            assert_int_equal(json_integer_value(json_object_get(r.json, "retry_after")), 1);
            http_reply_free(&r);
            struct account after = account(PRODUCT_BUCKET);
            expect_same_account(&before, &after);
            break;
        }
        http_reply_free(&r);
        assert_int_equal(status, 200);
        extra++;
        assert_true(extra <= (now_ms() - started) / 1000 + 1);
    }
    for (int i = 0; i < 20; i++) {
        struct http_reply r;
        long status = sale(PRODUCT_BUCKET, "", &r);
        assert_true(status == 429 || status == 200);
        assert_true(status == 200 || r.retry_after[0] == '1');
        http_reply_free(&r);
    }
    struct account a = account(PRODUCT_BUCKET);
    assert_int_equal(a.redis.oversold, 0);
    assert_true(metric("stockd_requests_total{strategy=\"lua\",outcome=\"throttled\"}") >= 1);
    /* Other products have buckets of their own. */
    reset(PRODUCT_BUCKET + 1, 10);
    expect_deduct("lua", PRODUCT_BUCKET + 1, "", 200, "");
}

/* --------------------------------------------------------------- flag */

static int flag_setup(void **state)
{
    /* No recheck during these tests: every flagged answer is from memory. */
    static const char *const args[] = {"--sold-out-flag", "1", "--sold-out-recheck-ms", "600000",
                                       NULL};
    return http_group_setup(state) == 0 && stockd_start(args) == 0 ? 0 : -1;
}

static void test_the_flag_answers_without_redis(void **state)
{
    (void)state;
    reset(PRODUCT_FLAG, 2);
    expect_deduct("lua", PRODUCT_FLAG, "", 200, "");
    expect_deduct("lua", PRODUCT_FLAG, "", 200, "");
    expect_deduct("lua", PRODUCT_FLAG, "", 409, "sold_out"); /* seen by the store: the flag */
    double before = metric("stockd_sold_out_flag_answers_total{strategy=\"lua\"}");
    assert_int_equal(stack_stop_one("redis"), 0);
    for (int i = 0; i < 5; i++) {
        struct http_reply r;
        assert_int_equal(sale(PRODUCT_FLAG, "", &r), 409);
        assert_string_equal(reply_word(&r), "sold_out");
        assert_true(flagged(&r));
        http_reply_free(&r);
    }
    /* Another product is not flagged: it needs Redis, which is down. */
    expect_deduct("lua", PRODUCT_FLAG + 50, "", 503, "backend_unavailable");
    assert_true(metric("stockd_sold_out_flag_answers_total{strategy=\"lua\"}") >= before + 5);
    assert_int_equal(stack_start_one("redis"), 0);
    char state_word[16];
    assert_int_equal(backend_health("redis", "up", state_word), 200);
    /* A reset through this instance clears the flag at once. */
    long long deadline = now_ms() + HEALTH_SETTLE_MS;
    char word[32];
    while (deadline > now_ms()) {
        struct http_reply r;
        http_call("POST", "/stock/reset?product=960101&count=1", NULL, &r);
        long status = r.status;
        http_reply_free(&r);
        if (status == 200)
            break;
        assert_int_equal(status, 503); /* a worker's link from before the restart */
    }
    long status = deduct("lua", PRODUCT_FLAG, "", word);
    if (status == 503) /* the same: the next sale goes on a new link */
        status = deduct("lua", PRODUCT_FLAG, "", word);
    assert_int_equal(status, 200);
    expect_deduct("lua", PRODUCT_FLAG, "", 409, "sold_out");
    struct account a = account(PRODUCT_FLAG);
    assert_int_equal(a.redis.sold, 1);
    assert_int_equal(a.redis.oversold, 0);
}

static void test_a_smaller_buyer_still_reaches_the_store(void **state)
{
    (void)state;
    reset(PRODUCT_FEWER, 3);
    expect_deduct("lua", PRODUCT_FEWER, "qty=2", 200, "");
    struct http_reply r;
    assert_int_equal(sale(PRODUCT_FEWER, "qty=2", &r), 409); /* the store: 1 left */
    assert_false(flagged(&r));
    http_reply_free(&r);
    assert_int_equal(sale(PRODUCT_FEWER, "qty=3", &r), 409); /* the flag: more than 1 */
    assert_true(flagged(&r));
    http_reply_free(&r);
    expect_deduct("lua", PRODUCT_FEWER, "qty=1", 200, ""); /* the last unit sells */
    struct account a = account(PRODUCT_FEWER);
    assert_int_equal(a.redis.sold, 3);
    assert_int_equal(a.redis.remaining, 0);
}

/* The flag's refusal of `qty` units of `product` by lua, byte for byte. */
static void expect_flag_body(const struct http_reply *r, int product, int qty)
{
    char want[256];
    snprintf(want, sizeof want,
             "{\"ok\":false,\"strategy\":\"lua\",\"product\":%d,\"qty\":%d,"
             "\"sold_out_flag\":true,\"error\":\"sold_out\",\"message\":\"product %d was "
             "seen sold out here, and not reset since\"}",
             product, qty, product);
    assert_int_equal(r->status, 409);
    assert_non_null(r->text);
    assert_string_equal(r->text, want);
}

/* Two replies the same on the wire: status, body and every header read. */
static void expect_same_reply(const struct http_reply *a, const struct http_reply *b)
{
    assert_int_equal(a->status, b->status);
    assert_non_null(a->text);
    assert_non_null(b->text);
    const char *const of_a[] = {a->text,        a->content_type, a->allow,   a->connection,
                                a->retry_after, a->instance,     a->replayed};
    const char *const of_b[] = {b->text,        b->content_type, b->allow,   b->connection,
                                b->retry_after, b->instance,     b->replayed};
    for (size_t i = 0; i < sizeof of_a / sizeof of_a[0]; i++)
        assert_string_equal(of_a[i], of_b[i]);
}

/* The refusal of a keyed deduct, which the flag's prebuilt answers leave
 * to the reply built for the request (a key's answer is the key's). */
static void keyed_sale(int product, const char *query, const char *key, struct http_reply *r)
{
    char path[192], header[96];
    snprintf(path, sizeof path, "/stock/deduct/lua?product=%d%s%s", product, *query ? "&" : "",
             query);
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
    const char *const headers[] = {header, NULL};
    http_call_with("POST", path, NULL, headers, r);
}

static void test_the_prebuilt_refusal_is_the_built_one(void **state)
{
    (void)state;
    reset(PRODUCT_BYTES, 0);
    expect_deduct("lua", PRODUCT_BYTES, "", 409, "sold_out"); /* the store: the flag goes up */
    struct http_reply built, prebuilt;
    keyed_sale(PRODUCT_BYTES, "", "it-admit-bytes-1", &built);
    expect_flag_body(&built, PRODUCT_BYTES, 1);
    assert_true(flagged(&built));
    double before = metric("stockd_sold_out_flag_answers_total{strategy=\"lua\"}");
    double refused = metric("stockd_requests_total{strategy=\"lua\",outcome=\"sold_out\"}");
    /* The first refusals build each loop's answer, the rest send it again. */
    for (int i = 0; i < 8; i++) {
        assert_int_equal(sale(PRODUCT_BYTES, "", &prebuilt), 409);
        expect_same_reply(&built, &prebuilt);
        http_reply_free(&prebuilt);
    }
    assert_true(metric("stockd_sold_out_flag_answers_total{strategy=\"lua\"}") >= before + 8);
    assert_true(metric("stockd_requests_total{strategy=\"lua\",outcome=\"sold_out\"}") >=
                refused + 8);
    http_reply_free(&built);
    /* Another qty has an answer of its own, and the first one comes back. */
    keyed_sale(PRODUCT_BYTES, "qty=2", "it-admit-bytes-2", &built);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sale(PRODUCT_BYTES, "qty=2", &prebuilt), 409);
        expect_flag_body(&prebuilt, PRODUCT_BYTES, 2);
        expect_same_reply(&built, &prebuilt);
        http_reply_free(&prebuilt);
        assert_int_equal(sale(PRODUCT_BYTES, "", &prebuilt), 409);
        expect_flag_body(&prebuilt, PRODUCT_BYTES, 1);
        http_reply_free(&prebuilt);
    }
    http_reply_free(&built);
    /* GET answers the same bytes as POST. */
    char path[96];
    snprintf(path, sizeof path, "/stock/deduct/lua?product=%d", PRODUCT_BYTES);
    http_call("GET", path, NULL, &prebuilt);
    expect_flag_body(&prebuilt, PRODUCT_BYTES, 1);
    http_reply_free(&prebuilt);
}

static void test_after_a_reset_the_product_sells_again(void **state)
{
    (void)state;
    struct http_reply r;
    for (int round = 0; round < 3; round++) {
        reset(PRODUCT_AGAIN, 1);
        expect_deduct("lua", PRODUCT_AGAIN, "", 200, "");
        expect_deduct("lua", PRODUCT_AGAIN, "", 409, "sold_out");
        for (int i = 0; i < 4; i++) {
            assert_int_equal(sale(PRODUCT_AGAIN, "", &r), 409);
            expect_flag_body(&r, PRODUCT_AGAIN, 1);
            http_reply_free(&r);
        }
    }
    struct account a = account(PRODUCT_AGAIN);
    assert_int_equal(a.redis.sold, 1);
    assert_int_equal(a.redis.oversold, 0);
}

/* Many products sold out at once: each its own answer, all kept at once
 * (the sanitized stockd's leak check at its stop frees them). */
#define MANY 300

static void test_many_products_sold_out_at_once(void **state)
{
    (void)state;
    struct http_reply r;
    for (int p = PRODUCT_MANY; p < PRODUCT_MANY + MANY; p++) {
        reset(p, 0);
        expect_deduct("lua", p, "", 409, "sold_out");
    }
    for (int round = 0; round < 2; round++)
        for (int p = PRODUCT_MANY; p < PRODUCT_MANY + MANY; p++) {
            assert_int_equal(sale(p, "", &r), 409);
            expect_flag_body(&r, p, 1);
            http_reply_free(&r);
        }
}

/* -------------------------------------------------- a second instance */

#define RECHECK_MS 200

static int remote_setup(void **state)
{
    static const char *const args[] = {"--sold-out-flag", "1", "--sold-out-recheck-ms", "200",
                                       NULL};
    return http_group_setup(state) == 0 && stockd_start(args) == 0 ? 0 : -1;
}

static char first_port[16], second_port[16];

/* Points the harness's HTTP calls at the first or the second instance. */
static void talk_to(const char *port)
{
    setenv("STOCKD_TEST_PORT", port, 1);
}

/* Starts the second instance, without the flag, on the next port; its
 * pid, or -1 after printing why. */
static pid_t second_start(void)
{
    snprintf(first_port, sizeof first_port, "%s", stockd_port());
    snprintf(second_port, sizeof second_port, "%d", atoi(first_port) + 1);
    char log_path[PATH_MAX];
    const char *dir = getenv("STOCKD_RUN_DIR") ? getenv("STOCKD_RUN_DIR") : "run/test";
    snprintf(log_path, sizeof log_path, "%s/stockd-it_admit-second.log", dir);
    const char *bin = getenv("STOCKD_TEST_BIN") ? getenv("STOCKD_TEST_BIN") : "build/test/stockd";
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (!freopen(log_path, "a", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
            _exit(126);
        execl(bin, bin, "--port", second_port, "--threads", "2", "--instance-name", "second",
              (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    talk_to(second_port);
    long long deadline = now_ms() + 10000;
    long status = 0;
    while (status == 0 && now_ms() < deadline) {
        struct http_reply r;
        http_call("GET", "/health", NULL, &r);
        status = r.status;
        http_reply_free(&r);
        if (!status)
            sleep_ms(50);
    }
    talk_to(first_port);
    if (status == 0) {
        fprintf(stderr, "the second stockd did not answer (see %s)\n", log_path);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

/* SIGTERM, and its exit status must be 0 (an orderly stop, no leak). */
static int second_stop(pid_t pid)
{
    int status = 0;
    kill(pid, SIGTERM);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void test_a_reset_elsewhere_clears_the_flag(void **state)
{
    (void)state;
    pid_t second = second_start();
    assert_true(second > 0);
    reset(PRODUCT_REMOTE, 1);
    expect_deduct("lua", PRODUCT_REMOTE, "", 200, "");
    expect_deduct("lua", PRODUCT_REMOTE, "", 409, "sold_out");
    struct http_reply r;
    assert_int_equal(sale(PRODUCT_REMOTE, "", &r), 409);
    assert_true(flagged(&r));
    http_reply_free(&r);

    talk_to(second_port);
    reset(PRODUCT_REMOTE, 5);
    talk_to(first_port);
    long long reset_at = now_ms();
    /* The first instance cannot know yet: it refuses from memory until its
     * recheck sale goes through, which sells. */
    int refused = 0;
    long status;
    while ((status = sale(PRODUCT_REMOTE, "", &r)) == 409) {
        assert_true(flagged(&r));
        http_reply_free(&r);
        refused++;
        assert_true(now_ms() - reset_at < RECHECK_MS + 5000);
    }
    http_reply_free(&r);
    assert_int_equal(status, 200);
    fprintf(stderr, "the reset was seen after %lld ms, %d buyers refused meanwhile\n",
            now_ms() - reset_at, refused);
    /* From then on the flag is down: the rest sells, then the store refuses. */
    for (int i = 0; i < 4; i++)
        expect_deduct("lua", PRODUCT_REMOTE, "", 200, "");
    assert_int_equal(sale(PRODUCT_REMOTE, "", &r), 409);
    assert_false(flagged(&r));
    http_reply_free(&r);
    struct account a = account(PRODUCT_REMOTE);
    assert_int_equal(a.redis.sold, 5);
    assert_int_equal(a.redis.oversold, 0);
    assert_int_equal(second_stop(second), 0);
}

int main(void)
{
    const struct CMUnitTest bucket[] = {
        cmocka_unit_test(test_past_the_burst_is_throttled),
    };
    const struct CMUnitTest flag[] = {
        cmocka_unit_test(test_the_flag_answers_without_redis),
        cmocka_unit_test(test_a_smaller_buyer_still_reaches_the_store),
        cmocka_unit_test(test_the_prebuilt_refusal_is_the_built_one),
        cmocka_unit_test(test_after_a_reset_the_product_sells_again),
        cmocka_unit_test(test_many_products_sold_out_at_once),
    };
    const struct CMUnitTest remote[] = {
        cmocka_unit_test(test_a_reset_elsewhere_clears_the_flag),
    };
    int failed = cmocka_run_group_tests_name("the token bucket", bucket, bucket_setup,
                                             stockd_group_teardown);
    failed +=
        cmocka_run_group_tests_name("the sold-out flag", flag, flag_setup, stockd_group_teardown);
    failed += cmocka_run_group_tests_name("a reset through another instance", remote, remote_setup,
                                          stockd_group_teardown);
    return failed ? 1 : 0;
}
