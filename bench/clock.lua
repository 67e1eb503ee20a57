-- bench/clock.lua: CLOCK_MONOTONIC in microseconds for the wrk scripts that time
-- their own requests (history.lua, order.lua); wrk's own clock is not Lua's to read,
-- so it goes through LuaJIT's ffi. Each script loads it with dofile; it returns now_us.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } lab_timespec;
int clock_gettime(int clock, lab_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("lab_timespec")

return function()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1000000 + math.floor(tonumber(ts.tv_nsec) / 1000)
end
