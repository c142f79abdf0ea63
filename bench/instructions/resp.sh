#!/usr/bin/env bash
# bench/instructions/resp.sh - instructions per decision of sluiced over RESP, beside redis-server's
# per INCR under the same client load: figures the machine's noise cannot move (req/s and CPU
# times swing by 1.5x on a shared VM; callgrind counts do not).
#
# Each case runs one server under valgrind --tool=callgrind: redis-benchmark -c 50 -P 16 sends
# WARM requests, callgrind_control dumps (and zeroes) the counters, N more are sent, and a second
# dump holds exactly those N requests (plus idle timers): instructions / N is printed. Cases:
#   sluiced (memory store, one loop, a named gcra rule 100 per second), 1 M random keys and one
#   hot key: SL.ALLOW api k:__rand_int__
#   sluiced over Redis with sluice.so (the sluiced process only; Redis runs natively)
#   redis-server: INCR i:__rand_int__ (1 M random keys)
#
#   bench/instructions/resp.sh                 builds this tree in build-bench-instr; N=40000
#   bench/instructions/resp.sh BUILD..         each BUILD's sluiced (another tree's, built with
#                                              its sluiced and sluice_module targets), side by side
#   STORE_TIMEOUT=30s (the default)            sluiced's --store-timeout in the Redis case (5ms
#                                              shows the timeouts a run under callgrind hits)
#   CASES="incr memory hot redis" (the default)  the cases to run: redis-server INCR, sluiced's
#                                              memory store on 1 M keys and on one hot key, sluiced
#                                              over Redis with sluice.so
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
N=${N:-40000}
CASES=" ${CASES:-incr memory hot redis} "
WARM=$((N / 2))
BENCH_NAME=bench/instructions/resp.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
# shellcheck source=bench/instructions/lib.sh
. "$ROOT/bench/instructions/lib.sh"

need_tools redis-server redis-benchmark redis-cli valgrind callgrind_control python3 cmake
BUILDS=()
for b in "$@"; do BUILDS+=("$(cd "$b" && pwd)"); done # absolute: redis-server loads sluice.so from its --dir
if [ ${#BUILDS[@]} -eq 0 ]; then
    bench_build build-bench-instr sluiced sluice_module
    BUILDS=("$ROOT/build-bench-instr")
fi
bench_init
bench_machine

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: gcra
    limit: 100
    window: 1s
YAML

# measure NAME PID PORT R ARGS..: WARM then N requests of ARGS with -r R; prints per request
measure() {
    local name=$1 pid=$2 port=$3 r=$4 total
    shift 4
    say "\$ redis-benchmark -p $port -c 50 -n $WARM then $N -r $r -P 16 $*"
    redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$WARM" -r "$r" -P 16 -q "$@" >/dev/null 2>&1
    dump_total "$pid" >/dev/null
    redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$N" -r "$r" -P 16 -q "$@" >/dev/null 2>&1
    total=$(dump_total "$pid")
    printf '  %-40s %8d instructions per request\n' "$name" "$((total / N))"
    case $name in
    sluiced*) layers "$N" engine_request_start,engine_find sl_table_decide,sl_table_decide_reserved write_decision,conn_flush ;;
    esac
}

# sluiced_case BUILD NAME R STORE ARGS..: one sluiced under callgrind
sluiced_case() {
    local build=$1 name=$2 r=$3 store=$4 port pid
    shift 4
    rm -rf "$TMP/cg" "$TMP/s.db"
    mkdir -p "$TMP/cg"
    port=$(free_port)
    local extra=()
    # under callgrind sluiced runs some 50 times slower, and 800 requests in flight wait past the
    # 5 ms default deadline: decisions would time out, be answered by the fallback and refunded
    # when Redis's reply came, work a native run does not do. The deadline is set out of reach.
    [ "$store" = memory ] || extra=(--store "$store" --store-timeout "${STORE_TIMEOUT:-30s}")
    start "cg-$name" valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
        "$build/src/server/sluiced" --grpc-port 0 --http-port 0 --threads 1 --port "$port" \
        --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" --log-level warn \
        "${extra[@]}"
    pid=$LAST_PID
    wait_port "$port"
    measure "$name" "$pid" "$port" "$r" "$@"
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
}

say ""
say "== instructions per request (callgrind; N=$N after $WARM to warm up; pipelined 16, 50 clients)"
if [[ $CASES == *" incr "* ]]; then
    rp=$(free_port)
    rm -rf "$TMP/cg"
    mkdir -p "$TMP/cg"
    start cg-incr valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
        redis-server --port "$rp" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/cg"
    incr_pid=$LAST_PID
    wait_port "$rp"
    measure "redis-server INCR, 1M keys" "$incr_pid" "$rp" 1000000 INCR 'i:__rand_int__'
    kill -TERM "$incr_pid"
    wait "$incr_pid" 2>/dev/null || true
fi

for b in "${BUILDS[@]}"; do
    say "-- $b ($(git -C "$b/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
    if [[ $CASES == *" memory "* ]]; then
        sluiced_case "$b" "sluiced memory SL.ALLOW, 1M keys" 1000000 memory SL.ALLOW api 'k:__rand_int__'
    fi
    if [[ $CASES == *" hot "* ]]; then
        sluiced_case "$b" "sluiced memory SL.ALLOW, hot key" 1 memory SL.ALLOW api hot
    fi
    [[ $CASES == *" redis "* ]] || continue
    mp=$(free_port)
    start "redis-mod" redis-server --port "$mp" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$TMP" --loadmodule "$b/src/module/sluice.so"
    mpid=$LAST_PID
    wait_port "$mp"
    sluiced_case "$b" "sluiced redis+module SL.ALLOW, 1M keys" 1000000 "redis://127.0.0.1:$mp" \
        SL.ALLOW api 'k:__rand_int__'
    kill -TERM "$mpid"
    wait "$mpid" 2>/dev/null || true
done
