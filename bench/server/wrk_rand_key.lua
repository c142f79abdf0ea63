-- wrk_rand_key.lua - each request GETs the URL's path with ?key=<a random integer below KEYS>,
-- KEYS 100000 unless given after "--" on wrk's command line:
--   wrk -t1 -c50 -d10s -s bench/server/wrk_rand_key.lua http://127.0.0.1:8390/v1/auth/bench -- 100000
local keys = 100000
local path

function init(args)
    if args[1] ~= nil then
        keys = tonumber(args[1])
    end
    path = wrk.path
    math.randomseed(os.time() + (wrk.thread and wrk.thread:get("id") or 0))
end

function request()
    return wrk.format("GET", path .. "?key=" .. math.random(0, keys - 1))
end
