-- concurrency.lua - sluice's concurrency (in-flight limits: at most N units held at once) as a
-- Redis script, for a Redis that forbids modules. docs/lua.md has the contract (lib/args.lua:
-- the arguments, acquire and release among them); docs/algorithms.md the algorithm. Its answers
-- are the core's (src/core/concurrency.c), in microseconds.
--
-- The key's holds are in one string (so one cluster slot), written with SET .. PXAT the last
-- hold's expiry (DEL when none is left): a 24-byte header, then 16 bytes per hold, sorted by
-- expiry (ties: in the order they came), little-endian:
--
--   latest_us (i8)  the latest time a write was decided at: times are clamped to it
--   secret (i8)     48 bits the key's hold ids are made with (the first acquire's entropy)
--   seq (i8)        ids issued on the key: the next id is the permutation of seq + 1
--   per hold        expires_us (i8), id (6 bytes), cost (2 bytes, 1..65535)
--
-- A hold is live while now < expires_us; expired holds are dropped when the key is read. Ids are
-- those of the core's scheme (a 4-round Feistel permutation of the 48-bit seq under the secret,
-- here with a 24-bit round function Lua's numbers compute exactly): never reused while the key
-- lives, never 0 (a decision's hold, which no release frees) nor 2^48 - 1 (units charged past
-- the limit, or merged), and not told apart from others' without the secret. A key written under
-- a greater limit keeps its live holds; beyond the limit, those expiring first merge into one
-- hold of id 2^48 - 1 that expires with the last of them (the core's conversion).
--
-- An adaptive limit (src/core/adaptive.c, in the same integers) adds 24 bytes after the header,
-- so a key's length tells the layouts apart (24 or 48 bytes, then 16 a hold: 8 or 0 modulo 16):
-- limit, round, noload_us, low_us (I4 each: the core's 16 bytes) and 8 zero bytes. Such a key
-- checks admissions against that limit, has room for max_limit holds, and is kept one window
-- past its last write (not dropped with its last hold), as the core's is_fresh says.
-- include: row
-- include: lib/args.lua

local ID_MASK = 281474976710655 -- 2^48 - 1: also the id of charged or merged units
local COST_MAX = 65535 -- units one hold records
local H24 = 16777216 -- 2^24: the Feistel's halves
local HDR, HOLD = '<i8i8i8', '<i8I6I2'
local NO_HOLD = 'ERR no such hold: the key holds no live hold of that id (expired, released ' ..
    'before, or never made); nothing changed'

local err, limit, window, _, _, _, cost, now, reserved, actual, _, closed, _, _, _, max_debt,
    hold_us, hold_arg, adaptive, sample = rule_args(4096, -1, 0, -1, 0, -1, 0)
if err then return redis.error_reply(err) end
local key, op = KEYS[1], ARGV[6]
local HDR_A = '<I4I4I4I4i8' -- an adaptive limit's bytes: limit, round, noload_us, low_us, 0
local slots = adaptive and adaptive.max or limit -- holds the key has room for
local av = {limit = 0, round = 0, noload = 0, low = 0} -- the adaptive limit's state

-- The round word's parts (the core's adaptive.h): samples, probes, busy, dropped.
local function round_parts(r)
    return r % 65536, math.floor(r / 65536) % 16384, math.floor(r / 1073741824) % 2,
        math.floor(r / 2147483648) % 2
end

-- the key's state: E, I, C (expiry, id, cost) of the live holds, m of them holding u units
local raw = redis.call('GET', key)
local latest, secret, seq, dirty = 0, 0, 0, false
local E, I, C, m, u = {}, {}, {}, 0, 0

-- Puts a hold after every hold expiring no later.
local function insert(e, id, c)
    local at = m + 1
    while at > 1 and E[at - 1] > e do at = at - 1 end
    table.insert(E, at, e)
    table.insert(I, at, id)
    table.insert(C, at, c)
    m, u = m + 1, u + c
end

if raw then
    local hdr = (#raw >= 24 and (#raw - 24) % 16 == 0) and 24 or
        ((#raw >= 48 and (#raw - 48) % 16 == 0) and 48 or nil)
    if not hdr then return no_state_reply(key) end
    latest, secret, seq = struct.unpack(HDR, raw)
    if hdr == 48 and adaptive then
        av.limit, av.round, av.noload, av.low = struct.unpack(HDR_A, raw, 25)
    end
    if adaptive then -- into the rule's bounds, as the core's adaptive_convert()
        local samples, probes, busy, drop = round_parts(av.round)
        if av.limit ~= 0 then av.limit = math.min(math.max(av.limit, adaptive.min), adaptive.max) end
        if adaptive.alg ~= 'vegas' or probes >= adaptive.probe then av.noload, probes = 0, 0 end
        samples = math.min(samples, adaptive.max)
        av.round = samples + probes * 65536 + busy * 1073741824 + drop * 2147483648
    end
    now = math.max(now, latest)
    for at = hdr + 1, #raw, 16 do
        local e, id, c = struct.unpack(HOLD, raw, at)
        if e > now then
            m, u = m + 1, u + c
            E[m], I[m], C[m] = e, id, c
        end
    end
elseif closed then -- taken as having held the whole limit since the closed start
    insert(closed + window, 0, limit)
    latest, dirty = closed, true
end
if m > slots then -- written under a greater limit: the first ones merge into one
    local merged, units = m - slots + 1, 0
    for i = 1, merged do units = units + C[i] end
    local e = E[merged]
    for _ = 1, merged do
        table.remove(E, 1)
        table.remove(I, 1)
        table.remove(C, 1)
    end
    m, u = m - merged, u - units
    insert(e, ID_MASK, math.min(units, COST_MAX))
    dirty = true
end

-- Writes the state (nothing held: the key goes; an adaptive one a window after its last write).
local function write()
    local parts = {struct.pack(HDR, latest, secret, seq)}
    if adaptive then parts[2] = struct.pack(HDR_A, av.limit, av.round, av.noload, av.low, 0) end
    for i = 1, m do parts[#parts + 1] = struct.pack(HOLD, E[i], I[i], C[i]) end
    local fresh = m > 0 and E[m] or 0
    if adaptive then fresh = math.max(fresh, latest + window) end
    store(key, raw, fresh > now and table.concat(parts) or nil, fresh)
end

-- The limit admissions are checked against: the adaptive one, or the rule's.
local function limit_now()
    return (adaptive and av.limit ~= 0) and av.limit or limit
end

-- The reply of a decision: {allowed, limit, remaining, retry_after_us, reset_after_us, last}.
local function reply(allowed, retry, last)
    local reset = (u > 0 and m > 0) and E[m] - now or 0
    local lim = limit_now()
    return {allowed and 1 or 0, lim, math.max(lim - u, 0), retry, reset, last}
end

-- Time until enough holds expire for cost to fit; -1 when it never can.
local function wait_for(c)
    local lim = limit_now()
    if c > lim then return -1 end
    local left = u
    for i = 1, m do
        left = left - C[i]
        if c <= lim - left then return E[i] - now end
    end
    return 0
end

-- The core's Log10RootFunction: floor(log10(n)), at least 1.
local function log10_floor1(n)
    local d = 0
    while n >= 10 do
        n, d = math.floor(n / 10), d + 1
    end
    return d > 1 and d or 1
end

-- Vegas at a window's end (the core's vegas_update): the next limit and the probes.
local function vegas(lim, probes, busy, low, dropped)
    if low < 0 then return dropped and lim - log10_floor1(lim) or lim, probes end
    local rtt = low > 0 and low or 1
    probes = probes + 1
    if probes >= adaptive.probe then
        av.noload = 0
        return math.floor(lim / 2), 0
    end
    if av.noload == 0 then
        av.noload = probes > 2 and rtt or 0
        return lim, probes
    end
    if rtt < av.noload then
        av.noload = rtt
        return lim, probes
    end
    if dropped then return lim - log10_floor1(lim), probes end
    if not busy then return lim, probes end
    local queue = math.floor((lim * (rtt - av.noload) + rtt - 1) / rtt)
    local lg = log10_floor1(lim)
    if queue <= lg then return lim + 6 * lg, probes end
    if queue < 3 * lg then return lim + lg, probes end
    if queue > 6 * lg then return lim - lg, probes end
    return lim, probes
end

-- A release's sample, with `in_flight` units held as the work ran (the core's adaptive_update).
local function adaptive_update(in_flight)
    if not adaptive or not sample or (sample.latency < 0 and sample.dropped == 0) then return end
    local lim = limit_now()
    local lat = sample.latency
    local late = adaptive.alg == 'aimd' and lat > adaptive.timeout
    local samples, probes, busy, drop = round_parts(av.round)
    if lat >= 0 then
        local l = lat > 0 and lat or 1
        if av.low == 0 or l < av.low then av.low = l end
    end
    if sample.dropped == 1 or late then drop = 1 end
    if in_flight * 2 >= lim then busy = 1 end
    samples = samples + 1
    if samples < lim then
        av.round = samples + probes * 65536 + busy * 1073741824 + drop * 2147483648
        return
    end
    local low = av.low ~= 0 and av.low or -1
    av.low = 0
    local nxt
    if adaptive.alg == 'aimd' then
        nxt = drop == 1 and math.floor(lim * adaptive.backoff / 100) or
            (busy == 1 and lim + 1 or lim)
    else
        nxt, probes = vegas(lim, probes, busy == 1, low, drop == 1)
    end
    av.limit = math.min(math.max(nxt, adaptive.min), adaptive.max)
    av.round = probes * 65536
end

-- 24 bits of x under round key k.
local function mix24(x, k)
    x = bit.bxor(x, k)
    x = (x * 2654435 + 40503) % H24
    x = bit.bxor(x, math.floor(x / 4096))
    x = (x * 1500007 + 7919) % H24
    return bit.bxor(x, math.floor(x / 8192))
end

-- The id of sequence number s under the key's secret: a permutation of [0, 2^48).
local function id_of(s)
    local l, r = math.floor(s / H24), s % H24
    local lo, hi = secret % H24, math.floor(secret / H24)
    for i = 0, 3 do
        local k = ((i % 2 == 0 and lo or hi) + i * 5039) % H24
        l, r = r, bit.bxor(l, mix24(r, k))
    end
    return l * H24 + r
end

-- The next id on the key, never 0 nor ID_MASK.
local function next_id(entropy)
    if secret == 0 then
        secret = entropy ~= 0 and entropy or (now * 40503 + 1) % ID_MASK + 1
    end
    local id
    repeat
        seq = (seq + 1) % (ID_MASK + 1)
        id = id_of(seq)
    until id ~= 0 and id ~= ID_MASK
    return id
end

if op == 'release' then
    local found
    for i = 1, m do
        if I[i] == hold_arg and hold_arg ~= 0 and hold_arg ~= ID_MASK then found = i end
    end
    if not found then return redis.error_reply(NO_HOLD) end
    adaptive_update(u)
    u, m = u - C[found], m - 1
    table.remove(E, found)
    table.remove(I, found)
    table.remove(C, found)
    latest = now
    write()
    return redis.status_reply('OK')
end

if reserved then -- a settle: nothing goes back (a hold goes by its release); more is charged
    local more = actual > reserved and actual - reserved or 0
    if more > 0 then
        -- no free slot: refused unless max_debt is all (the core's concurrency_debt), since
        -- joining a live hold would take its id or be freed by its release
        local debt = math.max(u + more - limit_now(), 0)
        max_debt = max_debt or limit
        local unrecordable = m >= slots or more > COST_MAX
        if (unrecordable and max_debt < INT_MAX) or debt > max_debt then
            return debt_reply(max_debt)
        end
        if m < slots then
            insert(now + window, ID_MASK, more)
        else
            u = u + math.min(C[m] + more, COST_MAX) - C[m]
            C[m] = math.min(C[m] + more, COST_MAX) -- keeps its id: its release still works
            E[m] = math.max(E[m], now + window)
        end
        latest, dirty = now, true
    end
    if dirty then write() end
    return reply(limit_now() - u >= 0, limit_now() - u >= 0 and 0 or wait_for(0), 0)
end

cost = shed(math.max(limit_now() - u, 0), cost) -- a priority's reserve (lib/args.lua)
if cost > limit_now() - u then
    if dirty and cost > 0 then write() end
    return view(reply(false, wait_for(cost), 0))
end
local id = 0
if cost > 0 then
    if op == 'acquire' then id = next_id(hold_arg) end
    insert(now + (hold_us or window), id, cost)
    latest = now
    write()
end
return view(reply(true, 0, id))
