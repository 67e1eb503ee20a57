/*
 * it_redis_cluster.c - the main Redis as a Redis Cluster: three primaries,
 * three replicas (the stack's rcluster nodes, started here: they are not in
 * the default stack), and a stockd given --redis-cluster.
 *
 * Proves, against the real cluster:
 *   - products land on different shards: each product's keys are all on
 *     the one primary that serves its hash tag's slot, and the products of
 *     this file use all three;
 *   - every strategy of /strategies that keeps anything in the main Redis
 *     (its store or its lock) sells there under 8 concurrent threads, its
 *     200s exactly its ledger's orders, and no answer is anything but a 200,
 *     sold_out or busy - no CROSSSLOT, MOVED or ASK ever reaches a client;
 *     the safe ones never oversell nor lose an update, the ones that wait
 *     their turn sell the whole stock; lua-stream, whose order stream is one
 *     key for every product, answers 503 and sells nothing;
 *   - a product's slot moved to another primary (CLUSTER SETSLOT IMPORTING
 *     and MIGRATING, MIGRATE, SETSLOT NODE) is followed: stockd's map is
 *     stale (nothing refreshes it but a sign of a move), its next sales meet
 *     MOVED, /health counts it, and every one of them is a 200 on the new
 *     primary;
 *   - a sale whose script meets its product's keys split by a migration
 *     (the ledger moved, the stock not yet: TRYAGAIN, nothing ran) waits
 *     for the rest of the keys and sells, once, on the new primary.
 *   - segmented's segments (--segments 3) are on the three primaries, one
 *     each, and sell exactly under concurrent sales: each segment's ledger
 *     is its own sales, their sums the product's, every unit sold with qty 1
 *     (no undersell); a segment drained by one large sale makes
 *     segmented-strict refuse a unit the product still has (undersell),
 *     and segmented sell it from the next segment; a qty no one segment
 *     holds is refused by both while the product has it (segmented's price).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STOCK 40
#define REQUESTS 80 /* twice the stock */
#define THREADS 8

/* Product ids of this file: strategy number i uses PRODUCTS_ROWS + i. */
enum {
    PRODUCTS_ROWS = 9400,
    PRODUCT_MOVED = 9450,
    PRODUCT_SPLIT = 9451,
    PRODUCT_SEGMENTS = 9460,
    PRODUCT_SEGMENTS_LOAD = 9461,
    PRODUCT_UNDERSELL = 9462, /* and the next one */
    PRODUCT_QTY = 9464,
};

#define PRIMARIES 3

/* ------------------------------------------------------------ helpers */

/* The cluster's node ports, from STACK_RCLUSTER_PORTS (tests/run). */
static int node_ports[16], node_count;
static char node_list[256];

static void read_nodes(void)
{
    const char *ports = getenv("STACK_RCLUSTER_PORTS");
    node_count = 0;
    node_list[0] = '\0';
    for (const char *p = ports; p && *p && node_count < 16;) {
        node_ports[node_count++] = atoi(p);
        size_t n = strlen(node_list);
        snprintf(node_list + n, sizeof node_list - n, "%s127.0.0.1:%d", n ? "," : "", atoi(p));
        p = strchr(p, ' ');
        p = p ? p + 1 : NULL;
    }
}

static int is_primary(int port)
{
    char out[64];
    redis_at(port, "ROLE", out, sizeof out);
    return strncmp(out, "master", 6) == 0;
}

static int slot_of(int product)
{
    char args[64];
    snprintf(args, sizeof args, "CLUSTER KEYSLOT stock:{%d}", product);
    return (int)redis_int_at(node_ports[0], args);
}

/* The one primary holding keys of `product` (asserted: exactly one does),
 * and how many it holds into *keys. */
static int holder_of(int product, long long *keys)
{
    char args[64];
    snprintf(args, sizeof args, "CLUSTER COUNTKEYSINSLOT %d", slot_of(product));
    int holder = 0, holders = 0;
    for (int i = 0; i < node_count; i++) {
        if (!is_primary(node_ports[i]))
            continue;
        long long n = redis_int_at(node_ports[i], args);
        if (n > 0) {
            holder = node_ports[i];
            *keys = n;
            holders++;
        }
    }
    if (holders != 1)
        fail_msg("product %d: %d primaries hold its keys, not one", product, holders);
    return holder;
}

/* A member of the main Redis's cluster entry in /health. */
static long long health_cluster(const char *member)
{
    long status;
    json_t *doc;
    http_get("/health", NULL, &status, &doc);
    json_t *cluster =
        json_object_get(json_object_get(json_object_get(doc, "backends"), "redis"), "cluster");
    if (!cluster)
        fail_msg("/health has no backends.redis.cluster");
    long long v = json_is_object(json_object_get(cluster, member))
                      ? (long long)json_object_size(json_object_get(cluster, member))
                      : json_int_member(cluster, member);
    json_decref(doc);
    return v;
}

/* Whether strategy `s` keeps anything in the main Redis ("needs" names it). */
static int uses_redis(const json_t *s)
{
    const json_t *needs = json_object_get(s, "needs");
    for (size_t i = 0; i < json_array_size(needs); i++)
        if (strcmp(json_string_value(json_array_get(needs, i)), "redis") == 0)
            return 1;
    return 0;
}

static int cluster_group_setup(void **state)
{
    read_nodes();
    if (http_group_setup(state) != 0 || node_count < 6 || stack_start_one("rcluster") != 0)
        return -1;
    const char *args[] = {"--redis-cluster", node_list, NULL};
    return stockd_start(args);
}

/* ------------------------------------------------------------- the tests */

static void test_the_cluster_serves_every_slot_from_three_primaries(void **state)
{
    (void)state;
    assert_int_equal(health_cluster("primaries"), PRIMARIES);
    assert_int_equal(health_cluster("slots_unserved"), 0);
}

static void check_row(const json_t *s, int index)
{
    const char *name = json_str_member(s, "name");
    if (!uses_redis(s))
        return;
    int product = PRODUCTS_ROWS + index;
    reset(product, STOCK);
    if (strcmp(name, "lua-stream") == 0) {
        expect_deduct(name, product, NULL, 503, "backend_unavailable");
        struct account a = account(product);
        assert_int_equal(a.redis.sold, 0);
        return;
    }
    struct tally t = drive(name, product, REQUESTS, THREADS, NULL);
    print_tally(name, &t);
    /* Nothing but the contract's answers for a sale: a redirect or a
     * CROSSSLOT would be a 503. */
    assert_int_equal(t.other + t.unanswered + t.outcome_unknown + t.shutting_down, 0);
    assert_int_equal(t.ok + t.sold_out + t.busy, REQUESTS);
    struct account a = account(product);
    const struct store_figures *f = account_store(&a, json_str_member(s, "store"));
    assert_int_equal(f->orders, t.ok);
    if (json_bool_member(s, "safe_single")) {
        assert_int_equal(f->oversold, 0);
        assert_int_equal(f->lost_updates, 0);
        assert_int_equal(f->sold, t.ok);
    }
    if (strcmp(json_str_member(s, "contention"), "waits") == 0)
        assert_int_equal(t.ok, STOCK);
}

static void test_every_redis_strategy_runs_on_the_cluster(void **state)
{
    (void)state;
    for_each_strategy(check_row);
}

static void test_products_land_on_different_shards(void **state)
{
    (void)state;
    /* The rows' products have their stock keys in Redis or their lock keys
     * there: every key of one product on one primary, and the products on
     * every primary. */
    int seen[PRIMARIES] = {0}, distinct = 0;
    for (int i = 0; i < 8; i++) {
        int product = PRODUCTS_ROWS + i;
        reset(product, STOCK);
        long long keys = 0;
        int holder = holder_of(product, &keys);
        assert_true(keys >= 3); /* stock, initial, epoch (a ledger once sold) */
        int known = 0;
        for (int k = 0; k < distinct; k++)
            known |= seen[k] == holder;
        if (!known && distinct < PRIMARIES)
            seen[distinct++] = holder;
    }
    assert_int_equal(distinct, PRIMARIES);
}

/* A slot being moved, as redis-cli --cluster reshard does it. */
struct move {
    int slot, from, to;
    char from_id[64], to_id[64];
};

/* SETSLOT IMPORTING on the target (another primary), MIGRATING on the
 * source. */
static void begin_move(struct move *m, int product)
{
    long long keys;
    m->from = holder_of(product, &keys);
    m->to = 0;
    for (int i = 0; i < node_count && !m->to; i++)
        if (node_ports[i] != m->from && is_primary(node_ports[i]))
            m->to = node_ports[i];
    char args[256], out[256];
    redis_at(m->from, "CLUSTER MYID", m->from_id, sizeof m->from_id);
    redis_at(m->to, "CLUSTER MYID", m->to_id, sizeof m->to_id);
    m->from_id[strcspn(m->from_id, "\n")] = m->to_id[strcspn(m->to_id, "\n")] = '\0';
    m->slot = slot_of(product);
    snprintf(args, sizeof args, "CLUSTER SETSLOT %d IMPORTING %s", m->slot, m->from_id);
    redis_at(m->to, args, out, sizeof out);
    snprintf(args, sizeof args, "CLUSTER SETSLOT %d MIGRATING %s", m->slot, m->to_id);
    redis_at(m->from, args, out, sizeof out);
}

/* MIGRATE of `names` (space-separated). It gives the target the password:
 * on redis-cli's input, from the environment (REDISCLI_AUTH) by the
 * shell's printf, never on a command line. */
static void migrate_keys(const struct move *m, const char *names)
{
    char args[512], out[512];
    snprintf(args, sizeof args,
             "printf 'MIGRATE 127.0.0.1 %d \"\" 0 5000 AUTH %%s KEYS %s\\n' \"$REDISCLI_AUTH\" | "
             "redis-cli -h 127.0.0.1 -p %d",
             m->to, names, m->from);
    if (command_output(args, out, sizeof out) != 0 || strncmp(out, "OK", 2) != 0)
        fail_msg("MIGRATE of slot %d: %s", m->slot, out);
}

/* The rest of the slot's keys, then SETSLOT NODE on every primary; the new
 * holder. */
static int finish_move(const struct move *m)
{
    char args[256], out[256], names[400];
    snprintf(args, sizeof args, "CLUSTER GETKEYSINSLOT %d 100", m->slot);
    redis_at(m->from, args, names, sizeof names);
    for (char *c = names; *c; c++)
        if (*c == '\n')
            *c = ' ';
    if (names[strspn(names, " ")])
        migrate_keys(m, names);
    for (int i = 0; i < node_count; i++)
        if (is_primary(node_ports[i])) {
            snprintf(args, sizeof args, "CLUSTER SETSLOT %d NODE %s", m->slot, m->to_id);
            redis_at(node_ports[i], args, out, sizeof out);
        }
    return m->to;
}

/* Moves `product`'s slot from the primary that holds it to another one;
 * the new holder. */
static int move_slot(int product)
{
    struct move m;
    begin_move(&m, product);
    return finish_move(&m);
}

static void test_a_moved_slot_is_followed(void **state)
{
    (void)state;
    reset(PRODUCT_MOVED, STOCK);
    expect_deduct("lua", PRODUCT_MOVED, NULL, 200, "");
    long long moved_before = health_cluster("moved");
    int to = move_slot(PRODUCT_MOVED);

    /* A script on a worker, a transaction, a lock, a fenced lock, WAIT. */
    static const char *const rows[] = {"lua", "watch", "redis-lock", "fenced", "lua-wait"};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        expect_deduct(rows[i], PRODUCT_MOVED, NULL, 200, "");
    assert_true(health_cluster("moved") > moved_before);
    long long keys;
    assert_int_equal(holder_of(PRODUCT_MOVED, &keys), to);
    struct account a = account(PRODUCT_MOVED);
    assert_int_equal(a.redis.sold, 4); /* lua twice, watch, lua-wait */
    assert_int_equal(a.mysql.sold, 2); /* redis-lock, fenced */
    assert_int_equal(a.redis.oversold + a.redis.lost_updates, 0);
}

static void test_a_split_script_waits_for_its_keys(void **state)
{
    (void)state;
    reset(PRODUCT_SPLIT, STOCK);
    expect_deduct("lua", PRODUCT_SPLIT, NULL, 200, ""); /* the ledger exists */
    struct move m;
    begin_move(&m, PRODUCT_SPLIT);
    char ledger[32];
    snprintf(ledger, sizeof ledger, "ledger:{%d}", PRODUCT_SPLIT);
    migrate_keys(&m, ledger); /* the script's keys split: TRYAGAIN */
    long long before = health_cluster("tryagain");
    static struct background sale;
    start_background(&sale, "lua", PRODUCT_SPLIT, NULL);
    long long until = now_ms() + 5000;
    while (health_cluster("tryagain") == before && now_ms() < until)
        sleep_ms(5);
    assert_true(health_cluster("tryagain") > before); /* it met the split */
    finish_move(&m);
    long status = finish_background(&sale);
    if (status != 200)
        fail_msg("the sale that met TRYAGAIN answered %ld: %s", status,
                 sale.reply.text ? sale.reply.text : "");
    http_reply_free(&sale.reply);
    struct account a = account(PRODUCT_SPLIT);
    assert_int_equal(a.redis.sold, 2);
    assert_int_equal(a.redis.oversold + a.redis.lost_updates, 0);
}

/* ------------------------------------------------------------ segmented */

/* The product's segments as GET /stock/{P} lists them (new reference). */
static json_t *segments_of(int product)
{
    char path[64];
    snprintf(path, sizeof path, "/stock/%d", product);
    json_t *doc = expect_ok("GET", path, NULL, 200);
    json_t *list = json_object_get(json_object_get(doc, "segments"), "segments");
    if (!json_is_array(list))
        fail_msg("/stock/%d has no segments.segments", product);
    json_incref(list);
    json_decref(doc);
    return list;
}

/* The primary whose slot `slot` holds keys (asserted: exactly one). */
static int primary_with_keys_in(int slot)
{
    char args[64];
    snprintf(args, sizeof args, "CLUSTER COUNTKEYSINSLOT %d", slot);
    int holder = 0, holders = 0;
    for (int i = 0; i < node_count; i++)
        if (is_primary(node_ports[i]) && redis_int_at(node_ports[i], args) > 0) {
            holder = node_ports[i];
            holders++;
        }
    if (holders != 1)
        fail_msg("slot %d: %d primaries hold keys in it, not one", slot, holders);
    return holder;
}

static void test_segments_are_on_distinct_primaries(void **state)
{
    (void)state;
    reset(PRODUCT_SEGMENTS, 30);
    json_t *list = segments_of(PRODUCT_SEGMENTS);
    assert_int_equal(json_array_size(list), PRIMARIES);
    int holders[PRIMARIES];
    for (int i = 0; i < PRIMARIES; i++) {
        const json_t *seg = json_array_get(list, (size_t)i);
        assert_int_equal(json_int_member(seg, "initial"), 10);
        holders[i] = primary_with_keys_in((int)json_int_member(seg, "slot"));
        char at[32]; /* stockd's map says the same */
        snprintf(at, sizeof at, "127.0.0.1:%d", holders[i]);
        assert_string_equal(json_str_member(seg, "node"), at);
        for (int k = 0; k < i; k++)
            assert_int_not_equal(holders[k], holders[i]);
    }
    json_decref(list);
}

static void test_segmented_sells_exactly_under_load(void **state)
{
    (void)state;
    reset(PRODUCT_SEGMENTS_LOAD, 61); /* 21, 20, 20 */
    struct tally t = drive("segmented", PRODUCT_SEGMENTS_LOAD, 150, THREADS, NULL);
    print_tally("segmented", &t);
    assert_int_equal(t.other + t.unanswered + t.outcome_unknown + t.busy, 0);
    assert_int_equal(t.ok, 61); /* qty 1: nobody refused while a unit was left */
    assert_int_equal(t.sold_out, 150 - 61);
    struct account a = account(PRODUCT_SEGMENTS_LOAD);
    assert_int_equal(a.segments.sold, 61);
    assert_int_equal(a.segments.orders, 61);
    assert_int_equal(a.segments.remaining, 0);
    assert_int_equal(a.segments.oversold + a.segments.lost_updates, 0);
    json_t *list = segments_of(PRODUCT_SEGMENTS_LOAD);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *seg = json_array_get(list, i);
        assert_int_equal(json_int_member(seg, "remaining"), 0);
        assert_int_equal(json_int_member(seg, "sold"), json_int_member(seg, "initial"));
    }
    json_decref(list);
}

/* Drains one segment of 10 + 10 + 10 with one sale of 10, then sends one
 * sale of 1 to each segment in turn (the round robin): the units refused
 * while the product still had 20. */
static int refused_after_draining(const char *name, int product)
{
    reset(product, 30);
    expect_deduct(name, product, "qty=10", 200, "");
    int refused = 0;
    for (int i = 0; i < PRIMARIES; i++) {
        char path[96];
        snprintf(path, sizeof path, "/stock/deduct/%s?product=%d", name, product);
        struct http_reply r;
        http_call("POST", path, NULL, &r);
        if (r.status == 409 && strcmp(reply_word(&r), "sold_out") == 0)
            refused++;
        else
            assert_int_equal(r.status, 200);
        http_reply_free(&r);
    }
    struct account a = account(product);
    assert_int_equal(a.segments.sold, 10 + PRIMARIES - refused);
    assert_int_equal(a.segments.oversold + a.segments.lost_updates, 0);
    return refused;
}

static void test_a_drained_segment_undersells_only_without_fall_through(void **state)
{
    (void)state;
    assert_int_equal(refused_after_draining("segmented-strict", PRODUCT_UNDERSELL), 1);
    assert_int_equal(refused_after_draining("segmented", PRODUCT_UNDERSELL + 1), 0);
}

static void test_a_qty_no_segment_holds_is_refused(void **state)
{
    (void)state;
    static const char *const rows[] = {"segmented", "segmented-strict"};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        reset(PRODUCT_QTY, 6); /* 2 + 2 + 2 */
        struct account before = account(PRODUCT_QTY);
        expect_deduct(rows[i], PRODUCT_QTY, "qty=3", 409, "sold_out");
        struct account after = account(PRODUCT_QTY);
        expect_same_account(&before, &after);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_cluster_serves_every_slot_from_three_primaries),
        cmocka_unit_test(test_every_redis_strategy_runs_on_the_cluster),
        cmocka_unit_test(test_products_land_on_different_shards),
        cmocka_unit_test(test_a_moved_slot_is_followed),
        cmocka_unit_test(test_a_split_script_waits_for_its_keys),
        cmocka_unit_test(test_segments_are_on_distinct_primaries),
        cmocka_unit_test(test_segmented_sells_exactly_under_load),
        cmocka_unit_test(test_a_drained_segment_undersells_only_without_fall_through),
        cmocka_unit_test(test_a_qty_no_segment_holds_is_refused),
    };
    return cmocka_run_group_tests_name("redis cluster", tests, cluster_group_setup,
                                       stockd_group_teardown);
}
