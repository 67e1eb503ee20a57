-- bench/count.lua: a wrk script that counts every answer by status and by the
-- body's "error" word, and which stockd instance gave it (X-Stockd-Instance), then
-- prints the one line the lab reads (report.lua).
--
-- The URL (path and query) is wrk's own; keep-alive is wrk's default. Only the
-- bodies of non-200 answers are searched for their word, so a sale costs one table
-- increment. Each wrk thread counts in its own Lua state; done() adds them up.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(here .. "report.lua")
local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

answers = {}
instances = {}

function response(status, headers, body)
   local word = ""
   if status ~= 200 and body then
      word = string.match(body, '"error"%s*:%s*"([%w_]+)"') or ""
   end
   local key = status .. " " .. word
   answers[key] = (answers[key] or 0) + 1
   local who = headers["X-Stockd-Instance"] or headers["x-stockd-instance"] or "none"
   instances[who] = (instances[who] or 0) + 1
end

local function add_into(total, t)
   for k, v in pairs(t or {}) do
      total[k] = (total[k] or 0) + v
   end
end

function done(summary, latency, requests)
   local all_answers, all_instances = {}, {}
   for _, thread in ipairs(threads) do
      add_into(all_answers, thread:get("answers"))
      add_into(all_instances, thread:get("instances"))
   end
   report(summary, latency, all_answers, all_instances, 0)
end
