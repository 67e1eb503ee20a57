/*
 * redis_orders.c - orders in the redis store: a script per transition,
 * each reading the order's state and Redis's TIME itself, so that a
 * payment, a return (a cancel, an expiry: the script its strategy's
 * return runs, sale/returns.h) and the sweepers' choice of due orders
 * decide in one place, one at a time, by one clock.
 */
#include "store/redis_orders.h"

#include "core/worker.h"
#include "store/expiry.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The payment of one order - KEYS: order, ledger, stock, payments,
 * deadlines, holds, hold key; ARGV: id, payment - answers {outcome word,
 * duplicate}: 'paid', or why not ('unknown', 'already_paid', or the state
 * it found). */
#define PAY_KEYS 7

static struct redis_script pay_script = {
    .source = REDIS_NOW_FUNCTION
    "local state = redis.call('HGET', KEYS[1], 'state')\n"
    "if not state then return {'unknown', 0} end\n"
    "if state == 'held' and now_ms() < tonumber(redis.call('HGET', KEYS[1], 'deadline_ms')) then\n"
    "  local qty = tonumber(redis.call('HGET', KEYS[1], 'qty'))\n"
    "  redis.call('HSET', KEYS[1], 'state', 'paid', 'payment', ARGV[2])\n"
    "  redis.call('HSET', KEYS[4], ARGV[2], 'captured')\n"
    "  redis.call('HINCRBY', KEYS[2], 'held', -qty)\n"
    "  redis.call('HINCRBY', KEYS[2], 'paid', qty)\n"
    "  redis.call('ZREM', KEYS[5], ARGV[1])\n"
    "  redis.call('ZREM', KEYS[6], ARGV[1])\n"
    "  redis.call('DEL', KEYS[7])\n"
    "  return {'paid', 0}\n"
    "end\n"
    "if state == 'paid' and redis.call('HGET', KEYS[1], 'payment') == ARGV[2] then\n"
    "  return {'paid', 1} end\n"
    "local new = redis.call('HSETNX', KEYS[4], ARGV[2], 'refund_due')\n"
    "if new == 1 then\n"
    "  redis.call('HINCRBY', KEYS[1], 'refunds_due', 1)\n"
    "  redis.call('HINCRBY', KEYS[2], 'refunds_due', 1)\n"
    "end\n"
    "if state == 'paid' then return {'already_paid', 1 - new} end\n"
    "return {'expired', 1 - new}\n",
};

/* KEYS: deadlines; ARGV: product, batch. redis-zset's due orders of one
 * product: the members of deadlines:{P} whose deadline TIME has passed,
 * the oldest first; a member whose order is no longer held (a reset came
 * in between) is dropped. */
static struct redis_script due_script = {
    .source = REDIS_NOW_FUNCTION
    "local now = now_ms()\n"
    "local due = {}\n"
    "for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0,"
    " ARGV[2])) do\n"
    "  if redis.call('HGET', 'order:{' .. ARGV[1] .. '}:' .. id, 'state') == 'held' then\n"
    "    due[#due + 1] = id\n"
    "  else redis.call('ZREM', KEYS[1], id) end\n"
    "end\n"
    "return due\n",
};

/* KEYS: ledger, holds; ARGV: product, redis-zset's lag, redis-keyspace's.
 * The order figures; stranded: held past deadline + its mechanism's lag. */
static struct redis_script account_script = {
    .source = "local t = redis.call('TIME')\n"
              "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
              "local f = redis.call('HMGET', KEYS[1], 'held', 'paid', 'returned', 'refunds_due',"
              " 'returned_twice', 'paid_and_returned')\n"
              "local stranded = 0\n"
              "for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do\n"
              "  local o = redis.call('HMGET', 'order:{' .. ARGV[1] .. '}:' .. id, 'state',"
              " 'deadline_ms', 'qty', 'expiry')\n"
              "  local lag = o[4] == 'redis-keyspace' and ARGV[3] or ARGV[2]\n"
              "  if o[1] == 'held' and tonumber(o[2]) + tonumber(lag) <= now then\n"
              "    stranded = stranded + tonumber(o[3]) end\n"
              "end\n"
              "for i = 1, 6 do f[i] = tonumber(f[i] or 0) end\n"
              "f[7] = stranded\n"
              "return f\n",
};

/* KEYS: ids, deadlines, holds; ARGV: product. */
static struct redis_script reset_script = {
    .source = "for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do\n"
              "  local tag = '{' .. ARGV[1] .. '}:' .. id\n"
              "  redis.call('DEL', 'order:' .. tag, 'payments:' .. tag, 'hold:' .. tag)\n"
              "end\n"
              "redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])\n"
              "return 1\n",
};

/* The hold written inside a MULTI: EVAL, not EVALSHA, so that a Redis that
 * forgot the script cannot fail this one command of the transaction while
 * the others apply. KEYS: ledger, order, deadlines, holds, ids, hold key;
 * ARGV: qty, id, ttl, strategy, expiry. */
static const char hold_source[] = REDIS_HOLD_FUNCTION
    "hold(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], tonumber(ARGV[1]), ARGV[2],"
    " tonumber(ARGV[3]), ARGV[4], ARGV[5])\n"
    "return 1\n";

/* The keys of order `id` of `product`. */
struct order_keys {
    char order[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX], stock[REDIS_KEY_MAX], payments[REDIS_KEY_MAX],
        deadlines[REDIS_KEY_MAX], holds[REDIS_KEY_MAX], hold_key[REDIS_KEY_MAX];
};

static void order_keys(struct order_keys *k, int product, const char *id)
{
    char suffix[ORDER_ID_MAX + 2];
    snprintf(suffix, sizeof suffix, ":%s", id);
    redis_key(k->order, "order", product, suffix);
    redis_key(k->ledger, "ledger", product, "");
    redis_key(k->stock, "stock", product, "");
    redis_key(k->payments, "payments", product, suffix);
    redis_key(k->deadlines, "deadlines", product, "");
    redis_key(k->holds, "holds", product, "");
    redis_key(k->hold_key, "hold", product, suffix);
}

/* Order `id`'s keys into a struct redis_hold. */
static void hold_keys(struct redis_hold *h, int product, const char *id)
{
    struct order_keys k;
    order_keys(&k, product, id);
    memcpy(h->order, k.order, sizeof h->order);
    memcpy(h->deadlines, k.deadlines, sizeof h->deadlines);
    memcpy(h->holds, k.holds, sizeof h->holds);
    memcpy(h->hold_key, k.hold_key, sizeof h->hold_key);
    redis_key(h->ids, "order-ids", product, "");
}

void redis_hold_of(struct redis_hold *h, const struct deduct_request *rq)
{
    hold_keys(h, rq->product, rq->hold.order);
    snprintf(h->ttl, sizeof h->ttl, "%d", rq->hold.ttl_ms);
}

void redis_give_back_of(struct redis_hold *h, const struct deduct_request *rq)
{
    assert(!rq->give_back.more_count); /* one order a return, here */
    hold_keys(h, rq->product, rq->give_back.order);
    h->ttl[0] = '\0';
}

st_result redis_hold_indexed(struct worker *w, const struct deduct_request *rq)
{
    char product[16];
    snprintf(product, sizeof product, "%d", rq->product);
    redisReply *reply;
    st_result r = redis_call(w, &reply, 3, (const char *[]){"SADD", ORDER_PRODUCTS_KEY, product});
    if (r == ST_OK)
        freeReplyObject(reply);
    return r;
}

int redis_hold_command(const char **argv, const struct redis_hold *h,
                       const struct deduct_request *rq, const char *ledger, const char *qty)
{
    const char *words[] = {"EVAL",         hold_source, "6",        ledger,         h->order,
                           h->deadlines,   h->holds,    h->ids,     h->hold_key,    qty,
                           rq->hold.order, h->ttl,      rq->seller, rq->hold.expiry};
    _Static_assert(sizeof words / sizeof words[0] <= REDIS_HOLD_ARGC, "REDIS_HOLD_ARGC");
    memcpy(argv, words, sizeof words);
    return (int)(sizeof words / sizeof words[0]);
}

/* The return a MULTI carries: EVAL, as the hold's. KEYS: order, ledger,
 * stock, deadlines, holds, hold key; ARGV: id, state, left. */
static const char give_back_source[] = REDIS_GIVE_BACK_FUNCTIONS
    "if redis.call('HGET', KEYS[1], 'state') ~= 'held' then return 0 end\n"
    "give_back(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2], now_ms(),"
    " ARGV[3])\n"
    "return 1\n";

int redis_give_back_command(const char **argv, const struct redis_hold *h,
                            const struct deduct_request *rq, const char *ledger, const char *stock,
                            const char *left)
{
    const char *words[] = {"EVAL",
                           give_back_source,
                           "6",
                           h->order,
                           ledger,
                           stock,
                           h->deadlines,
                           h->holds,
                           h->hold_key,
                           rq->give_back.order,
                           rq->give_back.state,
                           left};
    _Static_assert(sizeof words / sizeof words[0] <= REDIS_HOLD_ARGC, "REDIS_HOLD_ARGC");
    memcpy(argv, words, sizeof words);
    return (int)(sizeof words / sizeof words[0]);
}

/* Runs transition `script` on order `id` of `product`: the word of its
 * outcome into `outcome`, and whether it was a repeat. */
static st_result transition(struct worker *w, struct redis_script *script, int product,
                            const char *id, const char *payment, char outcome[16], int *duplicate)
{
    struct order_keys k;
    order_keys(&k, product, id);
    const char *argv[] = {k.order, k.ledger,   k.stock, k.payments, k.deadlines,
                          k.holds, k.hold_key, id,      payment};
    redisReply *reply;
    st_result r = redis_eval(w, script, &reply, PAY_KEYS, 9, argv);
    if (r != ST_OK)
        return r;
    long long dup;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        redis_reply_int(reply->element[1], &dup) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: unexpected reply from an order script");
    else {
        snprintf(outcome, 16, "%s", reply->element[0]->str);
        *duplicate = dup != 0;
    }
    freeReplyObject(reply);
    return r;
}

/* A pay's outcome in the contract's words: ST_OK when paid; a refusal
 * otherwise, its payment refund due. */
static st_result pay_answered(struct worker *w, const struct order_ref *o, const char *outcome,
                              const char *payment)
{
    if (strcmp(outcome, "paid") == 0)
        return ST_OK;
    if (strcmp(outcome, "unknown") == 0)
        return worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in redis", o->id);
    if (strcmp(outcome, "already_paid") == 0)
        return worker_fail(w, ST_ALREADY_PAID,
                           "order %s is paid with another payment: %s is refund due", o->id,
                           payment);
    return worker_fail(w, ST_EXPIRED,
                       "order %s expired, was cancelled or is past its deadline: payment %s "
                       "is refund due",
                       o->id, payment);
}

static st_result pay(struct worker *w, const struct order_ref *o, const char *payment,
                     int *duplicate)
{
    char outcome[16];
    st_result r = transition(w, &pay_script, o->product, o->id, payment, outcome, duplicate);
    return r == ST_OK ? pay_answered(w, o, outcome, payment) : r;
}

/* A field of an HGETALL reply as an integer member of `into`, or null. */
static json_t *integer_or_null(const char *text)
{
    return text ? json_integer(strtoll(text, NULL, 10)) : json_null();
}

static const char *field(const redisReply *all, const char *name)
{
    for (size_t i = 0; i + 1 < all->elements; i += 2)
        if (strcmp(all->element[i]->str, name) == 0)
            return all->element[i + 1]->str;
    return NULL;
}

static st_result get(struct worker *w, const struct order_ref *o, json_t *reply)
{
    struct order_keys k;
    order_keys(&k, o->product, o->id);
    redisReply *all;
    st_result r = redis_call(w, &all, 2, (const char *[]){"HGETALL", k.order});
    if (r != ST_OK)
        return r;
    if (all->type != REDIS_REPLY_ARRAY || all->elements == 0) {
        freeReplyObject(all);
        return worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in redis", o->id);
    }
    const char *payment = field(all, "payment");
    json_object_set_new(reply, "state", json_string(field(all, "state")));
    json_object_set_new(reply, "strategy", json_string(field(all, "strategy")));
    json_object_set_new(reply, "product", json_integer(o->product));
    json_object_set_new(reply, "qty", integer_or_null(field(all, "qty")));
    json_object_set_new(reply, "expiry", json_string(field(all, "expiry")));
    json_object_set_new(reply, "expires_at_ms", integer_or_null(field(all, "deadline_ms")));
    json_object_set_new(reply, "payment", payment ? json_string(payment) : json_null());
    json_object_set_new(reply, "returned", integer_or_null(field(all, "returned")));
    json_object_set_new(reply, "returned_at_ms", integer_or_null(field(all, "returned_at_ms")));
    json_object_set_new(reply, "refunds_due", integer_or_null(field(all, "refunds_due")));
    freeReplyObject(all);
    return ST_OK;
}

static st_result facts(struct worker *w, const struct order_ref *o, struct order_facts *out)
{
    struct order_keys k;
    order_keys(&k, o->product, o->id);
    redisReply *f;
    *out = (struct order_facts){0};
    st_result r =
        redis_call(w, &f, 5, (const char *[]){"HMGET", k.order, "state", "strategy", "qty"});
    if (r != ST_OK)
        return r;
    if (f->type != REDIS_REPLY_ARRAY || f->elements != 3)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: HMGET of order %s is no array of 3",
                        o->id);
    else if (!f->element[0]->str) /* no hash, or none with a state */
        r = worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in redis", o->id);
    else {
        out->state = order_state_parse(f->element[0]->str);
        snprintf(out->strategy, sizeof out->strategy, "%s",
                 f->element[1]->str ? f->element[1]->str : "");
        out->qty = f->element[2]->str ? strtoll(f->element[2]->str, NULL, 10) : 0;
    }
    freeReplyObject(f);
    return r;
}

static st_result deadline(struct worker *w, const struct order_ref *o, long long *ms)
{
    struct order_keys k;
    order_keys(&k, o->product, o->id);
    redisReply *reply;
    st_result r = redis_call(w, &reply, 3, (const char *[]){"HGET", k.order, "deadline_ms"});
    if (r != ST_OK)
        return r;
    if (redis_reply_int(reply, ms) != 0)
        r = worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in redis", o->id);
    freeReplyObject(reply);
    return r;
}

const struct order_store redis_order_store = {
    .letter = 'r',
    .pay = pay,
    .get = get,
    .facts = facts,
    .deadline = deadline,
};

st_result redis_orders_account(struct worker *w, int product, struct store_account *a)
{
    struct order_keys k;
    order_keys(&k, product, "");
    char text[3][24];
    snprintf(text[0], sizeof text[0], "%d", product);
    snprintf(text[1], sizeof text[1], "%lld", expiry_lag_ms(expiry_find("redis-zset")));
    snprintf(text[2], sizeof text[2], "%d", KEYSPACE_STRANDED_MS);
    const char *argv[] = {k.ledger, k.holds, text[0], text[1], text[2]};
    redisReply *reply;
    st_result r = redis_eval(w, &account_script, &reply, 2, 5, argv);
    if (r != ST_OK)
        return r;
    long long *figures[] = {&a->held,        &a->paid,           &a->returned,
                            &a->refunds_due, &a->returned_twice, &a->paid_and_returned,
                            &a->stranded};
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 7)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE,
                        "redis: unexpected reply from the orders' account");
    for (size_t i = 0; r == ST_OK && i < 7; i++)
        redis_reply_int(reply->element[i], figures[i]);
    freeReplyObject(reply);
    a->holds = r == ST_OK;
    return r;
}

st_result redis_orders_reset(struct worker *w, int product)
{
    struct order_keys k;
    char ids[REDIS_KEY_MAX], text[16];
    order_keys(&k, product, "");
    redis_key(ids, "order-ids", product, "");
    snprintf(text, sizeof text, "%d", product);
    redisReply *reply;
    st_result r = redis_eval(w, &reset_script, &reply, 3, 4,
                             (const char *[]){ids, k.deadlines, k.holds, text});
    if (r == ST_OK)
        freeReplyObject(reply);
    return r;
}

/* The most orders one product's sweep returns, each through its strategy:
 * a round short enough to end well inside the lag it promises. */
#define SWEEP_BATCH "100"

/* One product's due orders, each returned through its strategy. */
static st_result sweep_product(struct worker *w, const struct expiry *e, const char *product,
                               int *returned)
{
    char number[16];
    long long p = strtoll(product, NULL, 10);
    struct order_keys k;
    order_keys(&k, (int)p, "");
    snprintf(number, sizeof number, "%lld", p);
    redisReply *reply;
    st_result r = redis_eval(w, &due_script, &reply, 1, 3,
                             (const char *[]){k.deadlines, number, SWEEP_BATCH});
    if (r != ST_OK)
        return r;
    json_t *ids = json_array();
    for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; i++)
        json_array_append_new(ids,
                              json_string(reply->element[i]->str ? reply->element[i]->str : ""));
    freeReplyObject(reply);
    int n = 0;
    r = expiry_return_each(w, e, ids, &n);
    json_decref(ids);
    *returned += n;
    return r;
}

st_result redis_orders_sweep(struct worker *w, const struct expiry *e, int *returned)
{
    redisReply *products;
    *returned = 0;
    st_result r = redis_call(w, &products, 2, (const char *[]){"SMEMBERS", ORDER_PRODUCTS_KEY});
    if (r != ST_OK)
        return r;
    for (size_t i = 0; r == ST_OK && products->type == REDIS_REPLY_ARRAY && i < products->elements;
         i++)
        r = sweep_product(w, e, products->element[i]->str, returned);
    freeReplyObject(products);
    return r;
}
