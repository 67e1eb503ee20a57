/*
 * it_idempotency.c - Idempotency-Key on POST /stock/deduct/{strategy},
 * against the real stack, for a row of each store that keeps keys (sql on
 * MySQL, lua on Redis, and each other way a row keeps one) and a row that
 * keeps none.
 *
 * Proves:
 *   - a key sent again gets the first answer again - status and body,
 *     `remaining` included - with `Idempotent-Replayed: true`, and the
 *     ledger unchanged: no second sale;
 *   - a refusal (sold_out) is an answer too: replayed as it was, even once
 *     the stock is back, and it changed nothing;
 *   - the same key with another qty (and on MySQL another product or
 *     strategy) is 422 key_reused, and changes nothing;
 *   - a malformed key (empty, 256 characters, a control character) is a
 *     400 naming Idempotency-Key, and changes nothing; 255 printable
 *     characters are a key;
 *   - a key whose first request is still inside its critical section
 *     (hold_ms) is 409 in_progress for a second request, which changes
 *     nothing; the first then sells once, and its answer replays;
 *   - /strategies says which rows keep keys, and why the others do not;
 *     a row that keeps none sells every time, as if no key came;
 *   - lua-stream keeps its key with the sale and the order it streamed, and
 *     the stream entry carries it to MySQL: a replay before and after the
 *     consumer settled the order answers that order and sells nothing, and
 *     once Redis has forgotten the key (as a failover may), the purchase
 *     sold again in Redis is not settled again: MySQL keeps one order.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PRODUCT_REPLAY 470001 /* + the row's index in rows[] */
#define PRODUCT_REFUSAL 470011
#define PRODUCT_REUSED 470021
#define PRODUCT_OTHER 470031
#define PRODUCT_BAD 470041
#define PRODUCT_RUNNING 470051
#define PRODUCT_NO_KEY 470061
#define PRODUCT_HOLD 470071
#define PRODUCT_PAY 470081
#define PRODUCT_STREAM 470091

/* A row that keeps no key: its segments are shards, and a retry's script
 * runs on another one. */
#define ROW_KEEPING_NONE "segmented"

/* How long the stream's consumer may take to settle an order, polled. */
#define SETTLE_MS 10000

/* The longest key the contract allows. */
#define IDEMPOTENCY_TEST_MAX 255

/* Rows that keep keys: one per store and way of keeping it - a MySQL
 * commit, lua's script, the Redis MULTI of an optimistic row and of the
 * race itself, lua's script then WAIT, a transaction of a row's own and a
 * batch's transaction. */
static const char *const rows[] = {"sql",      "lua",      "watch",    "redis-nolock",
                                   "lua-wait", "mutex-tx", "sql-batch"};

/* A key no earlier run sent: the stores keep keys for a day, across runs. */
static void fresh_key(char *key, size_t size, const char *what)
{
    static int made;
    snprintf(key, size, "it-%ld-%d-%lld-%d-%s", (long)getpid(), made++, now_ms(), (int)time(NULL),
             what);
}

/* POST `path` with `key` (no header when NULL). */
static void post_keyed(const char *path, const char *key, struct http_reply *out)
{
    char header[64 + 512];
    /* curl drops a header written "Name:" with no value; "Name;" sends it empty. */
    if (key && !*key)
        snprintf(header, sizeof header, "Idempotency-Key;");
    else
        snprintf(header, sizeof header, "Idempotency-Key: %s", key ? key : "");
    const char *const headers[] = {key ? header : NULL, NULL};
    http_call_with("POST", path, NULL, headers, out);
}

/* POST /stock/deduct/{strategy}?product=P&qty=N[&extra] with `key` (no
 * header when NULL). */
static void keyed(const char *strategy, int product, int qty, const char *extra, const char *key,
                  struct http_reply *out)
{
    char path[192];
    snprintf(path, sizeof path, "/stock/deduct/%s?product=%d&qty=%d%s", strategy, product, qty,
             extra ? extra : "");
    post_keyed(path, key, out);
}

/* Asserts a keyed deduct's status and error word ("" for a 200), and
 * whether it says it is a replay; returns the reply, for the caller to
 * free. */
static struct http_reply expect_keyed(const char *strategy, int product, int qty, const char *extra,
                                      const char *key, long status, const char *word, int replayed)
{
    struct http_reply r;
    keyed(strategy, product, qty, extra, key, &r);
    if (r.status != status || strcmp(reply_word(&r), word) != 0 ||
        (strcmp(r.replayed, "true") == 0) != replayed)
        fail_msg("%s of %d qty %d key %.40s: %ld %s (replayed '%s'), wanted %ld %s%s: %s", strategy,
                 product, qty, key ? key : "(none)", r.status, reply_word(&r), r.replayed, status,
                 word, replayed ? " replayed" : "", r.text ? r.text : r.failure);
    assert_non_null(r.json);
    return r;
}

/* The same body, but for `batch`: how many sales shared the trip that
 * carried the answer, which a replay's trip is not. */
static void expect_same_body(const struct http_reply *first, const struct http_reply *again)
{
    json_t *a = json_deep_copy(first->json), *b = json_deep_copy(again->json);
    json_object_del(a, "batch");
    json_object_del(b, "batch");
    int same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (!same)
        fail_msg("the replay's body differs:\n  first: %s\n  again: %s", first->text, again->text);
}

/* Asserts a keyed deduct's answer as expect_keyed() does, that it left
 * the product's figures as they were and, when `same_as` is not NULL, that
 * its body is that reply's. */
static void expect_nothing_changed(const char *strategy, int product, int qty, const char *key,
                                   long status, const char *word, int replayed,
                                   const struct http_reply *same_as)
{
    struct account before = account(product);
    struct http_reply r = expect_keyed(strategy, product, qty, NULL, key, status, word, replayed);
    struct account after = account(product);
    expect_same_account(&before, &after);
    if (same_as)
        expect_same_body(same_as, &r);
    http_reply_free(&r);
}

static void test_a_key_replays_its_sale(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        int product = PRODUCT_REPLAY + i;
        char key[96];
        fresh_key(key, sizeof key, "replay");
        reset(product, 10);
        struct http_reply first = expect_keyed(rows[i], product, 2, NULL, key, 200, "", 0);
        struct account sold = account(product);
        assert_int_equal(
            account_store(&sold, json_str_member(find_strategy(rows[i]), "store"))->sold, 2);
        for (int again = 0; again < 3; again++) {
            struct http_reply r = expect_keyed(rows[i], product, 2, NULL, key, 200, "", 1);
            expect_same_body(&first, &r);
            http_reply_free(&r);
        }
        struct account after = account(product);
        expect_same_account(&sold, &after);
        http_reply_free(&first);
    }
}

static void test_a_refusal_replays_and_changes_nothing(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        int product = PRODUCT_REFUSAL + i;
        char key[96];
        fresh_key(key, sizeof key, "refused");
        reset(product, 1);
        struct account before = account(product);
        struct http_reply first = expect_keyed(rows[i], product, 2, NULL, key, 409, "sold_out", 0);
        struct account after = account(product);
        expect_same_account(&before, &after);
        /* The stock is back: the key still answers what it answered. */
        reset(product, 10);
        expect_nothing_changed(rows[i], product, 2, key, 409, "sold_out", 1, &first);
        http_reply_free(&first);
    }
}

static void test_a_key_reused_with_other_parameters_is_422(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        int product = PRODUCT_REUSED + i;
        char key[96];
        fresh_key(key, sizeof key, "reused");
        reset(product, 10);
        struct http_reply first = expect_keyed(rows[i], product, 1, NULL, key, 200, "", 0);
        expect_nothing_changed(rows[i], product, 3, key, 422, "key_reused", 0, NULL);
        http_reply_free(&first);
    }
    /* MySQL keeps one table of keys: another product or another of its
     * rows is another request too. */
    char key[96];
    fresh_key(key, sizeof key, "reused-sql");
    reset(PRODUCT_OTHER, 10);
    reset(PRODUCT_OTHER + 1, 10);
    struct http_reply first = expect_keyed("sql", PRODUCT_OTHER, 1, NULL, key, 200, "", 0);
    expect_nothing_changed("sql", PRODUCT_OTHER + 1, 1, key, 422, "key_reused", 0, NULL);
    expect_nothing_changed("for-update", PRODUCT_OTHER, 1, key, 422, "key_reused", 0, NULL);
    http_reply_free(&first);
}

static void expect_bad_key(const char *strategy, int product, const char *key)
{
    struct http_reply r = expect_keyed(strategy, product, 1, NULL, key, 400, "bad_request", 0);
    const char *message = json_str_member(r.json, "message");
    if (!strstr(message, "Idempotency-Key"))
        fail_msg("the 400 does not name the header: %s", message);
    http_reply_free(&r);
}

static void test_a_malformed_key_is_400_and_changes_nothing(void **state)
{
    (void)state;
    char longest[IDEMPOTENCY_TEST_MAX + 2];
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        int product = PRODUCT_BAD + i;
        reset(product, 10);
        struct account before = account(product);
        expect_bad_key(rows[i], product, "");
        memset(longest, 'k', IDEMPOTENCY_TEST_MAX + 1);
        longest[IDEMPOTENCY_TEST_MAX + 1] = '\0';
        expect_bad_key(rows[i], product, longest);
        expect_bad_key(rows[i], product, "a\001b");
        expect_bad_key(rows[i], product, "caf\xc3\xa9");
        struct account after = account(product);
        expect_same_account(&before, &after);
        /* 255 printable characters are a key. */
        fresh_key(longest, sizeof longest, "");
        memset(longest + strlen(longest), '~', IDEMPOTENCY_TEST_MAX - strlen(longest));
        longest[IDEMPOTENCY_TEST_MAX] = '\0';
        struct http_reply r = expect_keyed(rows[i], product, 1, NULL, longest, 200, "", 0);
        http_reply_free(&r);
        r = expect_keyed(rows[i], product, 1, NULL, longest, 200, "", 1);
        http_reply_free(&r);
    }
}

/* A keyed sale sent from a thread of its own. */
struct keyed_background {
    pthread_t thread;
    const char *strategy;
    int product;
    const char *key;
    struct http_reply reply;
};

static void *send_keyed(void *arg)
{
    struct keyed_background *b = arg;
    keyed(b->strategy, b->product, 1, "&hold_ms=1000", b->key, &b->reply);
    http_thread_done();
    return NULL;
}

static void test_a_running_key_is_409_in_progress(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        static struct keyed_background first;
        static char key[96];
        int product = PRODUCT_RUNNING + i;
        fresh_key(key, sizeof key, "running");
        reset(product, 10);
        first = (struct keyed_background){.strategy = rows[i], .product = product, .key = key};
        assert_int_equal(pthread_create(&first.thread, NULL, send_keyed, &first), 0);
        sleep_ms(300); /* the first is inside its 1000 ms hold */
        struct http_reply r = expect_keyed(rows[i], product, 1, NULL, key, 409, "in_progress", 0);
        http_reply_free(&r);
        assert_int_equal(pthread_join(first.thread, NULL), 0);
        if (first.reply.status != 200)
            fail_msg("the first request: %ld %s", first.reply.status,
                     first.reply.text ? first.reply.text : first.reply.failure);
        struct account a = account(product);
        const char *store = json_str_member(find_strategy(rows[i]), "store");
        assert_int_equal(account_store(&a, store)->sold, 1);
        r = expect_keyed(rows[i], product, 1, "&hold_ms=1000", key, 200, "", 1);
        expect_same_body(&first.reply, &r);
        http_reply_free(&r);
        http_reply_free(&first.reply);
        a = account(product);
        assert_int_equal(account_store(&a, store)->sold, 1);
    }
}

/* A row keeps keys, or says the reason it cannot: never "not yet". */
static void says_yes_or_why_not(const json_t *strategy, int index)
{
    (void)index;
    if (json_bool_member(strategy, "idempotent"))
        return;
    const char *why = json_str_member(strategy, "idempotent_why");
    if (strlen(why) == 0 || strncmp(why, "not yet", 7) == 0)
        fail_msg("%s keeps no key and says why not: '%s'", json_str_member(strategy, "name"), why);
}

static void test_strategies_say_which_rows_keep_keys(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        assert_true(json_bool_member(find_strategy(rows[i]), "idempotent"));
        assert_null(json_object_get(find_strategy(rows[i]), "idempotent_why"));
    }
    assert_true(json_bool_member(find_strategy("for-update"), "idempotent"));
    const json_t *none = find_strategy(ROW_KEEPING_NONE);
    assert_false(json_bool_member(none, "idempotent"));
    assert_true(strlen(json_str_member(none, "idempotent_why")) > 0);
    for_each_strategy(says_yes_or_why_not);
    /* A row that keeps no key sells each time, and never says replayed. */
    char key[96];
    fresh_key(key, sizeof key, "ignored");
    reset(PRODUCT_NO_KEY, 10);
    for (int n = 0; n < 2; n++) {
        struct http_reply r =
            expect_keyed(ROW_KEEPING_NONE, PRODUCT_NO_KEY, 1, NULL, key, 200, "", 0);
        http_reply_free(&r);
    }
    struct account a = account(PRODUCT_NO_KEY);
    assert_int_equal(account_store(&a, json_str_member(none, "store"))->sold, 2);
}

/* POST /orders/{strategy}?product=P&qty=N&ttl_ms=60000 with `key`:
 * asserts its status, error word and whether it says it is a replay. */
static struct http_reply expect_hold(const char *strategy, int product, int qty, const char *key,
                                     long status, const char *word, int replayed)
{
    char path[192];
    snprintf(path, sizeof path, "/orders/%s?product=%d&qty=%d&ttl_ms=60000", strategy, product,
             qty);
    struct http_reply r;
    post_keyed(path, key, &r);
    if (r.status != status || strcmp(reply_word(&r), word) != 0 ||
        (strcmp(r.replayed, "true") == 0) != replayed)
        fail_msg("hold on %s of %d qty %d: %ld %s (replayed '%s'), wanted %ld %s%s: %s", strategy,
                 product, qty, r.status, reply_word(&r), r.replayed, status, word,
                 replayed ? " replayed" : "", r.text ? r.text : r.failure);
    assert_non_null(r.json);
    return r;
}

/* A hold's key on a row of each way of keeping it: the replay is the first
 * hold - its order id and deadline - and holds nothing more; the key with
 * another qty is 422, a malformed key 400, and neither holds anything. */
static void test_a_hold_keeps_its_key(void **state)
{
    (void)state;
    static const char *const holding[] = {"sql", "lua", "watch"};
    for (int i = 0; i < (int)(sizeof holding / sizeof holding[0]); i++) {
        int product = PRODUCT_HOLD + i;
        const char *store = json_str_member(find_strategy(holding[i]), "store");
        char key[96];
        fresh_key(key, sizeof key, "hold");
        reset(product, 10);
        struct http_reply first = expect_hold(holding[i], product, 2, key, 201, "", 0);
        struct account held = account(product);
        assert_int_equal(account_store(&held, store)->sold, 2);
        for (int again = 0; again < 2; again++) {
            struct http_reply r = expect_hold(holding[i], product, 2, key, 201, "", 1);
            expect_same_body(&first, &r);
            http_reply_free(&r);
        }
        struct http_reply r = expect_hold(holding[i], product, 3, key, 422, "key_reused", 0);
        http_reply_free(&r);
        r = expect_hold(holding[i], product, 1, "a\001b", 400, "bad_request", 0);
        if (!strstr(json_str_member(r.json, "message"), "Idempotency-Key"))
            fail_msg("the 400 does not name the header: %s", r.text);
        http_reply_free(&r);
        struct account after = account(product);
        expect_same_account(&held, &after);
        http_reply_free(&first);
    }
}

/* POST /orders/{order}/{verb}[?payment=P] with `key`: asserts its status,
 * error word and whether it says it is a replay. */
static struct http_reply expect_transition(const char *order, const char *verb, const char *payment,
                                           const char *key, long status, const char *word,
                                           int replayed)
{
    char path[192];
    snprintf(path, sizeof path, "/orders/%s/%s%s%s", order, verb, payment ? "?payment=" : "",
             payment ? payment : "");
    struct http_reply r;
    post_keyed(path, key, &r);
    if (r.status != status || strcmp(reply_word(&r), word) != 0 ||
        (strcmp(r.replayed, "true") == 0) != replayed)
        fail_msg("%s of %s: %ld %s (replayed '%s'), wanted %ld %s%s: %s", verb, order, r.status,
                 reply_word(&r), r.replayed, status, word, replayed ? " replayed" : "",
                 r.text ? r.text : r.failure);
    assert_non_null(r.json);
    return r;
}

/* Pay and cancel with a key, on an order of each store: the replay is the
 * first answer (no `duplicate`, which a repeat without the key says); the
 * key with another payment is 422 and records no refund; a refusal (a
 * cancel of a paid order) replays too; a malformed key is a 400. */
static void test_pay_and_cancel_keep_their_keys(void **state)
{
    (void)state;
    static const char *const holding[] = {"sql", "lua"};
    for (int i = 0; i < (int)(sizeof holding / sizeof holding[0]); i++) {
        int product = PRODUCT_PAY + i;
        char pay_key[96], cancel_key[96], order[64];
        fresh_key(pay_key, sizeof pay_key, "pay");
        fresh_key(cancel_key, sizeof cancel_key, "cancel");
        reset(product, 10);
        struct http_reply held = expect_hold(holding[i], product, 1, NULL, 201, "", 0);
        snprintf(order, sizeof order, "%s", json_str_member(held.json, "order"));
        http_reply_free(&held);
        struct http_reply first = expect_transition(order, "pay", "p-1", pay_key, 200, "", 0);
        assert_null(json_object_get(first.json, "duplicate"));
        struct http_reply r = expect_transition(order, "pay", "p-1", pay_key, 200, "", 1);
        expect_same_body(&first, &r);
        http_reply_free(&r);
        r = expect_transition(order, "pay", "p-1", NULL, 200, "", 0);
        assert_true(json_bool_member(r.json, "duplicate")); /* the order's own answer */
        http_reply_free(&r);
        r = expect_transition(order, "pay", "p-2", pay_key, 422, "key_reused", 0);
        http_reply_free(&r);
        r = expect_transition(order, "pay", "p-3", "a\001b", 400, "bad_request", 0);
        if (!strstr(json_str_member(r.json, "message"), "Idempotency-Key"))
            fail_msg("the 400 does not name the header: %s", r.text);
        http_reply_free(&r);
        struct http_reply refused =
            expect_transition(order, "cancel", NULL, cancel_key, 409, "paid", 0);
        r = expect_transition(order, "cancel", NULL, cancel_key, 409, "paid", 1);
        expect_same_body(&refused, &r);
        http_reply_free(&r);
        http_reply_free(&refused);
        http_reply_free(&first);
        char path[96];
        snprintf(path, sizeof path, "/orders/%s", order);
        struct http_reply got;
        http_call_with("GET", path, NULL, NULL, &got);
        assert_int_equal(got.status, 200);
        assert_string_equal(json_str_member(got.json, "state"), "paid");
        assert_int_equal(json_integer_value(json_object_get(got.json, "refunds_due")), 0);
        http_reply_free(&got);
    }
}

/* Polls until MySQL's ledger of `product` has `sold` units: the consumer
 * settled what Redis accepted. */
static struct account settled(int product, long long sold)
{
    long long until = now_ms() + SETTLE_MS;
    struct account a = account(product);
    while (a.mysql.sold != sold && now_ms() < until) {
        sleep_ms(50);
        a = account(product);
    }
    if (a.mysql.sold != sold)
        fail_msg("product %d: mysql sold %lld after %d ms, expected %lld", product, a.mysql.sold,
                 SETTLE_MS, sold);
    return a;
}

static void test_a_streamed_sale_keeps_its_key_once_settled(void **state)
{
    (void)state;
    char key[96], out[64], idem[160];
    fresh_key(key, sizeof key, "stream");
    assert_true(json_bool_member(find_strategy("lua-stream"), "idempotent"));
    reset(PRODUCT_STREAM, 10);
    struct http_reply first = expect_keyed("lua-stream", PRODUCT_STREAM, 2, NULL, key, 200, "", 0);
    assert_true(strlen(json_str_member(first.json, "order")) > 0);
    struct http_reply early = expect_keyed("lua-stream", PRODUCT_STREAM, 2, NULL, key, 200, "", 1);
    expect_same_body(&first, &early);
    struct account once = settled(PRODUCT_STREAM, 2);
    assert_int_equal(once.mysql.orders, 1);
    assert_int_equal(once.redis.sold, 2);
    struct http_reply late = expect_keyed("lua-stream", PRODUCT_STREAM, 2, NULL, key, 200, "", 1);
    expect_same_body(&first, &late);
    /* Redis forgets the key: the retry sells again there, under a new order
     * id; MySQL, which kept the key with the settled order, settles nothing. */
    snprintf(idem, sizeof idem, "DEL idem:{%d}:%s", PRODUCT_STREAM, key);
    assert_int_equal(redis_cli(idem, out, sizeof out), 0);
    struct http_reply again = expect_keyed("lua-stream", PRODUCT_STREAM, 2, NULL, key, 200, "", 0);
    assert_string_not_equal(json_str_member(again.json, "order"),
                            json_str_member(first.json, "order"));
    long long until = now_ms() + SETTLE_MS;
    do
        assert_int_equal(redis_cli("XLEN orders:stream", out, sizeof out), 0);
    while (atoll(out) && now_ms() < until && (sleep_ms(50), 1));
    assert_int_equal(atoll(out), 0); /* the consumer took the entry: settled, or not */
    struct account after = account(PRODUCT_STREAM);
    assert_int_equal(after.redis.sold, 4);
    assert_int_equal(after.mysql.sold, 2);
    assert_int_equal(after.mysql.orders, 1);
    http_reply_free(&first), http_reply_free(&early), http_reply_free(&late),
        http_reply_free(&again);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_key_replays_its_sale),
        cmocka_unit_test(test_a_refusal_replays_and_changes_nothing),
        cmocka_unit_test(test_a_key_reused_with_other_parameters_is_422),
        cmocka_unit_test(test_a_malformed_key_is_400_and_changes_nothing),
        cmocka_unit_test(test_a_running_key_is_409_in_progress),
        cmocka_unit_test(test_strategies_say_which_rows_keep_keys),
        cmocka_unit_test(test_a_hold_keeps_its_key),
        cmocka_unit_test(test_pay_and_cancel_keep_their_keys),
        cmocka_unit_test(test_a_streamed_sale_keeps_its_key_once_settled),
    };
    return cmocka_run_group_tests_name("idempotency keys", tests, stockd_group_setup,
                                       stockd_group_teardown)
               ? 1
               : 0;
}
