/*
 * sql.c - the statement texts. They run unchanged on MariaDB 10.11 and
 * MySQL 8 (no VALUES() in ON DUPLICATE KEY UPDATE, no RETURNING).
 */
#include "backend/sql.h"

#include <assert.h>

static const char *const texts[SQL_COUNT] = {
    [SQL_READ_STOCK] = "SELECT count, version, fence, epoch FROM stock WHERE product_id = ?",
    [SQL_READ_STOCK_FOR_UPDATE] =
        "SELECT count, version, fence, epoch FROM stock WHERE product_id = ? FOR UPDATE",
    [SQL_WRITE_COUNT] = "UPDATE stock SET count = ?, version = version + 1"
                        " WHERE product_id = ? AND epoch = ?",
    [SQL_WRITE_IF_VERSION] = "UPDATE stock SET count = ?, version = version + 1"
                             " WHERE product_id = ? AND version = ?",
    [SQL_WRITE_IF_FENCE] = "UPDATE stock SET count = ?, version = version + 1"
                           " WHERE product_id = ? AND fence = ? AND epoch = ?",
    [SQL_CLAIM_FENCE] = "UPDATE stock SET fence = ? WHERE product_id = ? AND fence < ?",
    [SQL_DEDUCT_IF_ENOUGH] = "UPDATE stock SET count = count - ?, version = version + 1"
                             " WHERE product_id = ? AND count >= ?",
    [SQL_INSERT_ORDER] = "INSERT INTO orders (product_id, strategy, qty) VALUES (?, ?, ?)",
    /* Any number of ledger rows in one statement, prepared once: the qtys
     * travel as a JSON array that JSON_TABLE turns into rows. */
    [SQL_INSERT_ORDERS] = "INSERT INTO orders (product_id, strategy, qty)"
                          " SELECT ?, ?, sold.qty FROM JSON_TABLE(?, '$[*]'"
                          " COLUMNS (qty INT PATH '$')) AS sold",
    [SQL_INSERT_SETTLED] = "INSERT INTO orders (product_id, strategy, qty, order_id)"
                           " VALUES (?, 'lua-stream', ?, ?)",
    [SQL_INSERT_SETTLED_MANY] = "INSERT IGNORE INTO orders (product_id, strategy, qty, order_id)"
                                " SELECT ?, 'lua-stream', o.qty, o.id FROM JSON_TABLE(?, '$[*]'"
                                " COLUMNS (id VARCHAR(40) PATH '$.o', qty INT PATH '$.q')) AS o",
    [SQL_SETTLE_STOCK] = "UPDATE stock SET count = count - ?, version = version + 1"
                         " WHERE product_id = ?",
    [SQL_ACCOUNT] = "SELECT s.count, s.initial, CAST(COALESCE(SUM(o.qty), 0) AS SIGNED),"
                    " COUNT(o.id) FROM stock s LEFT JOIN orders o ON o.product_id = s.product_id"
                    " WHERE s.product_id = ? GROUP BY s.product_id, s.count, s.initial",
    /* version and epoch move on, never back: a write prepared before the
     * reset (a version read, an epoch read) can never match after it. The
     * fence is left alone for the same reason: tokens only grow. */
    [SQL_RESET_STOCK] = "INSERT INTO stock (product_id, count, initial) VALUES (?, ?, ?)"
                        " ON DUPLICATE KEY UPDATE count = ?, initial = ?,"
                        " version = version + 1, epoch = epoch + 1",
    [SQL_RESET_ORDERS] = "DELETE FROM orders WHERE product_id = ?",
    [SQL_LOCK_ROW_INSERT] = "INSERT INTO locks (name, owner, expires_at)"
                            " VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)",
    [SQL_LOCK_ROW_EXPIRE] = "DELETE FROM locks WHERE name = ? AND expires_at < NOW(6)",
    [SQL_LOCK_ROW_DELETE] = "DELETE FROM locks WHERE name = ? AND owner = ?",
    [SQL_LOCK_ROW_CLEAR] = "DELETE FROM locks WHERE name = ?",
    [SQL_GET_LOCK] = "SELECT GET_LOCK(CONCAT(DATABASE(), '.', ?), ? / 1000)",
    [SQL_RELEASE_LOCK] = "SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.', ?))",
    /* An order's deadline and every decision about it read NOW(6): one
     * clock, the store's, whatever the clocks of the stockd hosts say. */
    [SQL_INSERT_HOLD] =
        "INSERT INTO orders (product_id, strategy, qty, order_id, state, expires_at,"
        " expiry) VALUES (?, ?, ?, ?, 'held', NOW(6) + INTERVAL ? MICROSECOND, ?)",
    [SQL_ORDER_DEADLINE] = "SELECT CAST(FLOOR(UNIX_TIMESTAMP(expires_at) * 1000) AS SIGNED)"
                           " FROM orders WHERE order_id = ? AND state IS NOT NULL",
    [SQL_ORDER_PAY] = "UPDATE orders SET state = 'paid', payment = ?"
                      " WHERE order_id = ? AND state = 'held' AND expires_at > NOW(6)",
    [SQL_ORDER_READ] = "SELECT FIELD(state, 'held', 'paid', 'expired', 'cancelled'),"
                       " expires_at <= NOW(6), COALESCE(payment = ?, 0) FROM orders"
                       " WHERE order_id = ? AND state IS NOT NULL FOR UPDATE",
    [SQL_PAYMENT_RECORD] = "INSERT IGNORE INTO payments (order_id, product_id, payment_id, outcome)"
                           " VALUES (?, ?, ?, ?)",
    [SQL_RETURN_CLAIM] = "UPDATE orders SET state = ? WHERE order_id = ? AND state = 'held'",
    [SQL_RETURN_RECORD] = "INSERT INTO order_returns (order_id, product_id, qty, by_what)"
                          " SELECT order_id, product_id, qty, ? FROM orders WHERE order_id = ?",
    [SQL_SWEEP_DUE] = "SELECT COALESCE(JSON_ARRAYAGG(JSON_OBJECT('o', due.order_id,"
                      " 'p', due.product_id, 's', due.strategy, 'q', due.qty)), JSON_ARRAY()) FROM"
                      " (SELECT order_id, product_id, strategy, qty FROM orders"
                      " WHERE state = 'held' AND expires_at <= NOW(6)"
                      " ORDER BY expires_at LIMIT 100) AS due",
    [SQL_ORDER_JSON] =
        "SELECT JSON_OBJECT('state', o.state, 'strategy', o.strategy, 'product', o.product_id,"
        " 'qty', o.qty, 'expiry', o.expiry,"
        " 'expires_at_ms', CAST(FLOOR(UNIX_TIMESTAMP(o.expires_at) * 1000) AS SIGNED),"
        " 'payment', o.payment,"
        " 'returned', (SELECT COUNT(*) FROM order_returns r WHERE r.order_id = o.order_id),"
        " 'returned_at_ms', (SELECT CAST(FLOOR(UNIX_TIMESTAMP(MIN(r.returned_at)) * 1000) AS"
        " SIGNED) FROM order_returns r WHERE r.order_id = o.order_id),"
        " 'refunds_due', (SELECT COUNT(*) FROM payments p WHERE p.order_id = o.order_id"
        " AND p.outcome = 'refund_due'))"
        " FROM orders o WHERE o.order_id = ? AND o.state IS NOT NULL",
    [SQL_ORDER_FACTS] =
        "SELECT CONCAT_WS(' ', FIELD(state, 'held', 'paid', 'expired', 'cancelled'),"
        " qty, strategy) FROM orders WHERE order_id = ? AND state IS NOT NULL",
    [SQL_ORDERS_ACCOUNT] =
        "SELECT CAST(COALESCE(SUM(IF(o.state = 'held', o.qty, 0)), 0) AS SIGNED),"
        " CAST(COALESCE(SUM(IF(o.state = 'paid', o.qty, 0)), 0) AS SIGNED),"
        " CAST(COALESCE(SUM(IF(o.state = 'held' AND o.expires_at + INTERVAL ? MICROSECOND"
        " <= NOW(6), o.qty, 0)), 0) AS SIGNED),"
        " CAST(COALESCE(SUM(o.state = 'paid' AND EXISTS (SELECT 1 FROM order_returns r"
        " WHERE r.order_id = o.order_id)), 0) AS SIGNED),"
        " (SELECT CAST(COALESCE(SUM(qty), 0) AS SIGNED) FROM order_returns WHERE product_id = ?),"
        " (SELECT COUNT(*) FROM payments WHERE product_id = ? AND outcome = 'refund_due'),"
        " (SELECT COUNT(*) FROM (SELECT order_id FROM order_returns WHERE product_id = ?"
        " GROUP BY order_id HAVING COUNT(*) > 1) AS twice)"
        " FROM orders o WHERE o.product_id = ?",
    [SQL_RESET_RETURNS] = "DELETE FROM order_returns WHERE product_id = ?",
    [SQL_RESET_PAYMENTS] = "DELETE FROM payments WHERE product_id = ?",
    [SQL_KEY_INSERT] = "INSERT INTO idempotency (k, fingerprint, result, remaining, message,"
                       " order_id) VALUES (?, ?, ?, NULLIF(?, -9223372036854775808), ?, ?)",
    [SQL_KEY_READ] = "SELECT JSON_OBJECT('same', fingerprint = ?, 'result', result,"
                     " 'remaining', remaining, 'message', message, 'order', order_id)"
                     " FROM idempotency WHERE k = ?",
    [SQL_KEY_EXPIRE] = "DELETE FROM idempotency WHERE created_at < NOW(6) - INTERVAL ? SECOND"
                       " LIMIT 1000",
};

const char *sql_text(enum sql_statement s)
{
    assert(s < SQL_COUNT && texts[s]);
    return texts[s];
}
