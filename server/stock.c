/*
 * stock.c - accounting and reset across the stores.
 */
#include "stock.h"

#include "mysql_store.h"
#include "redis_store.h"
#include "strategy.h"
#include "worker.h"

#include <stdio.h>
#include <string.h>

long long account_oversold(const struct store_account *a)
{
    long long over = a->sold - a->initial;
    return over > 0 ? over : 0;
}

long long account_lost_updates(const struct store_account *a)
{
    long long lost = a->sold - (a->initial - a->remaining);
    return lost > 0 ? lost : 0;
}

json_t *account_json(const struct store_account *a)
{
    if (!a->present)
        return json_null();
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "initial", (json_int_t)a->initial,
                     "remaining", (json_int_t)a->remaining, "sold", (json_int_t)a->sold, "orders",
                     (json_int_t)a->orders, "oversold", (json_int_t)account_oversold(a),
                     "lost_updates", (json_int_t)account_lost_updates(a));
}

st_result mysql_account(struct worker *w, int product, struct store_account *out)
{
    struct sql_outcome row;
    memset(out, 0, sizeof *out);
    st_result r = sql_exec(w, SQL_ACCOUNT, SQL_ARGS(SQL_I(product)), &row);
    if (r != ST_OK)
        return r;
    out->present = row.found;
    out->remaining = row.col[0];
    out->initial = row.col[1];
    out->sold = row.col[2];
    out->orders = row.col[3];
    return ST_OK;
}

st_result redis_account(struct worker *w, int product, struct store_account *out)
{
    char stock[REDIS_KEY_MAX], initial[REDIS_KEY_MAX], ledger[REDIS_KEY_MAX];
    redis_key(stock, "stock", product, "");
    redis_key(initial, "stock", product, ":initial");
    redis_key(ledger, "ledger", product, "");
    const char *argv[] = {"MGET", stock, initial};
    const char *hargv[] = {"HMGET", ledger, "sold", "orders"};
    const char *const *argvs[] = {argv, hargv};
    const int argcs[] = {3, 4};
    redisReply *replies[2];
    memset(out, 0, sizeof *out);
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

/* Deletes every key of the product (they all carry the hash tag {P}) and
 * sets the stock, in one atomic script. */
static struct redis_script reset_script = {
    .source = "for _, key in ipairs(redis.call('KEYS', ARGV[1])) do\n"
              "  redis.call('DEL', key)\n"
              "end\n"
              "redis.call('SET', KEYS[1], ARGV[2])\n"
              "redis.call('SET', KEYS[2], ARGV[2])\n"
              "return 1\n",
};

static st_result redis_reset(struct worker *w, int product, long long count)
{
    char stock[REDIS_KEY_MAX], initial[REDIS_KEY_MAX], pattern[REDIS_KEY_MAX], text[24];
    redis_key(stock, "stock", product, "");
    redis_key(initial, "stock", product, ":initial");
    snprintf(pattern, sizeof pattern, "*{%d}*", product);
    snprintf(text, sizeof text, "%lld", count);
    const char *argv[] = {stock, initial, pattern, text};
    redisReply *reply;
    st_result r = redis_eval(w, &reset_script, &reply, 2, 4, argv);
    if (r == ST_OK)
        freeReplyObject(reply);
    return r;
}

st_result stock_reset(struct worker *w, int product, long long count)
{
    st_result r = sql_begin(w);
    if (r != ST_OK)
        return r;
    r = sql_exec(w, SQL_RESET_STOCK,
                 SQL_ARGS(SQL_I(product), SQL_I(count), SQL_I(count), SQL_I(count), SQL_I(count)),
                 NULL);
    if (r == ST_OK)
        r = sql_exec(w, SQL_RESET_ORDERS, SQL_ARGS(SQL_I(product)), NULL);
    if (r == ST_OK)
        r = sql_exec(w, SQL_RESET_LOCKS, SQL_ARGS(SQL_I(product)), NULL);
    if (r == ST_OK)
        r = redis_reset(w, product, count);
    for (size_t i = 0; r == ST_OK && i < strategy_count(); i++)
        if (strategy_at(i)->reset)
            r = strategy_at(i)->reset(w, product);
    if (r == ST_OK)
        return sql_commit(w);
    sql_rollback(w);
    return r;
}
