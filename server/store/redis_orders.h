/*
 * redis_orders.h - orders in the redis store (store/orders.h), every key of
 * one product's orders under its hash tag {P}, so that each transition is
 * one script on one slot (it runs on a Redis Cluster too):
 *
 *   order:{P}:<ID>     hash: qty, strategy, state, deadline_ms, expiry,
 *                      payment, returned (times), returned_at_ms,
 *                      refunds_due
 *   payments:{P}:<ID>  hash: payment id -> captured | refund_due (HSETNX:
 *                      a repeated callback records nothing new)
 *   holds:{P}          zset: the held orders by deadline (the accounting's
 *                      stranded units)
 *   deadlines:{P}      zset: the held orders redis-zset returns
 *   hold:{P}:<ID>      a key with the order's TTL (PX): redis-keyspace's
 *   order-ids:{P}      set: every order of the product, for its reset
 *   ledger:{P}         held, paid, returned, refunds_due, returned_twice,
 *                      paid_and_returned beside the sales' sold and orders
 *   order-products     set: the products that ever held an order, the
 *                      sweepers' list (no tag: one Redis; SADD before the
 *                      hold, so that no hold is ever out of the list)
 *
 * The deadline is the script's own TIME: Redis's clock, never stockd's.
 */
#ifndef STOCKD_REDIS_ORDERS_H
#define STOCKD_REDIS_ORDERS_H

#include "backend/redis.h"
#include "core/result.h"
#include "store/orders.h"
#include "store/store.h"

struct worker;

extern const struct order_store redis_order_store;

#define ORDER_PRODUCTS_KEY "order-products"

/* A hold's keys, and its arguments as the hold's scripts take them. */
struct redis_hold {
    char order[REDIS_KEY_MAX], deadlines[REDIS_KEY_MAX], holds[REDIS_KEY_MAX], ids[REDIS_KEY_MAX],
        hold_key[REDIS_KEY_MAX];
    char ttl[16];
};
void redis_hold_of(struct redis_hold *h, const struct deduct_request *rq);

/* The Lua function `hold(ledger, order, deadlines, holds, ids, hold_key,
 * qty, id, ttl, strategy, expiry)` that writes a held order, for a sale
 * script to call after its deduction. */
#define REDIS_HOLD_FUNCTION                                                                        \
    "local function hold(ledger, order, deadlines, holds, ids, hold_key, qty, id, ttl, strategy,"  \
    " expiry)\n"                                                                                   \
    "  local t = redis.call('TIME')\n"                                                             \
    "  local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl\n"         \
    "  redis.call('HSET', order, 'qty', qty, 'strategy', strategy, 'state', 'held',"               \
    " 'deadline_ms', deadline, 'expiry', expiry, 'returned', 0, 'refunds_due', 0)\n"               \
    "  redis.call('ZADD', holds, deadline, id)\n"                                                  \
    "  redis.call('SADD', ids, id)\n"                                                              \
    "  if expiry == 'redis-keyspace' then redis.call('SET', hold_key, 1, 'PX', ttl)\n"             \
    "  else redis.call('ZADD', deadlines, deadline, id) end\n"                                     \
    "  redis.call('HINCRBY', ledger, 'held', qty)\n"                                               \
    "end\n"

/* The Lua function now_ms(): Redis's clock, the one an order's every
 * decision reads. */
#define REDIS_NOW_FUNCTION                                                                         \
    "local function now_ms()\n"                                                                    \
    "  local t = redis.call('TIME')\n"                                                             \
    "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                         \
    "end\n"

/* The Lua functions every return runs: now_ms(); and give_back(order, ledger, stock, deadlines,
 * holds, hold_key, id, state, now, left), a held order's return - its state, its return counted (a
 * second would show in returned_twice), the ledger, its deadlines gone, and
 * its units back in the stock: INCRBY, or, given `left`, SET to the count
 * the caller computed from its own earlier read (the MULTI of a strategy
 * whose sale is a read-then-write: its return is one too). */
#define REDIS_GIVE_BACK_FUNCTIONS                                                                  \
    REDIS_NOW_FUNCTION                                                                             \
    "local function give_back(order, ledger, stock, deadlines, holds, hold_key, id, state, now,"   \
    " left)\n"                                                                                     \
    "  local qty = tonumber(redis.call('HGET', order, 'qty'))\n"                                   \
    "  redis.call('HSET', order, 'state', state)\n"                                                \
    "  if redis.call('HINCRBY', order, 'returned', 1) == 2 then\n"                                 \
    "    redis.call('HINCRBY', ledger, 'returned_twice', 1) end\n"                                 \
    "  redis.call('HSETNX', order, 'returned_at_ms', now)\n"                                       \
    "  if left then redis.call('SET', stock, left) else redis.call('INCRBY', stock, qty) end\n"    \
    "  redis.call('HINCRBY', ledger, 'returned', qty)\n"                                           \
    "  redis.call('HINCRBY', ledger, 'held', -qty)\n"                                              \
    "  redis.call('ZREM', deadlines, id)\n"                                                        \
    "  redis.call('ZREM', holds, id)\n"                                                            \
    "  redis.call('DEL', hold_key)\n"                                                              \
    "end\n"

/* A return's order keys (rq->give_back.order's), in a struct redis_hold:
 * order, deadlines, holds and hold key. */
void redis_give_back_of(struct redis_hold *h, const struct deduct_request *rq);

/* Writes rq's return inside a MULTI with the EVAL a MULTI carries: the
 * order's state change if it is still held, its units back by SET to
 * `left`, and 1; else 0 and nothing (argv[]: at most REDIS_HOLD_ARGC). */
int redis_give_back_command(const char **argv, const struct redis_hold *h,
                            const struct deduct_request *rq, const char *ledger, const char *stock,
                            const char *left);

/* Adds rq's product to the sweepers' list: before its hold is written. */
st_result redis_hold_indexed(struct worker *w, const struct deduct_request *rq);

/* Writes rq's held order with the EVAL a MULTI carries (its command's
 * words into argv[]: at most REDIS_HOLD_ARGC). */
#define REDIS_HOLD_ARGC 16
int redis_hold_command(const char **argv, const struct redis_hold *h,
                       const struct deduct_request *rq, const char *ledger, const char *qty);

/* The product's order figures into `a` (a->holds set). */
st_result redis_orders_account(struct worker *w, int product, struct store_account *a);

/* Deletes the product's orders, payments, holds and deadlines. */
st_result redis_orders_reset(struct worker *w, int product);

/* One redis-zset sweep (`e`) of every product on the list: the orders due
 * by Redis's TIME, each returned through its strategy; *returned how
 * many. */
struct expiry;
st_result redis_orders_sweep(struct worker *w, const struct expiry *e, int *returned);

#endif
