-- bench/sale.lua: a sysbench script running the `sql` strategy's sale transaction
-- straight against MariaDB, as stockd runs it (prepared statements on one connection
-- per thread):
--
--   START TRANSACTION; <deduct>; <insert>; COMMIT
--
-- The statement texts are options, passed by the lab from server/backend/sql.c
-- (SQL_DEDUCT_IF_ENOUGH, SQL_INSERT_ORDER) so that they stay the same:
--
--   sysbench bench/sale.lua --deduct-sql="UPDATE ..." --insert-sql="INSERT ..." \
--       --product=1001 --qty=1 --strategy=sql --mysql-... --threads=N --time=S run

sysbench.cmdline.options = {
   deduct_sql = {"the conditional UPDATE: (qty, product, qty)", ""},
   insert_sql = {"the ledger INSERT: (product, strategy, qty)", ""},
   product = {"product id", 1001},
   qty = {"units per sale", 1},
   strategy = {"strategy name written in the ledger", ""},
}

local function prepared(con, sql, types)
   local stmt = con:prepare(sql)
   local params = {}
   for i, t in ipairs(types) do
      params[i] = t == "string" and stmt:bind_create(sysbench.sql.type.VARCHAR, 64)
         or stmt:bind_create(sysbench.sql.type.INT)
   end
   stmt:bind_param(unpack(params))
   return stmt, params
end

function thread_init()
   if sysbench.opt.deduct_sql == "" or sysbench.opt.insert_sql == ""
      or sysbench.opt.strategy == "" then
      error("--deduct-sql, --insert-sql and --strategy are required")
   end
   con = sysbench.sql.driver():connect()
   deduct, deduct_params = prepared(con, sysbench.opt.deduct_sql, {"int", "int", "int"})
   insert, insert_params = prepared(con, sysbench.opt.insert_sql, {"int", "string", "int"})
   deduct_params[1]:set(sysbench.opt.qty)
   deduct_params[2]:set(sysbench.opt.product)
   deduct_params[3]:set(sysbench.opt.qty)
   insert_params[1]:set(sysbench.opt.product)
   insert_params[2]:set(sysbench.opt.strategy)
   insert_params[3]:set(sysbench.opt.qty)
end

function event()
   con:query("START TRANSACTION")
   deduct:execute()
   insert:execute()
   con:query("COMMIT")
end

function thread_done()
   deduct:close()
   insert:close()
   con:disconnect()
end
