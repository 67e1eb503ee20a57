/*
 * it_safety.c - a run cannot be corrupted from outside, and stockd is not
 * a hole on the machine it runs on.
 *
 * Proves:
 *   - a reset is a hard boundary: a sale that read the stock before a
 *     reset never writes after it, in every family - optimistic (cas),
 *     fenced, a lock around the shared body, and the body on Redis - so
 *     the accounting after it is exact;
 *   - fencing tokens never go back: when Redis loses the token counter
 *     (a restart without its data), the next fenced sale still sells, with
 *     a token larger than any the row has seen;
 *   - a deduct of a product that does not exist leaves nothing behind in
 *     Redis or ZooKeeper, whatever the strategy, 1000 times over;
 *   - with an admin token, reset needs it (401 otherwise); a request a
 *     browser marks cross-site cannot sell or reset (403), and changes
 *     nothing; stockd refuses to listen beyond loopback without a token;
 *   - a thousand idle sockets from one address cannot lock anyone else out.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCTS_RESET = 9100, /* + family */
    PRODUCT_GUARDED = 9110,
    PRODUCT_FENCE_LOST = 9111,
    PRODUCT_UNKNOWN = 900001, /* never reset by any test */
};

#define BUSY "stockd_workers_busy"
#define SETTLE_MS 10000
/* The sale under test stays between its read and its write this long;
 * the reset comes well inside that window. */
#define WINDOW_MS 1000
#define RESET_AFTER_MS 150

static int stop_stockd(void **state)
{
    (void)state;
    return stockd_stop();
}

/* ------------------------------------------------------- reset epochs */

/*
 * Starts a sale of `product` with `strategy` that waits `knob`=WINDOW_MS
 * between its read and its write, resets the product to 10 while it waits,
 * and checks that whatever the sale answered, the store's accounting is
 * exact afterwards. Returns the sale's reply for the caller's own checks.
 */
static struct http_reply sale_across_a_reset(const char *strategy, int product, const char *knob)
{
    reset(product, 100);
    struct background s;
    char query[32];
    snprintf(query, sizeof query, "%s=%d", knob, WINDOW_MS);
    start_background(&s, strategy, product, query);
    assert_int_equal(wait_metric(BUSY, 1, SETTLE_MS), 0);
    sleep_ms(RESET_AFTER_MS); /* the sale has read: a few ms of its 1000 ms window */
    reset(product, 10);
    finish_background(&s);

    const json_t *st = find_strategy(strategy);
    struct account a = account(product);
    const struct store_figures *f = account_store(&a, json_str_member(st, "store"));
    fprintf(stderr, "%s across a reset: %ld %s | initial %lld remaining %lld sold %lld\n", strategy,
            s.reply.status, reply_word(&s.reply), f->initial, f->remaining, f->sold);
    assert_int_equal(f->initial, 10);
    assert_int_equal(f->oversold, 0);
    assert_int_equal(f->lost_updates, 0);
    assert_int_equal(f->remaining, f->initial - f->sold);
    return s.reply;
}

/* The write a sale prepared before the reset is refused: busy, nothing sold. */
static void expect_refused_across_a_reset(const char *strategy, int product, const char *knob)
{
    struct http_reply r = sale_across_a_reset(strategy, product, knob);
    assert_int_equal(r.status, 409);
    assert_string_equal(reply_word(&r), "busy");
    http_reply_free(&r);
    struct account a = account(product);
    assert_int_equal(a.mysql.sold + a.redis.sold, 0);
}

static void test_reset_stops_cas(void **state)
{
    (void)state;
    /* Optimistic: the version moved on with the reset, so the first write
     * matched nothing and the retry sold from the new stock. */
    struct http_reply r = sale_across_a_reset("cas", PRODUCTS_RESET + 0, "hold_ms");
    assert_int_equal(r.status, 200);
    assert_true(json_int_member(r.json, "attempts") >= 2);
    assert_int_equal(json_int_member(r.json, "remaining"), 9);
    http_reply_free(&r);
}

static void test_reset_stops_fenced(void **state)
{
    (void)state;
    expect_refused_across_a_reset("fenced", PRODUCTS_RESET + 1, "pause_ms");
}

static void test_reset_stops_a_lock_around_the_body(void **state)
{
    (void)state;
    expect_refused_across_a_reset("redis-lock", PRODUCTS_RESET + 2, "hold_ms");
}

static void test_reset_stops_the_body_on_redis(void **state)
{
    (void)state;
    expect_refused_across_a_reset("redis-nolock", PRODUCTS_RESET + 3, "hold_ms");
}

static void test_reset_stops_the_bare_body_on_mysql(void **state)
{
    (void)state;
    expect_refused_across_a_reset("nolock", PRODUCTS_RESET + 4, "hold_ms");
}

/* What a fenced sale of `product` answers, as a 200 and its token. */
static long long fenced_sale(int product)
{
    struct http_reply r;
    char path[96];
    snprintf(path, sizeof path, "/stock/deduct/fenced?product=%d", product);
    http_call("POST", path, NULL, &r);
    if (r.status != 200)
        fprintf(stderr, "fenced sale: %ld %s\n", r.status, r.text ? r.text : r.failure);
    assert_int_equal(r.status, 200);
    long long token = json_int_member(r.json, "fence");
    http_reply_free(&r);
    return token;
}

static void test_lost_fence_counter_catches_up(void **state)
{
    (void)state;
    reset(PRODUCT_FENCE_LOST, 10);
    long long before = 0;
    for (int i = 0; i < 3; i++)
        before = fenced_sale(PRODUCT_FENCE_LOST);
    char cmd[64], out[64];
    snprintf(cmd, sizeof cmd, "DEL 'fence:{%d}'", PRODUCT_FENCE_LOST);
    assert_int_equal(redis_cli(cmd, out, sizeof out), 0);
    /* The counter restarts at 1, the row has seen `before`: the sale is
     * refused once, the counter catches up, and the sale goes again. */
    long long after = fenced_sale(PRODUCT_FENCE_LOST);
    fprintf(stderr, "fence counter lost at token %lld; the next sale sold with %lld\n", before,
            after);
    assert_true(after > before);
    struct account a = account(PRODUCT_FENCE_LOST);
    assert_int_equal(a.mysql.sold, 4);
    assert_int_equal(a.mysql.remaining, 6);
}

/* ----------------------------------------------- unknown products */

#define UNKNOWN_REQUESTS 1000

static int unknown_index;

static void sell_unknown(const json_t *strategy, int index)
{
    (void)index;
    const char *name = json_str_member(strategy, "name");
    int share = UNKNOWN_REQUESTS / (int)json_array_size(strategy_list()) + 1;
    struct tally t = drive(name, PRODUCT_UNKNOWN + unknown_index++ % 3, share, 4, NULL);
    if (t.other != share)
        print_tally(name, &t);
    assert_int_equal(t.other, share); /* all of them 404 unknown_product */
    assert_int_equal(t.ok + t.sold_out + t.busy, 0);
}

static void test_unknown_products_leave_nothing(void **state)
{
    (void)state;
    /* Every key and node the earlier tests left, on the shared test stack. */
    static char keys_before[1 << 17], keys_after[1 << 17], nodes_before[1 << 16],
        nodes_after[1 << 16];
    /* Warm up: the lock backends' roots exist, as after any real sale. */
    reset(PRODUCT_GUARDED, 1000);
    drive("zk-lock", PRODUCT_GUARDED, 1, 1, NULL);
    assert_int_equal(redis_cli("--raw KEYS '*'", keys_before, sizeof keys_before), 0);
    assert_int_equal(zk_tree("/stockd", nodes_before, sizeof nodes_before), 0);

    for_each_strategy(sell_unknown);

    assert_int_equal(redis_cli("--raw KEYS '*'", keys_after, sizeof keys_after), 0);
    assert_int_equal(zk_tree("/stockd", nodes_after, sizeof nodes_after), 0);
    assert_string_equal(keys_after, keys_before);
    assert_string_equal(nodes_after, nodes_before);
    expect_error("GET", "/stock/900001", NULL, 404, "unknown_product");
}

/* ------------------------------------------------------------- guards */

#define TOKEN "a-token-for-the-tests"

static int start_with_token(void **state)
{
    (void)state;
    static const char *const args[] = {"--admin-token", TOKEN, NULL};
    return stockd_start(args);
}

static long reset_with(const char *const *headers, char word[32])
{
    struct http_reply r;
    char path[96];
    snprintf(path, sizeof path, "/stock/reset?product=%d&count=0", PRODUCT_GUARDED);
    http_call_with("POST", path, NULL, headers, &r);
    snprintf(word, 32, "%s", reply_word(&r));
    http_reply_free(&r);
    return r.status;
}

static void test_reset_needs_the_token(void **state)
{
    (void)state;
    static const char *const right[] = {"Authorization: Bearer " TOKEN, NULL};
    static const char *const wrong[] = {"Authorization: Bearer a-token-for-the-test", NULL};
    static const char *const basic[] = {"Authorization: Basic " TOKEN, NULL};
    char word[32];
    assert_int_equal(reset_with(right, word), 200);
    struct http_reply r;
    char path[96];
    snprintf(path, sizeof path, "/stock/deduct/sql?product=%d", PRODUCT_GUARDED);
    http_call("POST", path, NULL, &r); /* selling needs no token */
    assert_int_equal(r.status, 409);   /* sold out: it was reset to 0 */
    http_reply_free(&r);
    assert_int_equal(reset_with(NULL, word), 401);
    assert_string_equal(word, "unauthorized");
    assert_int_equal(reset_with(wrong, word), 401);
    assert_int_equal(reset_with(basic, word), 401);
}

/* The race driver resets a product too: the same token, or nothing changes. */
static void test_race_needs_the_token(void **state)
{
    (void)state;
    static const char *const right[] = {"Authorization: Bearer " TOKEN, NULL};
    char word[32], body[96];
    assert_int_equal(reset_with(right, word), 200);
    struct account before = account(PRODUCT_GUARDED);
    snprintf(body, sizeof body, "{\"strategy\":\"sql\",\"buyers\":2,\"units\":1,\"product\":%d}",
             PRODUCT_GUARDED);
    expect_error("POST", "/lab/race", body, 401, "unauthorized");
    struct account after = account(PRODUCT_GUARDED);
    expect_same_account(&before, &after);
    struct http_reply r;
    http_call_with("POST", "/lab/race", body, right, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_int_member(json_object_get(r.json, "ledger"), "sold"), 1);
    http_reply_free(&r);
}

static void test_cross_site_requests_change_nothing(void **state)
{
    (void)state;
    static const char *const right[] = {"Authorization: Bearer " TOKEN, NULL};
    static const char *const evil_origin[] = {"Authorization: Bearer " TOKEN,
                                              "Origin: http://evil.example", NULL};
    static const char *const cross_site[] = {"Authorization: Bearer " TOKEN,
                                             "Sec-Fetch-Site: cross-site", NULL};
    char word[32], own_origin[64], path[96];
    snprintf(own_origin, sizeof own_origin, "Origin: http://127.0.0.1:%s", stockd_port());
    const char *const same_origin[] = {own_origin, NULL};

    snprintf(path, sizeof path, "/stock/reset?product=%d&count=5", PRODUCT_GUARDED);
    struct http_reply r;
    http_call_with("POST", path, NULL, right, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    struct account before = account(PRODUCT_GUARDED);
    assert_int_equal(reset_with(evil_origin, word), 403); /* would reset it to 0 */
    assert_string_equal(word, "forbidden");
    assert_int_equal(reset_with(cross_site, word), 403);

    /* The same for a sale (an <img> on any page would send a GET). */
    snprintf(path, sizeof path, "/stock/deduct/sql?product=%d", PRODUCT_GUARDED);
    http_call_with("GET", path, NULL, cross_site + 1, &r);
    assert_int_equal(r.status, 403);
    http_reply_free(&r);
    http_call_with("GET", path, NULL, evil_origin + 1, &r);
    assert_int_equal(r.status, 403);
    http_reply_free(&r);
    struct account after = account(PRODUCT_GUARDED);
    expect_same_account(&before, &after);
    http_call_with("GET", path, NULL, same_origin, &r); /* the lab page's own */
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    /* Reading stays open to everyone. */
    http_call_with("GET", "/strategies", NULL, cross_site + 1, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
}

static void test_no_token_no_listening_beyond_loopback(void **state)
{
    (void)state;
    static const char *const exposed[] = {"--listen", "0.0.0.0", NULL};
    assert_int_equal(stockd_exit_status(exposed), 2);
}

/* ----------------------------------------------------------- slowloris */

#define IDLE_SOCKETS 1000

static int start_limited(void **state)
{
    (void)state;
    static const char *const args[] = {"--max-per-ip", "64", "--idle-timeout-s", "3", NULL};
    return stockd_start(args);
}

/* Opens a socket from 127.0.0.2 that sends half a request and waits. */
static int idle_socket(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &from.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    to.sin_port = htons((uint16_t)port);
    static const char half[] = "GET /strategies HTTP/1.1\r\nHost: x\r\n";
    if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0 ||
        write(fd, half, sizeof half - 1) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_idle_sockets_lock_nobody_out(void **state)
{
    (void)state;
    struct rlimit files;
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    int port = atoi(stockd_port());
    static int fds[IDLE_SOCKETS];
    int opened = 0;
    for (int i = 0; i < IDLE_SOCKETS; i++)
        if ((fds[i] = idle_socket(port)) >= 0)
            opened++;
    /* Everyone else still gets in, at once. */
    long long start = now_ms();
    json_t *doc = expect_ok("GET", "/health", NULL, 200);
    json_decref(doc);
    long long took = now_ms() - start;
    double open_now = metric("process_open_fds");
    for (int i = 0; i < IDLE_SOCKETS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    fprintf(stderr, "%d idle sockets tried; /health took %lld ms; stockd holds %g fds\n", opened,
            took, open_now);
    assert_true(took < 1000);
    assert_true(open_now < 200); /* 64 from the one address, not a thousand */
}

int main(void)
{
    const struct CMUnitTest epochs[] = {
        cmocka_unit_test(test_reset_stops_cas),
        cmocka_unit_test(test_reset_stops_fenced),
        cmocka_unit_test(test_reset_stops_a_lock_around_the_body),
        cmocka_unit_test(test_reset_stops_the_body_on_redis),
        cmocka_unit_test(test_reset_stops_the_bare_body_on_mysql),
        cmocka_unit_test(test_lost_fence_counter_catches_up),
        cmocka_unit_test(test_unknown_products_leave_nothing),
    };
    const struct CMUnitTest guards[] = {
        cmocka_unit_test_setup_teardown(test_reset_needs_the_token, start_with_token, stop_stockd),
        cmocka_unit_test_setup_teardown(test_race_needs_the_token, start_with_token, stop_stockd),
        cmocka_unit_test_setup_teardown(test_cross_site_requests_change_nothing, start_with_token,
                                        stop_stockd),
        cmocka_unit_test(test_no_token_no_listening_beyond_loopback),
        cmocka_unit_test_setup_teardown(test_idle_sockets_lock_nobody_out, start_limited,
                                        stop_stockd),
    };
    int failed = cmocka_run_group_tests_name("resets and unknown products", epochs,
                                             stockd_group_setup, stockd_group_teardown);
    failed +=
        cmocka_run_group_tests_name("guards", guards, http_group_setup, stockd_group_teardown);
    return failed;
}
