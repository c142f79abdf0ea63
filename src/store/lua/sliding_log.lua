-- sliding_log.lua - sluice's sliding_log as a Redis script, for a Redis that forbids modules.
-- docs/lua.md has the contract of all six scripts and how the build makes each one shipped script
-- from this file and the fragments in lib/ it includes; docs/algorithms.md has the algorithm.
--
-- burst and buckets must be -1 or 0, max_delay_us 0; limit at most 2^20 (the core's too). Stamps
-- and windows are whole microseconds, so every time the core computes is 1000 times this script's:
-- the decisions are the core's.
-- State: one stamp per admitted unit, oldest first, packed (lib/packed.lua): the width of a stamp
-- (4 or 8), an 8-byte base time, then each stamp's offset from the base. Windows up to 2^32 us (71
-- minutes) take 4 bytes per stamp, longer ones 8. The base is the oldest stamp at the last
-- rewrite; an admission keeps it while the new stamp's offset fits, and otherwise rewrites the log
-- from its oldest stamp still in the window. An admission drops the expired stamps (SET of the
-- whole log, PXAT newest + W, when the key is fresh again); a rejection or a peek only reads.
-- A decision reads the whole log: O(N) bytes.
local ALG = 'sliding_log' -- in error messages
-- include: lib/args.lua
-- include: lib/packed.lua

-- limit up to SL_LOG_LIMIT_MAX, 2^20; burst, buckets and max_delay_us do not apply
local err, limit, window, _, _, _, cost, now = rule_args(1048576, -1, 0, -1, 0, -1, 0)
if err then return redis.error_reply(err) end

local width = 8
if window <= 4294967296 then width = 4 end -- offsets from a stamp in the window are < W

local key = KEYS[1]
local s = redis.call('GET', key)
local n, have, base = 0, width, 0
if s then
    have, base, n = packed_read(s)
    if not have then return no_state_reply(key) end
end
local have_fmt = packed_fmt(have)
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
        local fmt = packed_fmt(width)
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
