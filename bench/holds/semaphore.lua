-- semaphore.lua - the usual Redis recipe for an in-flight limit (a "fair semaphore" without its
-- counter, as Stripe's concurrent-requests limiter and the Redis books describe it): a sorted set
-- per key of holder ids scored by the time they acquired; holders older than the timeout are
-- dropped, then an id is added if fewer than the limit remain. Released by ZREM key id.
--   KEYS[1] the key   ARGV: now_ms, timeout_ms, limit, id      returns 1 acquired, 0 refused
local now, timeout, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - timeout)
if redis.call('ZCARD', KEYS[1]) < limit then
    redis.call('ZADD', KEYS[1], now, ARGV[4])
    redis.call('PEXPIRE', KEYS[1], timeout)
    return 1
end
return 0
