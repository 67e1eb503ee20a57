-- stockd schema. Runs unchanged on MariaDB 10.11 and MySQL 8; safe to apply twice.
--
-- stock    one row per product: the stock now, what reset set it to, and the
--          columns the optimistic and fenced strategies compare against.
-- orders   the ledger: one row per acknowledged sale, inserted in the same
--          transaction as the deduction wherever the strategy has one.
-- locks    the table lock of the mysql-lock strategy: a unique key is the lock.

CREATE TABLE IF NOT EXISTS stock (
    product_id INT NOT NULL PRIMARY KEY,
    count      BIGINT NOT NULL,             -- signed: an oversold stock shows below zero
    initial    BIGINT NOT NULL,
    version    BIGINT NOT NULL DEFAULT 0,   -- cas: bumped by every write
    fence      BIGINT NOT NULL DEFAULT 0    -- fenced: newest fencing token seen
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS orders (
    id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id INT NOT NULL,
    strategy   VARCHAR(32) NOT NULL,
    qty        INT NOT NULL,
    created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY orders_by_product (product_id)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS locks (
    name       VARCHAR(64) NOT NULL PRIMARY KEY,
    owner      VARCHAR(64) NOT NULL,
    expires_at TIMESTAMP(6) NOT NULL
) ENGINE = InnoDB;
