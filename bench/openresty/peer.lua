-- bench/openresty/peer.lua: the OpenResty-style peer's handlers. The flash sales
-- that publish their designs put the first filter in nginx + Lua talking to Redis;
-- this is that edge serving the same `lua` sale as stockd, so that the bench can
-- measure stockd next to the strongest peer a team could pick instead of a C
-- service.
--
--   GET /stock/deduct/LUA?product=P&qty=N  stockd's own sale script by EVALSHA
--       (EVAL once on NOSCRIPT) through lua-resty-redis, on the keys stockd uses
--       (stock:{P}, ledger:{P}); each worker keeps its Redis connections in a
--       keepalive pool (cosockets), so a sale costs one round trip and no connect
--   GET /strategies                        stockd's GET /strategies bytes, held
--       in memory since init
--
-- Nothing of the sale is written here: the script, its SHA1, the strategy's name
-- and the static bytes come from the bench (lab/drivers/openresty.py), which reads
-- them from stockd's sources and its GET /strategies. Answers follow stockd's
-- contract for these cases: 200 sold, 409 sold_out, 404 unknown_product, 400
-- bad_request, 503 backend_unavailable.

local redis = require "nginx.redis"

local M = {}

local cfg = {}

local function file_text(path)
   local f = assert(io.open(path, "rb"))
   local text = f:read("*a")
   f:close()
   return text
end

-- Read once in the master (init_by_lua): the workers inherit it.
function M.init()
   cfg.host = os.getenv("PEER_REDIS_HOST") or "127.0.0.1"
   cfg.port = tonumber(os.getenv("PEER_REDIS_PORT"))
   local pw = os.getenv("PEER_REDIS_PASSWORD_FILE") or ""
   cfg.password = pw ~= "" and file_text(pw):match("^[^\r\n]*") or nil
   cfg.script = assert(os.getenv("PEER_SALE_SCRIPT"), "PEER_SALE_SCRIPT is not set")
   cfg.sha = assert(os.getenv("PEER_SALE_SHA"), "PEER_SALE_SHA is not set")
   cfg.name = assert(os.getenv("PEER_LUA_NAME"), "PEER_LUA_NAME is not set")
   cfg.pool = tonumber(os.getenv("PEER_POOL") or "16")
   cfg.strategies = file_text(assert(os.getenv("PEER_STATIC_FILE"), "PEER_STATIC_FILE is not set"))
end

function M.strategies()
   ngx.print(cfg.strategies)
end

local function answer(status, body)
   ngx.status = status
   ngx.print(body)
end

local function refused(status, word, message)
   answer(status, string.format('{"ok":false,"error":"%s","message":"%s"}', word, message))
end

-- A whole number in [lo, hi] from the query, its default when absent; nil when bad.
local function whole(args, name, default, lo, hi)
   local v = args[name]
   if v == nil then return default end
   if type(v) ~= "string" or not v:match("^%d+$") then return nil end
   local n = tonumber(v)
   if n < lo or n > hi then return nil end
   return n
end

-- A connection from this worker's pool (a new one authenticates once).
local function connect()
   local red = redis:new()
   red:set_timeout(2000)
   local ok, err = red:connect(cfg.host, cfg.port)
   if not ok then return nil, err end
   if cfg.password and red:get_reused_times() == 0 then
      ok, err = red:auth(cfg.password)
      if not ok then return nil, err end
   end
   return red
end

local function run_script(red, product, qty)
   local stock, ledger = "stock:{" .. product .. "}", "ledger:{" .. product .. "}"
   local res, err = red:evalsha(cfg.sha, 2, stock, ledger, qty)
   if not res and err and err:find("^NOSCRIPT") then
      res, err = red:eval(cfg.script, 2, stock, ledger, qty)
   end
   return res, err
end

function M.sale()
   local args = ngx.req.get_uri_args()
   local product = whole(args, "product", 1001, 1, 2147483647)
   local qty = whole(args, "qty", 1, 1, 1000000)
   if not product or not qty then
      return refused(400, "bad_request", "product and qty are whole numbers in range")
   end
   local red, err = connect()
   if not red then return refused(503, "backend_unavailable", "redis: " .. tostring(err)) end
   local res
   res, err = run_script(red, product, qty)
   if not res then
      red:close()
      return refused(503, "backend_unavailable", "redis: " .. tostring(err))
   end
   red:set_keepalive(60000, cfg.pool)
   local sold, count = tonumber(res[1]), tonumber(res[2])
   if sold < 0 then
      return refused(404, "unknown_product", "product " .. product .. " is not in redis")
   end
   if sold == 0 then
      return refused(409, "sold_out", count .. " left, " .. qty .. " asked")
   end
   answer(200, string.format('{"ok":true,"strategy":"%s","product":%d,"qty":%d,"remaining":%d}',
                             cfg.name, product, qty, count))
end

return M
