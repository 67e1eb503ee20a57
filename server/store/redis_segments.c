/*
 * redis_segments.c - the segments store (redis_segments.h): a product's
 * stock and ledger split into segments, each on its own hash tag.
 *
 * Each segment is a whole redis store of its own: a count, an initial and a
 * ledger in one slot, changed only by the sale script (store/redis_stock.h)
 * or by a reset's MULTI/EXEC, so its three figures always agree with each
 * other. The product's figures are the segments' sums, read one segment at
 * a time: on a cluster no one command can read two slots, and none needs
 * to - each sum is exact once the sales stop, and a sampled sum under load
 * never shows a lost update, because each segment's part of it is whole.
 *
 * A reset splits the count evenly, the remainder on segment 0 (2 units of 3
 * segments: 2, 0, 0; not 1, 1, 0, which no sale of 2 could buy). It is one
 * MULTI/EXEC per segment, not one for the product: a sale running through
 * a reset may land in a segment before or after its reset, which the
 * contract allows of a sale racing a reset, and a failed reset is
 * completed by running it again.
 */
#include "store/redis_segments.h"

#include "backend/redis.h"
#include "backend/redis_cluster.h"
#include "core/config.h"
#include "core/worker.h"
#include "store/redis_stock.h"

#include <stdatomic.h>
#include <stdio.h>

struct segment_keys {
    char stock[REDIS_KEY_MAX], initial[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX];
    int slot;
};

static int segment_count(void)
{
    return config.segments < SEGMENTS_MAX ? config.segments : SEGMENTS_MAX;
}

/* The tag of segment `i`: "P:n" for the first n whose slot is in the middle
 * half of the i-th slot range, away from the edges where a cluster's split
 * may differ by a slot. A quarter of all tags qualify: a few tries. */
static void segment_keys(struct segment_keys *k, int product, int i)
{
    int n = segment_count(), width = REDIS_CLUSTER_SLOTS / n;
    int low = i * width + width / 4, high = (i + 1) * width - width / 4;
    char tag[40];
    for (int t = 0;; t++) {
        int len = snprintf(tag, sizeof tag, "%d:%d", product, t);
        k->slot = redis_cluster_key_slot(tag, (size_t)len);
        if (n == 1 || (k->slot >= low && k->slot < high))
            break;
    }
    snprintf(k->stock, sizeof k->stock, "stock:{%s}", tag);
    snprintf(k->initial, sizeof k->initial, "stock:{%s}:initial", tag);
    snprintf(k->ledger, sizeof k->ledger, "ledger:{%s}", tag);
}

/* ------------------------------------------------------------- the sale */

/* The sale script on segment `i`: ST_SOLD_OUT with out->remaining set to
 * what the segment held when it cannot cover qty. */
static st_result sell_in(struct worker *w, const struct deduct_request *rq, int i,
                         struct deduct_reply *out)
{
    struct segment_keys k;
    segment_keys(&k, rq->product, i);
    char qty[16];
    snprintf(qty, sizeof qty, "%d", rq->qty);
    const char *argv[] = {k.stock, k.ledger, qty};
    const char *const *argvs[] = {argv};
    redisReply *reply = NULL;
    st_result r = redis_eval_sales(w, &redis_sale_script, 1, 2, 3, argvs, &reply);
    if (!reply)
        return r; /* its fate is r: outcome_unknown once the script went out */
    r = redis_script_result(w, rq, reply, 0, out);
    freeReplyObject(reply);
    return r;
}

/* The segment the next sale starts from, round robin over the process's
 * sales: every segment is asked as often, so they drain together. */
static atomic_uint next_segment;

st_result segments_sell(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out,
                        int fall_through)
{
    int n = segment_count();
    int first =
        (int)(atomic_fetch_add_explicit(&next_segment, 1, memory_order_relaxed) % (unsigned)n);
    critical_section_wait(rq, NULL); /* the scripts are the critical sections */
    int tries = fall_through ? n : 1, tried = 0;
    long long seen = 0;
    st_result r = ST_SOLD_OUT;
    while (tried < tries && r == ST_SOLD_OUT) {
        r = sell_in(w, rq, (first + tried++) % n, out);
        if (r == ST_SOLD_OUT)
            seen += out->remaining;
    }
    out->attempts = tried;
    out->remaining = REMAINING_UNKNOWN;
    if (r == ST_SOLD_OUT)
        worker_fail(w, r, "%d asked, no segment of the %d tried held it (%lld in them)", rq->qty,
                    tried, seen);
    return r;
}

/* ------------------------------------------------------------ the store */

/* Every segment's keys and figures, one round trip to each one's slot. */
static st_result read_segments(struct worker *w, int product, struct segment_keys *keys,
                               struct store_account *figures)
{
    for (int i = 0; i < segment_count(); i++) {
        segment_keys(&keys[i], product, i);
        st_result r =
            redis_stock_account(w, keys[i].stock, keys[i].initial, keys[i].ledger, &figures[i]);
        if (r != ST_OK)
            return r;
    }
    return ST_OK;
}

/* The product is in the store when every segment is. */
static st_result account(struct worker *w, int product, struct store_account *out)
{
    struct segment_keys keys[SEGMENTS_MAX];
    struct store_account s[SEGMENTS_MAX];
    st_result r = read_segments(w, product, keys, s);
    *out = (struct store_account){.present = 1};
    for (int i = 0; r == ST_OK && i < segment_count(); i++) {
        out->present &= s[i].present;
        out->initial += s[i].initial;
        out->remaining += s[i].remaining;
        out->sold += s[i].sold;
        out->orders += s[i].orders;
    }
    if (r != ST_OK || !out->present)
        *out = (struct store_account){0};
    return r;
}

/* Each segment: its key, slot, the node serving it on a cluster, and its
 * figures. */
static st_result describe(struct worker *w, int product, json_t *into)
{
    struct segment_keys keys[SEGMENTS_MAX];
    struct store_account s[SEGMENTS_MAX];
    st_result r = read_segments(w, product, keys, s);
    if (r != ST_OK)
        return r;
    json_t *list = json_array();
    json_object_set_new(into, "segments", list);
    for (int i = 0; i < segment_count(); i++) {
        json_t *o =
            json_pack("{s:s, s:i, s:I, s:I, s:I, s:I}", "key", keys[i].stock, "slot", keys[i].slot,
                      "initial", (json_int_t)s[i].initial, "remaining", (json_int_t)s[i].remaining,
                      "sold", (json_int_t)s[i].sold, "orders", (json_int_t)s[i].orders);
        int node = redis_cluster_enabled() ? redis_cluster_node_of(keys[i].slot) : -1;
        if (node >= 0) {
            char at[CONFIG_TEXT_MAX + 8];
            const struct server_addr *a = redis_cluster_node(node);
            snprintf(at, sizeof at, "%s:%d", a->host, a->port);
            json_object_set_new(o, "node", json_string(at));
        }
        json_array_append_new(list, o);
    }
    return ST_OK;
}

/* Segment i's share of `count`: an even split, the remainder on segment 0. */
static long long share_of(long long count, int i, int n)
{
    return count / n + (i == 0 ? count % n : 0);
}

static st_result reset(struct worker *w, int product, long long count, long long *epoch)
{
    (void)epoch; /* nothing it sells is streamed */
    int n = segment_count();
    st_result r = ST_OK;
    for (int i = 0; r == ST_OK && i < n; i++) {
        struct segment_keys k;
        segment_keys(&k, product, i);
        r = redis_stock_reset_keys(w, k.stock, k.initial, k.ledger, share_of(count, i, n), NULL, 0);
    }
    return r;
}

const struct store store_segments = {
    .name = "segments",
    .backend = BACKEND_REDIS,
    .account = account,
    .describe = describe,
    .reset = reset,
};
