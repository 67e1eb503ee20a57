/*
 * it_strategies.c - what each strategy claims, measured under real
 * concurrency: 8 threads with keep-alive connections send twice as many
 * sale requests as there is stock to a stockd running 8 worker threads.
 *
 * Proves, reading the claims from /strategies (so strategies added later
 * are covered without editing this file):
 *   - every strategy that claims to be safe in one instance never oversells
 *     and never loses an update, over several runs, with and without
 *     hold_ms, and its 200 responses add up to exactly its ledger's sold;
 *     a conditional claim (a caveat) is tested under the default settings,
 *     which meet its condition (hold_ms far below the lock TTL);
 *   - the strategies that wait for their turn ("contention": "waits") sell
 *     the whole stock when demand is twice the stock, the rest sold_out;
 *   - every strategy that does not claim safety shows its race (oversold or
 *     lost updates) in every run once hold_ms widens the race window;
 *   - for every strategy: asking more than what remains is sold_out and
 *     changes nothing (no partial sale), and so is a sale on an exhausted
 *     product (a row that "undersells" any qty is asked until its sale
 *     reaches the units, each refusal changing nothing);
 *   - for every safe strategy, requests of mixed quantities that run the
 *     stock out part-way: the ledger holds exactly the units of the 200s,
 *     and a strategy that waits for its turn refuses only what did not fit
 *     (sql-batch's batches straddle the end of stock this way).
 * Each strategy is checked in its own store, the `store` of /strategies.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Sized for a small (2-core) machine: eight threads overlap in every run
 * whatever the stock; each unit sold costs a serialising strategy its lock
 * round trips, so the stock is kept small. */
#define STOCK 20
#define REQUESTS 40 /* at least twice the stock */
#define THREADS 8
#define RUNS 3

/* Product ids: strategy number i uses base + i; no other test uses them. */
enum {
    PRODUCTS_SAFE = 8200,
    PRODUCTS_EXPOSED = 8300,
    PRODUCTS_NO_PARTIAL = 8400,
    PRODUCTS_EXHAUSTED = 8500,
    PRODUCTS_MIXED = 8550,
};

/* hold_ms for the safe runs: none, and a short stay in the critical
 * section that makes requests overlap inside it. */
static const int safe_holds[] = {0, 5};

/* Whether the strategy waits for its turn rather than answering busy (its
 * "contention" in /strategies), so all of the stock is sold whatever the
 * contention. */
static int waits(const json_t *s)
{
    return strcmp(json_str_member(s, "contention"), "waits") == 0;
}

/* What makes an unsafe strategy's race show in every run, from the
 * parameters its "exposed_by" names: a long stay between its read and its
 * write (hold_ms), while other threads read the same stock, and for a
 * lease a TTL that expires inside that stay (ttl_ms). */
static const char *expose_query(const json_t *s)
{
    const json_t *knobs = json_object_get(s, "exposed_by");
    size_t i;
    const json_t *knob;
    int ttl = 0;
    json_array_foreach(knobs, i, knob)
    {
        ttl |= strcmp(json_string_value(knob), "ttl_ms") == 0;
    }
    return ttl ? "hold_ms=30&ttl_ms=10" : "hold_ms=30";
}

/* One load run on a fresh product: the outcomes, and the strategy's store
 * afterwards. */
struct run {
    const char *strategy;
    const char *query;
    struct tally t;
    struct store_figures f;
};

/* Fails the test with the whole run described unless `holds`. */
static void check(const struct run *r, int holds, const char *claim)
{
    if (holds)
        return;
    print_error("%s %s: 200=%d sold_out=%d busy=%d other=%d | sold=%lld orders=%lld "
                "remaining=%lld oversold=%lld lost_updates=%lld\n",
                r->strategy, r->query, r->t.ok, r->t.sold_out, r->t.busy, r->t.other, r->f.sold,
                r->f.orders, r->f.remaining, r->f.oversold, r->f.lost_updates);
    if (r->t.other)
        print_error("first unexpected outcome: %s\n", r->t.first_other);
    fail_msg("%s %s: expected %s", r->strategy, r->query, claim);
}

static struct run load_run(const json_t *strategy, int product, const char *query)
{
    struct run r = {.strategy = json_str_member(strategy, "name"), .query = query};
    reset(product, STOCK);
    r.t = drive(r.strategy, product, REQUESTS, THREADS, query);
    struct account a = account(product);
    r.f = *account_store(&a, json_str_member(strategy, "store"));
    check(&r, r.t.other == 0, "only 200, sold_out and busy");
    check(&r, r.t.ok + r.t.sold_out + r.t.busy == REQUESTS, "an answer to every request");
    check(&r, r.f.present && r.f.initial == STOCK, "the product reset in its store");
    /* Every 200 is one unit in the ledger, whatever the strategy. */
    check(&r, r.f.sold == r.t.ok && r.f.orders == r.t.ok, "one ledger row per 200");
    return r;
}

/* The range of a figure over several runs, for the summary line. */
struct range {
    int min, max;
};

static void widen(struct range *g, int v, int first)
{
    if (first || v < g->min)
        g->min = v;
    if (first || v > g->max)
        g->max = v;
}

static void expect_safe(const json_t *s, int index)
{
    if (!json_bool_member(s, "safe_single"))
        return;
    const char *name = json_str_member(s, "name");
    int blocks = waits(s);
    struct range ok = {0, 0}, busy = {0, 0};
    int runs = 0;
    for (int run = 0; run < RUNS; run++) {
        for (size_t h = 0; h < sizeof safe_holds / sizeof safe_holds[0]; h++) {
            char query[32];
            snprintf(query, sizeof query, "hold_ms=%d", safe_holds[h]);
            struct run r = load_run(s, PRODUCTS_SAFE + index, query);
            check(&r, r.f.oversold == 0 && r.f.lost_updates == 0, "no oversell and no lost update");
            /* busy and sold_out changed nothing: the stock moved by
             * exactly what was sold */
            check(&r, r.f.remaining == STOCK - r.f.sold, "remaining = initial - sold");
            check(&r, !blocks || (r.t.ok == STOCK && r.t.sold_out == REQUESTS - STOCK),
                  "a blocking strategy to sell all the stock, the rest sold_out");
            widen(&ok, r.t.ok, runs == 0);
            widen(&busy, r.t.busy, runs == 0);
            runs++;
        }
    }
    print_message("%-16s safe in %d runs: 200 %d..%d, busy %d..%d of %d requests for %d "
                  "units%s\n",
                  name, runs, ok.min, ok.max, busy.min, busy.max, REQUESTS, STOCK,
                  blocks ? " (blocking: all sold)" : "");
}

static void test_safe_strategies_never_oversell(void **state)
{
    (void)state;
    for_each_strategy(expect_safe);
}

static void expect_race(const json_t *s, int index)
{
    if (json_bool_member(s, "safe_single"))
        return;
    const char *query = expose_query(s);
    struct range oversold = {0, 0}, lost = {0, 0};
    for (int run = 0; run < RUNS; run++) {
        struct run r = load_run(s, PRODUCTS_EXPOSED + index, query);
        check(&r, r.f.oversold + r.f.lost_updates > 0, "the race to show in every run");
        widen(&oversold, (int)r.f.oversold, run == 0);
        widen(&lost, (int)r.f.lost_updates, run == 0);
    }
    print_message("%-16s race shown in %d of %d runs (%s): oversold %d..%d, lost updates "
                  "%d..%d\n",
                  json_str_member(s, "name"), RUNS, RUNS, query, oversold.min, oversold.max,
                  lost.min, lost.max);
}

static void test_unsafe_strategies_show_their_race(void **state)
{
    (void)state;
    for_each_strategy(expect_race);
}

/* Sends one sale that must be refused as sold_out and checks that neither
 * store moved. */
static void expect_sold_out_unchanged(const char *name, int product, const char *query)
{
    struct account before = account(product);
    expect_deduct(name, product, query, 409, "sold_out");
    struct account after = account(product);
    expect_same_account(&before, &after);
}

static void expect_no_partial_sale(const json_t *s, int index)
{
    int product = PRODUCTS_NO_PARTIAL + index;
    reset(product, 3);
    expect_sold_out_unchanged(json_str_member(s, "name"), product, "qty=5");
    expect_sold_out_unchanged(json_str_member(s, "name"), product, "qty=4");
}

static void test_no_partial_sale(void **state)
{
    (void)state;
    for_each_strategy(expect_no_partial_sale);
}

/* Whether the row may refuse a sale whose units the product has, even of
 * one unit ("undersells": "any_qty": its sale asks one place of several). */
static int undersells(const json_t *s, const char *which)
{
    const json_t *u = json_object_get(s, "undersells");
    return u && (!which || strcmp(json_string_value(u), which) == 0);
}

/* Sells qty=2 of the 2 units: at once, or for a row that undersells any
 * qty, once its sale reaches the place that holds them (each refusal on
 * the way changes nothing). */
static void sell_the_two_units(const char *name, const json_t *s, int product)
{
    for (int tries = 1; undersells(s, "any_qty") && tries < 16; tries++) {
        struct account before = account(product);
        char path[96];
        snprintf(path, sizeof path, "/stock/deduct/%s?product=%d&qty=2", name, product);
        struct http_reply r;
        http_call("POST", path, NULL, &r);
        long status = r.status;
        http_reply_free(&r);
        if (status == 200)
            return;
        assert_int_equal(status, 409);
        struct account after = account(product);
        expect_same_account(&before, &after);
    }
    expect_deduct(name, product, "qty=2", 200, "");
}

static void expect_exhausted_refuses(const json_t *s, int index)
{
    const char *name = json_str_member(s, "name");
    int product = PRODUCTS_EXHAUSTED + index;
    reset(product, 2);
    sell_the_two_units(name, s, product);
    /* A row that settles later moves MySQL's figures in the background:
     * the refusals below are judged once its one order has settled. */
    const json_t *settles = json_object_get(s, "settles");
    if (settles && strcmp(json_string_value(settles), "async") == 0)
        expect_stream_drained(product, 1);
    struct account a = account(product);
    const struct store_figures *f = account_store(&a, json_str_member(s, "store"));
    assert_int_equal(f->remaining, 0);
    assert_int_equal(f->sold, 2);
    expect_sold_out_unchanged(name, product, NULL);
    expect_sold_out_unchanged(name, product, "qty=1000");
}

static void test_exhausted_product(void **state)
{
    (void)state;
    for_each_strategy(expect_exhausted_refuses);
}

/* ------------------------------------------- mixed quantities at the end */

#define MIXED_STOCK 37 /* runs out part-way through a request of any qty 1..5 */
#define MIXED_REQUESTS 40
#define MIXED_THREADS 8

struct mixed {
    const char *name;
    int product;
    atomic_int next;
    pthread_mutex_t lock; /* guards the figures below */
    int sold_units, other, smallest_refused;
};

/* Request i asks for 1 + i % 5 units. */
static void *sell_mixed(void *arg)
{
    struct mixed *m = arg;
    for (int i; (i = atomic_fetch_add(&m->next, 1)) < MIXED_REQUESTS;) {
        int qty = 1 + i % 5;
        char path[128];
        snprintf(path, sizeof path, "/stock/deduct/%s?product=%d&qty=%d", m->name, m->product, qty);
        struct http_reply r;
        http_call("POST", path, NULL, &r);
        pthread_mutex_lock(&m->lock);
        if (r.status == 200)
            m->sold_units += qty;
        else if (r.status == 409 && strcmp(reply_word(&r), "sold_out") == 0)
            m->smallest_refused = qty < m->smallest_refused ? qty : m->smallest_refused;
        else
            m->other++;
        pthread_mutex_unlock(&m->lock);
        http_reply_free(&r);
    }
    http_thread_done();
    return NULL;
}

/* Requests of mixed quantities that together ask for more than the stock:
 * every unit the 200s sold is in the ledger and out of the stock, none
 * twice; a request is never partly sold; and a request refused as sold out
 * asked for more than what was left (the stock at the end is smaller than
 * any refused quantity), so nothing that fitted was turned away. */
static void expect_exact_at_the_end(const json_t *s, int index)
{
    if (!json_bool_member(s, "safe_single"))
        return;
    struct mixed m = {.name = json_str_member(s, "name"),
                      .product = PRODUCTS_MIXED + index,
                      .smallest_refused = 1000};
    atomic_init(&m.next, 0);
    pthread_mutex_init(&m.lock, NULL);
    reset(m.product, MIXED_STOCK);
    pthread_t threads[MIXED_THREADS];
    for (int t = 0; t < MIXED_THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, sell_mixed, &m), 0);
    for (int t = 0; t < MIXED_THREADS; t++)
        pthread_join(threads[t], NULL);
    pthread_mutex_destroy(&m.lock);
    struct account a = account(m.product);
    const struct store_figures *f = account_store(&a, json_str_member(s, "store"));
    print_message("%-16s mixed qty: %d units sold of %d, %lld left, smallest refused %d\n", m.name,
                  m.sold_units, MIXED_STOCK, f->remaining, m.smallest_refused);
    assert_int_equal(m.other, 0);
    assert_int_equal(f->sold, m.sold_units);
    assert_int_equal(f->remaining, MIXED_STOCK - m.sold_units);
    assert_int_equal(f->oversold, 0);
    assert_int_equal(f->lost_updates, 0);
    /* nothing answered busy: a refusal means it did not fit - in one place,
     * for a row whose stock is split (undersells) */
    if (waits(s) && !undersells(s, NULL))
        assert_true(f->remaining < m.smallest_refused);
}

static void test_mixed_quantities_at_the_end_of_stock(void **state)
{
    (void)state;
    for_each_strategy(expect_exact_at_the_end);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safe_strategies_never_oversell),
        cmocka_unit_test(test_unsafe_strategies_show_their_race),
        cmocka_unit_test(test_no_partial_sale),
        cmocka_unit_test(test_exhausted_product),
        cmocka_unit_test(test_mixed_quantities_at_the_end_of_stock),
    };
    return cmocka_run_group_tests(tests, stockd_group_setup, stockd_group_teardown);
}
