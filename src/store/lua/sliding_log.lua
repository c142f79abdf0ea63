-- sliding_log.lua - sluice's sliding_log as a Redis script, for a Redis that forbids modules.
-- docs/lua.md has the contract of all six scripts and how the build makes each one shipped script
-- from this file and the fragments in lib/ it includes; docs/algorithms.md has the algorithm.
--
-- burst and buckets must be -1 or 0, max_delay_us 0; limit at most 2^20 (the core's too). Stamps
-- and windows are whole microseconds, so every time the core computes is 1000 times this script's:
-- the decisions are the core's.
-- State: one stamp per admitted unit, oldest first, packed (lib/packed.lua): the width of a stamp
-- (4 or 8), an 8-byte base time, then each stamp's offset from the base, then the numbers it was
-- written under, "N:W" (NUMS). Windows up to 2^32 us (71 minutes) take 4 bytes per stamp, longer
-- ones 8. The base is the oldest stamp at the last
-- rewrite; an admission keeps it while the new stamp's offset fits, and otherwise rewrites the log
-- from its oldest stamp still in the window. An admission drops the expired stamps (SET of the
-- whole log, PXAT newest + W, when the key is fresh again); a rejection or a peek only reads.
-- A decision reads the whole log: O(N) bytes.
-- Settles set the core's two flags in the width byte (docs/algorithms.md): DROPPED (16), a debt
-- kept the newest N stamps of more, and until the oldest leaves a peek is refused as a cost of 1
-- is; LATEST (32), a refund took the newest stamps back, and one more entry after the stamps
-- holds their time, the latest recorded (what an earlier now is clamped to). An admission clears
-- both. A settle rewrites the log when it changes it (a DEL when it leaves it fresh).
-- A value written under another limit or window is converted first, as the core does: of the
-- stamps inside the new window at the latest time recorded, the newest up to the new limit
-- (DROPPED when some were left out, copies of the oldest standing for stamps a debt dropped);
-- a cost > 0 or a settle on a converted value writes it, whatever the decision. A closed start
-- (closed_from) gives a key that does not exist N stamps at its time, written as a converted
-- value is.
local ALG = 'sliding_log' -- in error messages
-- include: lib/args.lua
-- include: lib/packed.lua

local DROPPED, LATEST = 16, 32

-- limit up to SL_LOG_LIMIT_MAX, 2^20; burst, buckets and max_delay_us do not apply
local err, limit, window, _, _, _, cost, now, reserved, actual, charged, closed =
    rule_args(1048576, -1, 0, -1, 0, -1, 0)
if err then return redis.error_reply(err) end

local width = 8
if window <= 4294967296 then width = 4 end
local NUMS = string.format('%d:%d', limit, window)
local SUFFIX = NUMS .. string.char(#NUMS)

local key = KEYS[1]
local raw = redis.call('GET', key)
local s = raw
local n, have, base, flags, latest, nums = 0, width, 0, 0, 0, nil
local have_fmt

local function stamp(i) -- the i-th oldest stamp, 0 <= i < n; i = n: LATEST's time
    return base + struct.unpack(have_fmt, s, HEADER + 1 + have * i)
end

-- Reads the value s, and the latest time it records (what an earlier now is clamped to); false
-- if it is no sliding_log state.
local function read()
    n, have, base, flags, latest, nums = 0, width, 0, 0, 0, nil
    if s then
        have, base, n, flags, nums = packed_read(s)
        if not have or (flags ~= 0 and flags ~= DROPPED and flags ~= LATEST) then return false end
        if flags == LATEST then n = n - 1 end
    end
    have_fmt = packed_fmt(have)
    if n > 0 then latest = stamp(n - 1) end
    if flags == DROPPED and n == 0 then return false end
    if flags == LATEST then
        if n < 0 or stamp(n) <= latest then return false end
        latest = stamp(n)
    end
    return true
end
if not read() or (nums and nums ~= NUMS and not string.match(nums, '^%d+:%d+$')) then
    return no_state_reply(key)
end
local saturated = not raw and closed -- a closed start: N stamps at closed, the whole limit taken
if saturated then
    s = string.char(width + NUMBERED) .. struct.pack('<i8', closed) ..
        string.rep(struct.pack(packed_fmt(width), 0), limit) .. SUFFIX
    read()
end

local converted = nums and nums ~= NUMS -- written under other numbers
local log_value, count_upto -- for a settle or a conversion only (no closure a decision needs)
if reserved or converted then
    -- The value of a log (stamps st[0 .. cnt), oldest first; dropped: DROPPED; the latest time
    -- recorded when it is later than the newest stamp, LATEST) under these numbers.
    log_value = function(st, cnt, dropped, latest_kept)
        local fmt = packed_fmt(width)
        local parts = {}
        for i = 0, cnt - 1 do parts[i + 1] = struct.pack(fmt, st[i] - st[0]) end
        if latest_kept then parts[cnt + 1] = struct.pack(fmt, latest_kept - st[0]) end
        local f = width + NUMBERED + (dropped and DROPPED or 0) + (latest_kept and LATEST or 0)
        return string.char(f) .. struct.pack('<i8', st[0]) .. table.concat(parts) .. SUFFIX
    end
    -- the number of stamps t <= cutoff in st[0 .. cnt) (sorted): binary search
    count_upto = function(st, cnt, cutoff)
        local lo, hi = 0, cnt
        while lo < hi do
            local mid = math.floor((lo + hi) / 2)
            if st[mid] > cutoff then hi = mid else lo = mid + 1 end
        end
        return lo
    end
end

if converted then -- the core's sliding_log_convert
    local st = {}
    for i = 0, n - 1 do st[i] = stamp(i) end
    local expired = count_upto(st, n, latest - window) -- out of the new window at the latest time
    local inside = n - expired
    local first = expired -- the oldest kept
    if inside > limit then first = n - limit end
    -- the old log's dropped stamps are no newer than its oldest, which is inside
    local dropped = inside > limit or (flags == DROPPED and expired == 0)
    local cnt = n - first
    if dropped then cnt = limit end
    local copies = cnt - (n - first) -- copies of the oldest stand for the dropped stamps
    local out = {}
    for i = 0, cnt - 1 do
        if i < copies then out[i] = st[first] else out[i] = st[first + i - copies] end
    end
    s = nil -- fresh at now: the key goes
    if cnt > 0 and out[cnt - 1] > now - window then
        local keep = nil -- a full log records its newest stamp as the latest time
        if cnt < limit and latest > out[cnt - 1] then keep = latest end
        s = log_value(out, cnt, dropped and not keep, keep)
    end
    read()
end
if saturated then converted = true end -- written as a converted value is

if reserved and (reserved ~= actual or converted) then -- a settle (the core's), then a peek
    local st, cnt, dropped = {}, n, flags == DROPPED
    for i = 0, n - 1 do st[i] = stamp(i) end
    local has_latest, changed = flags == LATEST, true
    local function drop(k) -- the oldest k stamps
        for i = k, cnt - 1 do st[i - k] = st[i] end
        cnt = cnt - k
    end
    if actual == reserved then -- nothing to settle: the converted log is written
        changed = false
    elseif actual < reserved then -- the charge's stamps go (see the core's sliding_log_refund)
        changed = false
        if cnt > 0 then
            local expired = count_upto(st, cnt, latest - window)
            if expired > 0 then dropped, changed = false, true end
            drop(expired)
            local c, i, k = reserved - actual, 0, 0 -- stamps [i - k, i) go
            if dropped then -- the newest k no newer than charged; the newest stays
                i = math.min(count_upto(st, cnt, charged), cnt - 1)
                k = math.min(c, i)
            elseif charged > latest - window then -- the oldest k at or after charged, or
                k = math.min(c, cnt)                   -- the newest before it when fewer
                i = math.min(count_upto(st, cnt, charged - 1) + k, cnt)
            end
            if dropped then -- each replaced by a copy of the oldest
                local oldest = st[0]
                for j = i - 1, k, -1 do st[j] = st[j - k] end
                for j = 0, k - 1 do st[j] = oldest end
                changed = changed or k > 0
            else
                for j = i, cnt - 1 do st[j - k] = st[j] end
                cnt = cnt - k
                changed = changed or k > 0
                has_latest = latest > (cnt > 0 and st[cnt - 1] or 0)
            end
        end
    else -- debt: d stamps at the clamped now, keeping the newest N
        local x, d = math.max(now, latest), actual - reserved
        local expired = count_upto(st, cnt, x - window)
        if expired > 0 then dropped = false end
        drop(expired)
        if d > limit - cnt then
            drop(d >= limit and cnt or cnt + d - limit)
            dropped = true
        end
        for _ = 1, math.min(d, limit) do
            st[cnt] = x
            cnt = cnt + 1
        end
        has_latest = false
    end
    local was = s and packed_numbered(s, nums, SUFFIX) -- as this script writes it
    local value = was
    if cnt == 0 or st[cnt - 1] <= now - window then
        value = nil -- fresh: the key goes
    elseif changed or converted then
        value = log_value(st, cnt, dropped, has_latest and latest)
    end
    if converted or value ~= was then store(key, raw, value, cnt > 0 and st[cnt - 1] + window) end
    converted = false
    s = value -- the peek below reads the settled log
    read()
end

now = math.max(now, latest) -- clamp to the latest time recorded
-- binary search: the number of stamps t <= now - W (expired; the window excludes now - W)
local cutoff = now - window
local lo, hi = 0, n
while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if stamp(mid) > cutoff then hi = mid else lo = mid + 1 end
end
local expired = lo
local inside = n - expired
-- after a debt dropped stamps, they are in the window until the oldest kept one leaves
local unseen = 0
if flags == DROPPED and expired == 0 then unseen = 1 end

if cost <= limit - inside - unseen then
    if cost > 0 then -- writes the stamps in the window and the new ones, without flags
        local text
        local fmt = packed_fmt(width)
        if s and have == width and now - base < 2 ^ (width == 4 and 32 or 62) then
            -- the new offsets fit: keep the base and the bytes of the stamps in the window
            text = string.char(width + NUMBERED) .. string.sub(s, 2, HEADER) ..
                string.sub(s, HEADER + 1 + have * expired, HEADER + have * n)
        else -- rebase on the oldest stamp in the window (or now)
            local new_base = now
            if inside > 0 then new_base = stamp(expired) end
            local parts = {string.char(width + NUMBERED) .. struct.pack('<i8', new_base)}
            for i = expired, n - 1 do parts[#parts + 1] = struct.pack(fmt, stamp(i) - new_base) end
            text = table.concat(parts)
            base = new_base
        end
        text = text .. string.rep(struct.pack(fmt, now - base), cost) .. SUFFIX
        redis.call('SET', key, text, 'PXAT', math.floor((now + window + 999) / 1000))
        inside = inside + cost
        return {1, limit, math.max(0, limit - inside), 0, window, 0}
    end
    local reset = 0
    if inside > 0 then reset = stamp(n - 1) + window - now end
    return {1, limit, math.max(0, limit - inside), 0, reset, 0}
end
if converted and cost > 0 then -- a cost leaves a converted value written, whatever the decision
    store(key, raw, s, n > 0 and stamp(n - 1) + window)
end
local retry = -1
if cost <= limit then
    -- the (inside + cost - N)-th oldest stamp in the window has to leave it (the oldest, for
    -- the dropped stamps it stands for)
    retry = stamp(expired + math.max(inside + cost - limit - 1, 0)) + window - now
end
local reset = 0
if inside > 0 then reset = stamp(n - 1) + window - now end
return {0, limit, math.max(0, limit - inside), retry, reset, 0}
