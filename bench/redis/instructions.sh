#!/usr/bin/env bash
# bench/redis/instructions.sh - the instructions redis-server executes per request, for sluice.so
# and what people run in Redis without it: a figure the machine's noise cannot move (run.sh's
# req/s and CPU times swing by 1.5x on a shared VM, and this VM has no hardware counters).
#
# Each case runs in its own redis-server under valgrind --tool=callgrind (Debian's valgrind):
# redis-benchmark -c 50 -P 16 -r R sends WARM requests, callgrind_control dumps (and zeroes) the
# counters, it sends N more, a second dump holds exactly those N requests (plus the server's
# idle cron), and instructions / N is printed. The cases (those of docs/performance.md): INCR, SET k v PX 60000,
# MIN.GCRA (bench/redis/minimal_gcra.c), SL.THROTTLE gcra 100 1000, SL.LEASE of 4 units of the
# same rule (what the leased mode sends instead of a decision), bench/server/gcra.lua, and
# the sliding log 100 per 60 s: SL.THROTTLE against bench/redis/zset_log.lua, with sparse keys
# (-r 100000) and with keys filling up (-r (WARM + N) / 100: about 100 requests per key).
#
#   bench/redis/instructions.sh               N=40000 (about 5 minutes)
#   N=10000 bench/redis/instructions.sh       quicker, the same figures within about 1 %
#   BUILD_DIR=/tmp/b bench/redis/instructions.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-redis}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N:-40000}
WARM=$((N / 2))
FULL_R=$(((WARM + N) / 100)) # -r of the cases whose keys fill up: about 100 requests per key
BENCH_NAME=bench/redis/instructions.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools redis-server redis-benchmark redis-cli valgrind callgrind_control python3 cmake
bench_build "$BUILD" sluice_module minimal_gcra
MODULE=$BUILD/src/module/sluice.so
MINMOD=$BUILD/bench/minimal_gcra.so
bench_init
bench_machine

# The dump callgrind wrote last, and its total of instructions.
last_dump() { find "$TMP/cg" -name 'cg.out*' -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2; }
dump_total() {
    local before after i
    before=$(last_dump)
    callgrind_control -d "$1" >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do
        after=$(last_dump)
        [ "$after" != "$before" ] && [ -s "$after" ] && break
        sleep 0.1
    done
    awk '/^(summary|totals):/ { print $2; exit }' "$after"
}

OUT=$TMP/instructions.txt
: >"$OUT"
# icase NAME R SCRIPT|- ARGS..: one case in a fresh redis-server under callgrind; ARGS is the
# command, or with a SCRIPT the arguments of its EVALSHA.
icase() {
    local name=$1 r=$2 script=$3 port pid sha total
    shift 3
    rm -rf "$TMP/cg"
    mkdir -p "$TMP/cg"
    port=$(free_port)
    start "callgrind-$name" valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$TMP/cg" --loadmodule "$MODULE" --loadmodule "$MINMOD"
    pid=$LAST_PID
    wait_port "$port"
    local args=("$@")
    if [ "$script" != - ]; then
        sha=$(redis-cli -p "$port" -x SCRIPT LOAD <"$script")
        args=(EVALSHA "$sha" "$@")
    fi
    say "\$ redis-benchmark -p $port -c 50 -n $WARM then $N -r $r -P 16 ${args[*]}"
    redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$WARM" -r "$r" -P 16 -q "${args[@]}" \
        >/dev/null 2>&1
    dump_total "$pid" >/dev/null
    redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$N" -r "$r" -P 16 -q "${args[@]}" \
        >/dev/null 2>&1
    total=$(dump_total "$pid")
    [ "$(redis-cli -p "$port" INFO stats | awk -F: '$1 == "total_error_replies" { print $2 + 0 }')" = 0 ] ||
        die "$name: redis-server answered with errors"
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    printf '  %-14s %8d instructions per request\n' "$name" "$((total / N))"
    echo "$name $((total / N))" >>"$OUT"
}
get() { awk -v c="$1" '$1 == c { print $2 }' "$OUT"; }
per() { awk -v a="$(get "$1")" -v b="$(get "$2")" 'BEGIN { printf "%.2f", a / b }'; }

say ""
say "== instructions per request (redis-server under callgrind; N=$N after $WARM to warm up)"
icase incr 100000 - INCR 'i:__rand_int__'
icase set-px 100000 - SET 's:__rand_int__' v PX 60000
icase min-gcra 100000 - MIN.GCRA 'n:__rand_int__' 100 100 1000
icase mod-gcra 100000 - SL.THROTTLE 'g:__rand_int__' gcra 100 1000
icase mod-lease 100000 - SL.LEASE 'e:__rand_int__' gcra 100 1000 WANT 4 FOR 5
icase lua-gcra 100000 "$ROOT/bench/server/gcra.lua" 1 'b:__rand_int__' 100 1000
icase mod-slog 100000 - SL.THROTTLE 'l:__rand_int__' sliding_log 100 60000
icase lua-zset 100000 "$ROOT/bench/redis/zset_log.lua" 1 'z:__rand_int__' 100 60000
icase mod-slog-full "$FULL_R" - SL.THROTTLE 'L:__rand_int__' sliding_log 100 60000
icase lua-zset-full "$FULL_R" "$ROOT/bench/redis/zset_log.lua" 1 'Z:__rand_int__' 100 60000

say ""
say "== ratios (instructions of the other / of sluice.so; above 1: sluice.so does less work)"
say "  gcra: Lua GCRA / module $(per lua-gcra mod-gcra) (target >= 3 in req/s);" \
    "INCR / module $(per incr mod-gcra) (target >= 0.8 in req/s);" \
    "minimal module / module $(per min-gcra mod-gcra); SET PX / module $(per set-px mod-gcra);" \
    "SL.LEASE / SL.THROTTLE $(per mod-lease mod-gcra)"
say "  sliding log: ZSET / module $(per lua-zset mod-slog) with sparse keys," \
    "$(per lua-zset-full mod-slog-full) with keys filling up (target >= 5 in req/s)"
