/*
 * it_orders.c - orders against the real stack: a hold, its payment, its
 * cancel and its expiry, each transition with one winner, and the
 * accounting of GET /stock/{P} that counts every unit in one place.
 *
 * Proves, first with a stockd that sweeps nothing (--sweep-ms 0), so that
 * no expiry can happen behind a test's back:
 *   - a hold answers 201 held with its id and deadline; a payment before
 *     the deadline pays it; the same payment again is answered the same,
 *     duplicate, with no effect; another payment is already_paid and refund
 *     due once, its repeat a duplicate;
 *   - cancel gives the units back; cancel again is a duplicate; a payment
 *     for a cancelled order is expired and refund due; a paid order
 *     refuses its cancel (paid);
 *   - a payment for an order past its deadline by the store's clock (its
 *     stranded units say so) is expired and refund due, and leaves the order
 *     held, its units where they were: a sale without units never happens;
 *   - bad order ids, payment ids, ttl_ms and expiry, a strategy that cannot
 *     hold and an unknown order are 4xx naming what is wrong, and change
 *     nothing;
 *   - every row of /strategies that says it holds orders holds one and
 *     gives it back;
 *   - a return goes through its order's strategy: cancels sent at once with
 *     hold_ms overwrite one another on an unsafe row (nolock, redis-nolock:
 *     units vanish, every run, each order still returned once), and on a
 *     safe row (sql, watch) every unit comes back;
 * then with a stockd that sweeps (the default --sweep-ms):
 *   - the mysql-sweeper returns that stranded order exactly once: expired,
 *     its units back, returned once, never before its deadline;
 *   - a fresh hold stays held until its deadline and is returned after it,
 *     within the lag /expiry promises;
 *   - a sweeper's batch that meets an order a cancel took after the batch
 *     was read returns the others, and each order once;
 *   - payments racing their orders' deadlines and the sweepers end each
 *     order once: paid and never returned, or expired, returned once and
 *     the payment refund due;
 *   - and throughout, initial = remaining + held + paid, with nothing
 *     returned twice and nothing paid and returned.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRODUCT_PAY 460001
#define PRODUCT_CANCEL 460002
#define PRODUCT_LATE 460003
#define PRODUCT_BAD 460004
#define PRODUCT_SWEPT 460005
#define PRODUCT_TAKEN 460006
#define PRODUCT_REDIS 460010 /* + the row's index in its test */
#define PRODUCT_REDIS_LATE 460020
#define PRODUCT_REDIS_SWEPT 460021
#define PRODUCT_KEYSPACE 460022
#define PRODUCT_RACE 460030    /* and the next */
#define PRODUCT_RETURNS 460040 /* + the row's index in its test */
#define PRODUCT_ROWS 460100    /* + the row's index in /strategies */

/* How long a test waits for what the store's clock decides (a deadline
 * plus a sweeper's promised lag), polling: an upper bound, never a sleep
 * the result depends on. */
#define SETTLE_MS 15000
#define POLL_MS 50

/* An order's id, as the hold answered it. */
struct order {
    char id[48];
    long long expires_at_ms;
};

/* POST /orders/{strategy}?product=P&qty=N&ttl_ms=T, which must answer 201
 * held. */
static struct order hold_by(const char *strategy, int product, int qty, int ttl_ms,
                            const char *expiry)
{
    char path[192];
    snprintf(path, sizeof path, "/orders/%s?product=%d&qty=%d&ttl_ms=%d%s%s", strategy, product,
             qty, ttl_ms, expiry ? "&expiry=" : "", expiry ? expiry : "");
    json_t *doc = expect_ok("POST", path, NULL, 201);
    struct order o;
    snprintf(o.id, sizeof o.id, "%s", json_str_member(doc, "order"));
    assert_string_equal(json_str_member(doc, "state"), "held");
    assert_int_equal(json_int_member(doc, "qty"), qty);
    o.expires_at_ms = json_int_member(doc, "expires_at_ms");
    json_decref(doc);
    return o;
}

/* A hold with its store's default expiry mechanism. */
static struct order hold(const char *strategy, int product, int qty, int ttl_ms)
{
    return hold_by(strategy, product, qty, ttl_ms, NULL);
}

/* POST /orders/{ID}/{action}[?query]: its status; its reply in *doc. */
static long order_call(const struct order *o, const char *action, const char *query, json_t **doc)
{
    char path[192];
    snprintf(path, sizeof path, "/orders/%s/%s%s%s", o->id, action, query ? "?" : "",
             query ? query : "");
    struct http_reply r;
    http_call("POST", path, NULL, &r);
    *doc = json_incref(r.json);
    long status = r.status;
    if (!*doc)
        fail_msg("POST %s: no JSON answer (%ld)", path, status);
    http_reply_free(&r);
    return status;
}

/* Asserts one answer of a pay or cancel: status, error word ("" for ok),
 * and whether it was a duplicate. */
static void expect_answer(const struct order *o, const char *action, const char *query, long status,
                          const char *word, int duplicate)
{
    json_t *doc;
    long got = order_call(o, action, query, &doc);
    const char *error = json_string_value(json_object_get(doc, "error"));
    int as_expected = got == status && strcmp(error ? error : "", word) == 0 &&
                      json_is_true(json_object_get(doc, "duplicate")) == duplicate &&
                      strcmp(json_string_value(json_object_get(doc, "order")), o->id) == 0;
    if (!as_expected)
        print_reply("POST", action, got, doc);
    json_decref(doc);
    if (!as_expected)
        fail_msg("%s of %s: expected %ld '%s'%s", action, o->id, status, word,
                 duplicate ? ", duplicate" : "");
}

/* GET /orders/{ID}, which must answer 200 (the caller decrefs it). */
static json_t *order_get(const struct order *o)
{
    char path[96];
    snprintf(path, sizeof path, "/orders/%s", o->id);
    return expect_ok("GET", path, NULL, 200);
}

static void expect_state(const struct order *o, const char *state, long long returned,
                         long long refunds_due)
{
    json_t *doc = order_get(o);
    assert_string_equal(json_str_member(doc, "state"), state);
    assert_int_equal(json_int_member(doc, "returned"), returned);
    assert_int_equal(json_int_member(doc, "refunds_due"), refunds_due);
    assert_int_equal(json_int_member(doc, "expires_at_ms"), o->expires_at_ms);
    json_decref(doc);
}

/* The mysql store's figures of GET /stock/{P}, orders' included. */
struct figures {
    long long initial, remaining, sold, held, paid, returned, refunds_due, stranded, returned_twice,
        paid_and_returned, oversold, lost_updates;
};

/* The figures of `store` ("mysql" or "redis"). */
static struct figures store_figures(int product, const char *store)
{
    char path[64];
    snprintf(path, sizeof path, "/stock/%d", product);
    json_t *doc = expect_ok("GET", path, NULL, 200);
    const json_t *m = json_object_get(doc, store);
    assert_true(json_is_object(m));
    struct figures f;
    static const char *const names[] = {
        "initial",        "remaining",         "sold",        "held",
        "paid",           "returned",          "refunds_due", "stranded",
        "returned_twice", "paid_and_returned", "oversold",    "lost_updates"};
    long long *const slots[] = {
        &f.initial,        &f.remaining,         &f.sold,        &f.held,
        &f.paid,           &f.returned,          &f.refunds_due, &f.stranded,
        &f.returned_twice, &f.paid_and_returned, &f.oversold,    &f.lost_updates};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        *slots[i] = json_int_member(m, names[i]);
    json_decref(doc);
    return f;
}

static struct figures figures(int product)
{
    return store_figures(product, "mysql");
}

/* Every unit in one place, none returned twice or both paid and returned. */
static void expect_store_balanced(int product, const char *store)
{
    struct figures f = store_figures(product, store);
    assert_int_equal(f.initial, f.remaining + f.held + f.paid);
    assert_int_equal(f.returned_twice, 0);
    assert_int_equal(f.paid_and_returned, 0);
    assert_int_equal(f.oversold, 0);
    assert_int_equal(f.lost_updates, 0);
}

/* Where a product's units are in `store`, as a test expects them. */
struct units {
    long long remaining, held, paid, returned, refunds_due;
};

/* Asserts the units where `want` says, and every one in one place. */
static void expect_units(int product, const char *store, struct units want)
{
    struct figures f = store_figures(product, store);
    struct units got = {f.remaining, f.held, f.paid, f.returned, f.refunds_due};
    if (memcmp(&got, &want, sizeof got) != 0)
        fail_msg("%s of %d: remaining %lld held %lld paid %lld returned %lld refunds_due %lld, "
                 "expected %lld %lld %lld %lld %lld",
                 store, product, got.remaining, got.held, got.paid, got.returned, got.refunds_due,
                 want.remaining, want.held, want.paid, want.returned, want.refunds_due);
    expect_store_balanced(product, store);
}

static void expect_same_figures(const struct figures *a, const struct figures *b)
{
    assert_memory_equal(a, b, sizeof *a);
}

/* ----------------------------------------------------- no sweeper here */

/* Orders cancelled at once in racing_cancels(), and the wait each return
 * spends inside its strategy's critical section: long enough that they
 * all read the count before any writes it. */
#define RACING_CANCELS 6
#define RACING_HOLD_MS "200"

/* RACING_CANCELS holds of one unit by `strategy`, then their cancels sent
 * at once, each with hold_ms: every one answered cancelled and returned
 * once. The units that vanished: the returns others overwrote. */
static long long racing_cancels(const char *strategy, int product, const char *store)
{
    static struct background cancels[RACING_CANCELS];
    struct order o[RACING_CANCELS];
    reset(product, 100);
    for (int i = 0; i < RACING_CANCELS; i++)
        o[i] = hold(strategy, product, 1, 600000);
    for (int i = 0; i < RACING_CANCELS; i++) {
        char path[192];
        snprintf(path, sizeof path, "/orders/%s/cancel?hold_ms=" RACING_HOLD_MS, o[i].id);
        start_post_in_background(&cancels[i], path);
    }
    for (int i = 0; i < RACING_CANCELS; i++) {
        assert_int_equal(finish_background(&cancels[i]), 200);
        http_reply_free(&cancels[i].reply);
    }
    for (int i = 0; i < RACING_CANCELS; i++)
        expect_state(&o[i], "cancelled", 1, 0);
    struct figures f = store_figures(product, store);
    assert_int_equal(f.returned, RACING_CANCELS);
    assert_int_equal(f.returned_twice, 0);
    assert_int_equal(f.held + f.paid, 0);
    fprintf(stderr, "%s: %d racing cancels, %lld units vanished\n", strategy, RACING_CANCELS,
            f.initial - f.remaining);
    return f.initial - f.remaining;
}

static void test_returns_race_like_their_sales(void **state)
{
    (void)state;
    assert_true(racing_cancels("nolock", PRODUCT_RETURNS, "mysql") > 0);
    assert_true(racing_cancels("redis-nolock", PRODUCT_RETURNS + 1, "redis") > 0);
    assert_int_equal(racing_cancels("sql", PRODUCT_RETURNS + 2, "mysql"), 0);
    assert_int_equal(racing_cancels("watch", PRODUCT_RETURNS + 3, "redis"), 0);
}

static int quiet_setup(void **state)
{
    static const char *const args[] = {"--sweep-ms", "0", NULL};
    return http_group_setup(state) == 0 && stockd_start(args) == 0 ? 0 : -1;
}

/* A hold of 3 of the 10 units of `product` by `strategy`, paid once: the
 * same payment again a duplicate, another one already_paid and refund due
 * once, a cancel refused; the order as GET tells it. */
static void pay_once(const char *strategy, int product, const char *store, const char *expiry)
{
    reset(product, 10);
    struct order o = hold(strategy, product, 3, 600000);
    assert_true(o.id[0] == store[0]); /* m..., r...: the id names its store */
    expect_units(product, store, (struct units){.remaining = 7, .held = 3});
    expect_answer(&o, "pay", "payment=pay-1", 200, "", 0);
    expect_answer(&o, "pay", "payment=pay-1", 200, "", 1);
    expect_answer(&o, "pay", "payment=pay-2", 409, "already_paid", 0);
    expect_answer(&o, "pay", "payment=pay-2", 409, "already_paid", 1);
    expect_answer(&o, "cancel", NULL, 409, "paid", 0);
    json_t *doc = order_get(&o);
    assert_string_equal(json_str_member(doc, "state"), "paid");
    assert_string_equal(json_str_member(doc, "payment"), "pay-1");
    assert_string_equal(json_str_member(doc, "strategy"), strategy);
    assert_string_equal(json_str_member(doc, "expiry"), expiry);
    assert_int_equal(json_int_member(doc, "refunds_due"), 1);
    assert_int_equal(json_int_member(doc, "returned"), 0);
    assert_true(json_is_null(json_object_get(doc, "returned_at_ms")));
    json_decref(doc);
    expect_units(product, store, (struct units){.remaining = 7, .paid = 3, .refunds_due = 1});
    assert_int_equal(store_figures(product, store).sold, 3);
}

static void test_hold_then_pay_once(void **state)
{
    (void)state;
    pay_once("sql", PRODUCT_PAY, "mysql", "mysql-sweeper");
}

static void test_cancel_once(void **state)
{
    (void)state;
    reset(PRODUCT_CANCEL, 10);
    struct order o = hold("sql", PRODUCT_CANCEL, 4, 600000);
    expect_answer(&o, "cancel", NULL, 200, "", 0);
    expect_answer(&o, "cancel", NULL, 200, "", 1);
    expect_answer(&o, "pay", "payment=late-1", 409, "expired", 0);
    expect_answer(&o, "pay", "payment=late-1", 409, "expired", 1);
    expect_state(&o, "cancelled", 1, 1);
    expect_units(PRODUCT_CANCEL, "mysql",
                 (struct units){.remaining = 10, .returned = 4, .refunds_due = 1});
    assert_int_equal(figures(PRODUCT_CANCEL).sold, 4);
}

/* A hold of 2 of the 5 units of `product` by `strategy`, paid only once
 * stranded - its deadline and the promised lag passed by the store's
 * clock, and no sweeper runs here: the payment is expired and refund due,
 * and the order stays held for its mechanism. */
static struct order paid_late(const char *strategy, int product, const char *store)
{
    reset(product, 5);
    struct order o = hold(strategy, product, 2, 100);
    long long waited = now_ms();
    while (store_figures(product, store).stranded < 2 && now_ms() - waited < SETTLE_MS)
        sleep_ms(POLL_MS);
    assert_int_equal(store_figures(product, store).stranded, 2);
    expect_answer(&o, "pay", "payment=too-late", 409, "expired", 0);
    expect_answer(&o, "pay", "payment=too-late", 409, "expired", 1);
    expect_state(&o, "held", 0, 1);
    return o;
}

/* The order test_paid_late_stays_held() leaves held past its deadline,
 * for the sweeping stockd to return. */
static struct order stranded_order;

static void test_paid_late_stays_held(void **state)
{
    (void)state;
    stranded_order = paid_late("sql", PRODUCT_LATE, "mysql");
    expect_units(PRODUCT_LATE, "mysql",
                 (struct units){.remaining = 3, .held = 2, .refunds_due = 1});
}

static void test_bad_input_changes_nothing(void **state)
{
    (void)state;
    reset(PRODUCT_BAD, 10);
    struct order o = hold("sql", PRODUCT_BAD, 1, 600000);
    struct figures before = figures(PRODUCT_BAD);
    static const char *const ttls[] = {"", "&ttl_ms=99", "&ttl_ms=3600001", "&ttl_ms=x"};
    char path[192];
    for (size_t i = 0; i < sizeof ttls / sizeof ttls[0]; i++) {
        snprintf(path, sizeof path, "/orders/sql?product=%d%s", PRODUCT_BAD, ttls[i]);
        expect_error("POST", path, NULL, 400, "bad_request");
    }
    snprintf(path, sizeof path, "/orders/sql?product=%d&ttl_ms=1000&expiry=no-such", PRODUCT_BAD);
    expect_error("POST", path, NULL, 400, "bad_request");
    snprintf(path, sizeof path, "/orders/sql?product=%d&ttl_ms=1000&expiry=redis-zset",
             PRODUCT_BAD);
    expect_error("POST", path, NULL, 400, "bad_request");
    snprintf(path, sizeof path, "/orders/sql-batch?product=%d&ttl_ms=1000", PRODUCT_BAD);
    expect_error("POST", path, NULL, 400, "bad_request");
    snprintf(path, sizeof path, "/orders/no-such-strategy?product=%d&ttl_ms=1000", PRODUCT_BAD);
    expect_error("POST", path, NULL, 404, "unknown_strategy");
    static const char *const payments[] = {"", "?payment=", "?payment=a%20b", "?payment=%C3%A9",
                                           "?payment=0123456789012345678901234567890123456789"
                                           "01234567890123456789012345"};
    for (size_t i = 0; i < sizeof payments / sizeof payments[0]; i++) {
        snprintf(path, sizeof path, "/orders/%s/pay%s", o.id, payments[i]);
        expect_error("POST", path, NULL, 400, "bad_request");
    }
    static const char *const ids[] = {"m460004",
                                      "m460004-0123",
                                      "m0460004-0123456789abcdef",
                                      "x460004-0123456789abcdef",
                                      "m460004-0123456789ABCDEF",
                                      "m-0123456789abcdef"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        snprintf(path, sizeof path, "/orders/%s", ids[i]);
        expect_error("GET", path, NULL, 400, "bad_request");
        snprintf(path, sizeof path, "/orders/%s/cancel", ids[i]);
        expect_error("POST", path, NULL, 400, "bad_request");
    }
    expect_error("GET", "/orders/m460004-0123456789abcdef", NULL, 404, "unknown_order");
    expect_error("POST", "/orders/m460004-0123456789abcdef/pay?payment=p", NULL, 404,
                 "unknown_order");
    expect_error("POST", "/orders/m460004-0123456789abcdef/cancel", NULL, 404, "unknown_order");
    snprintf(path, sizeof path, "/orders/%s/refund", o.id);
    expect_error("POST", path, NULL, 404, "not_found");
    struct figures after = figures(PRODUCT_BAD);
    expect_same_figures(&before, &after);
    expect_state(&o, "held", 0, 0);
}

/* Each row /strategies says holds orders holds one and gives it back; each
 * that says it cannot says why, and refuses. */
static void check_row_holds(const json_t *row, int index)
{
    const char *name = json_str_member(row, "name");
    int product = PRODUCT_ROWS + index;
    char path[160];
    if (!json_is_true(json_object_get(row, "orders"))) {
        assert_true(strlen(json_str_member(row, "orders_why")) > 0);
        snprintf(path, sizeof path, "/orders/%s?product=%d&ttl_ms=1000", name, product);
        expect_error("POST", path, NULL, 400, "bad_request");
        return;
    }
    const char *store = json_str_member(row, "store");
    reset(product, 5);
    struct order o = hold(name, product, 2, 600000);
    expect_units(product, store, (struct units){.remaining = 3, .held = 2});
    expect_answer(&o, "cancel", NULL, 200, "", 0);
    expect_units(product, store, (struct units){.remaining = 5, .returned = 2});
}

static void test_every_row_that_holds(void **state)
{
    (void)state;
    assert_true(json_is_true(json_object_get(find_strategy("sql"), "orders")));
    assert_true(json_is_false(json_object_get(find_strategy("sql-batch"), "orders")));
    for_each_strategy(check_row_holds);
}

/* On Redis: lua's script and watch's and redis-nolock's MULTI write the
 * order; its payments as on MySQL. */
static void test_redis_hold_then_pay_once(void **state)
{
    (void)state;
    static const char *const rows[] = {"lua", "watch", "redis-nolock"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        pay_once(rows[i], PRODUCT_REDIS + (int)i, "redis", "redis-zset");
}

static struct order redis_stranded;

static void test_redis_paid_late_stays_held(void **state)
{
    (void)state;
    redis_stranded = paid_late("lua", PRODUCT_REDIS_LATE, "redis");
    struct order cancelled = hold("watch", PRODUCT_REDIS_LATE, 1, 600000);
    expect_answer(&cancelled, "cancel", NULL, 200, "", 0);
    expect_answer(&cancelled, "cancel", NULL, 200, "", 1);
    expect_units(PRODUCT_REDIS_LATE, "redis",
                 (struct units){.remaining = 3, .held = 2, .returned = 1, .refunds_due = 1});
}

/* ---------------------------------------------------- a sweeping stockd */

static int sweeping_setup(void **state)
{
    return http_group_setup(state) == 0 && stockd_start(NULL) == 0 ? 0 : -1;
}

/* A sweeper's promised lag, from GET /expiry. */
static long long sweeper_lag_ms(const char *name)
{
    json_t *doc = expect_ok("GET", "/expiry", NULL, 200);
    long long lag = -1;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(doc, "expiry"), i, row)
    {
        if (strcmp(json_str_member(row, "name"), name) == 0)
            lag = json_int_member(row, "lag_ms");
    }
    json_decref(doc);
    assert_true(lag > 0);
    return lag;
}

/* Polls the order until it leaves `held` (or SETTLE_MS pass): its reply. */
static json_t *await_return(const struct order *o)
{
    long long waited = now_ms();
    for (;;) {
        json_t *doc = order_get(o);
        if (strcmp(json_str_member(doc, "state"), "held") != 0 || now_ms() - waited > SETTLE_MS)
            return doc;
        json_decref(doc);
        sleep_ms(POLL_MS);
    }
}

/* Waits for the order's expiry; asserts it returned the units once, never
 * before the deadline, with `refunds_due`. When it came back. */
static long long expect_expired_once(const struct order *o, long long refunds_due)
{
    json_t *doc = await_return(o);
    assert_string_equal(json_str_member(doc, "state"), "expired");
    assert_int_equal(json_int_member(doc, "returned"), 1);
    assert_int_equal(json_int_member(doc, "refunds_due"), refunds_due);
    long long returned_at = json_int_member(doc, "returned_at_ms");
    json_decref(doc);
    assert_true(returned_at >= o->expires_at_ms);
    return returned_at;
}

static void test_the_sweeper_returns_the_late_order_once(void **state)
{
    (void)state;
    assert_true(stranded_order.id[0]); /* left by the first group */
    expect_expired_once(&stranded_order, 1);
    expect_answer(&stranded_order, "pay", "payment=later-still", 409, "expired", 0);
    expect_answer(&stranded_order, "cancel", NULL, 409, "expired", 0);
    expect_units(PRODUCT_LATE, "mysql",
                 (struct units){.remaining = 5, .returned = 2, .refunds_due = 2});
    assert_int_equal(figures(PRODUCT_LATE).stranded, 0);
}

static void test_a_hold_is_returned_after_its_deadline_within_the_lag(void **state)
{
    (void)state;
    long long lag = sweeper_lag_ms("mysql-sweeper");
    reset(PRODUCT_SWEPT, 8);
    struct order o = hold("for-update", PRODUCT_SWEPT, 3, 1000);
    assert_true(expect_expired_once(&o, 0) <= o.expires_at_ms + lag); /* within the promised lag */
    expect_units(PRODUCT_SWEPT, "mysql", (struct units){.remaining = 8, .returned = 3});
    assert_int_equal(figures(PRODUCT_SWEPT).sold, 3);
}

/* Two holds due together, one of them cancelled with hold_ms across both
 * deadlines: the cancel holds for-update's row lock while the sweeper
 * reads both orders due, so the sweeper's batch meets an order the cancel
 * took once it gets the row. The cancel answers cancelled, the other order
 * expires, and each is returned once. */
static void test_a_batch_returns_the_orders_a_cancel_left(void **state)
{
    (void)state;
    reset(PRODUCT_TAKEN, 4);
    struct order taken = hold("for-update", PRODUCT_TAKEN, 1, 300);
    struct order left = hold("for-update", PRODUCT_TAKEN, 2, 300);
    expect_answer(&taken, "cancel", "hold_ms=1000", 200, "", 0);
    expect_expired_once(&left, 0);
    expect_state(&taken, "cancelled", 1, 0);
    expect_units(PRODUCT_TAKEN, "mysql", (struct units){.remaining = 4, .returned = 3});
}

static void test_redis_zset_returns_once(void **state)
{
    (void)state;
    expect_expired_once(&redis_stranded, 1);
    expect_units(PRODUCT_REDIS_LATE, "redis",
                 (struct units){.remaining = 5, .returned = 3, .refunds_due = 1});

    long long lag = sweeper_lag_ms("redis-zset");
    reset(PRODUCT_REDIS_SWEPT, 8);
    struct order o = hold("lua", PRODUCT_REDIS_SWEPT, 3, 1000);
    assert_true(expect_expired_once(&o, 0) <= o.expires_at_ms + lag);
    expect_store_balanced(PRODUCT_REDIS_SWEPT, "redis");
}

/* The subscriber claims an order once its hold key's expired event comes:
 * never before the deadline; /expiry says it promises no lag and when it
 * strands units. */
static void test_redis_keyspace_returns_on_the_event(void **state)
{
    (void)state;
    json_t *doc = expect_ok("GET", "/expiry", NULL, 200);
    size_t i;
    json_t *row;
    int listed = 0;
    json_array_foreach(json_object_get(doc, "expiry"), i, row)
    {
        if (strcmp(json_str_member(row, "name"), "redis-keyspace") != 0)
            continue;
        listed = 1;
        assert_true(json_is_null(json_object_get(row, "lag_ms")));
        assert_true(strlen(json_str_member(row, "strands_when")) > 0);
    }
    json_decref(doc);
    assert_true(listed);
    reset(PRODUCT_KEYSPACE, 6);
    struct order o = hold_by("lua", PRODUCT_KEYSPACE, 2, 300, "redis-keyspace");
    struct order paid = hold_by("watch", PRODUCT_KEYSPACE, 1, 300, "redis-keyspace");
    expect_answer(&paid, "pay", "payment=in-time", 200, "", 0);
    expect_expired_once(&o, 0);
    expect_state(&paid, "paid", 0, 0);
    expect_units(PRODUCT_KEYSPACE, "redis",
                 (struct units){.remaining = 5, .paid = 1, .returned = 2});
}

/* ------------------------------------------ payments racing the sweeper */

#define RACERS 16

/* One buyer: its order, the moment it pays (ms after the race starts), and
 * what its payment got. */
struct racer {
    pthread_t thread;
    struct order o;
    int delay_ms;
    long status;
    char word[32];
};

static void *pay_when_due(void *arg)
{
    struct racer *r = arg;
    sleep_ms(r->delay_ms); /* spreads the payments around the deadlines */
    char path[160];
    snprintf(path, sizeof path, "/orders/%s/pay?payment=pay-%s", r->o.id, r->o.id + 1);
    struct http_reply reply;
    http_call("POST", path, NULL, &reply);
    r->status = reply.status;
    snprintf(r->word, sizeof r->word, "%s", reply_word(&reply));
    http_reply_free(&reply);
    http_thread_done();
    return NULL;
}

/* RACERS orders of one unit each, with deadlines 200..500 ms away, each
 * paid from a thread of its own between 0 and 600 ms, while the sweepers
 * run: whichever wins, each order ends once - a 200 is a paid order never
 * returned, a 409 expired an order returned once with its payment refund
 * due - and every unit is in one place. */
static void race_payments(const char *strategy, int product, const char *store)
{
    static struct racer racers[RACERS]; /* static: see struct background's note */
    reset(product, RACERS);
    for (int i = 0; i < RACERS; i++)
        racers[i] = (struct racer){.o = hold(strategy, product, 1, 200 + 20 * i),
                                   .delay_ms = (i * 37) % 600};
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(pthread_create(&racers[i].thread, NULL, pay_when_due, &racers[i]), 0);
    for (int i = 0; i < RACERS; i++)
        pthread_join(racers[i].thread, NULL);
    struct units want = {0};
    for (int i = 0; i < RACERS; i++) {
        const struct racer *r = &racers[i];
        json_t *doc = await_return(&r->o);
        const char *state = json_str_member(doc, "state");
        if (r->status == 200) {
            assert_string_equal(state, "paid");
            assert_int_equal(json_int_member(doc, "returned"), 0);
            want.paid++;
        } else {
            assert_int_equal(r->status, 409);
            assert_string_equal(r->word, "expired");
            assert_string_equal(state, "expired");
            assert_int_equal(json_int_member(doc, "returned"), 1);
            assert_int_equal(json_int_member(doc, "refunds_due"), 1);
            want.returned++, want.refunds_due++, want.remaining++;
        }
        json_decref(doc);
    }
    fprintf(stderr, "%s: %lld paid, %lld expired\n", strategy, want.paid, want.returned);
    expect_units(product, store, want);
}

static void test_payments_racing_the_sweepers(void **state)
{
    (void)state;
    race_payments("sql", PRODUCT_RACE, "mysql");
    race_payments("lua", PRODUCT_RACE + 1, "redis");
}

int main(void)
{
    const struct CMUnitTest quiet[] = {
        cmocka_unit_test(test_hold_then_pay_once),
        cmocka_unit_test(test_cancel_once),
        cmocka_unit_test(test_paid_late_stays_held),
        cmocka_unit_test(test_bad_input_changes_nothing),
        cmocka_unit_test(test_every_row_that_holds),
        cmocka_unit_test(test_returns_race_like_their_sales),
        cmocka_unit_test(test_redis_hold_then_pay_once),
        cmocka_unit_test(test_redis_paid_late_stays_held),
    };
    const struct CMUnitTest sweeping[] = {
        cmocka_unit_test(test_the_sweeper_returns_the_late_order_once),
        cmocka_unit_test(test_a_hold_is_returned_after_its_deadline_within_the_lag),
        cmocka_unit_test(test_a_batch_returns_the_orders_a_cancel_left),
        cmocka_unit_test(test_redis_zset_returns_once),
        cmocka_unit_test(test_redis_keyspace_returns_on_the_event),
        cmocka_unit_test(test_payments_racing_the_sweepers),
    };
    int failed = cmocka_run_group_tests_name("orders, no sweeper", quiet, quiet_setup,
                                             stockd_group_teardown);
    failed += cmocka_run_group_tests_name("orders, swept", sweeping, sweeping_setup,
                                          stockd_group_teardown);
    return failed ? 1 : 0;
}
