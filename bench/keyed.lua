-- bench/keyed.lua: a wrk script for the bench's key-cost pairs: every request with a
-- fresh Idempotency-Key when its argument is "key", with none otherwise, and wrk's own
-- counts reported as rate.lua reports them.
--
-- Both sides of a pair run this script, so both pay the same call into Lua per
-- request to build it: the pair's ratio is what keeping the key costs stockd. A key
-- is the thread's number, the run's start and a count, never sent twice: each one
-- is a new purchase, kept, as a retrying client's first try would be.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(here .. "report.lua")

local threads = 0

function setup(thread)
   threads = threads + 1
   thread:set("id", threads)
end

local keyed, prefix, sent = false, "", 0

function init(args)
   keyed = args[1] == "key"
   prefix = string.format("bench-%d-%d-", os.time(), id or 0)
end

function request()
   if keyed then
      sent = sent + 1
      wrk.headers["Idempotency-Key"] = prefix .. sent
   end
   return wrk.format()
end

function done(summary, latency, requests)
   local failed = summary.errors.status
   report(summary, latency, {["200 "] = summary.requests - failed}, {}, failed)
end
