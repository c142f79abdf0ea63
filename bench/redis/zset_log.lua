-- zset_log.lua - the sliding log as people write it in Redis without a module: one sorted set per
-- key, one member per admitted request scored by its time. The peer of
-- `SL.THROTTLE <key> sliding_log <limit> <window_ms>` in bench/redis/run.sh:
--
--   EVALSHA <sha> 1 <key> <limit> <window_ms>
--   -> {allowed 1|0, limit, remaining, retry_after_ms, reset_after_ms}   (SL.THROTTLE's reply)
--
-- Time is the server's TIME in microseconds (a double holds it exactly). A request at `now` sees
-- the members scored above now - window (the window excludes exactly now - window, as sluice's
-- sliding_log does): ZREMRANGEBYSCORE drops the older ones, ZCARD counts the rest, and
-- an admission adds one member and moves the key's expiry to now + window (PEXPIRE), so an idle
-- key vanishes. A rejection writes nothing but the trim. A member must be unique within its set:
-- "<now_us>-<count before it>" is, because two requests at the same microsecond see different
-- counts and no trim happens between them.
local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
if not limit or limit <= 0 or not window_ms or window_ms <= 0 then
    return redis.error_reply('ERR usage: EVALSHA sha 1 key limit window_ms')
end

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window_us = window_ms * 1000

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_us - window_us)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
    -- TIME's two strings, not now_us: Lua would print a double > 1e14 in %.14g notation
    redis.call('ZADD', KEYS[1], now_us, t[1] .. string.format('%06d', t[2]) .. '-' .. count)
    redis.call('PEXPIRE', KEYS[1], window_ms)
    -- the newest member decides the reset: now; SL.THROTTLE rounds durations up to the ms
    return {1, limit, limit - count - 1, 0, window_ms}
end
-- rejected: admitted again when the oldest member leaves the window
local oldest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
local newest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
return {0, limit, 0, math.ceil((oldest + window_us - now_us) / 1000),
        math.ceil((newest + window_us - now_us) / 1000)}
