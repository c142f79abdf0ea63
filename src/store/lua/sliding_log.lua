-- sliding_log.lua - sluice's sliding_log as a Redis script, for a Redis that forbids modules.
-- docs/lua.md has the contract of all six scripts and how the build makes each one shipped script
-- from this file and the fragments in lib/ it includes; docs/algorithms.md has the algorithm.
--
-- burst and buckets must be -1 or 0, max_delay_us 0; limit at most 2^20 (the core's too). Stamps
-- and windows are whole microseconds, so every time the core computes is 1000 times this script's:
-- the decisions are the core's (src/core/sliding_log.c), entry for entry.
-- State: one entry per admission (and per settle's charge), oldest first: its time and the
-- running total of units through it, so that a decision counts the window with two binary
-- searches and reads O(log entries) of the value, whatever the costs. The value: a byte (ENTRIES
-- + NUMBERED + LATEST + the width of a time offset, 4 or 8), an 8-byte base time, the 4-byte
-- running total before the first entry, then per entry its offset from the base (the width) and
-- its running total (4 bytes, modulo 2^32: a log holds at most 2^32 - 1 units, where the core
-- holds 2^62 - 1), then the numbers it was written under, "N:W" (NUMS), and their length.
-- Windows up to 2^32 us (71 minutes) take 8 bytes an entry, longer ones 12. An admission keeps
-- the base while the new offset fits, and otherwise rewrites the log from its oldest entry still
-- in the window; it drops the expired entries (SET of the rest, PXAT newest + W, when the key is
-- fresh again) and adds its cost to the newest entry when it is at now; a rejection or a peek
-- only reads.
-- Settles as the core's: a debt adds an entry at the clamped now past the limit, and when the
-- log already holds N entries the oldest one's units join the next (exact in admissions); a
-- refund takes units back, and when it takes the newest, LATEST keeps their time in one more
-- entry after the others (the latest time recorded, what an earlier now is clamped to). An
-- admission clears it. A settle rewrites the log when it changes it (a DEL when it leaves it
-- fresh).
-- A value written under another limit or window is converted first, as the core does: the
-- entries inside the new window at the latest time recorded, the oldest merged into the next
-- beyond the new limit's number; a cost > 0 or a settle on a converted value writes it, whatever
-- the decision. A closed start (closed_from) gives a key that does not exist N units at its time,
-- written as a converted value is. A value of older sluiceds (one stamp per unit, lib/packed.lua,
-- with the flags DROPPED and LATEST, with or without numbers) is read as the core reads the older
-- packed form, and written in this form by the next command that writes.
-- include: row
-- include: lib/args.lua
-- include: lib/packed.lua

local DROPPED, LATEST, ENTRIES = 16, 32, 128
local TWO32 = 4294967296
local UNITS_MAX = TWO32 - 1 -- the units a log holds at most: its totals are modulo 2^32
local HDR = 13 -- the byte, the base time, the running total before the first entry

-- limit up to SL_LOG_LIMIT_MAX, 2^20; burst, buckets and max_delay_us do not apply
local err, limit, window, _, _, _, cost, now, reserved, actual, charged, closed, _, _, _,
    max_debt = rule_args(1048576, -1, 0, -1, 0, -1, 0)
if err then return redis.error_reply(err) end

local width = 8
if window <= 4294967296 then width = 4 end
local NUMS = string.format('%d:%d', limit, window)
local SUFFIX = NUMS .. string.char(#NUMS)

local key = KEYS[1]
local raw = redis.call('GET', key)
local s -- the value in this script's form (raw, or what an older value reads as)
local n, hw, base, cbase, latest, nums = 0, width, 0, 0, 0, nil
local hfmt, hew = packed_fmt(width), width + 4

local function stamp(i) -- the i-th oldest entry's time, 0 <= i < n; i = n: LATEST's time
    return base + struct.unpack(hfmt, s, HDR + 1 + hew * i)
end
local function total(i) -- the running total through the i-th oldest entry, modulo 2^32
    return (struct.unpack('<I4', s, HDR + 1 + hew * i + hw))
end
local function before(i) -- the running total before it
    if i == 0 then return cbase end
    return total(i - 1)
end

-- The value of a log: times st[0 .. cnt), units un[0 .. cnt), the latest time recorded when it
-- is later than the newest (LATEST), offsets of w bytes, then suffix (the numbers).
local function encode(st, un, cnt, latest_kept, w, suffix)
    local fmt, parts, run = packed_fmt(w), {}, 0
    local b = st[0] or latest_kept or 0
    for i = 0, cnt - 1 do
        run = (run + un[i]) % TWO32
        parts[i + 1] = struct.pack(fmt, st[i] - b) .. struct.pack('<I4', run)
    end
    if latest_kept then parts[cnt + 1] = struct.pack(fmt, latest_kept - b) .. struct.pack('<I4', run) end
    local f = ENTRIES + NUMBERED + w + (latest_kept and LATEST or 0)
    return string.char(f) .. struct.pack('<i8', b) .. struct.pack('<I4', 0) ..
        table.concat(parts) .. suffix
end

-- Reads the value s, and the latest time it records (what an earlier now is clamped to); false
-- if it is no sliding_log state of this form.
local function read()
    n, hw, base, cbase, latest, nums = 0, width, 0, 0, 0, nil
    if not s then return true end
    local f = string.byte(s, 1)
    if not f or f < ENTRIES + NUMBERED then return false end
    local tail = 1 + string.byte(s, -1)
    nums, f = string.sub(s, -tail, -2), f - ENTRIES - NUMBERED
    hw = f % 16
    local flags, len = f - hw, #s - tail
    if (hw ~= 4 and hw ~= 8) or (flags ~= 0 and flags ~= LATEST) then return false end
    hfmt, hew = packed_fmt(hw), hw + 4
    if len < HDR or (len - HDR) % hew ~= 0 then return false end
    base, cbase = struct.unpack('<i8', s, 2), struct.unpack('<I4', s, 10)
    n = (len - HDR) / hew
    if flags == LATEST then n = n - 1 end
    if n < 0 then return false end
    if n > 0 then latest = stamp(n - 1) end
    if flags == LATEST then
        if stamp(n) <= latest then return false end
        latest = stamp(n)
    end
    return true
end

-- An older value (one stamp per unit, lib/packed.lua) in this form: equal stamps one entry,
-- DROPPED one more unit at the oldest (the core's reading of the older form); nil if it is none.
local function from_older(v)
    local have, b, cnt, flags, onums = packed_read(v)
    if not have or (flags ~= 0 and flags ~= DROPPED and flags ~= LATEST) then return nil end
    local fmt, st, un, m, lat = packed_fmt(have), {}, {}, 0, 0
    if flags == LATEST then cnt = cnt - 1 end
    if cnt < 0 or (flags == DROPPED and cnt == 0) then return nil end
    for i = 0, cnt - 1 do
        local t = b + struct.unpack(fmt, v, HEADER + 1 + have * i)
        if m > 0 and st[m - 1] == t then
            un[m - 1] = un[m - 1] + 1
        else
            st[m], un[m], m = t, 1, m + 1
        end
    end
    if m > 0 then lat = st[m - 1] end
    if flags == LATEST then
        local t = b + struct.unpack(fmt, v, HEADER + 1 + have * cnt)
        if t <= lat then return nil end
        lat = t
    end
    if flags == DROPPED then un[0] = un[0] + 1 end
    local suffix = SUFFIX -- no numbers: written under the command's
    if onums then suffix = onums .. string.char(#onums) end
    return encode(st, un, m, lat > (st[m - 1] or 0) and lat or nil, have, suffix)
end

s = raw
if raw and string.byte(raw, 1) < ENTRIES then s = from_older(raw) end
if (raw and not s) or not read() or (nums ~= NUMS and not string.match(nums or NUMS, '^%d+:%d+$')) then
    return no_state_reply(key)
end
local saturated = not raw and closed -- a closed start: N units at closed, the whole limit taken
if saturated then
    s = encode({[0] = closed}, {[0] = limit}, 1, nil, width, SUFFIX)
    read()
end

local converted = nums and nums ~= NUMS -- written under other numbers
local tables, count_upto -- for a settle or a conversion only (no closure a decision needs)
if reserved or converted then
    -- The log read into tables: times st, units un, cnt entries.
    tables = function()
        local st, un = {}, {}
        for i = 0, n - 1 do
            st[i], un[i] = stamp(i), (total(i) - before(i)) % TWO32
        end
        return st, un, n
    end
    -- the number of entries t <= cutoff in st[0 .. cnt) (sorted): binary search
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
    local st, un, cnt = tables()
    local expired = count_upto(st, cnt, latest - window) -- out of the new window at the latest time
    local first = expired -- the oldest kept; beyond the limit's number, the older ones join it
    if cnt - expired > limit then first = cnt - limit end
    local ost, oun, m = {}, {}, 0
    for i = first, cnt - 1 do ost[i - first], oun[i - first], m = st[i], un[i], m + 1 end
    for i = expired, first - 1 do oun[0] = oun[0] + un[i] end
    s = nil -- fresh at now: the key goes
    if m > 0 and ost[m - 1] > now - window then
        s = encode(ost, oun, m, latest > ost[m - 1] and latest or nil, width, SUFFIX)
    end
    read()
end
if saturated then converted = true end -- written as a converted value is

if reserved and (reserved ~= actual or converted) then -- a settle (the core's), then a peek
    local st, un, cnt = tables()
    local lat, changed = latest, true
    local function drop(k) -- the oldest k entries
        for i = k, cnt - 1 do st[i - k], un[i - k] = st[i], un[i] end
        cnt = cnt - k
    end
    local function held()
        local h = 0
        for i = 0, cnt - 1 do h = h + un[i] end
        return h
    end
    if actual == reserved then -- nothing to settle: the converted log is written
        changed = false
    elseif actual < reserved then -- the charge's units go (see the core's sliding_log_refund)
        changed = false
        if cnt > 0 then
            local expired = count_upto(st, cnt, lat - window)
            if expired > 0 then changed = true end
            drop(expired)
            if cnt > 0 and charged > lat - window then
                -- the units from the first one stamped >= charged, or the newest k
                local h, at = held(), 0
                local k = math.min(reserved - actual, h)
                for i = 0, count_upto(st, cnt, charged - 1) - 1 do at = at + un[i] end
                if at + k > h then at = h - k end
                local lo, w = 0, 0
                for i = 0, cnt - 1 do -- units [at, at + k) go, and entries left without one
                    local hi = lo + un[i]
                    local cut = math.max(0, math.min(hi, at + k) - math.max(lo, at))
                    if un[i] > cut then st[w], un[w], w = st[i], un[i] - cut, w + 1 end
                    lo = hi
                end
                cnt, changed = w, true
            end
        end
    else -- debt: d units at the clamped now, past the limit
        local x, d = math.max(now, lat), actual - reserved
        drop(count_upto(st, cnt, x - window))
        local h = held()
        -- the window's units past N, bounded by max_debt: more is refused, nothing written
        if math.min(h + d, UNITS_MAX) - limit > (max_debt or limit) then
            return debt_reply(max_debt or limit)
        end
        if d >= UNITS_MAX then -- saturated: the newest UNITS_MAX units, the charge's own
            drop(cnt)
            d = UNITS_MAX
        elseif h > UNITS_MAX - d then -- the oldest units go, whole entries and part of one
            local x_units = h - (UNITS_MAX - d)
            local i = 0
            while un[i] <= x_units do x_units, i = x_units - un[i], i + 1 end
            drop(i)
            un[0] = un[0] - x_units
        end
        if not (cnt > 0 and st[cnt - 1] == x) and cnt == limit then -- full: the oldest joins the next
            if limit == 1 then
                st[0] = x -- the next is the charge's own
            else
                un[1] = un[1] + un[0]
                drop(1)
            end
        end
        if cnt > 0 and st[cnt - 1] == x then
            un[cnt - 1] = un[cnt - 1] + d
        else
            st[cnt], un[cnt], cnt = x, d, cnt + 1
        end
        lat = x
    end
    local was = s -- as this script writes it
    local value = was
    if cnt == 0 or st[cnt - 1] <= now - window then
        value = nil -- fresh: the key goes
    elseif changed or converted then
        value = encode(st, un, cnt, lat > st[cnt - 1] and lat or nil, width, SUFFIX)
    end
    if converted or value ~= was then store(key, raw, value, cnt > 0 and st[cnt - 1] + window) end
    converted = false
    s = value -- the peek below reads the settled log
    read()
end

now = math.max(now, latest) -- clamp to the latest time recorded
-- binary search: the number of entries t <= now - W (expired; the window excludes now - W)
local cutoff = now - window
local lo, hi = 0, n
while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if stamp(mid) > cutoff then hi = mid else lo = mid + 1 end
end
local expired = lo
local inside = 0
if n > expired then inside = (total(n - 1) - before(expired)) % TWO32 end

cost = shed(math.max(0, limit - inside), cost) -- a priority's reserve (lib/args.lua)
if cost <= limit - inside then
    if cost > 0 then -- writes the entries in the window and the new one, without LATEST
        local text
        local fmt = packed_fmt(width)
        local last = n - 1 -- the newest entry kept as it is; at now, it takes the cost
        local run = before(n) -- the running total through the newest (base's when none)
        if n > expired and stamp(n - 1) == now then last = n - 2 end
        if s and hw == width and now - base < 2 ^ (width == 4 and 32 or 62) then
            -- the new offset fits: keep the base and the bytes of the entries in the window
            text = string.char(ENTRIES + NUMBERED + width) .. string.sub(s, 2, 9) ..
                struct.pack('<I4', before(expired)) ..
                string.sub(s, HDR + 1 + hew * expired, HDR + hew * (last + 1))
        else -- rebase on the oldest entry in the window (or now)
            local new_base = now
            if n > expired then new_base = stamp(expired) end
            local parts = {string.char(ENTRIES + NUMBERED + width) .. struct.pack('<i8', new_base) ..
                struct.pack('<I4', before(expired))}
            for i = expired, last do
                parts[#parts + 1] = struct.pack(fmt, stamp(i) - new_base) .. struct.pack('<I4', total(i))
            end
            text = table.concat(parts)
            base = new_base
        end
        text = text .. struct.pack(fmt, now - base) .. struct.pack('<I4', (run + cost) % TWO32) .. SUFFIX
        redis.call('SET', key, text, 'PXAT', math.floor((now + window + 999) / 1000))
        inside = inside + cost
        return view({1, limit, math.max(0, limit - inside), 0, window, 0})
    end
    local reset = 0
    if inside > 0 then reset = stamp(n - 1) + window - now end
    return view({1, limit, math.max(0, limit - inside), 0, reset, 0})
end
if converted and cost > 0 then -- a cost leaves a converted value written, whatever the decision
    store(key, raw, s, n > 0 and stamp(n - 1) + window)
end
local retry = -1
if cost <= limit then
    -- inside + cost - N units have to leave: the entry holding the last of them sets the time
    local need, b = inside + cost - limit, before(expired)
    lo, hi = expired, n - 1
    while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if (total(mid) - b) % TWO32 >= need then hi = mid else lo = mid + 1 end
    end
    retry = stamp(lo) + window - now
end
local reset = 0
if inside > 0 then reset = stamp(n - 1) + window - now end
return view({0, limit, math.max(0, limit - inside), retry, reset, 0})
