-- sliding_log.lua - sluice's sliding_log as a Redis script, for a Redis that forbids modules.
-- docs/lua.md has the contract of all six scripts; docs/algorithms.md the algorithm. One script
-- per algorithm: EVALSHA names the algorithm by the script's SHA1, each script carries only its
-- own code, and a change to one leaves the other SHA1s alone.
--
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us cost [now_us]
--   -> {allowed 1|0, limit, remaining, retry_after_us, reset_after_us, delay_us}
--
-- burst and buckets must be -1 or 0, max_delay_us 0; limit at most 2^20 (the core's too). now_us
-- is the test clock; without it the time is the server's TIME. Times are integer microseconds in
-- Lua numbers (doubles, exact to 2^53 us, 285 years). Stamps and windows are whole microseconds,
-- so every time the core computes is 1000 times this script's: the decisions are the core's.
-- State: one stamp per admitted unit, oldest first, packed: a byte with the width of a stamp (4 or
-- 8), an 8-byte base time, then each stamp's offset from the base (little-endian). Windows up to
-- 2^32 us (71 minutes) take 4 bytes per stamp, longer ones 8. The base is the oldest stamp at the
-- last rewrite; an admission keeps it while the new stamp's offset fits, and otherwise rewrites
-- the log from its oldest stamp still in the window. An admission drops the expired stamps (SET of
-- the whole log, PXAT newest + W, when the key is fresh again); a rejection or a peek only reads.
-- A decision reads the whole log: O(N) bytes.
local ALG = 'sliding_log' -- in error messages
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
limit, err = int_arg(1, 'limit', 1, 1048576) -- SL_LOG_LIMIT_MAX
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

local HEADER = 9 -- width byte, base
local width = 8
if window <= 4294967296 then width = 4 end -- offsets from a stamp in the window are < W

local key = KEYS[1]
local s = redis.call('GET', key)
local n, have, base = 0, width, 0
if s then
    have = string.byte(s, 1)
    if (have ~= 4 and have ~= 8) or #s < HEADER or (#s - HEADER) % have ~= 0 then
        return redis.error_reply('ERR sluice ' .. ALG .. ': key ' .. key .. ' holds no ' .. ALG ..
            ' state')
    end
    base = struct.unpack('<i8', s, 2)
    n = (#s - HEADER) / have
end
local have_fmt = have == 4 and '<I4' or '<i8'
local function stamp(i) -- the i-th oldest stamp, 0 <= i < n
    return base + struct.unpack(have_fmt, s, HEADER + 1 + have * i)
end

if n > 0 then now = math.max(now, stamp(n - 1)) end -- clamp to the newest stamp
-- binary search: the number of stamps t <= now - W (expired; the window excludes now - W)
local cutoff = now - window
local lo, hi = 0, n
while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if stamp(mid) > cutoff then hi = mid else lo = mid + 1 end
end
local expired = lo
local inside = n - expired

if cost <= limit - inside then
    if cost > 0 then
        local text
        local fmt = width == 4 and '<I4' or '<i8'
        if s and have == width and now - base < 2 ^ (width == 4 and 32 or 62) then
            -- the new offsets fit: keep the base and the bytes of the stamps in the window
            text = string.sub(s, 1, HEADER) .. string.sub(s, HEADER + 1 + have * expired)
        else -- rebase on the oldest stamp in the window (or now)
            local new_base = now
            if inside > 0 then new_base = stamp(expired) end
            local parts = {string.char(width) .. struct.pack('<i8', new_base)}
            for i = expired, n - 1 do parts[#parts + 1] = struct.pack(fmt, stamp(i) - new_base) end
            text = table.concat(parts)
            base = new_base
        end
        text = text .. string.rep(struct.pack(fmt, now - base), cost)
        redis.call('SET', key, text, 'PXAT', math.floor((now + window + 999) / 1000))
        inside = inside + cost
        return {1, limit, math.max(0, limit - inside), 0, window, 0}
    end
    local reset = 0
    if inside > 0 then reset = stamp(n - 1) + window - now end
    return {1, limit, math.max(0, limit - inside), 0, reset, 0}
end
local retry = -1
if cost <= limit then
    -- the (inside + cost - N)-th oldest stamp in the window has to leave it
    retry = stamp(expired + inside + cost - limit - 1) + window - now
end
local reset = 0
if inside > 0 then reset = stamp(n - 1) + window - now end
return {0, limit, math.max(0, limit - inside), retry, reset, 0}
