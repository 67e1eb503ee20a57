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
};

const char *sql_text(enum sql_statement s)
{
    assert(s < SQL_COUNT && texts[s]);
    return texts[s];
}
