-- sliding_buckets.lua - sluice's sliding_buckets as a Redis script, for a Redis that forbids
-- modules. docs/lua.md has the contract of all six scripts; docs/algorithms.md the algorithm. One
-- script per algorithm: EVALSHA names the algorithm by the script's SHA1, each script carries only
-- its own code, and a change to one leaves the other SHA1s alone.
--
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us cost [now_us]
--   -> {allowed 1|0, limit, remaining, retry_after_us, reset_after_us, delay_us}
--
-- buckets K (-1 = 10) must divide window_us, so a bucket G = W / K is whole microseconds; burst
-- must be -1 or 0, max_delay_us 0. now_us is the test clock; without it the time is the server's
-- TIME. Times are integer microseconds in Lua numbers (doubles, exact to 2^53 us, 285 years). The
-- decisions are the core's (in ns) for whole-microsecond times, reported in microseconds rounded
-- up: so the oldest bucket b - K is always counted (the core counts it while the offset into
-- bucket b is at most G - 2 ns, which every whole microsecond is), and a bucket j stops counting
-- at (j + K + 1) * G (the core's (j + K + 1) * G - 1 ns, rounded up).
-- State: the time of the latest admission and the counts of the buckets from the oldest non-empty
-- one still counted to the latest admission's, packed: a byte with the width of a count (4, or 8
-- for limits of 2^32 or more), the 8-byte time, then the counts (little-endian). An admission
-- rewrites it (O(K) bytes; SET .. PXAT when its bucket stops counting, when the key is fresh
-- again); a rejection or a peek only reads.
local ALG = 'sliding_buckets' -- in error messages
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
buckets, err = int_arg(4, 'buckets', -1, 4096) -- SL_BUCKETS_MAX
if not err and buckets == 0 then
    err = "ERR sluice sliding_buckets: buckets must be an integer in [1, 4096] or -1 for 10, " ..
        "got '0'"
end
if err then return redis.error_reply(err) end
if buckets == -1 then buckets = 10 end
if window % buckets ~= 0 then
    return redis.error_reply(string.format(
        'ERR sluice sliding_buckets: buckets (%d) must divide window_us (%.0f)', buckets, window))
end
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

local K = buckets
local G = window / K
local HEADER = 9 -- width byte, latest
local width = 8
if limit < 4294967296 then width = 4 end

local key = KEYS[1]
local s = redis.call('GET', key)
local latest, m, have = 0, 0, width
if s then
    have = string.byte(s, 1)
    if (have ~= 4 and have ~= 8) or #s < HEADER or (#s - HEADER) % have ~= 0 then
        return redis.error_reply('ERR sluice ' .. ALG .. ': key ' .. key .. ' holds no ' .. ALG ..
            ' state')
    end
    latest = struct.unpack('<i8', s, 2)
    m = (#s - HEADER) / have
end
local have_fmt = have == 4 and '<I4' or '<i8'
local newest = math.floor(latest / G) -- the stored counts are buckets newest - m + 1 .. newest
local first = newest - m + 1
local function count(j)
    if j < first or j > newest then return 0 end
    return struct.unpack(have_fmt, s, HEADER + 1 + have * (j - first))
end

now = math.max(now, latest) -- clamp to the latest admission
local b = math.floor(now / G)
local lo = b - K -- the oldest bucket counted (see above)
local inside = 0
for j = math.max(first, lo), newest do inside = inside + count(j) end

local function drop_time(j) -- when bucket j stops being counted
    return (j + K + 1) * G
end

if cost <= limit - inside then
    if cost > 0 then
        local fmt = width == 4 and '<I4' or '<i8'
        local parts = {string.char(width) .. struct.pack('<i8', now)}
        local started = false
        for j = math.max(first, lo), b do
            local c = count(j)
            if j == b then c = c + cost end
            if c > 0 or started then -- leading empty buckets are not stored
                started = true
                parts[#parts + 1] = struct.pack(fmt, c)
            end
        end
        redis.call('SET', key, table.concat(parts), 'PXAT', math.floor((drop_time(b) + 999) / 1000))
        inside = inside + cost
        return {1, limit, math.max(0, limit - inside), 0, drop_time(b) - now, 0}
    end
end

local function reset()
    if inside == 0 then return 0 end
    for j = math.min(b, newest), lo, -1 do -- the newest non-empty counted bucket
        if count(j) > 0 then return drop_time(j) - now end
    end
    return 0
end

if cost <= limit - inside then -- a peek
    return {1, limit, math.max(0, limit - inside), 0, reset(), 0}
end
local retry = -1
if cost <= limit then -- oldest first, until enough has left the window
    local left = inside
    local j = lo
    while j < b do
        left = left - count(j)
        if left + cost <= limit then break end
        j = j + 1
    end
    retry = drop_time(j) - now
end
return {0, limit, math.max(0, limit - inside), retry, reset(), 0}
