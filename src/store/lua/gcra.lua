-- gcra.lua - sluice's gcra (redis-cell's CL.THROTTLE) as a Redis script, for a Redis that forbids
-- modules. docs/lua.md has the contract of all six scripts and how the build makes
-- each shipped script from this file and the fragments in lib/ it includes; docs/algorithms.md
-- has the algorithm.
--
-- The algorithm is lib/gcra_core.lua's, with redis-cell's capacity B + 1: burst (-1 = limit) >= 0.
-- include: row
-- include: lib/args.lua

local function capacity(burst)
    return burst + 1
end

-- include: lib/gcra_core.lua
