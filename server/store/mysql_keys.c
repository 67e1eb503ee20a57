/*
 * mysql_keys.c - the `idempotency` table's rows: found, and kept with a
 * sale or a refusal (mysql_keys.h says when each is written).
 */
#include "store/mysql_keys.h"

#include "backend/mysql.h"
#include "core/config.h"
#include "core/worker.h"

#include <jansson.h>
#include <stdio.h>

/* A kept row as SQL_KEY_READ renders it: a message (256 characters, each
 * at most 6 once escaped) and a few numbers. */
#define KEPT_TEXT_MAX 2048

/* The kept answer `text` again, or ST_KEY_REUSED. */
static st_result answer_kept(struct worker *w, const char *text, struct deduct_reply *out)
{
    json_t *row = json_loads(text, 0, NULL);
    json_t *remaining = json_object_get(row, "remaining");
    json_t *message = json_object_get(row, "message");
    json_t *result = json_object_get(row, "result");
    json_t *same = json_object_get(row, "same"); /* a boolean or 1/0, as the server renders it */
    json_t *order = json_object_get(row, "order");
    st_result r;
    if (!json_is_integer(result) || !json_is_string(message))
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: an idempotency row reads oddly: %.200s",
                        text);
    else if (!json_is_true(same) && !(json_is_integer(same) && json_integer_value(same)))
        r = key_reused(w);
    else {
        snprintf(out->order, sizeof out->order, "%s",
                 json_is_string(order) ? json_string_value(order) : "");
        r = key_replay(w, (st_result)json_integer_value(result),
                       json_is_integer(remaining) ? json_integer_value(remaining)
                                                  : REMAINING_UNKNOWN,
                       json_string_value(message), out);
    }
    json_decref(row);
    return r;
}

/* ST_BUSY while a key is read or kept - a lock wait on another request's
 * uncommitted row of the same key, a Galera node that could not catch up
 * within the wait (wsrep_sync_wait), or a certification conflict with
 * another node's commit of that key - says nothing of the purchase: the
 * key's first request may have sold. Answering it as the final `busy`
 * would tell a buyer "not sold" while the key has a sale (or let a later
 * try sell what this answer refused). ST_IN_PROGRESS is the answer that
 * is true: the key's outcome is not known here yet; a retry learns it. */
static st_result key_contended(struct worker *w, st_result r)
{
    if (r != ST_BUSY)
        return r;
    char why[sizeof w->error];
    snprintf(why, sizeof why, "%s", w->error);
    return worker_fail(w, ST_IN_PROGRESS,
                       "this Idempotency-Key's row could not be read or kept for contention "
                       "(%.200s); retry for its answer",
                       why);
}

st_result mysql_key_find(struct worker *w, const struct deduct_request *rq,
                         struct deduct_reply *out, int *found)
{
    char fingerprint[KEY_FINGERPRINT_MAX], text[KEPT_TEXT_MAX];
    key_fingerprint(fingerprint, rq);
    st_result r = sql_exec_text(w, SQL_KEY_READ, SQL_ARGS(SQL_S(fingerprint), SQL_S(rq->key)), text,
                                sizeof text, found);
    return r == ST_OK && *found ? answer_kept(w, text, out) : key_contended(w, r);
}

st_result mysql_key_keep(struct worker *w, const struct deduct_request *rq, st_result answer,
                         long long remaining, const char *message, int *kept)
{
    char fingerprint[KEY_FINGERPRINT_MAX];
    key_fingerprint(fingerprint, rq);
    return sql_insert_unique(w, SQL_KEY_INSERT,
                             SQL_ARGS(SQL_S(rq->key), SQL_S(fingerprint), SQL_I(answer),
                                      SQL_I(remaining), SQL_S(message),
                                      SQL_S(answer == ST_OK ? rq->hold.order : "")),
                             kept);
}

st_result mysql_key_keep_sale(struct worker *w, const struct deduct_request *rq, long long left)
{
    int kept;
    st_result r = mysql_key_keep(w, rq, ST_OK, left, "", &kept);
    return r == ST_OK && !kept ? key_taken(w) : r;
}

st_result mysql_key_keep_refusal(struct worker *w, const struct deduct_request *rq,
                                 st_result refused, struct deduct_reply *out)
{
    if (refused == ST_IN_PROGRESS) /* key_taken(): its row waited for, then found */
        return refused;
    char message[sizeof w->error];
    snprintf(message, sizeof message, "%s", w->error);
    int kept, found;
    st_result r = mysql_key_keep(w, rq, refused, out->remaining, message, &kept);
    if (r == ST_OK && kept)
        return worker_fail(w, refused, "%s", message);
    if (r == ST_OK)
        r = mysql_key_find(w, rq, out, &found);
    if (r == ST_OK && !found) /* kept and swept in between: ours stands */
        return worker_fail(w, refused, "%s", message);
    return key_contended(w, r);
}

/* A request that is no sale keeps its answer in the same row: its result,
 * `duplicate` where a sale keeps `remaining`, its message, no order. */
static st_result find_answer(struct worker *w, int product, const char *key,
                             const char *fingerprint, struct kept_answer *out, int *found)
{
    (void)product; /* one table of keys for every product */
    char text[KEPT_TEXT_MAX];
    st_result r = sql_exec_text(w, SQL_KEY_READ, SQL_ARGS(SQL_S(fingerprint), SQL_S(key)), text,
                                sizeof text, found);
    if (r != ST_OK || !*found)
        return r;
    json_t *row = json_loads(text, 0, NULL);
    json_t *same = json_object_get(row, "same");
    json_t *result = json_object_get(row, "result");
    json_t *message = json_object_get(row, "message");
    if (!json_is_integer(result) || !json_is_string(message))
        r = worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: an idempotency row reads oddly: %.200s",
                        text);
    *out = (struct kept_answer){
        .result = json_is_true(same) || (json_is_integer(same) && json_integer_value(same))
                      ? (st_result)json_integer_value(result)
                      : ST_KEY_REUSED,
        .duplicate = json_integer_value(json_object_get(row, "remaining")) != 0,
    };
    snprintf(out->message, sizeof out->message, "%s",
             json_is_string(message) ? json_string_value(message) : "");
    json_decref(row);
    return r;
}

static st_result keep_answer(struct worker *w, int product, const char *key,
                             const char *fingerprint, const struct kept_answer *a, int *kept)
{
    (void)product;
    return sql_insert_unique(w, SQL_KEY_INSERT,
                             SQL_ARGS(SQL_S(key), SQL_S(fingerprint), SQL_I(a->result),
                                      SQL_I(a->duplicate), SQL_S(a->message), SQL_S("")),
                             kept);
}

const struct key_store mysql_key_store = {.find = mysql_key_find,
                                          .after_refusal = mysql_key_keep_refusal,
                                          .find_answer = find_answer,
                                          .keep_answer = keep_answer};

st_result mysql_keys_expire(struct worker *w)
{
    return sql_exec(w, SQL_KEY_EXPIRE, SQL_ARGS(SQL_I(config.idempotency_ttl_s)), NULL);
}
