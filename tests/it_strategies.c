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
 *   - the blocking strategies (they wait instead of answering busy) sell
 *     the whole stock when demand is twice the stock, the rest sold_out;
 *   - every strategy that does not claim safety shows its race (oversold or
 *     lost updates) in every run once hold_ms widens the race window;
 *   - for every strategy: asking more than what remains is sold_out and
 *     changes nothing (no partial sale), and so is a sale on an exhausted
 *     product.
 * Each strategy is checked in its own store, the `store` of /strategies.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

/* Sized for a small (2-core) machine: enough overlap, a few seconds. */
#define STOCK 40
#define REQUESTS 80 /* at least twice the stock */
#define THREADS 8
#define RUNS 3

/* Product ids: strategy number i uses base + i; no other test uses them. */
enum {
    PRODUCTS_SAFE = 8200,
    PRODUCTS_EXPOSED = 8300,
    PRODUCTS_NO_PARTIAL = 8400,
    PRODUCTS_EXHAUSTED = 8500,
};

/* Strategies that wait for their turn rather than answering busy, so all
 * of the stock is sold whatever the contention. */
static const char *const blocking[] = {"sql", "for-update", "mutex"};

/* hold_ms for the safe runs: none, and a short stay in the critical
 * section that makes requests overlap inside it. */
static const int safe_holds[] = {0, 5};

/* What makes an unsafe strategy's race show in every run: a long stay
 * between its read and its write, while other threads read the same stock,
 * and for the lock strategies a lease (ttl_ms) that expires inside that
 * stay. A strategy whose race needs other knobs gets its own row below. */
#define EXPOSE_QUERY "hold_ms=30&ttl_ms=10"
static const struct {
    const char *strategy;
    const char *query;
} expose_queries[] = {
    {"nolock", "hold_ms=30"}, /* no lock, no lease: the window alone */
};

static int is_blocking(const char *name)
{
    for (size_t i = 0; i < sizeof blocking / sizeof blocking[0]; i++)
        if (strcmp(blocking[i], name) == 0)
            return 1;
    return 0;
}

static const char *expose_query(const char *name)
{
    for (size_t i = 0; i < sizeof expose_queries / sizeof expose_queries[0]; i++)
        if (strcmp(expose_queries[i].strategy, name) == 0)
            return expose_queries[i].query;
    return EXPOSE_QUERY;
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
    int blocks = is_blocking(name);
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
    const char *query = expose_query(json_str_member(s, "name"));
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

static void expect_exhausted_refuses(const json_t *s, int index)
{
    const char *name = json_str_member(s, "name");
    int product = PRODUCTS_EXHAUSTED + index;
    reset(product, 2);
    expect_deduct(name, product, "qty=2", 200, "");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safe_strategies_never_oversell),
        cmocka_unit_test(test_unsafe_strategies_show_their_race),
        cmocka_unit_test(test_no_partial_sale),
        cmocka_unit_test(test_exhausted_product),
    };
    return cmocka_run_group_tests(tests, stockd_group_setup, stockd_group_teardown);
}
