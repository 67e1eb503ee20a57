-- bench/rate.lua: a wrk script that only reports, for the pairs of the bench: wrk's
-- own counts, printed as the one line the lab reads (count.lua's format):
--
--   LAB-RESULT {"requests":N,"duration_us":N,"latency_us":{...},"socket":{...},
--               "answers":{"200 ":N},"status_errors":N,"instances":{}}
--
-- It has no response() function, so wrk runs as fast as it does with no script: a
-- pair compares stockd with a tool that counts in C (redis-benchmark, sysbench,
-- nginx under the same wrk), and count.lua's call into Lua per answer would be
-- charged to stockd (about 7% of `lua`'s rate at 64 connections, alternating runs).
-- wrk counts the answers with a status of 400 or more (status_errors); every other
-- answer of a pair's requests is a 200.

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'LAB-RESULT {"requests":%d,"duration_us":%d,' ..
      '"latency_us":{"p50":%d,"p95":%d,"p99":%d,"max":%d},' ..
      '"socket":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
      '"answers":{"200 ":%d},"status_errors":%d,"instances":{}}\n',
      summary.requests, summary.duration,
      latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max,
      e.connect, e.read, e.write, e.timeout, summary.requests - e.status, e.status))
end
