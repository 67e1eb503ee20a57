/*
 * redis_keys.c - idem:{P}:<key>: named, found, written into a sale's MULTI,
 * and kept after a refusal (redis_keys.h says when each is written).
 */
#include "store/redis_keys.h"

#include "core/config.h"
#include "core/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* idem:{P}:<key> */
static void idem_key_of(char out[REDIS_IDEM_KEY_MAX], int product, const char *key)
{
    snprintf(out, REDIS_IDEM_KEY_MAX, "idem:{%d}:%s", product, key);
}

void redis_idem_key(char out[REDIS_IDEM_KEY_MAX], const struct deduct_request *rq)
{
    idem_key_of(out, rq->product, rq->key);
}

st_result redis_key_replay(struct worker *w, const struct deduct_request *rq, long long sold,
                           long long count, const char *order, struct deduct_reply *out)
{
    char message[64];
    snprintf(message, sizeof message, "%lld left, %d asked", count, rq->qty);
    if (order)
        snprintf(out->order, sizeof out->order, "%s", order);
    return key_replay(w, sold ? ST_OK : ST_SOLD_OUT, count, message, out);
}

/* The text of a bulk reply, or NULL (a nil: the field is not kept). */
static const char *text_of(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING ? r->str : NULL;
}

/* HMGET of `idem`'s fingerprint and three fields `of`: an array of four in
 * *out, freed by the caller, or a failure. */
static st_result read_kept(struct worker *w, const char *idem, const char *const of[3],
                           redisReply **out)
{
    const char *hmget[] = {"HMGET", idem, "fingerprint", of[0], of[1], of[2]};
    const char *const *argvs[] = {hmget};
    const int argcs[] = {6};
    st_result r = redis_pipeline(w, 1, argcs, argvs, out);
    if (r != ST_OK || ((*out)->type == REDIS_REPLY_ARRAY && (*out)->elements == 4))
        return r;
    redis_free_replies(out, 1);
    return worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: unexpected reply to HMGET %s", idem);
}

st_result redis_key_find(struct worker *w, const struct deduct_request *rq,
                         struct deduct_reply *out, int *found)
{
    char idem[REDIS_IDEM_KEY_MAX], fingerprint[KEY_FINGERPRINT_MAX];
    redis_idem_key(idem, rq);
    key_fingerprint(fingerprint, rq);
    redisReply *reply;
    st_result r = read_kept(w, idem, (const char *const[]){"sold", "count", "order"}, &reply);
    if (r != ST_OK)
        return r;
    *found = 0;
    if (text_of(reply->element[0])) {
        *found = 1;
        const char *sold = text_of(reply->element[1]), *count = text_of(reply->element[2]);
        if (strcmp(text_of(reply->element[0]), fingerprint) != 0)
            r = key_reused(w);
        else if (!sold || !count)
            r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: %s is kept half", idem);
        else
            r = redis_key_replay(w, rq, atoll(sold), atoll(count), text_of(reply->element[3]), out);
    }
    redis_free_replies(&reply, 1);
    return r;
}

void redis_key_keep_of(struct redis_key_keep *k, const struct deduct_request *rq, long long left)
{
    redis_idem_key(k->idem, rq);
    key_fingerprint(k->fingerprint, rq);
    snprintf(k->left, sizeof k->left, "%lld", left);
    snprintf(k->ttl, sizeof k->ttl, "%lld", (long long)config.idempotency_ttl_s * 1000);
    const char *hset[] = {"HSET", k->idem, "fingerprint", k->fingerprint, "sold",
                          "1",    "count", k->left,       "order",        rq->hold.order};
    _Static_assert(sizeof hset == sizeof k->hset, "hset");
    memcpy(k->hset, hset, sizeof hset);
    k->hset_argc = rq->hold.order[0] ? 10 : 8; /* a plain sale has no order */
    k->pexpire[0] = "PEXPIRE", k->pexpire[1] = k->idem, k->pexpire[2] = k->ttl;
}

/* Keeps a sold_out where the key has no answer yet: {0, count} when kept,
 * else the key's kept answer as the keyed sale script gives it. */
static struct redis_script keep_refusal_script = {
    .source = REDIS_KEY_LOOKUP("KEYS[1]", "ARGV[1]") "redis.call('HSET', KEYS[1], 'fingerprint', "
                                                     "ARGV[1], 'sold', 0, 'count', ARGV[2])\n"
                                                     "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
                                                     "return {0, tonumber(ARGV[2])}\n",
};

/* The sold_out of `message` kept with rq's key, or the key's answer. */
static st_result keep_sold_out(struct worker *w, const struct deduct_request *rq,
                               const char *message, struct deduct_reply *out)
{
    struct redis_key_keep k;
    redis_key_keep_of(&k, rq, out->remaining);
    const char *argv[] = {k.idem, k.fingerprint, k.left, k.ttl};
    const char *const *argvs[] = {argv};
    redisReply *reply = NULL;
    st_result r = redis_eval_sales(w, &keep_refusal_script, 1, 1, 4, argvs, &reply);
    if (!reply)
        return r;
    long long sold, count;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        redis_reply_int(reply->element[0], &sold) != 0 ||
        redis_reply_int(reply->element[1], &count) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: unexpected reply keeping %s", k.idem);
    else if (sold == -2)
        r = key_reused(w);
    else if (reply->elements >= 3) /* another request's answer, kept first */
        r = redis_key_replay(w, rq, sold, count,
                             reply->elements == 4 ? text_of(reply->element[3]) : NULL, out);
    else
        r = worker_fail(w, ST_SOLD_OUT, "%s", message);
    freeReplyObject(reply);
    return r;
}

st_result redis_key_after_refusal(struct worker *w, const struct deduct_request *rq,
                                  st_result refused, struct deduct_reply *out)
{
    char message[sizeof w->error];
    snprintf(message, sizeof message, "%s", w->error);
    if (refused == ST_SOLD_OUT)
        return keep_sold_out(w, rq, message, out);
    int found;
    st_result r = redis_key_find(w, rq, out, &found);
    if (r == ST_OK && !found)
        return worker_fail(w, refused, "%s", message);
    return r;
}

/* A request that is no sale keeps its answer in the same hash: its
 * result, `duplicate` and message beside its fingerprint. */
static st_result find_answer(struct worker *w, int product, const char *key,
                             const char *fingerprint, struct kept_answer *out, int *found)
{
    char idem[REDIS_IDEM_KEY_MAX];
    idem_key_of(idem, product, key);
    redisReply *reply;
    st_result r =
        read_kept(w, idem, (const char *const[]){"result", "duplicate", "message"}, &reply);
    if (r != ST_OK)
        return r;
    *found = 0;
    if (text_of(reply->element[0])) {
        const char *result = text_of(reply->element[1]), *message = text_of(reply->element[3]);
        const char *duplicate = text_of(reply->element[2]);
        *found = 1;
        *out = (struct kept_answer){
            .result = strcmp(text_of(reply->element[0]), fingerprint) == 0 && result
                          ? (st_result)atoi(result)
                          : ST_KEY_REUSED,
            .duplicate = duplicate && atoi(duplicate) != 0,
        };
        snprintf(out->message, sizeof out->message, "%s", message ? message : "");
    }
    redis_free_replies(&reply, 1);
    return r;
}

/* Keeps an answer where the key has none: 1, else 0. */
static struct redis_script keep_answer_script = {
    .source = "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end\n"
              "redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'result', ARGV[2],"
              " 'duplicate', ARGV[3], 'message', ARGV[4])\n"
              "redis.call('PEXPIRE', KEYS[1], ARGV[5])\n"
              "return 1\n",
};

static st_result keep_answer(struct worker *w, int product, const char *key,
                             const char *fingerprint, const struct kept_answer *a, int *kept)
{
    char idem[REDIS_IDEM_KEY_MAX], result[16], duplicate[4], ttl[24];
    idem_key_of(idem, product, key);
    snprintf(result, sizeof result, "%d", (int)a->result);
    snprintf(duplicate, sizeof duplicate, "%d", a->duplicate != 0);
    snprintf(ttl, sizeof ttl, "%lld", (long long)config.idempotency_ttl_s * 1000);
    const char *argv[] = {idem, fingerprint, result, duplicate, a->message, ttl};
    const char *const *argvs[] = {argv};
    redisReply *reply = NULL;
    st_result r = redis_eval_sales(w, &keep_answer_script, 1, 1, 6, argvs, &reply);
    if (!reply)
        return r;
    long long done;
    if (redis_reply_int(reply, &done) != 0)
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "redis: unexpected reply keeping %s", idem);
    else {
        *kept = done == 1;
        r = ST_OK;
    }
    freeReplyObject(reply);
    return r;
}

const struct key_store redis_key_store = {.find = redis_key_find,
                                          .after_refusal = redis_key_after_refusal,
                                          .find_answer = find_answer,
                                          .keep_answer = keep_answer};
