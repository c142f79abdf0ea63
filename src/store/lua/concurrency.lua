-- concurrency.lua - sluice's concurrency (in-flight limits) as a Redis script, for a Redis that
-- forbids modules. docs/lua.md has the contract; docs/algorithms.md the algorithm.
-- include: row
-- include: lib/args.lua

local err, limit, window, _, _, _, cost, now = rule_args(4096, -1, 0, -1, 0, -1, 0)
if err then return redis.error_reply(err) end
return redis.error_reply('ERR sluice ' .. ALG .. ': not available through Lua yet')
