/*
 * redis_stock.c - the redis store: a product's count, its initial count and
 * its ledger in three keys, a sale and its ledger entry in one MULTI/EXEC
 * or one script - a hold's order with them (redis_orders.h).
 *
 * The reset epoch: every reset writes stock:{P}:initial, so a read that
 * WATCHes that key makes the EXEC of its sale fail once a reset came in
 * between - without watching the count itself, which would turn the bare
 * body (redis-nolock) into the optimistic `watch` strategy.
 */
#include "store/redis_stock.h"

#include "core/config.h"
#include "core/trace.h"
#include "core/worker.h"
#include "store/order_stream.h"
#include "store/redis_keys.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

void redis_stock_keys(struct redis_stock *k, int product)
{
    redis_key(k->stock, "stock", product, "");
    redis_key(k->initial, "stock", product, ":initial");
    redis_key(k->epoch, "stock", product, ":epoch");
    redis_key(k->ledger, "ledger", product, "");
}

/* Reads the count out of the reply to GET stock:{P}. */
static st_result count_reply(struct worker *w, const struct deduct_request *rq,
                             const struct redis_stock *k, const redisReply *reply,
                             struct deduct_reply *out)
{
    long long count;
    if (reply->type == REDIS_REPLY_NIL)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in redis", rq->product);
    if (redis_reply_int(reply, &count) != 0)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: %s does not hold an integer",
                           k->stock);
    return count_covers(w, rq, count, out);
}

/* With a key: the key is WATCHed too, and asked for. A key that is there
 * already was kept by a request with the same key that sold since this
 * one found it absent (redis_keys.h): ST_IN_PROGRESS, for the caller to
 * answer that request's answer. */
st_result redis_watch_and_read(struct worker *w, const struct deduct_request *rq,
                               const struct redis_stock *k, const char *watched,
                               struct deduct_reply *out)
{
    char idem[REDIS_IDEM_KEY_MAX];
    redis_idem_key(idem, rq);
    const char *watch[] = {"WATCH", watched, idem};
    const char *get[] = {"GET", k->stock};
    const char *exists[] = {"EXISTS", idem};
    const char *const *argvs[] = {watch, get, exists};
    const int keyed = rq->key[0] != '\0';
    const int argcs[] = {keyed ? 3 : 2, 2, 2};
    const int count = keyed ? 3 : 2;
    redisReply *replies[3];
    st_result r = redis_pipeline(w, count, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    long long taken = 0;
    if (keyed && redis_reply_int(replies[2], &taken) == 0 && taken)
        r = key_taken(w);
    else
        r = count_reply(w, rq, k, replies[1], out);
    redis_free_replies(replies, count);
    if (r != ST_OK)
        redis_undo(w, 1, (const char *[]){"UNWATCH"});
    return r;
}

/* Whether every command EXEC ran answered without an error. */
static int exec_applied(const redisReply *result, size_t commands)
{
    if (result->type != REDIS_REPLY_ARRAY || result->elements != commands)
        return 0;
    for (size_t i = 0; i < commands; i++)
        if (result->element[i]->type == REDIS_REPLY_ERROR)
            return 0;
    return 1;
}

/* What EXEC answered for `commands` queued commands: ST_BUSY (no message:
 * the caller knows what it watched) when a WATCHed key changed. */
static st_result exec_outcome(struct worker *w, const redisReply *result, size_t commands)
{
    if (result->type == REDIS_REPLY_NIL)
        return ST_BUSY;
    if (!exec_applied(result, commands))
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: EXEC failed: %s",
                           result->type == REDIS_REPLY_ERROR ? result->str : "unexpected reply");
    return ST_OK;
}

/* A return: MULTI; the EVAL that changes the order's state if it is still
 * held and SETs the count to `left`; EXEC. ST_EXPIRED when it was no
 * longer held: nothing written. */
static st_result return_exec(struct worker *w, const struct deduct_request *rq,
                             const struct redis_stock *k, const char *left)
{
    const char *multi[] = {"MULTI"};
    const char *exec[] = {"EXEC"};
    const char *given[REDIS_HOLD_ARGC];
    struct redis_hold h;
    redis_give_back_of(&h, rq);
    const char *const *argvs[] = {multi, given, exec};
    int argcs[] = {1, redis_give_back_command(given, &h, rq, k->ledger, k->stock, left), 1};
    redisReply *replies[3];
    trace_mark(rq->trace, TRACE_WRITE);
    st_result r = redis_pipeline_sale(w, 3, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    long long claimed = 0;
    r = exec_outcome(w, replies[2], 1);
    if (r == ST_OK && redis_reply_int(replies[2]->element[0], &claimed) == 0 && !claimed)
        r = worker_fail(w, ST_EXPIRED, "order %s is no longer held", rq->give_back.order);
    redis_free_replies(replies, 3);
    return r;
}

st_result redis_sale_exec(struct worker *w, const struct deduct_request *rq,
                          const struct redis_stock *k, long long left)
{
    char left_text[24], qty_text[16];
    snprintf(left_text, sizeof left_text, "%lld", left);
    snprintf(qty_text, sizeof qty_text, "%d", rq->qty);
    if (rq->give_back.order[0])
        return return_exec(w, rq, k, left_text);
    const char *multi[] = {"MULTI"};
    const char *set[] = {"SET", k->stock, left_text};
    const char *sold[] = {"HINCRBY", k->ledger, "sold", qty_text};
    const char *orders[] = {"HINCRBY", k->ledger, "orders", "1"};
    const char *exec[] = {"EXEC"};
    const char *held[REDIS_HOLD_ARGC];
    struct redis_hold h;
    struct redis_key_keep key;
    const char *const *argvs[8] = {multi, set, sold, orders};
    int argcs[8] = {1, 3, 4, 4};
    int count = 4;
    if (rq->hold.order[0]) { /* its order's EVAL */
        st_result indexed = redis_hold_indexed(w, rq);
        if (indexed != ST_OK)
            return indexed;
        redis_hold_of(&h, rq);
        argcs[count] = redis_hold_command(held, &h, rq, k->ledger, qty_text);
        argvs[count++] = held;
    }
    if (rq->key[0]) { /* its key, with the answer the sale gets */
        redis_key_keep_of(&key, rq, left);
        argcs[count] = key.hset_argc, argvs[count++] = key.hset;
        argcs[count] = 3, argvs[count++] = key.pexpire;
    }
    argcs[count] = 1, argvs[count++] = exec;
    redisReply *replies[8];
    trace_mark(rq->trace, TRACE_WRITE);
    st_result r = redis_pipeline_sale(w, count, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    r = exec_outcome(w, replies[count - 1], (size_t)count - 2);
    redis_free_replies(replies, count);
    return r;
}

/* The check, the deduction and the ledger entry: both scripts open so. */
#define SALE_SCRIPT_BODY                                                                           \
    "local count = tonumber(redis.call('GET', KEYS[1]))\n"                                         \
    "if not count then return {-1, 0} end\n"                                                       \
    "local qty = tonumber(ARGV[1])\n"                                                              \
    "if count < qty then return {0, count} end\n"                                                  \
    "local left = redis.call('DECRBY', KEYS[1], qty)\n"                                            \
    "redis.call('HINCRBY', KEYS[2], 'sold', qty)\n"                                                \
    "redis.call('HINCRBY', KEYS[2], 'orders', 1)\n"

#define SALE_SCRIPT_STEPS "the sale script: GET, compare with qty, DECRBY, HINCRBY the ledger"

struct redis_script redis_sale_script = {
    .source = SALE_SCRIPT_BODY "return {1, left}\n",
    .steps = SALE_SCRIPT_STEPS,
};

struct redis_script redis_stream_sale_script = {
    .source = SALE_SCRIPT_BODY
    "redis.call('XADD', KEYS[4], '*', 'order', ARGV[2], 'product', ARGV[3], 'qty', ARGV[1],"
    " 'epoch', redis.call('GET', KEYS[3]) or '0')\n"
    "return {1, left}\n",
    .steps = SALE_SCRIPT_STEPS ", XADD the order",
};

struct redis_script redis_hold_sale_script = {
    .source = REDIS_HOLD_FUNCTION SALE_SCRIPT_BODY
    "hold(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], qty, ARGV[2], tonumber(ARGV[3]),"
    " ARGV[4], ARGV[5])\n"
    "return {1, left}\n",
    .steps = SALE_SCRIPT_STEPS ", HSET the held order, ZADD its deadline",
};

struct redis_script redis_return_script = {
    .source = REDIS_GIVE_BACK_FUNCTIONS
    "if redis.call('HGET', KEYS[3], 'state') ~= 'held' then return {-3, 0} end\n"
    "give_back(KEYS[3], KEYS[2], KEYS[1], KEYS[4], KEYS[5], KEYS[6], ARGV[2], ARGV[3], now_ms())\n"
    "return {1, tonumber(redis.call('GET', KEYS[1]))}\n",
    .steps = "the return script: HGET the order's state, HSET it, INCRBY the count, HINCRBY the "
             "ledger's returned",
};

/* What the keyed scripts share: keep(sold, count) keeps the answer with
 * key `idem` (for fingerprint `fp`, `ttl` ms; a sale's order `order`), and
 * the sale, whose refusal is kept. */
#define KEYED_SALE_BODY(idem, fp, ttl, order)                                                      \
    "local function keep(sold, count)\n"                                                           \
    "  redis.call('HSET', " idem ", 'fingerprint', " fp ", 'sold', sold, 'count', count)\n"        \
    "  if sold == 1 and " order " ~= '' then redis.call('HSET', " idem ", 'order', " order         \
    ") end\n"                                                                                      \
    "  redis.call('PEXPIRE', " idem ", " ttl ")\n"                                                 \
    "  return {sold, count}\n"                                                                     \
    "end\n"                                                                                        \
    "local count = tonumber(redis.call('GET', KEYS[1]))\n"                                         \
    "if not count then return {-1, 0} end\n"                                                       \
    "local qty = tonumber(ARGV[1])\n"                                                              \
    "if count < qty then return keep(0, count) end\n"                                              \
    "local left = redis.call('DECRBY', KEYS[1], qty)\n"                                            \
    "redis.call('HINCRBY', KEYS[2], 'sold', qty)\n"                                                \
    "redis.call('HINCRBY', KEYS[2], 'orders', 1)\n"

struct redis_script redis_keyed_sale_script = {
    .source = REDIS_KEY_LOOKUP("KEYS[3]", "ARGV[2]")
        KEYED_SALE_BODY("KEYS[3]", "ARGV[2]", "ARGV[3]", "''") "return keep(1, left)\n",
    .steps = "the keyed sale script: HMGET the key (its answer again if kept), GET, compare with "
             "qty, DECRBY, HINCRBY the ledger, HSET the key's answer",
};

struct redis_script redis_keyed_hold_sale_script = {
    .source = REDIS_HOLD_FUNCTION REDIS_KEY_LOOKUP("KEYS[8]", "ARGV[6]")
        KEYED_SALE_BODY("KEYS[8]", "ARGV[6]", "ARGV[7]",
                        "ARGV[2]") "hold(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], "
                                   "qty, ARGV[2], tonumber(ARGV[3]),"
                                   " ARGV[4], ARGV[5])\n"
                                   "return keep(1, left)\n",
    .steps = "the keyed hold script: HMGET the key (its answer again if kept), GET, compare with "
             "qty, DECRBY, HINCRBY the ledger, HSET the held order, ZADD its deadline, HSET the "
             "key's answer",
};

struct redis_script redis_keyed_stream_sale_script = {
    .source = REDIS_KEY_LOOKUP("KEYS[5]", "ARGV[4]") KEYED_SALE_BODY(
        "KEYS[5]", "ARGV[4]", "ARGV[5]", "ARGV[2]") "redis.call('XADD', KEYS[4], '*', 'order', "
                                                    "ARGV[2], 'product', ARGV[3], 'qty', ARGV[1],"
                                                    " 'epoch', redis.call('GET', KEYS[3]) or '0', "
                                                    "'key', ARGV[6], 'fingerprint', ARGV[4])\n"
                                                    "return keep(1, left)\n",
    .steps = "the keyed stream sale script: HMGET the key (its answer again if kept), GET, compare "
             "with qty, DECRBY, HINCRBY the ledger, XADD the order with its key, HSET the key's "
             "answer",
};

/* The sale script a row runs: a row that settles later streams its orders;
 * a hold writes its order; a keyed sale keeps its key. */
static struct redis_script *sale_script_of(const struct deduct_request *rq)
{
    if (rq->give_back.order[0])
        return &redis_return_script;
    if (rq->hold.order[0])
        return rq->key[0] ? &redis_keyed_hold_sale_script : &redis_hold_sale_script;
    if (rq->key[0])
        return rq->streams_order ? &redis_keyed_stream_sale_script : &redis_keyed_sale_script;
    return rq->streams_order ? &redis_stream_sale_script : &redis_sale_script;
}

/* A hold's arguments, after the sale's: its order's keys (and a keyed
 * hold's key), then its id, ttl, seller and expiry mechanism (and the
 * key's fingerprint and ttl in ms). */
static void hold_args_of(struct redis_script_args *a, const struct deduct_request *rq)
{
    redis_hold_of(&a->hold, rq);
    const char *keys[] = {a->stock,      a->ledger,   a->hold.order,    a->hold.deadlines,
                          a->hold.holds, a->hold.ids, a->hold.hold_key, a->idem};
    const char *args[] = {a->qty,          rq->hold.order, a->hold.ttl, rq->seller,
                          rq->hold.expiry, a->fingerprint, a->key_ttl};
    const int keyed = rq->key[0] != '\0';
    a->nkeys = keyed ? 8 : 7;
    const int nargs = keyed ? 7 : 5;
    _Static_assert(sizeof keys / sizeof keys[0] + sizeof args / sizeof args[0] <=
                       sizeof a->argv / sizeof a->argv[0],
                   "argv");
    memcpy(a->argv, keys, sizeof keys[0] * (size_t)a->nkeys);
    memcpy(a->argv + a->nkeys, args, sizeof args[0] * (size_t)nargs);
    a->argc = a->nkeys + nargs;
}

/* A keyed sale's key and what it keeps there: idem:{P}:<key>, the
 * fingerprint and the key's ttl in ms. */
static void key_args_of(struct redis_script_args *a, const struct deduct_request *rq)
{
    redis_idem_key(a->idem, rq);
    key_fingerprint(a->fingerprint, rq);
    snprintf(a->key_ttl, sizeof a->key_ttl, "%lld", (long long)config.idempotency_ttl_s * 1000);
}

/* A keyed sale's arguments, after the sale's: its key's, then the
 * fingerprint and the key's ttl. */
static void keyed_args_of(struct redis_script_args *a)
{
    const char *keyed[] = {a->stock, a->ledger, a->idem, a->qty, a->fingerprint, a->key_ttl};
    memcpy(a->argv, keyed, sizeof keyed);
    a->nkeys = 3, a->argc = 6;
}

/* A return's arguments, after the sale's: its order's keys, then its id
 * and the state it leaves `held` for. */
static void return_args_of(struct redis_script_args *a, const struct deduct_request *rq)
{
    redis_give_back_of(&a->hold, rq);
    const char *given[] = {a->stock,           a->ledger,        a->hold.order, a->hold.deadlines,
                           a->hold.holds,      a->hold.hold_key, a->qty,        rq->give_back.order,
                           rq->give_back.state};
    memcpy(a->argv, given, sizeof given);
    a->nkeys = 6, a->argc = 9;
}

/* The script's keys and quantity as this thread last formatted them: a
 * loop sells the same few products, mostly one unit at a time, over and
 * over, and formatting is a good part of what a piped sale costs it. */
static __thread struct {
    int product, qty;
    char stock[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX], epoch[REDIS_KEY_MAX], product_text[16];
    char qty_text[16];
} last;

/* A sale that settles later: its epoch key and the stream, then a new
 * order id (into out->order) and the product; a keyed one, its key's hash
 * too, then the fingerprint, the key's ttl and the key, which the stream
 * entry carries to MySQL (order_stream.h). */
static void streamed_args_of(struct redis_script_args *a, const struct deduct_request *rq,
                             struct deduct_reply *out)
{
    memcpy(a->epoch, last.epoch, sizeof a->epoch);
    memcpy(a->product, last.product_text, sizeof a->product);
    order_stream_new_id(out->order);
    const char *streamed[] = {a->stock, a->ledger,  a->epoch,  ORDER_STREAM_KEY,
                              a->qty,   out->order, a->product};
    memcpy(a->argv, streamed, sizeof streamed);
    a->nkeys = 4, a->argc = 7;
    if (!rq->key[0])
        return;
    const char *keyed[] = {a->stock,       a->ledger,  a->epoch,   ORDER_STREAM_KEY,
                           a->idem,        a->qty,     out->order, a->product,
                           a->fingerprint, a->key_ttl, rq->key};
    _Static_assert(sizeof keyed / sizeof keyed[0] <= sizeof a->argv / sizeof a->argv[0], "argv");
    memcpy(a->argv, keyed, sizeof keyed);
    a->nkeys = 5, a->argc = 11;
}

void redis_script_args_of(struct redis_script_args *a, const struct deduct_request *rq,
                          struct deduct_reply *out)
{
    if (!last.stock[0] || last.product != rq->product) {
        redis_key(last.stock, "stock", rq->product, "");
        redis_key(last.ledger, "ledger", rq->product, "");
        redis_key(last.epoch, "stock", rq->product, ":epoch");
        snprintf(last.product_text, sizeof last.product_text, "%d", rq->product);
        last.product = rq->product;
    }
    if (!last.qty_text[0] || last.qty != rq->qty) {
        snprintf(last.qty_text, sizeof last.qty_text, "%d", rq->qty);
        last.qty = rq->qty;
    }
    memcpy(a->stock, last.stock, sizeof a->stock);
    memcpy(a->ledger, last.ledger, sizeof a->ledger);
    memcpy(a->qty, last.qty_text, sizeof a->qty);
    a->argv[0] = a->stock;
    a->argv[1] = a->ledger;
    a->argv[2] = a->qty;
    a->script = sale_script_of(rq), a->nkeys = 2, a->argc = 3;
    if (rq->key[0])
        key_args_of(a, rq);
    if (a->script == &redis_return_script)
        return_args_of(a, rq);
    else if (rq->hold.order[0])
        hold_args_of(a, rq);
    else if (rq->streams_order)
        streamed_args_of(a, rq, out);
    else if (rq->key[0])
        keyed_args_of(a);
}

/* What the script reported back: the count it found when it sold
 * nothing, the count it left when it sold. It reads inside Redis, so the
 * server never sees the count before a sale. */
static void trace_script(const struct deduct_request *rq, long long sold, long long count)
{
    struct sale_trace *t = rq->trace;
    if (!t)
        return;
    trace_mark(t, TRACE_COMMIT);
    t->update = sale_script_of(rq)->steps;
    if (sold)
        t->wrote = count;
    else
        t->read = count;
}

/* What the script answered, before the order id is kept or dropped. */
static st_result script_outcome(struct worker *w, const struct deduct_request *rq,
                                const redisReply *reply, int batch, struct deduct_reply *out)
{
    long long sold, count;
    out->attempts = 1;
    out->batch = batch;
    if (reply->type == REDIS_REPLY_ERROR)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: %s", reply->str);
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || reply->elements > 4 ||
        redis_reply_int(reply->element[0], &sold) != 0 ||
        redis_reply_int(reply->element[1], &count) != 0)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "redis: unexpected reply from the sale script");
    if (sold == -2)
        return key_reused(w);
    if (sold == -3)
        return worker_fail(w, ST_EXPIRED, "order %s is no longer held", rq->give_back.order);
    if (sold < 0)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is not in redis", rq->product);
    if (reply->elements >= 3) /* the key's kept answer */
        return redis_key_replay(w, rq, sold, count,
                                reply->elements == 4 &&
                                        reply->element[3]->type == REDIS_REPLY_STRING
                                    ? reply->element[3]->str
                                    : NULL,
                                out);
    out->remaining = count;
    trace_script(rq, sold, count);
    if (sold == 0)
        return worker_fail(w, ST_SOLD_OUT, "%lld left, %d asked", count, rq->qty);
    return ST_OK;
}

st_result redis_script_result(struct worker *w, const struct deduct_request *rq,
                              const redisReply *reply, int batch, struct deduct_reply *out)
{
    st_result r = script_outcome(w, rq, reply, batch, out);
    if (r != ST_OK)
        out->order[0] = '\0';
    return r;
}

/* ------------------------------------------------------------ the store */

/* WATCH stock:{P}:initial (the reset epoch), then GET stock:{P}. */
static st_result read(struct worker *w, const struct deduct_request *rq, struct stock_seen *seen,
                      struct deduct_reply *out)
{
    struct redis_stock k;
    redis_stock_keys(&k, rq->product);
    st_result r = redis_watch_and_read(w, rq, &k, k.initial, out);
    if (r == ST_OK)
        *seen = (struct stock_seen){.count = out->remaining};
    return r;
}

static st_result write_if(struct worker *w, const struct deduct_request *rq,
                          const struct stock_seen *seen, long long left, long long fence)
{
    (void)seen, (void)fence; /* the epoch is the WATCH; the store does not fence */
    struct redis_stock k;
    redis_stock_keys(&k, rq->product);
    st_result r = redis_sale_exec(w, rq, &k, left);
    if (r == ST_BUSY)
        worker_fail(w, r, "product %d was reset during the sale", rq->product);
    return r;
}

st_result redis_stock_account(struct worker *w, const char *stock, const char *initial,
                              const char *ledger, struct store_account *out)
{
    const char *argv[] = {"MGET", stock, initial};
    const char *hargv[] = {"HMGET", ledger, "sold", "orders"};
    const char *const *argvs[] = {argv, hargv};
    const int argcs[] = {3, 4};
    redisReply *replies[2];
    *out = (struct store_account){0};
    st_result r = redis_pipeline(w, 2, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    redisReply *counts = replies[0], *sales = replies[1];
    if (counts->type != REDIS_REPLY_ARRAY || counts->elements != 2 ||
        sales->type != REDIS_REPLY_ARRAY || sales->elements != 2) {
        redis_free_replies(replies, 2);
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: unexpected reply to MGET/HMGET");
    }
    out->present = redis_reply_int(counts->element[0], &out->remaining) == 0;
    if (out->present) {
        redis_reply_int(counts->element[1], &out->initial);
        redis_reply_int(sales->element[0], &out->sold);
        redis_reply_int(sales->element[1], &out->orders);
    }
    redis_free_replies(replies, 2);
    return ST_OK;
}

static st_result account(struct worker *w, int product, struct store_account *out)
{
    struct redis_stock k;
    redis_stock_keys(&k, product);
    st_result r = redis_stock_account(w, k.stock, k.initial, k.ledger, out);
    return r == ST_OK && out->present ? redis_orders_account(w, product, out) : r;
}

/* The count, the initial count (which moves the epoch: it aborts every
 * WATCH on it), MySQL's epoch (what streamed orders carry) and an empty
 * ledger, in one atomic step. */
st_result redis_stock_reset_keys(struct worker *w, const char *stock, const char *initial,
                                 const char *ledger, long long count, const char *epoch_key,
                                 long long epoch)
{
    char text[24], epoch_text[24];
    snprintf(text, sizeof text, "%lld", count);
    snprintf(epoch_text, sizeof epoch_text, "%lld", epoch);
    const char *multi[] = {"MULTI"};
    const char *set[] = {"MSET", stock, text, initial, text, epoch_key, epoch_text};
    const char *del[] = {"DEL", ledger};
    const char *exec[] = {"EXEC"};
    const char *const *argvs[] = {multi, set, del, exec};
    const int argcs[] = {1, epoch_key ? 7 : 5, 2, 1};
    redisReply *replies[4];
    st_result r = redis_pipeline(w, 4, argcs, argvs, replies);
    if (r != ST_OK)
        return r;
    if (replies[3]->type != REDIS_REPLY_ARRAY)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: the reset's EXEC failed (%s)", stock);
    redis_free_replies(replies, 4);
    return r;
}

static st_result reset(struct worker *w, int product, long long count, long long *epoch)
{
    struct redis_stock k;
    redis_stock_keys(&k, product);
    /* The orders first: none of them can return units after the count is set. */
    st_result r = redis_orders_reset(w, product);
    return r == ST_OK
               ? redis_stock_reset_keys(w, k.stock, k.initial, k.ledger, count, k.epoch, *epoch)
               : r;
}

const struct store store_redis = {
    .name = "redis",
    .backend = BACKEND_REDIS,
    .read = read,
    .write_if = write_if,
    .account = account,
    .reset = reset,
    .orders = &redis_order_store,
    .keys = &redis_key_store,
};
