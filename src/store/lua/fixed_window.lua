-- fixed_window.lua - sluice's fixed_window as a Redis script, for a Redis that forbids modules.
-- docs/lua.md has the contract of all six scripts and how the build makes each one shipped script
-- from this file and the fragments in lib/ it includes; docs/algorithms.md has the algorithm.
--
-- burst and buckets must be -1 or 0, max_delay_us 0. Windows are whole microseconds, so every time
-- the core computes for whole-microsecond inputs is 1000 times this script's: the decisions are
-- the core's.
-- State: the count and the window index k = floor(t / W), as the decimal digits <digits of
-- count><count><k> ("15" .. "1666666666" is count 5 in window 1666666666); "count:k" for counts
-- of ten digits or more; then '#' and the window W in us it was written under (NUMS: the one
-- number its meaning depends on). A value written under another W is converted first, as the
-- core does: the count of the window of now goes to the new window holding now. Only an admitted
-- cost > 0 writes (SET .. PXAT the window's end, when the key is fresh again), a settle that
-- changes the state (a DEL when it leaves it fresh), and a cost > 0 or a settle on a value it
-- converted. A settle past the limit (debt) counts past N, saturating at 2^53 - 1 (the core at
-- 2^62 - 1). A closed start (closed_from) gives a key that does not exist the count N in the
-- window holding its time, written as a converted value is. A lease is a decision of up to
-- `want` units ending with the window (or lease_us); its return, a settle (lib/args.lua).
-- include: row
-- include: lib/args.lua

-- limit up to 2^53 - 1; burst, buckets and max_delay_us do not apply
local err, limit, window, _, _, _, cost, now, reserved, actual, charged, closed, want, lease_len,
    _, max_debt = rule_args(INT_MAX, -1, 0, -1, 0, -1, 0)
if err then return redis.error_reply(err) end
max_debt = max_debt or limit -- the capacity
local SUFFIX = '#' .. string.format('%d', window)

local key = KEYS[1]
local s = redis.call('GET', key)
local idx, count, converted = 0, 0, false
if s then
    local body, nums = decimal_split(s, SUFFIX)
    local c, k = string.match(body, '^(%d+):(%d+)$')
    if not c then
        local d = tonumber(string.sub(body, 1, 1))
        if d and d > 0 then
            c, k = string.sub(body, 2, 1 + d), string.sub(body, 2 + d)
        end
    end
    count, idx = tonumber(c), tonumber(k)
    local from = nums and string.match(nums, '^%d+$') and tonumber(nums)
    if not count or not idx or not string.match(c, '^%d+$') or not string.match(k, '^%d+$') or
        count > INT_MAX or idx > INT_MAX or
        (nums and (not from or from < 1000 or from > WINDOW_MAX_US)) then
        return no_state_reply(key)
    end
    if from then -- written under another window: the core's fixed_window_convert at now
        local kf = math.max(math.floor(now / from), idx)
        if idx == kf and count > 0 then
            idx = math.floor(math.max(now, kf * from) / window)
        else
            count, idx = 0, 0
        end
        converted = true
    end
end
if not s and closed then -- a closed start: the whole limit taken at closed, written as converted
    count, idx, converted = limit, math.floor(closed / window), true
end

local function text_of(c, k) -- the state's value
    local digits = string.format('%d', c)
    if #digits < 10 then return string.format('%d%s%d', #digits, digits, k) .. SUFFIX end
    return string.format('%s:%d', digits, k) .. SUFFIX
end

-- The key's value as the state now is (nil when fresh at now): for a settle, or a value converted
local value_now
if reserved or converted then
    value_now = function()
        if count > 0 and idx >= math.floor(now / window) then return text_of(count, idx) end
        return nil
    end
end

if reserved then -- a settle, then a peek
    local before = value_now()
    if actual < reserved then -- a refund from the charge's window, if it is the stored one
        if idx == math.floor(charged / window) then
            count = count - math.min(reserved - actual, count)
        end
    elseif actual > reserved then -- debt: the difference, now (clamped), past the limit
        local k = math.max(math.floor(now / window), idx)
        if k ~= idx then count = 0 end
        -- the window's units past N, bounded by max_debt: more is refused, nothing written
        if math.min(count + (actual - reserved), INT_MAX) - limit > max_debt then
            return debt_reply(max_debt)
        end
        count, idx = math.min(count + (actual - reserved), INT_MAX), k
    end
    local value = value_now()
    -- written when the settle changed the state (or the stored value was stale), or converted
    if converted or (reserved ~= actual and (value ~= before or (s and not before))) then
        store(key, s, value, (idx + 1) * window)
    end
    converted = false
end

-- a cost or a lease on a value written under another window leaves it converted, whatever the
-- decision
local converted_value, converted_fresh
if converted and (cost > 0 or want) then
    converted_value, converted_fresh = value_now(), (idx + 1) * window
end

local t = now
local k = math.floor(t / window)
if k < idx then -- clamp to the start of the stored window
    k = idx
    t = k * window
end
if idx ~= k then count = 0 end
local until_next = (k + 1) * window - t

if want then -- a lease: a decision of what remains, ending no later than the window
    local n = math.min(want, math.max(0, limit - count))
    if n == 0 then
        if converted_fresh then store(key, s, converted_value, converted_fresh) end
        return {0, t, t, math.max(0, limit - count), count > 0 and until_next or 0}
    end
    count = count + n
    redis.call('SET', key, text_of(count, k), 'PXAT', math.floor(((k + 1) * window + 999) / 1000))
    return {n, t, math.min(t + lease_len, (k + 1) * window), limit - count, until_next}
end

cost = shed(math.max(0, limit - count), cost) -- a priority's reserve (lib/args.lua)
if cost <= limit - count then
    if cost > 0 then
        count = count + cost
        redis.call('SET', key, text_of(count, k), 'PXAT',
            math.floor(((k + 1) * window + 999) / 1000))
    end
    return view({1, limit, math.max(0, limit - count), 0, count > 0 and until_next or 0, 0})
end
if converted_fresh then store(key, s, converted_value, converted_fresh) end
local retry = until_next
if cost > limit then retry = -1 end
return view({0, limit, math.max(0, limit - count), retry, count > 0 and until_next or 0, 0})
