-- lib/args.lua - the part of the contract every script shares (docs/lua.md): the arguments,
-- their checks and the clock. Not a script of its own: the build puts it into each script in
-- place of the script's include line, after the script's row (its include line "row": ALG, the
-- algorithm's name, and NO_LEASE, why it cannot lease or nil, from src/core/algorithms.c).
--
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us cost [now_us]
--           [closed_from from_us] [reserve units]
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us settle reserved actual
--           charged_us|now [now_us] [max_debt units] [closed_from from_us]
--   -> {allowed 1|0, limit, remaining, retry_after_us, reset_after_us, delay_us}
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us lease want lease_us [now_us]
--           [closed_from from_us]
--   -> {granted, at_us, until_us, remaining, reset_after_us}
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us return granted unused at_us
--           until_us [now_us] [closed_from from_us]
--   -> a peek's reply, as a settle's
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us acquire cost hold_us entropy
--           [now_us] [closed_from from_us] [reserve units]
--   -> {allowed 1|0, limit, remaining, retry_after_us, reset_after_us, hold_id}
--   EVALSHA sha 1 key limit window_us burst buckets max_delay_us release id [now_us]
--   -> OK, or the error of a hold the key does not hold
--
-- now_us is the test clock; without it the time is the server's TIME. closed_from is a closed
-- start: a key that does not exist is taken, for one window from from_us, as having taken the
-- rule's whole capacity at from_us (the core's sl_state_saturate()), its usage being unknown; a
-- cost or a settle writes that state whatever it decides, as a converted value's. Times are integer
-- microseconds in Lua numbers (doubles, exact to 2^53 us, 285 years). A settle gives back
-- reserved - actual units charged at charged_us (now: the settle's time), or charges actual -
-- reserved past the limit, and replies with a peek; its arguments are the core's sl_settle().
-- max_debt (a settle's; default the rule's capacity, 0 = no debt) bounds what a key may owe past
-- its limit: a charge that would leave it owing more is refused (debt_reply()), nothing written.
-- A lease grants up to `want` units for at most lease_us (the core's sl_lease()); a return gives
-- back `unused` units of a lease granted at at_us until until_us (sl_lease_return()): a settle
-- of unused units reserved at at_us that cost 0, and for token_bucket and gcra also the lease
-- time until_us - at_us (`hold`), charged at at_us. An acquire (an algorithm with HOLDS only)
-- takes cost units as one hold living hold_us (at least 1 ms, at most the window); entropy
-- (48 bits, from the caller) makes the key's hold ids at its first acquire. A release gives the
-- hold of that id back.
-- reserve (a decision's or an acquire's) is a priority's: the units the request must leave for
-- higher priorities (the core's sl_decide_reserved()). The request is admitted only when a peek's
-- remaining is at least cost + reserve; else it is shed: decided as cost + reserve, which every
-- script refuses without writing (never delayed: max_delay 0), and its reply's remaining is the
-- priority's (shed(), view()).
-- After the rest, an algorithm with HOLDS takes `adaptive alg min_limit
-- max_limit backoff latency_timeout_us probe` (an adaptive limit, the core's sl_adaptive_t with
-- its defaults resolved; 0 for an option alg does not read), and a release `sample latency_us
-- dropped` (latency_us -1: none; dropped 0 or 1): what the work its hold stood for reported.
local INT_MAX = 9007199254740991 -- 2^53 - 1
local RESERVE = 0 -- the request's reserve (rule_args)
local SHED -- a shed request's remaining, the priority's (shed())
local NOW_MAX_US = 4611686018427387 -- the core's SL_NOW_MAX_NS, (2^63 - 1) / 2 ns, in us
local WINDOW_MAX_US = 31622400000000 -- 366 days

-- ARGV[i] as an integer in [min, max]; or nil and the error naming the argument `name`.
local function int_arg(i, name, min, max)
    local s = ARGV[i]
    local v = s and string.match(s, '^-?%d+$') and tonumber(s)
    if not v or v < min or v > max then
        return nil, string.format('ERR sluice %s: %s must be an integer in [%.0f, %.0f], got %s',
            ALG, name, min, max, s and ("'" .. s .. "'") or 'nothing')
    end
    return v
end

-- The rule and the request in ARGV, checked in argument order (the first bad one is reported)
-- against this algorithm's ranges: limit in [1, limit_max], burst in [burst_min, burst_max],
-- buckets in [buckets_min, buckets_max], max_delay_us in [delay_min, delay_max] ([-1, 0] where a
-- parameter does not apply). check_buckets(buckets, window), if given, runs right after buckets
-- is read and returns the buckets to use, or nil and an error. Returns nil and then limit,
-- window, burst, buckets, max_delay, cost and now (clamped to [0, NOW_MAX_US] as the core clamps
-- it), then for a settle reserved, actual and charged (clamped likewise; now is then no earlier
-- than charged, as in the core), nil for a decision, then the closed start's time when the call
-- names one whose window now is in (clamped likewise), else nil, then for a lease want and
-- lease_us (else nil, nil), then for a return the lease time to give back, hold (else 0), then a
-- settle's max_debt when it names one (else nil: the script's capacity), then an acquire's
-- hold_us and entropy, or a release's id as the second (else nil, nil), then the adaptive
-- limit's numbers and a release's sample as tables (else nil, nil); or the error. Numbers, not a
-- table of ranges: a script runs all of this on every call, and tables cost allocations (the
-- adaptive limit's two are only made for the rules that have one).
local function rule_args(limit_max, burst_min, burst_max, buckets_min, buckets_max, delay_min,
                         delay_max, check_buckets)
    local limit, window, burst, buckets, max_delay, cost, now, err
    local reserved, actual, charged, closed, want, lease_len, max_debt
    local hold = 0
    local hold_us, hold_arg -- an acquire's hold time and entropy; a release's id
    limit, err = int_arg(1, 'limit', 1, limit_max)
    if err then return err end
    window, err = int_arg(2, 'window_us', 1000, WINDOW_MAX_US)
    if err then return err end
    burst, err = int_arg(3, 'burst', burst_min, burst_max)
    if err then return err end
    buckets, err = int_arg(4, 'buckets', buckets_min, buckets_max)
    if err then return err end
    if check_buckets then
        buckets, err = check_buckets(buckets, window)
        if err then return err end
    end
    max_delay, err = int_arg(5, 'max_delay_us', delay_min, delay_max)
    if err then return err end
    local at = 7 -- now_us
    if ARGV[6] == 'settle' then
        reserved, err = int_arg(7, 'reserved', 0, INT_MAX)
        if err then return err end
        actual, err = int_arg(8, 'actual', 0, INT_MAX)
        if err then return err end
        if ARGV[9] ~= 'now' then
            charged, err = int_arg(9, 'charged_us', -INT_MAX, INT_MAX)
            if err then return err .. " (or 'now')" end
        end
        cost, at = 0, 10
    elseif ARGV[6] == 'lease' or ARGV[6] == 'return' then
        if NO_LEASE then
            return 'ERR sluice ' .. ALG .. ': cannot lease: ' .. NO_LEASE
        end
        if ARGV[6] == 'lease' then
            want, err = int_arg(7, 'want', 0, INT_MAX)
            if err then return err end
            lease_len, err = int_arg(8, 'lease_us', 1, WINDOW_MAX_US)
            if err then return err end
            at = 9
        else
            local granted, lease_at, lease_until
            granted, err = int_arg(7, 'granted', 0, INT_MAX)
            if err then return err end
            reserved, err = int_arg(8, 'unused', 0, granted)
            if err then return err end
            lease_at, err = int_arg(9, 'at_us', 0, INT_MAX)
            if err then return err end
            lease_until, err = int_arg(10, 'until_us', lease_at,
                math.min(lease_at + WINDOW_MAX_US, INT_MAX))
            if err then return err end
            actual, charged, at = 0, lease_at, 11
            hold = math.min(lease_until, NOW_MAX_US) - math.min(lease_at, NOW_MAX_US)
        end
        cost = 0
    elseif ARGV[6] == 'acquire' or ARGV[6] == 'release' then
        if not HOLDS then
            return 'ERR SL.ACQUIRE and SL.RELEASE need an algorithm that holds units'
        end
        if ARGV[6] == 'acquire' then
            cost, err = int_arg(7, 'cost', 0, INT_MAX)
            if err then return err end
            hold_us, err = int_arg(8, 'hold_us', 1000, window)
            if err then return err end
            hold_arg, err = int_arg(9, 'entropy', 0, 281474976710655)
            if err then return err end
            at = 10
        else
            hold_arg, err = int_arg(7, 'id', 0, INT_MAX)
            if err then return err end
            cost, at = 0, 8
        end
    else
        cost, err = int_arg(6, 'cost', 0, INT_MAX)
        if err then return err end
    end
    if ARGV[at] and ARGV[at] ~= 'closed_from' and ARGV[at] ~= 'max_debt' and
        ARGV[at] ~= 'reserve' and ARGV[at] ~= 'adaptive' and ARGV[at] ~= 'sample' then
        now, err = int_arg(at, 'now_us', -INT_MAX, INT_MAX)
        if err then return err end
        at = at + 1
    else
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    if ARGV[at] == 'max_debt' and ARGV[6] == 'settle' then
        max_debt, err = int_arg(at + 1, 'max_debt', 0, INT_MAX)
        if err then return err end
        at = at + 2
    end
    if ARGV[at] == 'closed_from' then
        closed, err = int_arg(at + 1, 'closed_from_us', 0, INT_MAX)
        if err then return err end
        at = at + 2
    end
    if ARGV[at] == 'reserve' and (ARGV[6] == 'acquire' or not string.match(ARGV[6], '%a')) then
        RESERVE, err = int_arg(at + 1, 'reserve', 0, INT_MAX)
        if err then return err end
        at = at + 2
    end
    local adaptive, sample -- an adaptive limit's numbers; what a release reports to it
    if ARGV[at] == 'adaptive' then
        if not HOLDS then
            return 'ERR sluice ' .. ALG .. ': an adaptive limit needs an algorithm that holds units'
        end
        adaptive = {alg = ARGV[at + 1]}
        if adaptive.alg ~= 'aimd' and adaptive.alg ~= 'vegas' then
            return 'ERR sluice ' .. ALG .. ': unknown adaptive algorithm (aimd, vegas)'
        end
        adaptive.min, err = int_arg(at + 2, 'min_limit', 1, limit)
        if err then return err end
        adaptive.max, err = int_arg(at + 3, 'max_limit', limit, limit_max)
        if err then return err end
        adaptive.backoff, err = int_arg(at + 4, 'backoff', 0, 99)
        if err then return err end
        adaptive.timeout, err = int_arg(at + 5, 'latency_timeout_us', 0, 3600000000)
        if err then return err end
        adaptive.probe, err = int_arg(at + 6, 'probe', 0, 1000)
        if err then return err end
        at = at + 7
    end
    if ARGV[at] == 'sample' and ARGV[6] == 'release' then
        sample = {}
        sample.latency, err = int_arg(at + 1, 'latency_us', -1, 3600000000)
        if err then return err end
        sample.dropped, err = int_arg(at + 2, 'dropped', 0, 1)
        if err then return err end
        at = at + 3
    end
    if ARGV[at] then
        return string.format("ERR sluice %s: unexpected argument '%s' (the last ones are " ..
            "[now_us] %s[closed_from from_us]%s)", ALG, ARGV[at],
            ARGV[6] == 'settle' and '[max_debt units] ' or '',
            (ARGV[6] == 'acquire' or not string.match(ARGV[6], '%a')) and ' [reserve units]' or '')
    end
    now = math.min(math.max(now, 0), NOW_MAX_US)
    if closed then
        closed = math.min(closed, NOW_MAX_US)
        if now >= closed + window then closed = nil end -- past its window: a key is fresh
    end
    if reserved then
        charged = charged and math.min(math.max(charged, 0), NOW_MAX_US) or now
        now = math.max(now, charged)
    end
    return nil, limit, window, burst, buckets, max_delay, cost, now, reserved, actual, charged,
        closed, want, lease_len, hold, max_debt, hold_us, hold_arg, adaptive, sample
end

-- The cost to decide, given a peek's remaining: cost itself, or for a request whose reserve
-- does not fit, cost + reserve (SHED then holds the priority's remaining).
local function shed(remaining, cost)
    if RESERVE == 0 or remaining >= cost + RESERVE then return cost end
    SHED = math.max(remaining - RESERVE, 0)
    return cost + RESERVE
end

-- A decision's reply with the priority's remaining: a shed request's, or what is left above its
-- reserve.
local function view(reply)
    if RESERVE > 0 then reply[3] = SHED or math.max(reply[3] - RESERVE, 0) end
    return reply
end

-- The error of a settle refused because it would leave the key owing more than max_debt units
-- past its limit: nothing is written. sluiced's request store knows it by its words, which are
-- sluice.so's (proto/throttle_args.h: THROTTLE_DEBT_REFUSED).
local function debt_reply(max_debt)
    return redis.error_reply(string.format('ERR sluice %s: settle refused: the key would owe ' ..
        'more than max_debt (%.0f units past its limit); nothing was charged', ALG, max_debt))
end

-- The error reply for a key that holds a string that is not this algorithm's state.
local function no_state_reply(key)
    return redis.error_reply('ERR sluice ' .. ALG .. ': key ' .. key .. ' holds no ' .. ALG ..
        ' state')
end

-- A value records the numbers its state was written under (docs/lua.md): those the state's
-- meaning depends on, as the script's text NUMS ("60000000", "5:1000000"). A key decided under
-- other numbers is converted to them first, as the core's sl_state_convert() does. A decimal
-- state (fixed_window, sliding_window, token_bucket, gcra) is followed by '#' and the numbers.
-- Returns the state's text, and the numbers of a value that records other ones (nil when it
-- records NUMS, or none: a value of an older sluiced, written under the current numbers).
local function decimal_split(s, suffix) -- suffix: '#' .. NUMS
    local n = #suffix
    if string.sub(s, -n) == suffix then return string.sub(s, 1, -n - 1), nil end
    local body, nums = string.match(s, '^([^#]+)#([%d:]+)$')
    if body then return body, nums end
    return s, nil
end

-- After a command, the key holds value until fresh_us, when it is fresh; or is fresh already
-- (value nil) and goes (a DEL when it existed). The caller writes only what changes: a settle
-- that changes nothing is not a write (no SET, nothing replicated, WATCH untouched).
local function store(key, existed, value, fresh_us)
    if not value then
        if existed then redis.call('DEL', key) end
    else
        redis.call('SET', key, value, 'PXAT', math.floor((fresh_us + 999) / 1000))
    end
end
