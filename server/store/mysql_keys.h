/*
 * mysql_keys.h - Idempotency-Keys in the mysql store: a row of
 * `idempotency` per key, with what its request asked (the fingerprint) and
 * the answer it was given.
 *
 * A sale's key row is inserted inside the sale's transaction, after its
 * ledger row and before its COMMIT (sale_commit()): the key exists if and
 * only if the sale does. So a retry after `outcome_unknown` - a COMMIT
 * sent and its reply lost - finds the row (the sale happened: its 200
 * again) or not (nothing happened: it runs anew), and two requests with
 * one key, on any instances, apply one sale: the second's insert waits on
 * the first's uncommitted row and then finds it taken. A refusal changed
 * nothing, so its row is inserted on its own, after it.
 */
#ifndef STOCKD_MYSQL_KEYS_H
#define STOCKD_MYSQL_KEYS_H

#include "core/result.h"
#include "store/store.h"

struct worker;

/* Looks rq->key up: *found 0 when the store has no answer for it; else
 * *found 1 and the kept answer again (key_replay()), or ST_KEY_REUSED when
 * the key was sent with another fingerprint. ST_IN_PROGRESS, never ST_BUSY,
 * when the read met contention: the key's outcome is not known here yet. */
st_result mysql_key_find(struct worker *w, const struct deduct_request *rq,
                         struct deduct_reply *out, int *found);

/* Inserts rq->key's row with `answer` (ST_OK, ST_SOLD_OUT or ST_BUSY),
 * the `remaining` it showed and its `message`; *kept 0 when the key was
 * there already. In an open transaction, it is kept with what the
 * transaction does (sql-batch keeps every sale's of a batch so). */
st_result mysql_key_keep(struct worker *w, const struct deduct_request *rq, st_result answer,
                         long long remaining, const char *message, int *kept);

/* Inside the sale's open transaction: rq->key's row, a 200 that left
 * `left`. ST_IN_PROGRESS when another request recorded the key first. */
st_result mysql_key_keep_sale(struct worker *w, const struct deduct_request *rq, long long left);

/* After refusal `refused` (ST_SOLD_OUT or ST_BUSY, its message in w and
 * what it saw in *out): rq->key's row with that answer. When another
 * request recorded the key meanwhile, its answer instead. ST_IN_PROGRESS
 * (key_taken()) is answered as it is: the store has the other request's
 * row, for the retry; and so is a keep or a look that met contention (the
 * key's other request may have sold): never the refusal then. */
st_result mysql_key_keep_refusal(struct worker *w, const struct deduct_request *rq,
                                 st_result refused, struct deduct_reply *out);

/* The two above, as store_mysql offers them (store.h). */
extern const struct key_store mysql_key_store;

/* Deletes a batch of keys kept longer than --idempotency-ttl-s: the
 * mysql sweeper's work beside its orders (a key past its time is a new
 * request again, as on Redis, where the key's own expiry does it). */
st_result mysql_keys_expire(struct worker *w);

#endif
