-- bench/rate.lua: a wrk script for the pairs of the bench that only reports wrk's own
-- counts, in the line the lab reads (report.lua).
--
-- It has no response() function, so wrk runs as fast as it does with no script: a
-- pair compares stockd with a tool that counts in C (redis-benchmark, sysbench,
-- nginx under the same wrk), and count.lua's call into Lua per answer would be
-- charged to stockd, a cost the tools it is compared with do not pay.
-- wrk counts the answers with a status of 400 or more; every other answer of a
-- pair's requests is a 200.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(here .. "report.lua")

function done(summary, latency, requests)
   local failed = summary.errors.status
   report(summary, latency, {["200 "] = summary.requests - failed}, {}, failed)
end
