-- bench/report.lua: the one line the lab reads from wrk, written by count.lua and
-- rate.lua at the end of a run (each loads it with dofile; it returns report):
--
--   LAB-RESULT {"requests":N,"duration_us":N,"latency_us":{"p50":..,"p95":..,
--               "p99":..,"max":..},"socket":{"connect":N,"read":N,"write":N,
--               "timeout":N},"answers":{"200 ":N,"409 busy":N,...},
--               "status_errors":N,"instances":{"name":N,...}}
--
-- answers counts answers by status and error word, instances by the stockd
-- instance that gave them; status_errors counts answers of status 400 or more that
-- are not in answers (rate.lua leaves them to wrk).

local function json_counts(t)
   local parts = {}
   for k, v in pairs(t) do
      parts[#parts + 1] = string.format('"%s":%d', string.gsub(k, '["\\]', ""), v)
   end
   return "{" .. table.concat(parts, ",") .. "}"
end

return function(summary, latency, answers, instances, status_errors)
   local e = summary.errors
   io.write(string.format(
      'LAB-RESULT {"requests":%d,"duration_us":%d,' ..
      '"latency_us":{"p50":%d,"p95":%d,"p99":%d,"max":%d},' ..
      '"socket":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
      '"answers":%s,"status_errors":%d,"instances":%s}\n',
      summary.requests, summary.duration,
      latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max,
      e.connect, e.read, e.write, e.timeout,
      json_counts(answers), status_errors, json_counts(instances)))
end
