-- bench/history.lua: count.lua's counts, and every request's history for the
-- checker (lab/judges/history.py reads it, lab/judges/linearize.py judges it): when it was sent,
-- when its answer came, its status, the stock the reply says it left, its error word.
--
-- wrk hands response() no connection, so a request and its answer pair up only
-- when a thread has one connection: the lab runs this script with as many threads
-- as connections (one request outstanding per thread), which costs wrk throughput;
-- that is why the bench records on a pass of its own (bench/README.md).
--
-- Arguments (after wrk's --): the files' prefix, and the most lines a thread
-- writes. Thread N writes PREFIX.N, one line per request, through a 64 KiB buffer
-- (flushed when wrk exits):
--   INVOKE COMPLETE STATUS REMAINING WORD   an answer ("-": no remaining, no word)
--   INVOKE - 0 - -                          a request that never got its answer
-- Times are CLOCK_MONOTONIC microseconds (clock.lua: wrk's own clock is not
-- Lua's to read). done() writes PREFIX.end: the requests still in flight when wrk
-- stopped (as above), and "cut T" for a thread that reached its bound at T (its
-- later requests are not in the history: the history is then a window).

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "count.lua")
local now_us = dofile(here .. "clock.lua")

local count_setup, count_response, count_done = setup, response, done
local all, file, left, req, checking = {}, nil, 0, nil, false
prefix, sent, cut = nil, nil, nil -- globals: done() reads them with thread:get

function setup(thread)
   all[#all + 1] = thread
   thread:set("id", #all)
   count_setup(thread)
end

function init(args)
   prefix = args[1]
   file = assert(io.open(prefix .. "." .. id, "w"))
   file:setvbuf("full", 65536)
   left = tonumber(args[2])
   req = wrk.format()
   checking = id == 1 -- wrk calls thread 1's request() once to check it, before the run
end

function request()
   if checking then
      checking = false
      return req
   end
   if sent and not cut then -- its connection was lost before the answer
      file:write(sent, " - 0 - -\n")
   end
   sent = now_us()
   if left <= 0 and not cut then
      cut = sent
   end
   left = left - 1
   return req
end

function response(status, headers, body)
   local done_us = now_us()
   count_response(status, headers, body)
   if not cut then
      local word = status ~= 200 and body and string.match(body, '"error"%s*:%s*"([%w_]+)"')
      file:write(sent, " ", done_us, " ", status, " ",
                 body and string.match(body, '"remaining"%s*:%s*(-?%d+)') or "-", " ",
                 word or "-", "\n")
   end
   sent = nil
end

function done(summary, latency, requests)
   local prefix = all[1] and all[1]:get("prefix")
   local f = prefix and assert(io.open(prefix .. ".end", "w"))
   for _, thread in ipairs(all) do
      local t, c = thread:get("sent"), thread:get("cut")
      if c then
         f:write("cut ", c, "\n")
      elseif t then
         f:write(t, " - 0 - -\n")
      end
   end
   if f then
      f:close()
   end
   count_done(summary, latency, requests)
end
