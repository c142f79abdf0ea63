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
-- or 8 for limits or counts of 2^32 or more), the 8-byte time, then the counts, then the numbers
-- it was written under, "W:K" (NUMS). An admission rewrites it (O(K) bytes; SET .. PXAT when its
-- bucket stops counting, when the key is fresh again); a rejection or a peek only reads. A settle
-- rewrites it when it changes it (a DEL when it leaves it fresh): a refund takes units from the
-- charge's bucket first, then older ones still counted, and keeps the latest admission's time; a
-- debt adds to the current bucket as an admission does, the total saturating at 2^53 - 1 (the
-- core at 2^62 - 1). A value written under another window or bucket count is converted first, as
-- the core does: each bucket's count goes to the new bucket holding its last us (the latest
-- admission, for the newest), dropped when that is older than the new ring reaches; a cost > 0 or
-- a settle on a converted value writes it, whatever the decision. A closed start (closed_from)
-- gives a key that does not exist the count N in the bucket holding its time, as the latest
-- admission's, written as a converted value is. A lease is a decision of up to `want` units
-- ending with the current bucket (or lease_us); its return, a settle (lib/args.lua).
-- include: row
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
local err, limit, window, _, K, _, cost, now, reserved, actual, charged, closed, want, lease_len,
    _, max_debt = rule_args(INT_MAX, -1, 0, -1, 4096, -1, 0, check_buckets)
if err then return redis.error_reply(err) end

local G = window / K
local width = 8
if limit < 4294967296 then width = 4 end
local NUMS = string.format('%d:%d', window, K)
local SUFFIX = NUMS .. string.char(#NUMS)

local key = KEYS[1]
local raw = redis.call('GET', key)
local s = raw
local latest, m, have, flags, nums = 0, 0, width, 0, nil
if s then
    have, latest, m, flags, nums = packed_read(s)
    if not have or flags ~= 0 then return no_state_reply(key) end
end
local have_fmt = packed_fmt(have)
local newest = math.floor(latest / G) -- the stored counts are buckets newest - m + 1 .. newest
local first = newest - m + 1
-- Reads the state from the packed value text (nil: a fresh state) into the locals above.
local function load(text)
    have, latest, m = width, 0, 0
    if text then have, latest, m = packed_read(text) end
    have_fmt = packed_fmt(have)
    newest = math.floor(latest / G)
    first = newest - m + 1
end
local function count(j)
    if j < first or j > newest then return 0 end
    return struct.unpack(have_fmt, s, HEADER + 1 + have * (j - first))
end

-- The value of a state: the time t, then the counts get(j) of buckets from .. to, plus add at
-- bucket add_j, leading empty ones left out (none at all: nil), w bytes each.
local function text_of(t, from, to, get, add_j, add, w)
    local fmt, parts = packed_fmt(w), {string.char(w + NUMBERED) .. struct.pack('<i8', t)}
    for j = from, to do
        local c = get(j)
        if j == add_j then c = c + add end
        if c > 0 or #parts > 1 then parts[#parts + 1] = struct.pack(fmt, c) end
    end
    if #parts == 1 then return nil end
    parts[#parts + 1] = SUFFIX
    return table.concat(parts)
end

local converted, converted_fresh = nums and nums ~= NUMS, 0 -- written under other numbers
if converted then -- the core's sliding_buckets_convert
    local wf, kf = string.match(nums, '^(%d+):(%d+)$')
    wf, kf = tonumber(wf), tonumber(kf)
    if not wf or wf < 1000 or wf > WINDOW_MAX_US or kf < 1 or kf > 4096 or wf % kf ~= 0 then
        return no_state_reply(key)
    end
    local gf = wf / kf
    local newest_f = math.floor(latest / gf)
    local first_f = newest_f - m + 1
    local top = math.floor(latest / G) -- latest stays: the new ring ends at its bucket
    local oldest = top - K
    local counts, big = {}, false
    for j = math.max(newest_f - kf, first_f, 0), newest_f do
        local c = struct.unpack(have_fmt, s, HEADER + 1 + have * (j - first_f))
        local to = top -- the bucket holding the last us its units can have had
        if j ~= newest_f then to = math.floor(((j + 1) * gf - 1) / G) end
        if c > 0 and to >= oldest then
            counts[to] = (counts[to] or 0) + c
            big = big or counts[to] >= 4294967296
        end
    end
    local function get(j) return counts[j] or 0 end
    -- fresh at now when no bucket counted at now holds a unit
    local bx = math.floor(math.max(now, latest) / G)
    for j = top, math.max(oldest, bx - K), -1 do
        if get(j) > 0 then
            converted_fresh = (j + K + 1) * G
            break
        end
    end
    s = nil
    if converted_fresh > 0 then
        s = text_of(latest, oldest, top, get, nil, 0, big and 8 or width)
    end
    load(s)
end
if not raw and closed then -- a closed start: the whole limit taken at closed, in its bucket
    local b = math.floor(closed / G)
    s = text_of(closed, b, b, function() return 0 end, b, limit, width)
    load(s)
    converted, converted_fresh = true, (b + K + 1) * G -- written as a converted value is
end

if reserved and (reserved ~= actual or converted) then -- a settle, then a peek
    local x = math.max(now, latest) -- clamped
    local bx = math.floor(x / G)
    local counts = {}
    for j = first, newest do counts[j] = count(j) end
    if actual == reserved then -- nothing to settle: the converted state is written
    elseif actual < reserved then
        -- the charge's bucket, then older ones still counted (none when all have left)
        local c, j = reserved - actual, math.min(math.floor(charged / G), newest)
        if bx - newest > K then j = first - 1 end
        while j >= math.max(first, bx - K) and c > 0 do
            local take = math.min(counts[j], c)
            counts[j], c, j = counts[j] - take, c - take, j - 1
        end
    else -- debt: the difference in the current bucket, past the limit, as an admission adds
        -- the counted units past N (buckets bx - K + 1 .. bx, and bx - K while e <= G - 2),
        -- bounded by max_debt: more is refused, nothing written
        local lo, inside = bx - K, 0
        if x - bx * G > G - 2 then lo = lo + 1 end
        for j = math.max(first, lo), math.min(newest, bx) do inside = inside + counts[j] end
        if math.min(inside + (actual - reserved), INT_MAX) - limit > (max_debt or limit) then
            return debt_reply(max_debt or limit)
        end
        local kept = 0
        for j = math.max(first, bx - K), newest do kept = kept + counts[j] end
        first = math.max(first, bx - K)
        for j = math.max(newest + 1, first), bx do counts[j] = 0 end
        counts[bx] = counts[bx] + math.min(actual - reserved, INT_MAX - kept)
        latest, newest = x, bx
    end
    local fresh, text = 0, nil -- when the newest counted non-empty bucket stops counting
    for j = newest, math.max(first, bx - K), -1 do
        if counts[j] > 0 then
            fresh = (j + K + 1) * G
            break
        end
    end
    if fresh > 0 then -- 8-byte counts when the limit or a count (a debt) needs them
        local w = width
        for j = first, newest do
            if counts[j] >= 4294967296 then w = 8 end
        end
        text = text_of(latest, first, newest, function(j) return counts[j] end, nil, 0, w)
    end
    local was = s and packed_numbered(s, nums, SUFFIX) -- as this script writes it
    if converted or text ~= was then store(key, raw, text, fresh) end
    converted = false
    s = text -- the peek below reads the settled state
    have, m = width, 0
    if text then
        have, latest, m = packed_read(text)
    end
    have_fmt = packed_fmt(have)
    newest = math.floor(latest / G)
    first = newest - m + 1
end

now = math.max(now, latest) -- clamp to the latest admission
local b = math.floor(now / G)
local lo = b - K -- the oldest bucket counted (see above)
local inside = 0
for j = math.max(first, lo), newest do inside = inside + count(j) end

local function drop_time(j) -- when bucket j stops being counted
    return (j + K + 1) * G
end

if want and want > 0 and inside < limit then -- a lease: a decision of what remains, to the bucket's end
    local n = math.min(want, limit - inside)
    local text = text_of(now, math.max(first, lo), b, count, b, n, width)
    redis.call('SET', key, text, 'PXAT', math.floor((drop_time(b) + 999) / 1000))
    return {n, now, math.min(now + lease_len, (b + 1) * G), limit - inside - n, drop_time(b) - now}
end

cost = shed(math.max(0, limit - inside), cost) -- a priority's reserve (lib/args.lua)
if cost <= limit - inside then
    if cost > 0 then
        -- every count is within the limit: none was admitted otherwise
        local text = text_of(now, math.max(first, lo), b, count, b, cost, width)
        redis.call('SET', key, text, 'PXAT', math.floor((drop_time(b) + 999) / 1000))
        inside = inside + cost
        return view({1, limit, math.max(0, limit - inside), 0, drop_time(b) - now, 0})
    end
end

local function reset()
    if inside == 0 then return 0 end
    for j = math.min(b, newest), lo, -1 do -- the newest non-empty counted bucket
        if count(j) > 0 then return drop_time(j) - now end
    end
    return 0
end

if converted and (cost > 0 or want) then -- a cost or a lease leaves a converted value written
    store(key, raw, s, converted_fresh)
end
if want then -- a lease of nothing
    return {0, now, now, math.max(0, limit - inside), reset()}
end
if cost <= limit - inside then -- a peek
    return view({1, limit, math.max(0, limit - inside), 0, reset(), 0})
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
return view({0, limit, math.max(0, limit - inside), retry, reset(), 0})
