-- stockd schema. Runs unchanged on MariaDB 10.11 and MySQL 8; safe to apply twice.
--
-- stock    one row per product: the stock now, what reset set it to, and the
--          columns the optimistic and fenced strategies compare against. None of
--          version, fence and epoch ever goes back, so that a write prepared
--          before a reset can never apply after it.
-- orders   the ledger: one row per acknowledged sale, inserted in the same
--          transaction as the deduction wherever the strategy has one. A sale
--          that settles later (lua-stream) carries the order id stockd gave it,
--          a unique key: a replayed stream entry inserts nothing.
--          A hold (POST /orders/{strategy}) is a ledger row with an order on it:
--          its state, its deadline (the server's clock, NOW(6)), the expiry
--          mechanism that returns it and the payment that confirmed it. A plain
--          sale keeps state NULL: a sale, not an order.
-- order_returns  one row per return of an order's units (expiry or cancel). No
--          unique key on purpose: a double return is a second row, counted by
--          GET /stock/{product}, not hidden by the schema.
-- payments one row per payment id an order saw: captured, or refund due (paid
--          too late, or a second payment). Unique per order and payment id, so
--          a repeated callback records nothing new.
-- locks    the table lock of the mysql-lock strategy: a unique key is the lock.
-- idempotency  one row per Idempotency-Key a sale was sent with: what the
--          request asked (its fingerprint) and the answer it was given. A sale's
--          row is inserted in the sale's own transaction, so the key exists if
--          and only if the sale does; a refusal's (sold_out, busy) on its own,
--          as it changed nothing. A hold's keeps its order id. Kept
--          --idempotency-ttl-s, then swept.

CREATE TABLE IF NOT EXISTS stock (
    product_id INT NOT NULL PRIMARY KEY,
    count      BIGINT NOT NULL,             -- signed: an oversold stock shows below zero
    initial    BIGINT NOT NULL,
    version    BIGINT NOT NULL DEFAULT 0,   -- cas: bumped by every write and every reset
    fence      BIGINT NOT NULL DEFAULT 0,   -- fenced: newest fencing token seen
    epoch      BIGINT NOT NULL DEFAULT 0    -- bumped by every reset; blind writes check it
) ENGINE = InnoDB;

-- A database made before the epoch column existed gets it here (MySQL 8 has no
-- ADD COLUMN IF NOT EXISTS, so the statement is chosen from information_schema).
SET @add_epoch = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE stock ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0', 'DO 0')
    FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'stock' AND column_name = 'epoch');
PREPARE add_epoch FROM @add_epoch;
EXECUTE add_epoch;
DEALLOCATE PREPARE add_epoch;

CREATE TABLE IF NOT EXISTS orders (
    id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id INT NOT NULL,
    strategy   VARCHAR(32) NOT NULL,
    qty        INT NOT NULL,
    created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    order_id   VARCHAR(40) NULL,
    KEY orders_by_product (product_id),
    UNIQUE KEY orders_by_order_id (order_id)
) ENGINE = InnoDB;

-- A database made before the order id existed gets it here, the same way.
SET @add_order_id = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE orders ADD COLUMN order_id VARCHAR(40) NULL, ADD UNIQUE KEY orders_by_order_id (order_id)',
    'DO 0')
    FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'orders' AND column_name = 'order_id');
PREPARE add_order_id FROM @add_order_id;
EXECUTE add_order_id;
DEALLOCATE PREPARE add_order_id;

-- A database made before orders could be held gets their columns here, the same way.
SET @add_hold = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE orders ADD COLUMN state ENUM(''held'', ''paid'', ''expired'', ''cancelled'') NULL,
     ADD COLUMN expires_at TIMESTAMP(6) NULL, ADD COLUMN expiry VARCHAR(32) NULL,
     ADD COLUMN payment VARCHAR(64) NULL, ADD KEY orders_by_deadline (state, expires_at)',
    'DO 0')
    FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'orders' AND column_name = 'state');
PREPARE add_hold FROM @add_hold;
EXECUTE add_hold;
DEALLOCATE PREPARE add_hold;

CREATE TABLE IF NOT EXISTS order_returns (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    order_id    VARCHAR(40) NOT NULL,
    product_id  INT NOT NULL,
    qty         INT NOT NULL,
    by_what     VARCHAR(32) NOT NULL,      -- the expiry mechanism, or 'cancel'
    returned_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY order_returns_by_order (order_id),
    KEY order_returns_by_product (product_id)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS payments (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    order_id    VARCHAR(40) NOT NULL,
    product_id  INT NOT NULL,
    payment_id  VARCHAR(64) NOT NULL,
    outcome     ENUM('captured', 'refund_due') NOT NULL,
    received_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY payments_once (order_id, payment_id),
    KEY payments_by_product (product_id)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS locks (
    name       VARCHAR(64) NOT NULL PRIMARY KEY,
    owner      VARCHAR(64) NOT NULL,
    expires_at TIMESTAMP(6) NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS idempotency (
    k           VARBINARY(255) NOT NULL PRIMARY KEY,
    fingerprint VARCHAR(128) NOT NULL,
    result      INT NOT NULL,
    remaining   BIGINT NULL,
    message     VARCHAR(256) NOT NULL DEFAULT '',
    order_id    VARCHAR(40) NOT NULL DEFAULT '',  -- a hold's order, '' for a sale
    created_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY idempotency_by_age (created_at)
) ENGINE = InnoDB;

-- A database made before holds kept keys gets order_id here (as epoch above).
SET @add_key_order = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE idempotency ADD COLUMN order_id VARCHAR(40) NOT NULL DEFAULT '''' AFTER message',
    'DO 0')
    FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'idempotency' AND column_name = 'order_id');
PREPARE add_key_order FROM @add_key_order;
EXECUTE add_key_order;
DEALLOCATE PREPARE add_key_order;
