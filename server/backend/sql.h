/*
 * sql.h - every SQL statement stockd runs, named once.
 *
 * Each is prepared once per worker connection and re-executed with new
 * parameters, so the hot path sends only the statement id and the values.
 * All result columns are integers (BIGINT), which keeps the binding code to
 * one shape - except the statements that answer one text (an order as the
 * server renders it, or its facts, a kept key, the ids a sweep returns),
 * read with sql_exec_text() (mysql.h).
 */
#ifndef STOCKD_SQL_H
#define STOCKD_SQL_H

enum sql_statement {
    SQL_READ_STOCK,            /* (product) -> count, version, fence, epoch     */
    SQL_READ_STOCK_FOR_UPDATE, /* the same, locking the row until commit        */
    SQL_WRITE_COUNT,           /* (count, product, epoch): write unless reset   */
    SQL_WRITE_IF_VERSION,      /* (count, product, version): compare-and-set    */
    SQL_WRITE_IF_FENCE,        /* (count, product, token, epoch): fenced write  */
    SQL_CLAIM_FENCE,           /* (token, product, token): newer token only     */
    SQL_DEDUCT_IF_ENOUGH,      /* (qty, product, qty): the one-statement sale   */
    SQL_INSERT_ORDER,          /* (product, strategy, qty): the ledger          */
    SQL_INSERT_ORDERS,         /* (product, strategy, "[qty,...]"): one row each */
    SQL_INSERT_SETTLED,        /* (product, qty, order id): unique by order id  */
    SQL_INSERT_SETTLED_MANY,   /* (product, '[{"o":id,"q":qty},...]'): IGNOREs taken ids */
    SQL_SETTLE_STOCK,          /* (qty, product): what a new settled order sells */
    SQL_ACCOUNT,               /* (product) -> count, initial, sold, orders     */
    SQL_RESET_STOCK,           /* (product, count, count, count, count)         */
    SQL_RESET_ORDERS,          /* (product)                                     */
    SQL_LOCK_ROW_INSERT,       /* (name, owner, ttl us): take the table lock    */
    SQL_LOCK_ROW_EXPIRE,       /* (name): delete the lock row if expired        */
    SQL_LOCK_ROW_DELETE,       /* (name, owner): release our lock row           */
    SQL_LOCK_ROW_CLEAR,        /* (name): reset: whoever holds it               */
    SQL_GET_LOCK,              /* (name, wait ms) -> 1 taken, 0 timed out       */
    SQL_RELEASE_LOCK,          /* (name) -> 1 released, 0 not ours, NULL none   */
    /* Orders (store/mysql_orders.c): a hold is a ledger row with an order. */
    SQL_INSERT_HOLD,    /* (product, strategy, qty, order id, ttl us, expiry)   */
    SQL_ORDER_DEADLINE, /* (order id) -> expires_at in ms since the epoch     */
    SQL_ORDER_PAY,      /* (payment, order id): held and before its deadline  */
    SQL_ORDER_READ,     /* (payment, order id) -> state (ORDER_STATE_*),
                           past its deadline, paid with that payment; locks it */
    SQL_PAYMENT_RECORD, /* (order id, product, payment, outcome): once per payment */
    SQL_RETURN_CLAIM,   /* (state, order id): held -> state, or matches nothing */
    SQL_RETURN_RECORD,  /* (by what, order id): one order_returns row per return */
    SQL_SWEEP_DUE,      /* () -> one JSON text: held orders past their deadline,
                           the oldest hundred: [{o: id, p: product, s: strategy,
                           q: qty}, ...]                                       */
    SQL_ORDER_JSON,     /* (order id) -> the order as one JSON text           */
    SQL_ORDER_FACTS,    /* (order id) -> one text: "state qty strategy", the
                           state as SQL_ORDER_READ's                          */
    SQL_ORDERS_ACCOUNT, /* (lag us, product x4) -> held, paid, stranded,
                           paid and returned, returned, refunds due,
                           returned twice                                     */
    SQL_RESET_RETURNS,  /* (product)                                          */
    SQL_RESET_PAYMENTS, /* (product)                                          */
    /* Idempotency keys (store/mysql_keys.c). */
    SQL_KEY_INSERT, /* (key, fingerprint, result, remaining or LLONG_MIN, message,
                       order id or empty)                                     */
    SQL_KEY_READ,   /* (fingerprint, key) -> the kept answer as one JSON text     */
    SQL_KEY_EXPIRE, /* (ttl s): a batch of keys kept longer than that, deleted     */
    SQL_COUNT
};

/* The text of a statement, for preparing and for error messages. */
const char *sql_text(enum sql_statement s);

#endif
