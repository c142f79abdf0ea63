-- sliding_window.lua - sluice's sliding_window as a Redis script, for a Redis that forbids
-- modules. docs/lua.md has the contract of all six scripts and how the build makes
-- each shipped script from this file and the fragments in lib/ it includes; docs/algorithms.md
-- has the algorithm.
--
-- burst and buckets must be -1 or 0, max_delay_us 0. The estimate's products (count * window) can
-- pass 2^53, so they go through muldiv(), exact for limits up to 2^52. Windows are whole
-- microseconds, so this is the core's arithmetic scaled by 1000, and the decisions are the core's
-- reported in microseconds rounded up.
-- State: the current window's index k = floor(t / W) and the counts of windows k and k - 1, as the
-- decimal digits <digits of curr><digits of prev><curr><prev><k>; "curr:prev:k" for counts of ten
-- digits or more; then '#' and the window W in us it was written under (NUMS: the one number its
-- meaning depends on). A value written under another W is converted first, as the core does:
-- curr to the new window holding now, prev to the one holding the old window's start - 1 (the
-- window of now, the one before, or none). Only an admitted cost > 0 writes (SET .. PXAT the end
-- of window k + 1, when the key is fresh again), a settle that changes the state (a DEL when it
-- leaves it fresh), and a cost > 0 or a settle on a value it converted. A settle past the limit
-- (debt) counts past N, saturating at 2^52 (muldiv's divisors; the core at 2^62 - 1). A closed
-- start (closed_from) gives a key that does not exist the count N in the window holding its time
-- (none in the one before), written as a converted value is. A lease is a decision of up to
-- `want` units ending with the window (or lease_us); its return, a settle (lib/args.lua).
-- include: row
-- include: lib/args.lua

-- limit up to 2^52 (muldiv's divisors); burst, buckets and max_delay_us do not apply
local COUNT_MAX = 4503599627370496 -- 2^52
local err, limit, window, _, _, _, cost, now, reserved, actual, charged, closed, want, lease_len,
    _, max_debt = rule_args(COUNT_MAX, -1, 0, -1, 0, -1, 0)
if err then return redis.error_reply(err) end

-- floor(a * b / c) exactly, for integers a, b >= 0 and 0 < c <= 2^52 (the result must be below
-- 2^53). Doubles hold a * b exactly only below 2^53; past that, long multiplication over the
-- bits of b keeps the accumulator as q * c + r with r < c, so every step is exact.
local function muldiv(a, b, c)
    if a == 0 or b == 0 then return 0 end
    if a <= 4503599627370496 / b then
        local p = a * b
        local q = math.floor(p / c)
        local r = p - q * c
        if r < 0 then q = q - 1 elseif r >= c then q = q + 1 end
        return q
    end
    local qa = math.floor(a / c)
    local ra = a - qa * c
    if ra < 0 then qa, ra = qa - 1, ra + c elseif ra >= c then qa, ra = qa + 1, ra - c end
    local bits = {}
    while b > 0 do
        local h = math.floor(b / 2)
        bits[#bits + 1] = b - 2 * h
        b = h
    end
    local q, r = 0, 0
    for i = #bits, 1, -1 do
        q, r = 2 * q, 2 * r
        if r >= c then q, r = q + 1, r - c end
        if bits[i] == 1 then
            q, r = q + qa, r + ra
            if r >= c then q, r = q + 1, r - c end
        end
    end
    return q
end

local SUFFIX = '#' .. string.format('%d', window)

local key = KEYS[1]
local s = redis.call('GET', key)
local idx, curr, prev, converted = 0, 0, 0, false
if s then
    local body, nums = decimal_split(s, SUFFIX)
    local c, p, k = string.match(body, '^(%d+):(%d+):(%d+)$')
    if not c then
        local dc, dp = tonumber(string.sub(body, 1, 1)), tonumber(string.sub(body, 2, 2))
        if dc and dp and dc > 0 and dp > 0 then
            c, p = string.sub(body, 3, 2 + dc), string.sub(body, 3 + dc, 2 + dc + dp)
            k = string.sub(body, 3 + dc + dp)
        end
    end
    curr, prev, idx = tonumber(c), tonumber(p), tonumber(k)
    local from = nums and string.match(nums, '^%d+$') and tonumber(nums)
    if not curr or not prev or not idx or not string.match(c .. p .. k, '^%d+$') or
        curr > COUNT_MAX or prev > COUNT_MAX or idx > INT_MAX or
        (nums and (not from or from < 1000 or from > WINDOW_MAX_US)) then
        return no_state_reply(key)
    end
    if from then -- written under another window: the core's sliding_window_convert at now
        local kf = math.max(math.floor(now / from), idx)
        if idx == kf - 1 then
            prev, curr = curr, 0
        elseif idx ~= kf then
            prev, curr = 0, 0
        end
        idx = 0
        if prev > 0 or curr > 0 then
            local start = kf * from -- the old window's start: prev's units came before it
            local kt = math.floor(math.max(now, start) / window)
            local prev_to = start > 0 and math.floor((start - 1) / window) or 0
            if prev_to == kt then
                curr, prev = math.min(curr + prev, COUNT_MAX), 0
            elseif prev_to ~= kt - 1 then
                prev = 0
            end
            if curr > 0 or prev > 0 then idx = kt end
        end
        converted = true
    end
end
if not s and closed then -- a closed start: the whole limit taken at closed, written as converted
    idx, curr, prev, converted = math.floor(closed / window), limit, 0, true
end

local w = window
local function text_of(c, p, k) -- the state's value
    local cs, ps = string.format('%d', c), string.format('%d', p)
    if #cs < 10 and #ps < 10 then
        return string.format('%d%d%s%s%d', #cs, #ps, cs, ps, k) .. SUFFIX
    end
    return string.format('%s:%s:%d', cs, ps, k) .. SUFFIX
end

-- The key's value as the state now is (nil when fresh at now), and when it is fresh: the end of
-- window k + 1 (curr), or k (prev only). For a settle, or a value converted.
local value_now
if reserved or converted then
    value_now = function()
        local fresh = (idx + 1) * w
        if curr > 0 then fresh = fresh + w end
        if (curr > 0 or prev > 0) and fresh > now then return text_of(curr, prev, idx), fresh end
        return nil, fresh
    end
end

if reserved then -- a settle, then a peek
    local before = value_now()
    if actual < reserved then -- a refund from the charge's window: k's curr, or k - 1's prev
        local c, kc = reserved - actual, math.floor(charged / w)
        if kc == idx then
            curr = curr - math.min(c, curr)
        elseif kc == idx - 1 then
            prev = prev - math.min(c, prev)
        end
    elseif actual > reserved then -- debt: the difference, now (clamped), past the limit
        local k = math.max(math.floor(now / w), idx)
        if idx == k - 1 then
            prev, curr = curr, 0
        elseif idx ~= k then
            prev, curr = 0, 0
        end
        -- the estimate's units past what it allows at e (the core's debt), bounded by max_debt:
        -- more is refused, nothing written
        local e = math.max(now - k * w, 0)
        local over = math.min(curr + (actual - reserved), COUNT_MAX) -
            (limit - prev + muldiv(prev, e, w))
        if over > (max_debt or limit) then return debt_reply(max_debt or limit) end
        curr, idx = math.min(curr + (actual - reserved), COUNT_MAX), k
    end
    local value, fresh = value_now()
    -- written when the settle changed the state (or the stored value was stale), or converted
    if converted or (reserved ~= actual and (value ~= before or (s and not before))) then
        store(key, s, value, fresh)
    end
    converted = false
end

-- a cost or a lease on a value written under another window leaves it converted, whatever the
-- decision
local converted_value, converted_fresh
if converted and (cost > 0 or want) then converted_value, converted_fresh = value_now() end

local k = math.floor(now / w)
if k < idx then -- clamp to the start of the stored window
    k = idx
end
local e = math.max(now - k * w, 0)
if idx == k - 1 then -- roll the counts forward to window k
    prev, curr = curr, 0
elseif idx ~= k then
    prev, curr = 0, 0
end
-- floor((N * W - prev * (W - e)) / W) = N - prev + floor(prev * e / W): the units the
-- estimate allows at e; admitted iff curr + cost is within it
local allows = limit - prev + muldiv(prev, e, w)

local function reset()
    if curr > 0 then return 2 * w - e end
    if prev > 0 then return w - e end
    return 0
end

if want then -- a lease: a decision of what the estimate allows, ending no later than the window
    local n, at = math.min(want, math.max(0, allows - curr)), math.max(now, k * w)
    if n == 0 then
        if converted_fresh then store(key, s, converted_value, converted_fresh) end
        return {0, at, at, math.max(0, allows - curr), reset()}
    end
    curr = curr + n
    redis.call('SET', key, text_of(curr, prev, k), 'PXAT', math.floor(((k + 2) * w + 999) / 1000))
    return {n, at, math.min(at + lease_len, (k + 1) * w), math.max(0, allows - curr), reset()}
end

cost = shed(math.max(0, allows - curr), cost) -- a priority's reserve (lib/args.lua)
if cost <= limit - curr and curr + cost <= allows then
    if cost > 0 then
        curr = curr + cost
        redis.call('SET', key, text_of(curr, prev, k), 'PXAT',
            math.floor(((k + 2) * w + 999) / 1000))
    end
    return view({1, limit, math.max(0, allows - curr), 0, reset(), 0})
end
if converted_fresh then store(key, s, converted_value, converted_fresh) end
local retry = -1
if cost <= limit then
    local room = limit - curr - cost
    -- within this window at e' = W - floor(room * W / prev), if that is before its end
    if room >= 0 and prev > 0 and room * w >= prev then
        retry = w - e - muldiv(room, w, prev)
    else -- the next window: prev' = curr, curr' = 0
        local e2 = 0
        if curr > limit - cost then e2 = w - muldiv(limit - cost, w, curr) end
        retry = w - e + e2
    end
end
return view({0, limit, math.max(0, allows - curr), retry, reset(), 0})
