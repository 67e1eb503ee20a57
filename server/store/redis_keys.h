/*
 * redis_keys.h - Idempotency-Keys in the redis store: a hash
 * idem:{P}:<key> under the product's hash tag, holding what its request
 * asked (the fingerprint) and the answer it was given (`sold` 1 or 0 for
 * sold_out, the `count` it left or found, a hold's `order`), kept
 * --idempotency-ttl-s by Redis's own expiry.
 *
 * lua keeps it inside its keyed sale script (redis_stock.h). The rows whose
 * sale is the store's MULTI (watch, redis-nolock: redis_sale_exec()) keep
 * it in that MULTI, and WATCH it with the stock: the read sees the key
 * absent, and the EXEC applies only if it is still absent, so the key
 * exists if and only if its sale does, and two requests with one key, on
 * any instances, apply one sale. A refusal changed nothing: it is kept on
 * its own after it, by a script that keeps it only where no answer is.
 */
#ifndef STOCKD_REDIS_KEYS_H
#define STOCKD_REDIS_KEYS_H

#include "backend/redis.h"
#include "core/result.h"
#include "store/store.h"

/* idem:{P}:<key> */
#define REDIS_IDEM_KEY_MAX (REDIS_KEY_MAX + IDEMPOTENCY_KEY_MAX)
void redis_idem_key(char out[REDIS_IDEM_KEY_MAX], const struct deduct_request *rq);

/* The Lua that opens every script keeping a key `idem` for fingerprint
 * `fp` (two Lua expressions): a key kept already answers {sold, count, 1,
 * order} at once, or {-2, 0} when kept with another fingerprint. */
#define REDIS_KEY_LOOKUP(idem, fp)                                                                 \
    "local kept = redis.call('HMGET', " idem ", 'fingerprint', 'sold', 'count', 'order')\n"        \
    "if kept[1] then\n"                                                                            \
    "  if kept[1] ~= " fp " then return {-2, 0} end\n"                                             \
    "  return {tonumber(kept[2]), tonumber(kept[3]), 1, kept[4]}\n"                                \
    "end\n"

/* The answer kept for rq's key (`sold` 1 or 0, the `count`, a hold's
 * `order` or NULL) given again, marked replayed; a hold's order id into
 * out->order. */
st_result redis_key_replay(struct worker *w, const struct deduct_request *rq, long long sold,
                           long long count, const char *order, struct deduct_reply *out);

/* Looks rq->key up: *found 0 when Redis has no answer for it; else
 * *found 1 and the kept answer again, or ST_KEY_REUSED. */
st_result redis_key_find(struct worker *w, const struct deduct_request *rq,
                         struct deduct_reply *out, int *found);

/* The two commands a sale's MULTI carries to keep rq's key with its
 * answer, a 200 that left `left` (redis_sale_exec()). */
struct redis_key_keep {
    char idem[REDIS_IDEM_KEY_MAX], fingerprint[KEY_FINGERPRINT_MAX], left[24], ttl[24];
    const char *hset[10], *pexpire[3];
    int hset_argc;
};
void redis_key_keep_of(struct redis_key_keep *k, const struct deduct_request *rq, long long left);

/* After refusal `refused` of rq's sale (its message in w, what it saw in
 * *out): a sold_out kept where the key has no answer yet; else, and after
 * any other refusal, the key's kept answer when it has one (a request
 * with the same key sold meanwhile), or the refusal as it was. */
st_result redis_key_after_refusal(struct worker *w, const struct deduct_request *rq,
                                  st_result refused, struct deduct_reply *out);

/* The two above, as store_redis offers them (store.h). */
extern const struct key_store redis_key_store;

#endif
