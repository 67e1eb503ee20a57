/*
 * order_stream.c - the consumers that settle the order stream into MySQL.
 *
 * One round of a consumer: every --stream-claim-ms/2 it takes over the
 * entries another consumer left pending that long (XAUTOCLAIM: that one
 * died); then it reads its own pending entries first (XREADGROUP ... 0:
 * a batch it could not settle, or what it just claimed) and only when it
 * has none, new ones (XREADGROUP ... >, blocking 200 ms). Each batch is
 * settled in one transaction, committed, then acknowledged; a failure
 * anywhere leaves the batch pending in this consumer's list, to be tried
 * again next round: an outage of MySQL only lengthens the stream.
 *
 * Why COMMIT before XACK, and a unique order id: a consumer can die
 * between the two. Acknowledging first would lose the batch; committing
 * first means its next reader finds the rows there, and the unique key
 * makes the second insert of each a no-op that sells nothing twice.
 *
 * Rows are locked in product order, so two consumers sharing the group
 * never deadlock on each other.
 *
 * A keyed sale's entry carries its Idempotency-Key and fingerprint: the
 * key goes into MySQL's idempotency table in the order's transaction,
 * before the order, and a key already there settles nothing (settle_key()),
 * so one purchase is one settled order even should Redis forget its key.
 */
#include "store/order_stream.h"

#include "backend/backend.h"
#include "backend/mysql.h"
#include "backend/redis.h"
#include "core/background.h"
#include "core/config.h"
#include "core/log.h"
#include "core/worker.h"
#include "store/store.h"

#include <limits.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ order ids */

static pthread_once_t prefix_once = PTHREAD_ONCE_INIT;
static char prefix[13];
static atomic_ullong next_order;

static void make_prefix(void)
{
    random_token(prefix, 6);
}

void order_stream_new_id(char out[ORDER_ID_MAX])
{
    pthread_once(&prefix_once, make_prefix);
    unsigned long long n = atomic_fetch_add_explicit(&next_order, 1, memory_order_relaxed) + 1;
    snprintf(out, ORDER_ID_MAX, "%s-%llu", prefix, n);
}

/* ------------------------------------------------------------- figures */

static atomic_ullong drained, replayed, redelivered, fenced, dead_letters;
static atomic_llong stream_length = -1, lag_ms = -1;

/* ------------------------------------------------------------- entries */

/* One stream entry as the consumer understood it. */
struct order {
    const char *entry;       /* the stream's id, "ms-seq" */
    const char *id;          /* the order id */
    const char *key;         /* its sale's Idempotency-Key, or NULL */
    const char *fingerprint; /* what the key's request asked (store.h) */
    long long product, qty, epoch;
    int poison; /* it cannot be settled: why says why */
    char why[96];
};

static int field_int(const char *text, long long min, long long max, long long *out)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Marks *o as an entry that cannot be settled, and says why. */
__attribute__((format(printf, 2, 3))) static void mark_poison(struct order *o, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(o->why, sizeof o->why, fmt, args);
    va_end(args);
    o->poison = 1;
}

/* Reads [id, [field, value, ...]] into *o; a poison entry says why. */
static void parse_entry(const redisReply *e, struct order *o)
{
    *o = (struct order){.entry = ""};
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_STRING) {
        mark_poison(o, "not a stream entry");
        return;
    }
    o->entry = e->element[0]->str;
    const redisReply *f = e->element[1];
    int have = 0;
    for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2) {
        const char *name = f->element[i]->str, *value = f->element[i + 1]->str;
        if (!name || !value)
            continue;
        if (strcmp(name, "order") == 0 && value[0] && strlen(value) < ORDER_ID_MAX)
            o->id = value, have |= 1;
        else if (strcmp(name, "product") == 0 && field_int(value, 1, 2147483647, &o->product) == 0)
            have |= 2;
        else if (strcmp(name, "qty") == 0 && field_int(value, 1, 1000, &o->qty) == 0)
            have |= 4;
        else if (strcmp(name, "epoch") == 0 && field_int(value, 0, LLONG_MAX, &o->epoch) == 0)
            have |= 8;
        else if (strcmp(name, "key") == 0 && value[0] && strlen(value) <= IDEMPOTENCY_KEY_MAX)
            o->key = value;
        else if (strcmp(name, "fingerprint") == 0 && strlen(value) < KEY_FINGERPRINT_MAX)
            o->fingerprint = value;
    }
    if (have != 15)
        mark_poison(o, "unparsable: needs order, product (1..2^31-1), qty (1..1000), epoch");
    else if (!o->key != !o->fingerprint)
        mark_poison(o, "a key needs its fingerprint, and a fingerprint its key");
}

static int by_product(const void *a, const void *b)
{
    const struct order *x = a, *y = b;
    return (x->product > y->product) - (x->product < y->product);
}

/* ---------------------------------------------------------- a consumer */

struct consumer {
    struct worker *w;
    char name[CONFIG_TEXT_MAX + 32];
    long long claimed_ms; /* the last XAUTOCLAIM */
    int group_ready;
};

static struct background consuming = BACKGROUND_INIT;
static struct consumer *consumers;
static int consumer_count;

/* The test knob --stream-hold: at `point`, say so and wait to be killed
 * (or stopped); 1 when the batch must go no further. */
static int held_at(const char *point, int n)
{
    if (strcmp(config.stream_hold, point) != 0)
        return 0;
    log_warn("stream: holding %d orders %s (stream-hold)", n,
             strcmp(point, "commit") == 0 ? "before commit" : "committed, before ack");
    while (background_pause(&consuming, 1000))
        ;
    return 1;
}

/* What one batch did, counted once it is acknowledged. */
struct settled {
    unsigned long long fresh, replayed, fenced, poison;
};

/* A keyed order's key, kept in MySQL as a keyed sale there keeps it
 * (mysql_keys.h: a 200, the count unknown, the order that settled it):
 * *fresh 0 when the key was there already - this order, delivered again,
 * or another order of the same purchase, sold twice in Redis after it
 * forgot the key (a failover): either way the purchase is settled, and
 * this order must not be. */
static st_result settle_key(struct worker *w, const struct order *o, int *fresh)
{
    *fresh = 1;
    if (!o->key)
        return ST_OK;
    return sql_insert_unique(w, SQL_KEY_INSERT,
                             SQL_ARGS(SQL_S(o->key), SQL_S(o->fingerprint), SQL_I(ST_OK),
                                      SQL_I(REMAINING_UNKNOWN), SQL_S(""), SQL_S(o->id)),
                             fresh);
}

/* Each of a product's `n` orders alone: its key kept, then the order
 * inserted and its qty sold, only when neither its key nor its id was in
 * MySQL yet. */
static st_result settle_each(struct worker *w, struct order *o, int n, struct settled *s)
{
    st_result r = ST_OK;
    for (int i = 0; r == ST_OK && i < n; i++) {
        int fresh = 0;
        r = settle_key(w, &o[i], &fresh);
        if (r == ST_OK && fresh)
            r = sql_insert_unique(w, SQL_INSERT_SETTLED,
                                  SQL_ARGS(SQL_I(o[i].product), SQL_I(o[i].qty), SQL_S(o[i].id)),
                                  &fresh);
        if (r == ST_OK && fresh)
            r = sql_exec(w, SQL_SETTLE_STOCK, SQL_ARGS(SQL_I(o[i].qty), SQL_I(o[i].product)), NULL);
        s->fresh += (unsigned long long)fresh;
        s->replayed += (unsigned long long)!fresh;
    }
    return r;
}

/* A product's `n` orders in one statement, and its stock sold by their sum
 * in one more. ST_BUSY, for settle_each() instead, when fewer rows went in
 * than there are orders: some were settled before (a redelivery). */
static st_result settle_all(struct worker *w, struct order *o, int n, struct settled *s)
{
    json_t *list = json_array();
    long long qty = 0;
    for (int i = 0; i < n; i++) {
        json_array_append_new(list, json_pack("{s:s, s:I}", "o", o[i].id, "q", o[i].qty));
        qty += o[i].qty;
    }
    char *text = json_dumps(list, JSON_COMPACT);
    json_decref(list);
    if (!text)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "stream: out of memory");
    struct sql_outcome in;
    st_result r =
        sql_exec(w, SQL_INSERT_SETTLED_MANY, SQL_ARGS(SQL_I(o->product), SQL_S(text)), &in);
    free(text);
    if (r == ST_OK && in.matched != (unsigned long long)n)
        return ST_BUSY;
    if (r == ST_OK)
        r = sql_exec(w, SQL_SETTLE_STOCK, SQL_ARGS(SQL_I(qty), SQL_I(o->product)), NULL);
    s->fresh += r == ST_OK ? (unsigned long long)n : 0;
    return r;
}

/* Moves the orders of o[0..n) that `keep` into o[0..kept), and says how
 * many they are. */
static int partition(struct order *o, int n, int (*keep)(const struct order *, long long),
                     long long arg)
{
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (keep(&o[i], arg)) {
            struct order moved = o[i];
            o[i] = o[kept];
            o[kept++] = moved;
        }
    return kept;
}

static int parsed(const struct order *o, long long unused)
{
    (void)unused;
    return !o->poison;
}

static int of_epoch(const struct order *o, long long epoch)
{
    return o->epoch == epoch;
}

static int keyed(const struct order *o, long long unused)
{
    (void)unused;
    return o->key != NULL;
}

/* One product's `n` orders (poison among them left alone), its row locked:
 * the ones of its current epoch are settled, the others fenced; all are
 * poison when MySQL does not have the product. */
static st_result settle_product(struct worker *w, struct order *o, int n, int one_by_one,
                                struct settled *s)
{
    n = partition(o, n, parsed, 0);
    if (!n)
        return ST_OK;
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_READ_STOCK_FOR_UPDATE, SQL_ARGS(SQL_I(o->product)), &row);
    if (r != ST_OK)
        return r;
    for (int i = 0; i < n && !row.found; i++) {
        mark_poison(&o[i], "product %lld is not in mysql", o[i].product);
    }
    int live = row.found ? partition(o, n, of_epoch, row.col[3]) : 0;
    s->fenced += (unsigned long long)(row.found ? n - live : 0); /* reset since the sale */
    if (!live)
        return ST_OK;
    /* A keyed order is settled alone, after its key: the one statement of
     * settle_all() inserts orders only. */
    int keys = partition(o, live, keyed, 0);
    r = settle_each(w, o, one_by_one ? live : keys, s);
    if (r != ST_OK || one_by_one || keys == live)
        return r;
    return settle_all(w, o + keys, live - keys, s);
}

/* The batch's transaction: the orders grouped by product, in product
 * order (so two consumers never deadlock on each other's rows). A batch
 * that met an order settled before is rolled back and settled one order
 * at a time. */
static st_result settle_in_mysql(struct worker *w, struct order *orders, int n, int one_by_one,
                                 struct settled *s)
{
    *s = (struct settled){0};
    qsort(orders, (size_t)n, sizeof *orders, by_product);
    st_result r = sql_begin(w);
    for (int i = 0, end; r == ST_OK && i < n; i = end) {
        for (end = i + 1; end < n && orders[end].product == orders[i].product;)
            end++;
        r = settle_product(w, &orders[i], end - i, one_by_one, s);
    }
    if (r != ST_OK) {
        sql_rollback(w);
        return r == ST_BUSY && !one_by_one ? settle_in_mysql(w, orders, n, 1, s) : r;
    }
    if (held_at("commit", n)) {
        sql_rollback(w);
        return ST_SHUTTING_DOWN;
    }
    return sql_commit(w);
}

/* The dead letters, XACK and XDEL of the batch, in one MULTI/EXEC: an
 * entry leaves the stream and its poison reaches orders:dead together. */
static st_result acknowledge(struct worker *w, const struct order *orders, int n,
                             unsigned long long *poison)
{
    int count = n + 4;
    const char ***argvs = calloc((size_t)count, sizeof *argvs);
    int *argcs = calloc((size_t)count, sizeof *argcs);
    const char **ack = calloc((size_t)n + 3, sizeof *ack),
               **del = calloc((size_t)n + 2, sizeof *del);
    const char *(*dead)[9] = calloc((size_t)n, sizeof *dead);
    redisReply **replies = calloc((size_t)count, sizeof *replies);
    st_result r = ST_BACKEND_UNAVAILABLE;
    if (!argvs || !argcs || !ack || !del || !dead || !replies) {
        worker_fail(w, r, "stream: out of memory");
        goto done;
    }
    static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    int c = 0;
    argvs[c] = multi, argcs[c++] = 1;
    ack[0] = "XACK", ack[1] = ORDER_STREAM_KEY, ack[2] = ORDER_GROUP;
    del[0] = "XDEL", del[1] = ORDER_STREAM_KEY;
    for (int i = 0; i < n; i++) {
        ack[3 + i] = del[2 + i] = orders[i].entry;
        if (!orders[i].poison)
            continue;
        const char **x = dead[i];
        x[0] = "XADD", x[1] = ORDER_DEAD_KEY, x[2] = "*", x[3] = "entry", x[4] = orders[i].entry,
        x[5] = "reason", x[6] = orders[i].why, x[7] = "order",
        x[8] = orders[i].id ? orders[i].id : "";
        argvs[c] = x, argcs[c++] = 9;
        (*poison)++;
    }
    argvs[c] = ack, argcs[c++] = n + 3;
    argvs[c] = del, argcs[c++] = n + 2;
    argvs[c] = exec, argcs[c++] = 1;
    r = redis_pipeline(w, c, argcs, (const char *const *const *)argvs, replies);
    if (r == ST_OK) {
        if (replies[c - 1]->type != REDIS_REPLY_ARRAY)
            r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "stream: the acknowledgement's EXEC failed");
        redis_free_replies(replies, c);
    }
done:
    free(argvs), free(argcs), free(ack), free(del), free((void *)dead), free(replies);
    return r;
}

/* Settles the entries of a stream reply's list `list`. */
static st_result settle(struct worker *w, const redisReply *list)
{
    int n = (int)list->elements;
    struct order *orders = calloc((size_t)n, sizeof *orders);
    if (!orders)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "stream: out of memory");
    for (int i = 0; i < n; i++)
        parse_entry(list->element[i], &orders[i]);
    struct settled s;
    st_result r = settle_in_mysql(w, orders, n, 0, &s);
    if (r == ST_OK && held_at("ack", n))
        r = ST_SHUTTING_DOWN;
    if (r == ST_OK)
        r = acknowledge(w, orders, n, &s.poison);
    if (r == ST_OK) {
        atomic_fetch_add(&drained, s.fresh);
        atomic_fetch_add(&replayed, s.replayed);
        atomic_fetch_add(&fenced, s.fenced);
        atomic_fetch_add(&dead_letters, s.poison);
    }
    free(orders);
    return r;
}

/* The entries of an XREADGROUP reply (NIL: none came), or NULL. */
static const redisReply *read_entries(const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 1)
        return NULL;
    const redisReply *stream = reply->element[0];
    if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2 ||
        stream->element[1]->type != REDIS_REPLY_ARRAY || !stream->element[1]->elements)
        return NULL;
    return stream->element[1];
}

/* XREADGROUP of this consumer's pending entries (`fresh` 0: a batch it
 * could not settle, or claimed), or of new ones, waiting up to 200 ms for
 * them; *n entries settled. */
static st_result read_and_settle(struct consumer *c, int fresh, int *n)
{
    char count[16];
    snprintf(count, sizeof count, "%d", config.stream_batch);
    const char *argv[] = {"XREADGROUP", "GROUP", ORDER_GROUP, c->name,          "COUNT", count,
                          "BLOCK",      "200",   "STREAMS",   ORDER_STREAM_KEY, ">"};
    if (!fresh) /* the history: no waiting, from the start of the list */
        argv[6] = "STREAMS", argv[7] = ORDER_STREAM_KEY, argv[8] = "0";
    redisReply *reply;
    *n = 0;
    st_result r = redis_call(c->w, &reply, fresh ? 11 : 9, argv);
    if (r != ST_OK)
        return r;
    const redisReply *entries = read_entries(reply);
    if (entries) {
        *n = (int)entries->elements;
        r = settle(c->w, entries);
    }
    freeReplyObject(reply);
    return r;
}

/* Takes over the entries pending longer than --stream-claim-ms. */
static st_result claim_orphans(struct consumer *c)
{
    char idle[16], count[16];
    snprintf(idle, sizeof idle, "%d", config.stream_claim_ms);
    snprintf(count, sizeof count, "%d", config.stream_batch);
    const char *argv[] = {"XAUTOCLAIM", ORDER_STREAM_KEY, ORDER_GROUP, c->name, idle,
                          "0-0",        "COUNT",          count};
    redisReply *reply;
    st_result r = redis_call(c->w, &reply, 8, argv);
    if (r != ST_OK)
        return r;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2 &&
        reply->element[1]->type == REDIS_REPLY_ARRAY && reply->element[1]->elements) {
        atomic_fetch_add(&redelivered, reply->element[1]->elements);
        log_info("stream: %s claimed %zu orders pending over %d ms", c->name,
                 reply->element[1]->elements, config.stream_claim_ms);
    }
    freeReplyObject(reply);
    c->claimed_ms = monotonic_ms();
    return ST_OK;
}

/* The group, made with the stream if need be ("BUSYGROUP": it exists). */
static st_result make_group(struct consumer *c)
{
    const char *argv[] = {"XGROUP", "CREATE", ORDER_STREAM_KEY, ORDER_GROUP, "0", "MKSTREAM"};
    redisReply *reply;
    st_result r = redis_call(c->w, &reply, 6, argv);
    if (r == ST_OK)
        freeReplyObject(reply);
    else if (strstr(c->w->error, "BUSYGROUP"))
        r = ST_OK;
    c->group_ready = r == ST_OK;
    return r;
}

/* Samples the stream's length and lag for /metrics. */
static void sample(struct worker *w)
{
    json_t *status;
    if (order_stream_status(w, &status) != ST_OK)
        return;
    atomic_store(&stream_length, json_integer_value(json_object_get(status, "length")));
    atomic_store(&lag_ms, json_integer_value(json_object_get(status, "lag_ms")));
    json_decref(status);
}

static st_result round_of(struct consumer *c)
{
    int n = 0;
    st_result r = c->group_ready ? ST_OK : make_group(c);
    if (r == ST_OK && monotonic_ms() - c->claimed_ms >= config.stream_claim_ms / 2)
        r = claim_orphans(c);
    if (r == ST_OK)
        r = read_and_settle(c, 0, &n);
    if (r == ST_OK && !n)
        r = read_and_settle(c, 1, &n);
    return r;
}

static void *consume(void *arg)
{
    struct consumer *c = arg;
    long long warned_ms = 0;
    while (!background_stopping(&consuming)) {
        st_result r = round_of(c);
        if (r == ST_OK) {
            sample(c->w);
            continue;
        }
        if (r == ST_SHUTTING_DOWN)
            break;
        if (monotonic_ms() - warned_ms > 5000) {
            log_warn("stream: %s: %s (the orders stay pending and are tried again)", c->name,
                     c->w->error);
            warned_ms = monotonic_ms();
        }
        backends_drop_dead_links(c->w);
        if (!background_pause(&consuming, 200))
            break;
    }
    backends_close(c->w);
    worker_free(c->w);
    return NULL;
}

int order_stream_start(int count)
{
    consumers = calloc((size_t)count + 1, sizeof *consumers);
    if (!consumers)
        return -1;
    for (consumer_count = 0; consumer_count < count; consumer_count++) {
        struct consumer *c = &consumers[consumer_count];
        c->w = worker_new();
        snprintf(c->name, sizeof c->name, "%s/%d/%d", config.instance_name, (int)getpid(),
                 consumer_count);
        char what[48];
        snprintf(what, sizeof what, "the order stream's consumer %d", consumer_count);
        if (background_start(&consuming, what, consume, c) != 0) {
            worker_free(c->w);
            return -1;
        }
    }
    if (count)
        log_info("stream: %d consumers settle %s into mysql, batches of at most %d", count,
                 ORDER_STREAM_KEY, config.stream_batch);
    return 0;
}

void order_stream_stop(void)
{
    background_stop(&consuming);
    free(consumers);
    consumers = NULL;
    consumer_count = 0;
}

/* -------------------------------------------------------------- status */

/* The milliseconds part of a stream id "ms-seq". */
static long long id_ms(const char *id)
{
    return strtoll(id, NULL, 10);
}

st_result order_stream_status(struct worker *w, json_t **out)
{
    const char *len[] = {"XLEN", ORDER_STREAM_KEY};
    const char *first[] = {"XRANGE", ORDER_STREAM_KEY, "-", "+", "COUNT", "1"};
    const char *pending[] = {"XPENDING", ORDER_STREAM_KEY, ORDER_GROUP};
    const char *dead[] = {"XLEN", ORDER_DEAD_KEY};
    const char *const *argvs[] = {len, first, pending, dead};
    const int argcs[] = {2, 6, 3, 2};
    redisReply *replies[4];
    st_result r = redis_pipeline(w, 4, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    long long length = 0, dead_count = 0, pending_count = 0, lag = 0;
    redis_reply_int(replies[0], &length);
    redis_reply_int(replies[3], &dead_count);
    /* No group yet (NOGROUP) is nothing pending. */
    if (replies[2]->type == REDIS_REPLY_ARRAY && replies[2]->elements >= 1)
        redis_reply_int(replies[2]->element[0], &pending_count);
    const redisReply *oldest = replies[1];
    if (oldest->type == REDIS_REPLY_ARRAY && oldest->elements == 1 &&
        oldest->element[0]->type == REDIS_REPLY_ARRAY && oldest->element[0]->elements == 2) {
        lag = wall_clock_ms() - id_ms(oldest->element[0]->element[0]->str);
        if (lag < 0)
            lag = 0;
    }
    redis_free_replies(replies, 4);
    /* Settled entries are deleted: what is left is not in MySQL yet. */
    *out = json_pack("{s:I, s:I, s:I, s:I}", "length", (json_int_t)length, "pending",
                     (json_int_t)pending_count, "lag_ms", (json_int_t)lag, "dead_letters",
                     (json_int_t)dead_count);
    return ST_OK;
}

/* ------------------------------------------------------------- metrics */

static void counter(FILE *out, const char *name, const char *help, unsigned long long v)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, v);
}

json_t *order_stream_json(void)
{
    long long length = atomic_load(&stream_length), lag = atomic_load(&lag_ms);
    if (length < 0)
        return json_pack("{s:n, s:n}", "length", "lag_ms");
    return json_pack("{s:I, s:I}", "length", (json_int_t)length, "lag_ms", (json_int_t)lag);
}

void order_stream_render(FILE *out)
{
    long long length = atomic_load(&stream_length), lag = atomic_load(&lag_ms);
    if (length >= 0)
        fprintf(out,
                "# HELP stockd_stream_length Orders accepted in Redis and not yet settled into "
                "MySQL (lua-stream).\n# TYPE stockd_stream_length gauge\n"
                "stockd_stream_length %lld\n"
                "# HELP stockd_stream_lag_seconds Age of the oldest order not yet settled.\n"
                "# TYPE stockd_stream_lag_seconds gauge\nstockd_stream_lag_seconds %.3f\n",
                length, (double)lag / 1000);
    counter(out, "stockd_stream_drained_total",
            "Orders this process's consumers settled into MySQL (new rows).",
            atomic_load(&drained));
    counter(out, "stockd_stream_replayed_total",
            "Entries settled again that were in MySQL already: no-ops by the order id.",
            atomic_load(&replayed));
    counter(out, "stockd_stream_redeliveries_total",
            "Entries taken over from a consumer that left them pending (XAUTOCLAIM).",
            atomic_load(&redelivered));
    counter(out, "stockd_stream_fenced_total",
            "Orders dropped for an epoch the product's reset ended.", atomic_load(&fenced));
    counter(out, "stockd_stream_dead_letters_total",
            "Poison entries moved to " ORDER_DEAD_KEY " with their reason.",
            atomic_load(&dead_letters));
}
