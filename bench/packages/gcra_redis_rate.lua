-- gcra_redis_rate.lua - GCRA in one Lua call, the way go-redis/redis_rate's Limiter.AllowN
-- decides, for bench/packages/go.sh: written here (not copied) to do the same work per decision
-- as its script: the same Redis calls (TIME, GET of the key's theoretical arrival time, SET with
-- EX when admitted), float arithmetic in seconds, and the same reply (allowed cost, remaining,
-- retry_after and reset_after as strings). redis_rate itself is a Go module that cannot be
-- fetched here (no module proxy).
--
-- KEYS[1] the key; ARGV burst, rate, period (seconds), cost.
redis.replicate_commands()

local burst, rate, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local interval = period / rate -- seconds between two units at the steady rate

local t = redis.call('TIME')
local now = (t[1] - 1483228800) + t[2] / 1e6 -- seconds since 2017: keeps the float's precision

local stored = redis.call('GET', KEYS[1])
local tat = now
if stored then
  tat = math.max(tonumber(stored), now)
end

local next_tat = tat + interval * cost
local slack = now - (next_tat - interval * burst) -- < 0: the cost does not fit yet
if slack < 0 then
  return { 0, 0, tostring(-slack), tostring(tat - now) }
end

local reset_after = next_tat - now
if reset_after > 0 then
  redis.call('SET', KEYS[1], next_tat, 'EX', math.ceil(reset_after))
end
return { cost, slack / interval, tostring(-1), tostring(reset_after) }
