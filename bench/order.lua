-- bench/order.lua: a wrk script for the bench's hold-then-pay rows: every order is
-- two requests, a hold (POST /orders/{strategy}?..., the URL wrk is given) and its
-- payment (POST /orders/{ID}/pay?payment=PID), and each hold is paid.
--
-- wrk hands response() no connection, so a thread keeps one queue of the orders its
-- connections held: whichever of its connections is free next pays the oldest of
-- them, and holds a new one when none waits. The order id is read from the 201's
-- body by string matching (wrk's Lua has no JSON library); each payment id is the
-- thread's own ("b<thread>-<n>"), so no two payments share one.
--
-- Every hold must be paid before wrk stops, or its units stay held: after the
-- window (first argument, milliseconds from the thread's first request) a thread
-- holds no more, pays what it still holds and, while a hold or a payment of its is
-- still in flight, keeps its free connections busy with the second argument's
-- path (a GET without a backend), each after a pause (IDLE_MS: delay()) so that
-- they stay few among the requests whose latency wrk measures; once nothing of its
-- own is in flight it stops. The lab gives wrk a second more than the window.
--
-- The LAB-RESULT line (report.lua) counts orders, not requests: "200 " the orders
-- paid, any other answer by its status and error word ("409 sold_out" for a
-- refused hold, "409 expired" for a refused payment...); its requests and duration are the orders paid
-- within the window and the window itself, so that the lab's rate is orders per
-- second. Its latency is wrk's, over every request of the run (holds, payments and
-- the few GETs of the end).

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local report = dofile(here .. "report.lua")
local now_us = dofile(here .. "clock.lua")
local IDLE_MS = 20

local all = {}
-- globals: done() reads them with thread:get
answers, paid_in_window, window_us = {}, 0, 0
local hold_req, idle_req, checking = nil, nil, false
local queue, head, tail = {}, 1, 0
local started, payments, in_flight = nil, 0, 0 -- in_flight: holds and payments sent, unanswered

function setup(thread)
   all[#all + 1] = thread
   thread:set("id", #all)
end

function init(args)
   window_us = tonumber(args[1]) * 1000
   hold_req = wrk.format("POST", nil, nil, "")
   idle_req = wrk.format("GET", args[2])
   checking = id == 1 -- wrk calls thread 1's request() once to check it, before the run
end

local function count(key)
   answers[key] = (answers[key] or 0) + 1
end

function request()
   if checking then
      checking = false
      return hold_req
   end
   local now = now_us()
   started = started or now
   if head <= tail then
      local order = queue[head]
      queue[head], head = nil, head + 1
      payments, in_flight = payments + 1, in_flight + 1
      return wrk.format("POST", "/orders/" .. order .. "/pay?payment=b" .. id .. "-" .. payments,
                        nil, "")
   end
   if now - started < window_us then
      in_flight = in_flight + 1
      return hold_req
   end
   return idle_req
end

function delay()
   return started and now_us() - started >= window_us and IDLE_MS or 0
end

function response(status, headers, body)
   local text = body or ""
   if status == 200 and string.find(text, '"strategies"', 1, true) then
      if in_flight == 0 and head > tail then
         wrk.thread:stop()
      end
      return
   end
   in_flight = in_flight - 1
   local order = status == 201 and string.match(text, '"order"%s*:%s*"([%w%-]+)"')
   if order then
      tail = tail + 1
      queue[tail] = order
   elseif status == 200 and string.find(text, '"state"%s*:%s*"paid"') then
      count("200 ")
      if now_us() - started < window_us then
         paid_in_window = paid_in_window + 1
      end
   else
      count(status .. " " .. (string.match(text, '"error"%s*:%s*"([%w_]+)"') or "none"))
   end
end

function done(summary, latency, requests)
   local orders, totals = 0, {}
   for _, thread in ipairs(all) do
      orders = orders + thread:get("paid_in_window")
      for k, v in pairs(thread:get("answers")) do
         totals[k] = (totals[k] or 0) + v
      end
   end
   local window = all[1] and all[1]:get("window_us") or 0
   report({requests = orders, duration = window, errors = summary.errors}, latency, totals, {}, 0)
end
