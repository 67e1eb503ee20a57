-- The seed article's product: 5000 units of product 1001. Applying it again
-- leaves an existing product alone; POST /stock/reset is the way to restock.
INSERT IGNORE INTO stock (product_id, count, initial) VALUES (1001, 5000, 5000);
