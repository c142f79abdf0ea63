-- sliding_buckets.lua - sluice's sliding_buckets as a Redis script, for a Redis that forbids
-- modules. docs/lua.md has the contract of all six scripts and how the build makes
-- each shipped script from this file and the fragments in lib/ it includes; docs/algorithms.md
-- has the algorithm.
--
-- buckets K (-1 = 10) must divide window_us, so a bucket G = W / K is whole microseconds; burst
-- must be -1 or 0, max_delay_us 0. The decisions are the core's (in ns) for whole-microsecond
-- times, reported in microseconds rounded up: so the oldest bucket b - K is always counted (the
-- core counts it while the offset into bucket b is at most G - 2 ns, which every whole microsecond
-- is), and a bucket j stops counting at (j + K + 1) * G (the core's (j + K + 1) * G - 1 ns,
-- rounded up).
-- State: the time of the latest admission and the counts of the buckets from the oldest non-empty
-- one still counted to the latest admission's, packed (lib/packed.lua): the width of a count (4,
-- or 8 for limits of 2^32 or more), the 8-byte time, then the counts. An admission rewrites it
-- (O(K) bytes; SET .. PXAT when its bucket stops counting, when the key is fresh again); a
-- rejection or a peek only reads.
local ALG = 'sliding_buckets' -- in error messages
-- include: lib/args.lua
-- include: lib/packed.lua

-- buckets 0 is refused here (-1 is the default 10), and K must divide the window.
local function check_buckets(buckets, window)
    if buckets == 0 then
        return nil, "ERR sluice sliding_buckets: buckets must be an integer in [1, 4096] or -1 " ..
            "for 10, got '0'"
    end
    if buckets == -1 then buckets = 10 end
    if window % buckets ~= 0 then
        return nil, string.format('ERR sluice sliding_buckets: buckets (%d) must divide ' ..
            'window_us (%.0f)', buckets, window)
    end
    return buckets
end

-- limit up to 2^53 - 1; buckets up to SL_BUCKETS_MAX, 4096; burst and max_delay_us do not apply
local err, limit, window, _, K, _, cost, now = rule_args(INT_MAX, -1, 0, -1, 4096, -1, 0,
    check_buckets)
if err then return redis.error_reply(err) end

local G = window / K
local width = 8
if limit < 4294967296 then width = 4 end

local key = KEYS[1]
local s = redis.call('GET', key)
local latest, m, have = 0, 0, width
if s then
    have, latest, m = packed_read(s)
    if not have then return no_state_reply(key) end
end
local have_fmt = packed_fmt(have)
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
        local fmt = packed_fmt(width)
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
