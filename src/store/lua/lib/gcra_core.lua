-- lib/gcra_core.lua - GCRA as token_bucket.lua and gcra.lua share it (docs/lua.md), put into
-- those scripts by the build in place of their include line, after lib/args.lua and the script's
-- capacity(burst): the capacity for the rule's burst B (the limit where the rule says -1), or nil
-- and the error. That function is the only difference between the two: token_bucket's capacity is
-- B (at least 1), gcra's (redis-cell's CL.THROTTLE) B + 1.
--
-- burst -1 = limit; buckets must be -1 or 0. The state is the core's own: TAT (the theoretical
-- arrival time) in integer nanoseconds, in decimal, then '#' and the emission interval T in ns
-- it was written under (NUMS: the one number its meaning depends on). Nanoseconds do not fit a
-- double, so every time here is a pair (q, r): q microseconds and r in [0, 1000) nanoseconds.
-- That keeps the core's T = ceil(W / N) in ns, so decisions are the core's for every rule,
-- reported in microseconds rounded up. A value written under another T is converted first, as
-- the core does: the units not yet refilled, ceil((TAT - now) / T_old), taken again at now. Only
-- an admitted cost > 0 writes (SET .. PXAT, the key vanishes when its TAT passes and it is fresh
-- again), a settle that changes the TAT (a DEL when it leaves it fresh), and a cost > 0 or a
-- settle on a value it converted. A refund gives back only what the bucket has not
-- refilled by itself, c * T - (now - charged), as the core does; a debt moves TAT past the
-- tolerance, saturating just below 2^53 us (the year 2255; the core at 2^63 - 1 ns, 2262). A
-- closed start (closed_from) gives a key that does not exist the TAT of the whole capacity taken
-- at its time, written as a converted value is. A lease of n units for L us moves TAT to
-- max(TAT, now) + n * T + L (granted as far as that leaves TAT - tol <= now, L at most tol - T);
-- its return is a refund of the unused units and L charged at the lease's time (lib/args.lua).
local TOL_MAX_Q, TOL_MAX_R = 2305843009213693, 951 -- SL_TOLERANCE_MAX_NS, (2^63 - 1) / 4 ns
local CAP_MAX = 9000000000000 -- capacity * 999 ns stays below 2^53

-- limit up to CAP_MAX; burst -1 (the limit) up to CAP_MAX - 1; buckets does not apply; max_delay_us
-- up to 366 days
local TAT_MAX_Q = 9007199254740990 -- a debt's TAT saturates at (TAT_MAX_Q, 0): 2^53 - 2 us
local err, limit, window, burst, _, max_delay, cost, now, reserved, actual, charged, closed, want,
    lease_len, hold, max_debt = rule_args(CAP_MAX, -1, CAP_MAX - 1, -1, 0, 0, WINDOW_MAX_US)
if err then return redis.error_reply(err) end
if burst == -1 then burst = limit end
local cap
cap, err = capacity(burst)
if err then return redis.error_reply(err) end

-- (q, r) pairs: q * 1000 + r ns with 0 <= r < 1000; q may be negative.
local function norm(q, r)
    local k = math.floor(r / 1000)
    return q + k, r - 1000 * k
end
local function gt(aq, ar, bq, br)
    return aq > bq or (aq == bq and ar > br)
end
local function ceil_us(q, r)
    if r > 0 then return q + 1 end
    return q
end

-- T = ceil(1000 W / N) ns, the core's emission interval: with W = a N + b (b < N),
-- T = 1000 a + ceil(1000 b / N), and 1000 b < 2^53 since N <= CAP_MAX
local a = math.floor(window / limit)
local b = window - a * limit
local d = math.floor(1000 * b / limit)
local rest = 1000 * b - d * limit
if rest < 0 then
    d, rest = d - 1, rest + limit
elseif rest >= limit then
    d, rest = d + 1, rest - limit
end
if rest > 0 then d = d + 1 end
local tq, tr = norm(a, d)
local function times_t(k) -- k * T, exact while k * 999 < 2^53 (k <= CAP_MAX)
    return norm(k * tq, k * tr)
end
-- k * (uq us + ur ns) for any k >= 0 (T, or another interval), or nil when it is 2^53 us or
-- more (beyond any TAT): exact, since doubles hold every integer below 2^53 and round a larger
-- sum to 2^53 or more
local function times_big(k, uq, ur)
    local q = k * uq
    if q >= 9007199254740992 then return nil end
    local hi = math.floor(k / 1000)
    local x = (k - hi * 1000) * ur -- k = 1000 hi + lo: k * ur = 1000 (hi * ur) + lo * ur
    local xq = math.floor(x / 1000)
    q = q + hi * ur + xq
    if q >= 9007199254740992 then return nil end
    return q, x - xq * 1000
end
local tolq, tolr = times_t(cap) -- the tolerance, T * capacity
if gt(tolq, tolr, TOL_MAX_Q, TOL_MAX_R) then
    return redis.error_reply('ERR sluice ' .. ALG .. ': the rule overflows 64-bit nanoseconds ' ..
        '(emission interval times capacity above (2^63 - 1) / 4 ns)')
end
if lease_len then -- a lease holds its time too: at most tolerance - T, room for one unit
    local mq, mr = norm(tolq - tq, tolr - tr)
    if gt(lease_len, 0, mq, mr) then
        return redis.error_reply(string.format('ERR sluice %s: lease_us must be at most %.0f ' ..
            '(the tolerance less one interval), got %.0f', ALG, math.max(mq, 0), lease_len))
    end
end

-- What a request at now (n_q, n_r) could still take with the bucket's level at t (t_q, t_r):
-- floor((tol - (t - now)) / T), found from a double's estimate and corrected exactly.
local function remaining_at(t_q, t_r, n_q, n_r)
    local hq, hr = norm(tolq - t_q + n_q, tolr - t_r + n_r)
    if hq < 0 or (hq == 0 and hr == 0) then return 0 end
    local function over(k) -- k * T > headroom
        local q, r = times_t(k)
        return gt(q, r, hq, hr)
    end
    local k = math.floor((hq * 1000 + hr) / (tq * 1000 + tr))
    while k > 0 and over(k) do k = k - 1 end
    while not over(k + 1) do k = k + 1 end
    return k
end

local function tat_text(q, r) -- TAT's value (or T's): its decimal ns
    if q > 0 then return string.format('%d%03d', q, r) end
    return tostring(r)
end
local SUFFIX = '#' .. tat_text(tq, tr)

local key = KEYS[1]
local s = redis.call('GET', key)
local tatq, tatr, converted = 0, 0, false
if s then
    local body, nums = decimal_split(s, SUFFIX)
    if not string.match(body, '^%d+$') or #body > 19 or
        (nums and (not string.match(nums, '^%d+$') or #nums > 17 or tonumber(nums) == 0)) then
        return no_state_reply(key)
    end
    if #body > 3 then
        tatq, tatr = tonumber(string.sub(body, 1, -4)), tonumber(string.sub(body, -3))
    else
        tatr = tonumber(body)
    end
    if nums then -- written under another T: the core's gcra_convert at now
        local fq, fr = 0, tonumber(nums) -- that T, as a pair
        if #nums > 3 then
            fq, fr = tonumber(string.sub(nums, 1, -4)), tonumber(string.sub(nums, -3))
        end
        if gt(tatq, tatr, now, 0) then
            -- u = ceil(owed / T_old), the smallest u whose u * T_old covers what is owed: a
            -- double's estimate, then a bracket around it and a bisection, all exact
            local oq, orr = norm(tatq - now, tatr)
            local function covers(u)
                local pq, pr = times_big(u, fq, fr)
                return not pq or not gt(oq, orr, pq, pr)
            end
            local est = math.floor((oq * 1000 + orr) / (fq * 1000 + fr))
            local lo, hi, step = math.max(est - 1, 0), math.max(est, 1), 1
            while not covers(hi) do hi, step = hi + step, step * 2 end
            step = 1
            while lo > 0 and covers(lo) do lo, step = math.max(lo - step, 0), step * 2 end
            while hi - lo > 1 do -- covers(hi), and not covers(lo): lo * T_old < owed
                local mid = math.floor((lo + hi) / 2)
                if covers(mid) then hi = mid else lo = mid end
            end
            local pq, pr = times_big(hi, tq, tr) -- taken again at now: TAT = now + u * T
            if pq then tatq, tatr = norm(now + pq, pr) end
            if not pq or gt(tatq, tatr, TAT_MAX_Q, 0) then tatq, tatr = TAT_MAX_Q, 0 end
        else
            tatq, tatr = 0, 0 -- a full bucket stays fresh
        end
        converted = true
    end
end
if not s and closed then -- a closed start: the whole capacity taken at closed, TAT = closed + tol
    tatq, tatr = norm(closed + tolq, tolr)
    converted = true -- written as a converted value is
end

-- no clamp of a now that stepped back: the decision is monotone in now (an earlier now sees less
-- refilled), and a TAT in debt lies beyond any bound of the last admission's time
local nq, nr = now, 0

if reserved and (reserved ~= actual or converted or hold > 0) then -- a settle, then a peek
    local before_q, before_r = tatq, tatr
    if actual == reserved and hold == 0 then -- nothing to settle: the converted state is written
    elseif actual <= reserved then -- a refund (of a lease: its unused units and its time, hold)
        -- now no earlier than TAT - tol - max_delay (no admission is older), and the part of the
        -- charge's c * T not refilled since charged comes off TAT, TAT no lower than now
        local aq, ar = norm(tatq - tolq - max_delay, tatr - tolr)
        local mq, mr = nq, nr
        if gt(aq, ar, mq, mr) then mq, mr = aq, ar end
        if gt(tatq, tatr, mq, mr) then
            local cq, cr = times_big(reserved - actual, tq, tr)
            local lq, lr = mq, mr -- TAT - back, when back > 0
            if cq then lq, lr = norm(tatq - cq - hold + (mq - charged), tatr - cr + mr) end
            if gt(tatq, tatr, lq, lr) then -- back > 0
                if gt(lq, lr, mq, mr) then mq, mr = lq, lr end
                tatq, tatr = mq, mr
            end
        end
    else -- debt: TAT = max(TAT, now) + d * T
        local dq, dr = times_big(actual - reserved, tq, tr)
        local bq, br = tatq, tatr
        if gt(nq, nr, bq, br) then bq, br = nq, nr end
        if dq then bq, br = norm(bq + dq, br + dr) end
        if not dq or gt(bq, br, TAT_MAX_Q, 0) then bq, br = TAT_MAX_Q, 0 end
        -- the debt, the time owed past a bucket emptied in units of T, rounded up: more than
        -- max_debt (default the capacity) is TAT' - now - tol > max_debt * T; refused, nothing
        -- written (a bound past 2^53 us is none)
        local mq, mr = times_big(max_debt or cap, tq, tr)
        if mq then
            local lq, lr = norm(nq + tolq + mq, nr + tolr + mr)
            if gt(bq, br, lq, lr) then return debt_reply(max_debt or cap) end
        end
        tatq, tatr = bq, br
    end
    local value -- nil: fresh, the key goes
    if gt(tatq, tatr, nq, nr) then value = tat_text(tatq, tatr) .. SUFFIX end
    if converted or tatq ~= before_q or tatr ~= before_r or (s and not value) then
        store(key, s, value, ceil_us(tatq, tatr))
    end
    converted = false
end

-- TAT0 = max(TAT, now)
local t0q, t0r = tatq, tatr
if gt(nq, nr, tatq, tatr) then t0q, t0r = nq, nr end
local reset0 = ceil_us(norm(t0q - nq, t0r - nr))

-- a cost or a lease on a value written under another T leaves it converted, whatever the decision
local keep_converted
if converted and (cost > 0 or want) then
    keep_converted = function()
        local value -- nil: fresh, the key goes
        if gt(tatq, tatr, nq, nr) then value = tat_text(tatq, tatr) .. SUFFIX end
        store(key, s, value, ceil_us(tatq, tatr))
    end
end

if want then -- a lease: n units and its time, TAT = max(TAT, now) + n * T + lease_us
    local lq, lr = t0q + lease_len, t0r
    local n = math.min(want, remaining_at(lq, lr, nq, nr))
    if n == 0 then
        if keep_converted then keep_converted() end
        return {0, now, now, remaining_at(t0q, t0r, nq, nr), reset0}
    end
    local dq, dr = times_t(n)
    local t1q, t1r = norm(lq + dq, lr + dr)
    redis.call('SET', key, tat_text(t1q, t1r) .. SUFFIX, 'PXAT',
        math.floor((ceil_us(t1q, t1r) + 999) / 1000))
    return {n, now, now + lease_len, remaining_at(t1q, t1r, nq, nr),
        ceil_us(norm(t1q - nq, t1r - nr))}
end

cost = shed(remaining_at(t0q, t0r, nq, nr), cost) -- a priority's reserve (lib/args.lua)
if SHED then max_delay = 0 end -- a shed request is judged without delay
if cost > cap then -- c * T > tol: never
    if keep_converted then keep_converted() end
    return view({0, cap, remaining_at(t0q, t0r, nq, nr), -1, reset0, 0})
end
local t1q, t1r = norm(t0q + cost * tq, t0r + cost * tr)
local wq, wr = norm(t1q - tolq - nq, t1r - tolr - nr) -- wait = TAT' - tol - now
if gt(wq, wr, max_delay, 0) then
    -- a cost waits until it fits with no delay; a peek (never delayed) until the wait is max_delay
    local rq, rr = wq, wr
    if cost == 0 then rq, rr = norm(wq - max_delay, wr) end
    if keep_converted then keep_converted() end
    return view({0, cap, remaining_at(t0q, t0r, nq, nr), ceil_us(rq, rr), reset0, 0})
end
local delay = 0
if cost > 0 then
    if wq >= 0 then delay = ceil_us(wq, wr) end -- a peek is never delayed
    redis.call('SET', key, tat_text(t1q, t1r) .. SUFFIX, 'PXAT',
        math.floor((ceil_us(t1q, t1r) + 999) / 1000))
end
return view({1, cap, remaining_at(t1q, t1r, nq, nr), 0, ceil_us(norm(t1q - nq, t1r - nr)), delay})
