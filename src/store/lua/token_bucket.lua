-- token_bucket.lua - sluice's token_bucket (capacity B, refilled N per W) as a Redis script, for a
-- Redis that forbids modules. docs/lua.md has the contract of all six scripts and how the build
-- makes each shipped script from this file and the fragments in lib/ it includes;
-- docs/algorithms.md has the algorithm.
--
-- The algorithm is lib/gcra_core.lua's, with the capacity B: burst (-1 = limit) must be at least 1.
-- include: row
-- include: lib/args.lua

local function capacity(burst)
    if burst == 0 then
        return nil, "ERR sluice token_bucket: burst must be an integer in [1, 8999999999999] " ..
            "or -1 for the limit, got '0'"
    end
    return burst
end

-- include: lib/gcra_core.lua
