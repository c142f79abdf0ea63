-- fixed_window.lua - sluice's fixed_window as a Redis script, for a Redis that forbids modules.
-- docs/lua.md has the contract of all six scripts; docs/algorithms.md the algorithm. One script
-- per algorithm: EVALSHA names the algorithm by the script's SHA1, each script carries only its
-- own code, and a change to one leaves the other SHA1s alone.
--
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us cost [now_us]
--   -> {allowed 1|0, limit, remaining, retry_after_us, reset_after_us, delay_us}
--
-- burst and buckets must be -1 or 0, max_delay_us 0. now_us is the test clock; without it the time
-- is the server's TIME. Times are integer microseconds in Lua numbers (doubles, exact to 2^53 us,
-- 285 years). Windows are whole microseconds, so every time the core computes for
-- whole-microsecond inputs is 1000 times this script's: the decisions are the core's.
-- State: the count and the window index k = floor(t / W), as the decimal digits <digits of
-- count><count><k> ("15" .. "1666666666" is count 5 in window 1666666666), which Redis keeps as an
-- integer (no allocation) while it fits 64 bits; "count:k" for counts of ten digits or more. Only
-- an admitted cost > 0 writes (SET .. PXAT the window's end, when the key is fresh again).
local ALG = 'fixed_window' -- in error messages
local INT_MAX = 9007199254740991 -- 2^53 - 1
local NOW_MAX_US = 4611686018427387 -- the core's SL_NOW_MAX_NS, (2^63 - 1) / 2 ns, in us
local WINDOW_MAX_US = 31622400000000 -- 366 days

local function int_arg(i, name, min, max)
    local s = ARGV[i]
    local v = s and string.match(s, '^-?%d+$') and tonumber(s)
    if not v or v < min or v > max then
        return nil, string.format('ERR sluice %s: %s must be an integer in [%.0f, %.0f], got %s',
            ALG, name, min, max, s and ("'" .. s .. "'") or 'nothing')
    end
    return v
end

local limit, window, burst, buckets, max_delay, cost, now, err
limit, err = int_arg(1, 'limit', 1, INT_MAX)
if err then return redis.error_reply(err) end
window, err = int_arg(2, 'window_us', 1000, WINDOW_MAX_US)
if err then return redis.error_reply(err) end
burst, err = int_arg(3, 'burst', -1, 0)
if err then return redis.error_reply(err) end
buckets, err = int_arg(4, 'buckets', -1, 0)
if err then return redis.error_reply(err) end
max_delay, err = int_arg(5, 'max_delay_us', -1, 0)
if err then return redis.error_reply(err) end
cost, err = int_arg(6, 'cost', 0, INT_MAX)
if err then return redis.error_reply(err) end
if ARGV[7] then
    now, err = int_arg(7, 'now_us', -INT_MAX, INT_MAX)
    if err then return redis.error_reply(err) end
else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
now = math.min(math.max(now, 0), NOW_MAX_US)

local key = KEYS[1]
local s = redis.call('GET', key)
local idx, count = 0, 0
if s then
    local c, k = string.match(s, '^(%d+):(%d+)$')
    if not c then
        local d = tonumber(string.sub(s, 1, 1))
        if d and d > 0 then
            c, k = string.sub(s, 2, 1 + d), string.sub(s, 2 + d)
        end
    end
    count, idx = tonumber(c), tonumber(k)
    if not count or not idx or not string.match(c, '^%d+$') or not string.match(k, '^%d+$') or
        count > INT_MAX or idx > INT_MAX then
        return redis.error_reply('ERR sluice ' .. ALG .. ': key ' .. key .. ' holds no ' .. ALG ..
            ' state')
    end
end

local k = math.floor(now / window)
if k < idx then -- clamp to the start of the stored window
    k = idx
    now = k * window
end
if idx ~= k then count = 0 end
local until_next = (k + 1) * window - now

if cost <= limit - count then
    if cost > 0 then
        count = count + cost
        local c = string.format('%d', count)
        local text
        if #c < 10 then
            text = string.format('%d%s%d', #c, c, k)
        else
            text = string.format('%s:%d', c, k)
        end
        redis.call('SET', key, text, 'PXAT', math.floor(((k + 1) * window + 999) / 1000))
    end
    return {1, limit, math.max(0, limit - count), 0, count > 0 and until_next or 0, 0}
end
local retry = until_next
if cost > limit then retry = -1 end
return {0, limit, math.max(0, limit - count), retry, count > 0 and until_next or 0, 0}
