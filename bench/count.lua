-- bench/count.lua: a wrk script that counts every answer by status and by the
-- body's "error" word, and which stockd instance gave it (X-Stockd-Instance), then
-- prints one line for the lab to read:
--
--   LAB-RESULT {"requests":N,"duration_us":N,"latency_us":{"p50":..,"p95":..,
--               "p99":..,"max":..},"socket":{"connect":N,"read":N,"write":N,
--               "timeout":N},"answers":{"200 ":N,"409 busy":N,...},
--               "instances":{"name":N,...}}
--
-- The URL (path and query) is wrk's own; keep-alive is wrk's default. Only the
-- bodies of non-200 answers are searched for their word, so a sale costs one table
-- increment. Each wrk thread counts in its own Lua state; done() adds them up.

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

local function json_counts(t)
   local parts = {}
   for k, v in pairs(t) do
      parts[#parts + 1] = string.format('"%s":%d', string.gsub(k, '["\\]', ""), v)
   end
   return "{" .. table.concat(parts, ",") .. "}"
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
   local e = summary.errors
   io.write(string.format(
      'LAB-RESULT {"requests":%d,"duration_us":%d,' ..
      '"latency_us":{"p50":%d,"p95":%d,"p99":%d,"max":%d},' ..
      '"socket":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
      '"answers":%s,"instances":%s}\n',
      summary.requests, summary.duration,
      latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max,
      e.connect, e.read, e.write, e.timeout,
      json_counts(all_answers), json_counts(all_instances)))
end
