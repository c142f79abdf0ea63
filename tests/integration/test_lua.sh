#!/usr/bin/env bash
# test_lua.sh - sluice's Redis Lua scripts (what sluiced runs with EVALSHA when sluice.so is not
# loaded) in Debian's redis-server, driven by tests/integration/lua/lua_equiv.py. The scripts are
# the shipped texts the build writes to $SLUICE_BUILD_DIR/src/store/lua/<alg>.lua (src/store/lua/
# <alg>.lua with its lib/ fragments put in; docs/lua.md):
#   - every include line was resolved, and the SHA1 of each shipped file is the one sluiced embeds
#     (lua_scripts.c);
#   - SCRIPT LOAD returns each file's SHA1; an unloaded SHA1 is NOSCRIPT;
#   - every argument error, WRONGTYPE, and a key holding something that is no state;
#   - the server's TIME without the test clock, the absolute expiry at reset, no key written by
#     a peek or a rejection;
#   - equivalence: seeded random (time, key, cost) sequences (equal times, time going back,
#     cost 0 and above the capacity, times on bucket and window edges) through each script with
#     its now_us test clock and through the core (`sluice replay --unit us`): every field of
#     every decision equal, and a rejection or a peek leaves the key's bytes as they were;
#   - settles: such sequences with settles among them (refunds, debts, charged at an admission's
#     time, now or any time) through each script and through libsluice: every reply equal, the
#     key there exactly while the core's state is not fresh, and its expiry the first ms at which
#     it is fresh; a settle that changes nothing writes nothing;
#   - conversions: keys whose numbers change among such calls, converted as the core's
#     sl_state_convert() converts (the value and the numbers it records, its expiry, every
#     reply), a peek under other numbers writing nothing; values without numbers (an older
#     sluiced's) read under the command's;
#   - a closed start (closed_from): such sequences, with keys losing their data among them,
#     through each script and through sluice.so's CLOSED_FROM in a redis-server that loads it
#     with its test clock, against libsluice with sl_state_saturate(): a key absent within one
#     window of the closed start is taken as having used its whole capacity then (every reply,
#     value and expiry equal; a peek writes nothing; a cost or a settle writes it);
# and prints (asserting only that a decimal state's key is at most 40 bytes larger than SET k v
# PX t) memory per key and
# per stored sliding_log request, and each script's requests/s under redis-benchmark (EVALSHA,
# -c 50 -P 16 -r 100000, server on CPU 0, client on CPU 1). SLUICE_SEED changes the sequences.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

LUA_DIR=$SLUICE_BUILD_DIR/src/store/lua # the shipped scripts, made by src/store/CMakeLists.txt
EMBEDDED=$SLUICE_BUILD_DIR/src/store/lua_scripts.c
DRIVER=$SLUICE_SOURCE_DIR/tests/integration/lua/lua_equiv.py
[ -x "$SLUICE" ] || { echo "no $SLUICE"; exit 1; }
SRV_PIN=()
CLI_PIN=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    SRV_PIN=(taskset -c 0)
    CLI_PIN=(taskset -c 1)
fi

ALGS=(fixed_window sliding_log sliding_window sliding_buckets token_bucket gcra)
# --- the shipped texts: every include line resolved, and the SHA1 the one sluiced embeds
shipped_ok() {
    local alg=$1 sha len
    [ -s "$LUA_DIR/$alg.lua" ] || return 1
    if grep -n '^-- include:' "$LUA_DIR/$alg.lua"; then return 1; fi
    sha=$(sha1sum <"$LUA_DIR/$alg.lua" | cut -d' ' -f1)
    len=$(wc -c <"$LUA_DIR/$alg.lua")
    grep -q "{\"$alg\", \".*\", $len, \"$sha\"}" "$EMBEDDED"
}
for alg in "${ALGS[@]}"; do
    check "shipped/$alg" shipped_ok "$alg"
done

REDIS_WRAP=("${SRV_PIN[@]}")
start_redis redis || { cat "$TMP/redis.log"; exit 1; }
PORT=$REDIS_PORT

# the settle check calls libsluice (tests/integration/sluice_core.py): an ASan build's needs the
# ASan runtime loaded first
CORE_ENV=()
if ldd "$SLUICE_BUILD_DIR/src/libsluice.so" | grep -q libasan; then
    CORE_ENV=(LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
for what in sha errors clock equiv settle convert memory; do
    check "$what" env "${CORE_ENV[@]}" python3 "$DRIVER" "$PORT" "$SLUICE" "$LUA_DIR" "$TMP" \
        "${SLUICE_SEED:-20250}" "$what"
done
# the closed start, the scripts' and sluice.so's side by side
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
start_redis withmodule --loadmodule "$MODULE" testclock || { cat "$TMP/withmodule.log"; exit 1; }
check cold env "${CORE_ENV[@]}" python3 "$DRIVER" "$REDIS_PORT" "$SLUICE" "$LUA_DIR" "$TMP" \
    "${SLUICE_SEED:-20250}" cold
stop_bg withmodule

# --- requests/s of each script: printed, not asserted (a shared machine's figures)
bench() {
    local alg=$1 sha len
    sha=$(sha1sum "$LUA_DIR/$alg.lua" | cut -d' ' -f1)
    redis-cli -p "$PORT" FLUSHALL >/dev/null
    "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -P 16 -r 100000 -n 200000 \
        --csv EVALSHA "$sha" 1 "lua:__rand_int__" 100 1000000 -1 -1 0 1 |
        awk -F'"' -v alg="$alg" 'NR == 2 { printf "requests/s: %-16s %10.0f\n", alg, $4 }'
}
if ldd "$SLUICE_BUILD_DIR/src/libsluice.so" | grep -q libasan; then
    echo "requests/s: skipped (ASan build: the same scripts as the plain build, which prints them)"
elif redis-benchmark --help 2>&1 | grep -q -- --csv; then
    for alg in "${ALGS[@]}"; do
        bench "$alg"
    done
    # for scale: bench/server/gcra.lua (a minimal GCRA in ms, no argument checks) and INCR
    sha=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat "$SLUICE_SOURCE_DIR/bench/server/gcra.lua")")
    "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -P 16 -r 100000 -n 200000 \
        --csv EVALSHA "$sha" 1 "lua:__rand_int__" 100 1000 |
        awk -F'"' 'NR == 2 { printf "requests/s: %-16s %10.0f (for scale)\n", "bench gcra.lua", $4 }'
    "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -P 16 -r 100000 -n 400000 \
        --csv INCR "lua:__rand_int__" |
        awk -F'"' 'NR == 2 { printf "requests/s: %-16s %10.0f (for scale)\n", "INCR", $4 }'
else
    echo "requests/s: skipped (no redis-benchmark)"
fi

check redis-alive bash -c "redis-cli -p $PORT PING | grep -qx PONG"
stop_bg redis
finish
