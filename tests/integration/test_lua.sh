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
#   - leases and their returns: such sequences with leases of random sizes and times and returns
#     of random unused parts among them, through every script but sliding_log's and through
#     libsluice (sl_lease, sl_lease_return): every reply, value and expiry equal, a lease of
#     nothing writing nothing; and by hand through redis-cli, the worked examples of
#     docs/algorithms.md ("Leases") and the errors of a lease;
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
for what in sha errors clock equiv settle lease convert memory; do
    check "$what" env "${CORE_ENV[@]}" python3 "$DRIVER" "$PORT" "$SLUICE" "$LUA_DIR" "$TMP" \
        "${SLUICE_SEED:-20250}" "$what"
done
# the closed start, the scripts' and sluice.so's side by side
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
start_redis withmodule --loadmodule "$MODULE" testclock || { cat "$TMP/withmodule.log"; exit 1; }
check cold env "${CORE_ENV[@]}" python3 "$DRIVER" "$REDIS_PORT" "$SLUICE" "$LUA_DIR" "$TMP" \
    "${SLUICE_SEED:-20250}" cold
stop_bg withmodule

# --- leases by hand: the worked examples of docs/algorithms.md, in microseconds from S (a whole
# 10 s in 2096, so the keys never expire while the test runs)
S=4000000000000000
ev() { # ev ALG KEY ARGS...: the script's reply, joined by spaces
    local sha
    sha=$(sha1sum "$LUA_DIR/$1.lua" | cut -d' ' -f1)
    redis-cli -p "$PORT" EVALSHA "$sha" 1 "$2" "${@:3}" 2>&1 | sed '/^$/d' | paste -sd' ' -
}
lease_is() { # lease_is NAME WANT ALG KEY ARGS...
    local name=$1 want=$2 got
    shift 2
    got=$(ev "$@")
    if [ "$got" != "$want" ]; then
        echo "FAIL [lease/$name]: $* -> '$got', want '$want'"
        return 1
    fi
}
FW=(100 10000000 -1 -1 0)
check lease/fw-grant lease_is fw-grant "30 $((S + 5000000)) $((S + 10000000)) 70 5000000" \
    fixed_window hl:fw "${FW[@]}" lease 30 20000000 $((S + 5000000))
check lease/fw-decide lease_is fw-decide "1 100 10 0 4000000 0" \
    fixed_window hl:fw "${FW[@]}" 60 $((S + 6000000))
check lease/fw-fewer lease_is fw-fewer "10 $((S + 8000000)) $((S + 9000000)) 0 2000000" \
    fixed_window hl:fw "${FW[@]}" lease 30 1000000 $((S + 8000000))
check lease/fw-return lease_is fw-return "1 100 4 0 1000000 0" \
    fixed_window hl:fw "${FW[@]}" return 30 4 $((S + 5000000)) $((S + 10000000)) $((S + 9000000))
check lease/fw-next lease_is fw-next "1 100 0 0 10000000 0" \
    fixed_window hl:fw "${FW[@]}" 100 $((S + 10000000))
TB=(10 10000000 -1 -1 0)
check lease/tb-grant lease_is tb-grant "4 $S $((S + 3000000)) 3 7000000" \
    token_bucket hl:tb "${TB[@]}" lease 4 3000000 $S
check lease/tb-refused lease_is tb-refused "0 10 3 1000000 7000000 0" \
    token_bucket hl:tb "${TB[@]}" 4 $S
check lease/tb-return lease_is tb-return "1 10 7 0 3000000 0" \
    token_bucket hl:tb "${TB[@]}" return 4 1 $S $((S + 3000000)) $((S + 2000000))
check lease/tb-decide lease_is tb-decide "1 10 0 0 10000000 0" \
    token_bucket hl:tb "${TB[@]}" 7 $((S + 2000000))
check lease/tb-too-long lease_is tb-too-long \
    "ERR sluice token_bucket: lease_us must be at most 9000000 (the tolerance less one interval), got 9000001" \
    token_bucket hl:tb "${TB[@]}" lease 1 9000001 $((S + 2000000))
check lease/log lease_is log \
    "ERR sluice sliding_log: cannot lease: it keeps each unit's time (sliding_buckets can)" \
    sliding_log hl:log 10 1000000 -1 -1 0 lease 1 1000 $S
check lease/unused lease_is unused "ERR sluice gcra: unused must be an integer in [0, 4], got '5'" \
    gcra hl:g 10 1000000 -1 -1 0 return 4 5 $S $((S + 1))
check lease/until lease_is until \
    "ERR sluice gcra: until_us must be an integer in [$S, $((S + 31622400000000))], got '1'" \
    gcra hl:g 10 1000000 -1 -1 0 return 4 1 $S 1
check lease/for lease_is for "ERR sluice fixed_window: lease_us must be an integer in [1, 31622400000000], got '0'" \
    fixed_window hl:fw "${FW[@]}" lease 1 0 $S

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
