-- gcra.lua - GCRA (redis-cell's algorithm) as a Redis script: what a user without a rate-limit
-- server would run with EVALSHA. The peer of `SL.THROTTLE <key> gcra <limit> <window_ms>` in
-- bench/server/run.sh, with the same numbers and the same reply:
--
--   EVALSHA <sha> 1 <key> <limit> <window_ms> [burst] [cost]
--   -> {allowed 1|0, limit, remaining, retry_after_ms, reset_after_ms}
--
-- As docs/algorithms.md: T = ceil(window / limit) (here in microseconds), tau = T * (burst + 1),
-- burst defaults to limit and the reported limit is burst + 1. The key holds the TAT (theoretical
-- arrival time, microseconds of the server clock from TIME) and expires when the TAT passes, when
-- its state is the same as a fresh key's (SET .. PX: the value and its PEXPIRE in one call).
-- Redis 7 replicates a script's effects, not the script, so reading TIME before a write is safe.
local limit = tonumber(ARGV[1])
local window_us = tonumber(ARGV[2]) * 1000
local burst = tonumber(ARGV[3] or limit)
local cost = tonumber(ARGV[4] or 1)
if not limit or limit <= 0 or not window_us or window_us <= 0 or not burst or burst < 0 or
    not cost or cost < 0 then
    return redis.error_reply('ERR usage: EVALSHA sha 1 key limit window_ms [burst] [cost]')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local step = math.ceil(window_us / limit)
local tau = step * (burst + 1)

local tat = tonumber(redis.call('GET', KEYS[1])) or 0
local tat0 = math.max(tat, now)
local tat1 = tat0 + cost * step

if tat1 - tau <= now then
    local reset = tat1 - now
    if cost > 0 then
        redis.call('SET', KEYS[1], tat1, 'PX', math.max(1, math.ceil(reset / 1000)))
    end
    return {1, burst + 1, math.floor((tau - reset) / step), 0, math.ceil(reset / 1000)}
end
local remaining = math.max(0, math.floor((tau - (tat0 - now)) / step))
local retry = -1
if cost * step <= tau then
    retry = math.ceil((tat1 - tau - now) / 1000)
end
return {0, burst + 1, remaining, retry, math.ceil((tat0 - now) / 1000)}
