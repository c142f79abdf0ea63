#!/usr/bin/env bash
# bench/redis/run.sh - sluice's Redis side against what people run in Redis without it, on this
# machine, side by side in one run, against the targets of docs/performance.md. Prints figures (asserts
# nothing), every command before its output, and one table of medians with ratios.
#
#   1. GCRA in one redis-server 7 (Debian's), redis-benchmark -c 50 -r 100000 -P 16:
#        SL.THROTTLE key gcra 100 1000 (sluice.so)   MIN.GCRA (bench/redis/minimal_gcra.c: the least
#        a replicated GCRA module does)   EVALSHA bench/server/gcra.lua (GCRA in Lua,
#        the same reply)   EVALSHA src/store/lua/gcra.lua (what sluiced sends without the module)
#        INCR (the floor of a Redis write)   SET k v PX 60000 (a write with an expiry)
#   2. The sliding log, 100 per 60 s, same flags: SL.THROTTLE key sliding_log 100 60000 against
#        EVALSHA bench/redis/zset_log.lua (ZREMRANGEBYSCORE + ZCARD + ZADD + PEXPIRE, time from
#        TIME); and memory per stored request: N keys filled with M requests each (redis-cli
#        --pipe), used_memory delta / (N * M), at M = 100 (keys full) and M = 10; and a user at
#        the limit (100 stamps 600 ms apart, laid out with the module's test clock in a
#        redis-server of its own), bytes per key, the figure docs/scaling.md plans with.
#   3. Memory per key: SL.THROTTLE gcra against SET k v PX (and the key src/store/lua/gcra.lua
#        writes), used_memory delta over N keys.
#   4. sluiced --threads 1 --store redis://  (one redis-server with sluice.so) and
#        --store redis-cluster:// (3 primaries with sluice.so, no replicas), redis-benchmark
#        SL.THROTTLE key:__rand_int__ gcra 100 1000 through sluiced (-P 16, and -P 1 for latency),
#        the same with sliding_log 100 60000 (a login rule: 100 attempts a minute, exact), and sluiced's memory store as the
#        reference; req/s, p50/p99, and CPU per decision of sluiced and of Redis apart, which
#        give the decisions per core-second.
#
# Every server (redis-server, the cluster's nodes, sluiced) runs pinned to CPU 0 (taskset -c 0),
# every client (redis-benchmark, redis-cli --pipe) to CPU 1: with two cores, sluiced and Redis
# share CPU 0, so through sluiced the req/s are those of one core for both, and the per-core
# figures come from each process's CPU time (/proc/PID/stat). Everything listens on 127.0.0.1 on
# free ports; every process started here is stopped by its PID on exit.
#
#   bench/redis/run.sh              REPS=3 repetitions, medians; about 4 minutes on a quiet machine
#   QUICK=1 bench/redis/run.sh      a smoke run: 1 repetition, small counts (figures not comparable)
#   REPS=5 bench/redis/run.sh       more repetitions
#   BUILD_DIR=/tmp/b bench/redis/run.sh   build (RelWithDebInfo, no sanitizer) there
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-redis}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
QUICK=${QUICK:-0}
KEYS_R=100000 # redis-benchmark -r: random keys per case
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-1}
    N_FAST=100000 N_LUA=30000 N_SLOG=30000 N_SL=50000 N_SL_P1=10000 N_MEM=20000
    MEM_KEYS=20000 LOG_KEYS=200
else
    REPS=${REPS:-3}
    N_FAST=1000000 N_LUA=300000 N_SLOG=300000 N_SL=400000 N_SL_P1=100000 N_MEM=1000000
    MEM_KEYS=200000 LOG_KEYS=2000
fi
FULL_R=$((N_SLOG / 100)) # -r of the sliding-log runs whose keys fill up
CLIENTS=50
QUIET_BUDGET_S=${QUIET_BUDGET_S:-90} # in all, waiting for other processes to leave the CPUs
BENCH_NAME=bench/redis/run.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# ---- tools, build ------------------------------------------------------------------------------
need_tools redis-server redis-benchmark redis-cli taskset curl python3 cmake
bench_build "$BUILD" sluiced sluice_module minimal_gcra
SLUICED=$BUILD/src/server/sluiced
MODULE=$BUILD/src/module/sluice.so
MINMOD=$BUILD/bench/minimal_gcra.so
# The Lua scripts as sluiced sends them: src/store/lua/<alg>.lua with its fragments put in by
# the build (docs/lua.md); the files in the source tree do not run on their own.
LUA_DIR=$BUILD/src/store/lua
for f in "$MODULE" "$MINMOD" "$LUA_DIR/gcra.lua" "$LUA_DIR/sliding_log.lua"; do
    [ -f "$f" ] || die "the build made no $f"
done
bench_init

bench_machine
say "versions: $("$SLUICED" --version 2>&1 | head -n1); $(redis-server --version | cut -d' ' -f1-3);" \
    "modules $MODULE, $MINMOD"
say "pinning: servers (redis-server, cluster nodes, sluiced) ${SRV_PIN[*]:-(none)}," \
    "clients ${CLI_PIN[*]:-(none)}; repetitions: $REPS (median)"

# ---- servers ---------------------------------------------------------------------------------------
rcli() { # PORT ARGS..: redis-cli on 127.0.0.1, one reply per line, no \r
    local port=$1
    shift
    redis-cli -h 127.0.0.1 -p "$port" "$@" | tr -d '\r'
}
# One redis-server for parts 1-3 and for sluiced --store redis://. No persistence, as
# bench/server/run.sh; sluice.so and minimal_gcra.so loaded (they change nothing INCR, SET or
# EVALSHA do).
RD_PORT=$(free_port)
mkdir -p "$TMP/redis"
start redis "${SRV_PIN[@]}" redis-server --port "$RD_PORT" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --dir "$TMP/redis" --loadmodule "$MODULE" --loadmodule "$MINMOD"
RD_PID=$LAST_PID
wait_port "$RD_PORT"
# The scripts' exact bytes (-x: the last argument from stdin), so the SHA1s are those sluiced
# has compiled in.
SHA_BENCH=$(rcli "$RD_PORT" -x SCRIPT LOAD <"$ROOT/bench/server/gcra.lua")
SHA_STORE=$(rcli "$RD_PORT" -x SCRIPT LOAD <"$LUA_DIR/gcra.lua")
SHA_ZSET=$(rcli "$RD_PORT" -x SCRIPT LOAD <"$ROOT/bench/redis/zset_log.lua")
SHA_SLOG=$(rcli "$RD_PORT" -x SCRIPT LOAD <"$LUA_DIR/sliding_log.lua")
say "scripts: bench/server/gcra.lua $SHA_BENCH, src/store/lua/gcra.lua $SHA_STORE," \
    "bench/redis/zset_log.lua $SHA_ZSET, src/store/lua/sliding_log.lua $SHA_SLOG"

# A Redis Cluster of 3 primaries, no replicas (a replica would take CPU 0 from the primaries;
# the module replicates its effects all the same, see docs/module.md). Each node needs its port
# and port + 10000 (the cluster bus) free.
CL_PORTS=()
CL_PIDS=()
for ((i = 1; i <= 3; i++)); do
    p=$(cluster_port)
    [ -n "$p" ] || die "no free port pair for a cluster node"
    while [[ " ${CL_PORTS[*]} " == *" $p "* ]]; do p=$(cluster_port); done
    mkdir -p "$TMP/node$i"
    start "node$i" "${SRV_PIN[@]}" redis-server --port "$p" --bind 127.0.0.1 --save "" \
        --appendonly no --daemonize no --dir "$TMP/node$i" --cluster-enabled yes \
        --cluster-config-file "$TMP/node$i/nodes.conf" --loadmodule "$MODULE"
    CL_PORTS+=("$p")
    CL_PIDS+=("$LAST_PID")
    wait_port "$p"
done
say "\$ redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CL_PORTS[@]}")--cluster-replicas 0 --cluster-yes"
# shellcheck disable=SC2046 # one word per node
timeout 60 redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CL_PORTS[@]}") \
    --cluster-replicas 0 --cluster-yes >"$TMP/cluster-create.log" 2>&1 ||
    die "redis-cli --cluster create failed: $(tail -n 5 "$TMP/cluster-create.log")"
for ((i = 0; i < 300; i++)); do
    ok=0
    for p in "${CL_PORTS[@]}"; do
        rcli "$p" CLUSTER INFO | grep -qx cluster_state:ok && ok=$((ok + 1))
    done
    [ "$ok" -lt 3 ] || break
    sleep 0.1
done
[ "$ok" = 3 ] || die "the cluster is not ok after 30 s"

# sluiced: one Redis-store server per store, and one with the memory store as the reference.
# --store-timeout 2s: with 800 requests in flight on one core, the default 5 ms would let
# decisions time out and be decided by on_store_error instead of by Redis; each run checks that
# none did (sluice_redis_timeouts_total and _errors_total stay 0).
start_sluiced() { # NAME STORE: sets SL_PID, SL_PORT, SL_HTTP
    SL_PORT=$(free_port)
    SL_HTTP=$(free_port)
    start "$1" "${SRV_PIN[@]}" "$SLUICED" --grpc-port 0 --threads 1 --port "$SL_PORT" --http-port "$SL_HTTP" \
        --store "$2" --store-timeout 2s --config-store "$TMP/$1.db" --snapshot "" --log-level info
    SL_PID=$LAST_PID
    wait_port "$SL_PORT"
    wait_port "$SL_HTTP"
}
start_sluiced sluiced-redis "redis://127.0.0.1:$RD_PORT"
SA_PID=$SL_PID SA_PORT=$SL_PORT SA_HTTP=$SL_HTTP
start_sluiced sluiced-cluster "redis-cluster://$(printf '127.0.0.1:%s,' "${CL_PORTS[@]}" | sed 's/,$//')"
SB_PID=$SL_PID SB_PORT=$SL_PORT SB_HTTP=$SL_HTTP
start_sluiced sluiced-memory memory
SM_PID=$SL_PID SM_PORT=$SL_PORT
for name in sluiced-redis sluiced-cluster; do
    grep -q 'request store redis (sluice.so module)' "$TMP/$name.log" ||
        die "$name does not use sluice.so: $(cat "$TMP/$name.log")"
done
say "both Redis-store sluiced found sluice.so (log: \"request store redis (sluice.so module)\")"

# ---- same work ------------------------------------------------------------------------------------
flat() { tr '\n' ' ' | sed 's/ $//'; }
say ""
say "== the same work: first replies on fresh keys"
m=$(rcli "$RD_PORT" SL.THROTTLE check:m gcra 100 1000 | flat)
b=$(rcli "$RD_PORT" EVALSHA "$SHA_BENCH" 1 check:b 100 1000 | flat)
c=$(rcli "$RD_PORT" EVALSHA "$SHA_STORE" 1 check:c 100 1000000 100 0 0 1 | flat)
say "  gcra 100 per 1000 ms: SL.THROTTLE -> $m; gcra.lua -> $b; src/store/lua/gcra.lua (us) -> $c"
[ "$m" = "$b" ] || say "  WARNING: SL.THROTTLE and bench/server/gcra.lua reply differently"
n=$(rcli "$RD_PORT" MIN.GCRA check:n 100 100 1000 | flat)
k=$(rcli "$RD_PORT" CL.THROTTLE check:k 100 100 1 | flat)
say "  redis-cell's numbers (burst 100, 100 per 1 s): MIN.GCRA (minimal_gcra.so) -> $n; CL.THROTTLE -> $k"
l=$(rcli "$RD_PORT" SL.THROTTLE check:l sliding_log 100 60000 | flat)
z=$(rcli "$RD_PORT" EVALSHA "$SHA_ZSET" 1 check:z 100 60000 | flat)
say "  sliding_log 100 per 60000 ms: SL.THROTTLE -> $l; zset_log.lua -> $z"
[ "$l" = "$z" ] || say "  WARNING: SL.THROTTLE sliding_log and zset_log.lua reply differently"
# an error (or nothing) in place of an admission would be measured as a fast request
for r in "$m" "$b" "$c" "$l" "$z" "$n" "$k"; do
    case $r in "1 "* | "0 "*) ;; *) die "a first reply is not a decision: '$r'" ;; esac
done
for spec in "$SA_PORT:redis" "$SB_PORT:cluster" "$SM_PORT:memory"; do
    s=$(rcli "${spec%%:*}" SL.THROTTLE check:s gcra 100 1000 | flat)
    say "  through sluiced (${spec#*:} store): SL.THROTTLE check:s gcra 100 1000 -> $s"
    [ "$s" = "$m" ] || say "  WARNING: sluiced replies differently from the module"
done
rcli "$SA_PORT" SL.THROTTLE check:key gcra 1 60000 >/dev/null # a key that lives 60 s
say "  the key sluiced writes for SL.THROTTLE check:key gcra 1 60000:" \
    "$(rcli "$RD_PORT" --scan --pattern 'sl:{check:key}*' | flat)"

# ---- measuring -----------------------------------------------------------------------------------
# sum of a metric of sluiced's /metrics (all label sets)
metric() {
    curl -s --max-time 5 "http://127.0.0.1:$1/metrics" |
        awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%d\n", s }'
}
STORE_FAILS=0
# rbs CASE "PIDS" PORT [HTTP] N P CMD..: redis-benchmark -r $KEYS_R through/at PORT; with HTTP
# (a sluiced with the Redis store) also reports what sluiced's Redis store counted meanwhile.
rbs() {
    local case=$1 pidlist=$2 port=$3 http=$4 n=$5 p=$6 d0 e0 d1 e1 h0 h1
    shift 6
    if [ "$http" != - ]; then
        d0=$(metric "$http" sluice_redis_decisions_total)
        h0=$(metric "$http" sluice_redis_cache_hits_total)
        e0=$(($(metric "$http" sluice_redis_timeouts_total) + $(metric "$http" sluice_redis_errors_total)))
    fi
    # shellcheck disable=SC2086 # the PIDs, one word each
    run_case "$case" rb $pidlist -- "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$port" \
        -c "$CLIENTS" -n "$n" -r "$KEYS_R" -P "$p" --csv "$@"
    if [ "$http" != - ]; then
        d1=$(metric "$http" sluice_redis_decisions_total)
        h1=$(metric "$http" sluice_redis_cache_hits_total)
        e1=$(($(metric "$http" sluice_redis_timeouts_total) + $(metric "$http" sluice_redis_errors_total)))
        say "  sluiced's Redis store meanwhile: $((d1 - d0)) decisions, $((h1 - h0)) over-limit cache hits," \
            "$((e1 - e0)) timeouts + errors"
        if [ $((e1 - e0)) -ne 0 ]; then
            STORE_FAILS=$((STORE_FAILS + e1 - e0))
            say "  WARNING: decisions that Redis did not make were decided by on_store_error"
        fi
    fi
}

say ""
say "== throughput (redis-benchmark -c $CLIENTS -r $KEYS_R; -n: $N_FAST fast cases, $N_LUA Lua GCRA," \
    "$N_SLOG sliding log (also at -r $FULL_R), $N_SL / $N_SL_P1 through sluiced at -P 16 / -P 1, $N_MEM memory store)"
CL_PIDS_S="${CL_PIDS[*]}"
for ((rep = 1; rep <= REPS; rep++)); do
    say "repetition $rep/$REPS"
    # 1. GCRA and the plain writes, one redis-server
    rbs mod:gcra "$RD_PID" "$RD_PORT" - "$N_FAST" 16 SL.THROTTLE 'g:__rand_int__' gcra 100 1000
    rbs min:gcra "$RD_PID" "$RD_PORT" - "$N_FAST" 16 MIN.GCRA 'n:__rand_int__' 100 100 1000
    rbs lua:bench "$RD_PID" "$RD_PORT" - "$N_LUA" 16 EVALSHA "$SHA_BENCH" 1 'b:__rand_int__' 100 1000
    rbs lua:store "$RD_PID" "$RD_PORT" - "$N_LUA" 16 EVALSHA "$SHA_STORE" 1 'c:__rand_int__' 100 1000000 100 0 0 1
    rbs incr "$RD_PID" "$RD_PORT" - "$N_FAST" 16 INCR 'i:__rand_int__'
    rbs set "$RD_PID" "$RD_PORT" - "$N_FAST" 16 SET 's:__rand_int__' v PX 60000
    # 2. the sliding log: fresh keys each repetition, so every repetition measures the same
    #    (about N_SLOG / KEYS_R stamps per key at its end)
    rbs mod:slog "$RD_PID" "$RD_PORT" - "$N_SLOG" 16 SL.THROTTLE "l$rep:__rand_int__" sliding_log 100 60000
    rbs lua:zset "$RD_PID" "$RD_PORT" - "$N_SLOG" 16 EVALSHA "$SHA_ZSET" 1 "z$rep:__rand_int__" 100 60000
    #    and without pipelining: 50 connections, one request each in flight, as a primary sees
    #    many sluiced that each have few decisions in flight for it (docs/scaling.md)
    rbs mod:slog:P1 "$RD_PID" "$RD_PORT" - "$N_SL_P1" 1 SL.THROTTLE "j$rep:__rand_int__" sliding_log 100 60000
    rbs lua:slog "$RD_PID" "$RD_PORT" - "$N_SLOG" 16 EVALSHA "$SHA_SLOG" 1 "y$rep:__rand_int__" 100 60000000 0 0 0 1
    #    keys filling up: -r FULL_R, N_SLOG / FULL_R = 100 requests per key on average, so keys
    #    end the run near their limit (and a few over it: rejections)
    KEYS_R=$FULL_R
    rbs mod:slog:full "$RD_PID" "$RD_PORT" - "$N_SLOG" 16 SL.THROTTLE "L$rep:__rand_int__" sliding_log 100 60000
    rbs lua:zset:full "$RD_PID" "$RD_PORT" - "$N_SLOG" 16 EVALSHA "$SHA_ZSET" 1 "Z$rep:__rand_int__" 100 60000
    KEYS_R=100000
    # 4. through sluiced
    rbs sl:redis "$SA_PID $RD_PID" "$SA_PORT" "$SA_HTTP" "$N_SL" 16 SL.THROTTLE 'k:__rand_int__' gcra 100 1000
    rbs sl:redis:P1 "$SA_PID $RD_PID" "$SA_PORT" "$SA_HTTP" "$N_SL_P1" 1 SL.THROTTLE 'k:__rand_int__' gcra 100 1000
    rbs sl:redis:slog "$SA_PID $RD_PID" "$SA_PORT" "$SA_HTTP" "$N_SL" 16 SL.THROTTLE "q$rep:__rand_int__" sliding_log 100 60000
    rbs sl:cluster "$SB_PID $CL_PIDS_S" "$SB_PORT" "$SB_HTTP" "$N_SL" 16 SL.THROTTLE 'k:__rand_int__' gcra 100 1000
    rbs sl:cluster:P1 "$SB_PID $CL_PIDS_S" "$SB_PORT" "$SB_HTTP" "$N_SL_P1" 1 SL.THROTTLE 'k:__rand_int__' gcra 100 1000
    rbs sl:cluster:slog "$SB_PID $CL_PIDS_S" "$SB_PORT" "$SB_HTTP" "$N_SL" 16 SL.THROTTLE "p$rep:__rand_int__" sliding_log 100 60000
    rbs sl:cluster:slog:P1 "$SB_PID $CL_PIDS_S" "$SB_PORT" "$SB_HTTP" "$N_SL_P1" 1 SL.THROTTLE "o$rep:__rand_int__" sliding_log 100 60000
    rbs sl:memory "$SM_PID" "$SM_PORT" - "$N_MEM" 16 SL.THROTTLE 'k:__rand_int__' gcra 100 1000
done
errs=$(rcli "$RD_PORT" INFO stats | awk -F: '$1 == "total_error_replies" { print $2 }')
say "error replies of the redis-server in all: $errs (the sanity checks above make none)"
cl_keys=""
for p in "${CL_PORTS[@]}"; do cl_keys="$cl_keys $(rcli "$p" DBSIZE)"; done
say "keys on the cluster's primaries now (gcra keys live ~10 ms, sliding_log keys 60 s):$cl_keys;" \
    "sl.throttle calls per primary: $(for p in "${CL_PORTS[@]}"; do
        rcli "$p" INFO commandstats | awk -F'[=:,]' '$1 == "cmdstat_sl.throttle" { printf "%s ", $3 }'
    done)"

# ---- memory ------------------------------------------------------------------------------------------
# fill N M PREFIX WORDS..: N keys (PREFIX and 7 digits, so every case's keys have one length), M
# commands each, key-major, through redis-cli --pipe; "{}" in WORDS is the key. Sets MEM_B (the
# used_memory delta after FLUSHALL) and MEM_PER (MEM_B / (N * M)).
used_memory() { rcli "$RD_PORT" INFO memory | awk -F: '$1 == "used_memory" { print $2 }'; }
fill() {
    local n=$1 m=$2 pre=$3 before after out
    shift 3
    awk -v n="$n" -v m="$m" -v pre="$pre" -v words="$*" 'BEGIN {
        na = split(words, a, " ")
        for (i = 0; i < n; i++) {
            k = sprintf("%s%07d", pre, i)
            for (j = 0; j < m; j++) {
                printf "*%d\r\n", na
                for (x = 1; x <= na; x++) {
                    w = a[x] == "{}" ? k : a[x]
                    printf "$%d\r\n%s\r\n", length(w), w
                }
            }
        }
    }' >"$TMP/fill.resp"
    rcli "$RD_PORT" FLUSHALL >/dev/null
    before=$(used_memory)
    timeout 120 "${CLI_PIN[@]}" redis-cli -h 127.0.0.1 -p "$RD_PORT" --pipe <"$TMP/fill.resp" \
        >"$TMP/fill.out" 2>&1 || die "redis-cli --pipe failed: $(tail -n 3 "$TMP/fill.out")"
    after=$(used_memory)
    out=$(tr -d '\r' <"$TMP/fill.out" | tail -n 1)
    [ "$out" = "errors: 0, replies: $((n * m))" ] || die "filling $*: $out"
    [ "$(rcli "$RD_PORT" DBSIZE)" = "$n" ] || die "filling $*: $(rcli "$RD_PORT" DBSIZE) keys, not $n"
    MEM_B=$((after - before))
    MEM_PER=$(awk -v b="$MEM_B" -v k="$((n * m))" 'BEGIN { printf "%.1f", b / k }')
}
MEM=$TMP/memory.txt
: >"$MEM"
mem_case() { # CASE N M WORDS..
    local case=$1 n=$2 m=$3 pre
    shift 3
    pre="$(printf '%s' "$case" | cut -c1):"
    fill "$n" "$m" "$pre" "$@"
    printf '  %-12s %s keys x %s: used_memory +%s B, %s B per %s; MEMORY USAGE of one key %s B  (%s)\n' \
        "$case" "$n" "$m" "$MEM_B" "$MEM_PER" "$([ "$m" = 1 ] && echo key || echo 'stored request')" \
        "$(rcli "$RD_PORT" MEMORY USAGE "${pre}0000001")" "$*"
    awk -v c="$case" -v b="$MEM_B" -v k="$((n * m))" 'BEGIN { printf "%s %.4f\n", c, b / k }' >>"$MEM"
}
mem_get() { awk -v c="$1" '$1 == c { printf "%.1f\n", $2 }' "$MEM"; }
mem_ratio() { # CASE_A CASE_B: A / B to 3 decimals, from the unrounded bytes
    awk -v a="$1" -v b="$2" '$1 == a { x = $2 } $1 == b { y = $2 } END { printf "%.3f\n", x / y }' "$MEM"
}

say ""
say "== memory (used_memory of the redis-server after FLUSHALL and after the fill; once, it is"
say "   deterministic; keys live 60 s or more, the fill takes seconds)"
# gcra 10 per 600000 ms: one admission keeps the key 60 s (T = 60 s), like SET .. PX 600000
# The first fill after the server starts carries a one-time ~25-50 kB of allocations (measured:
# the same fill again is that much smaller), which would land on whichever case runs first.
fill "$MEM_KEYS" 1 w: SET {} v PX 600000
mem_case gcra-mod "$MEM_KEYS" 1 SL.THROTTLE {} gcra 10 600000
mem_case set "$MEM_KEYS" 1 SET {} v PX 600000
mem_case lua-gcra "$MEM_KEYS" 1 EVALSHA "$SHA_STORE" 1 {} 10 600000000 10 0 0 1
mem_case mod-log100 "$LOG_KEYS" 100 SL.THROTTLE {} sliding_log 100 60000
say "    check: SL.PEEK on one key -> $(rcli "$RD_PORT" SL.PEEK m:0000001 sliding_log 100 60000 | flat) (remaining 0: full)"
mem_case zset-log100 "$LOG_KEYS" 100 EVALSHA "$SHA_ZSET" 1 {} 100 60000
say "    check: ZCARD $(rcli "$RD_PORT" ZCARD z:0000001), encoding $(rcli "$RD_PORT" OBJECT ENCODING z:0000001)"
mem_case lua-log100 "$LOG_KEYS" 100 EVALSHA "$SHA_SLOG" 1 {} 100 60000000 0 0 0 1
mem_case mod-log10 "$LOG_KEYS" 10 SL.THROTTLE {} sliding_log 100 60000
mem_case zset-log10 "$LOG_KEYS" 10 EVALSHA "$SHA_ZSET" 1 {} 100 60000
rcli "$RD_PORT" FLUSHALL >/dev/null

# Users at their limit, as in docs/scaling.md: 100 stamps spread over the minute (600 ms apart,
# whole microseconds, as the real clock gives them), so the stamps' distances take 3 bytes each
# rather than the 1 byte of the back-to-back fills above. Only the module's test clock can lay
# requests out over a minute in seconds, so this runs in a redis-server of its own.
UC_PORT=$(free_port)
mkdir -p "$TMP/redis-clock"
start redis-clock "${SRV_PIN[@]}" redis-server --port "$UC_PORT" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --dir "$TMP/redis-clock" --loadmodule "$MODULE" testclock
UC_PID=$LAST_PID
wait_port "$UC_PORT"
python3 -c '
import sys
keys, t0 = int(sys.argv[1]), 4000000000000000000  # a whole second in 2096: keys outlive the run
out = []
def cmd(*a):
    out.append("*%d\r\n" % len(a) + "".join("$%d\r\n%s\r\n" % (len(x), x) for x in a))
for i in range(100):
    cmd("SL.DEBUG", "SETTIME", str(t0 + i * 600000000 + ((i * 7919) % 99991) * 1000 + 1000))
    for j in range(keys):
        cmd("SL.THROTTLE", "u:%07d" % j, "sliding_log", "100", "60000")
sys.stdout.write("".join(out))
' "$LOG_KEYS" >"$TMP/users.resp"
for pass in warm-up measured; do # the first fill carries the server's one-time allocations
    rcli "$UC_PORT" FLUSHALL >/dev/null
    before=$(rcli "$UC_PORT" INFO memory | awk -F: '$1 == "used_memory" { print $2 }')
    timeout 120 "${CLI_PIN[@]}" redis-cli -h 127.0.0.1 -p "$UC_PORT" --pipe <"$TMP/users.resp" \
        >"$TMP/users.out" 2>&1 || die "redis-cli --pipe failed ($pass): $(tail -n 3 "$TMP/users.out")"
    after=$(rcli "$UC_PORT" INFO memory | awk -F: '$1 == "used_memory" { print $2 }')
done
USER_KEY_B=$(((after - before) / LOG_KEYS))
say "  mod-user100  $LOG_KEYS keys x 100 stamps 600 ms apart: used_memory +$((after - before)) B," \
    "$USER_KEY_B B per key; STRLEN $(rcli "$UC_PORT" STRLEN u:0000001)," \
    "MEMORY USAGE of one key $(rcli "$UC_PORT" MEMORY USAGE u:0000001) B;" \
    "SL.PEEK -> $(rcli "$UC_PORT" SL.PEEK u:0000001 sliding_log 100 60000 | flat) (remaining 0: full)"
kill -TERM "$UC_PID"

# ---- the table ------------------------------------------------------------------------------------
row() { printf '%-44s %10s %8s %8s %8s %10s  %s\n' "$@"; }
f0() { [ "$1" = - ] && echo - || printf '%.0f' "$1"; }
f2() { [ "$1" = - ] && echo - || printf '%.2f' "$1"; }
f3() { [ "$1" = - ] && echo - || printf '%.3f' "$1"; }
target() { # VALUE OP BOUND
    awk -v v="$1" -v op="$2" -v b="$3" 'BEGIN {
        if (v == "-") { print ""; exit }
        ok = op == ">=" ? v >= b : v <= b
        printf "target %s %s: %s\n", op, b, ok ? "met" : "NOT met" }'
}

say ""
say "== summary: medians of $REPS; redis-benchmark -c $CLIENTS -r $KEYS_R -P 16 unless -P 1 is named;"
say "   redis-server 7 and sluiced on CPU 0, the client on CPU 1"
row "1. GCRA, one redis-server" "req/s" "p50 ms" "p99 ms" "us/req" "module /" ""
mg=$(med mod:gcra 2)
for spec in "mod:gcra|SL.THROTTLE gcra 100 1000 (sluice.so)||" \
    "min:gcra|MIN.GCRA (minimal_gcra.so, the floor)||" \
    "lua:bench|EVALSHA bench/server/gcra.lua|>=|3" \
    "lua:store|EVALSHA src/store/lua/gcra.lua|>=|3" \
    "incr|INCR|>=|0.8" \
    "set|SET k v PX 60000||"; do
    IFS='|' read -r c label op bound <<<"$spec"
    r=-
    [ "$c" = mod:gcra ] || r=$(ratio "$mg" "$(med "$c" 2)")
    row "  $label" "$(f0 "$(med "$c" 2)")" "$(f3 "$(med "$c" 3)")" "$(f3 "$(med "$c" 4)")" \
        "$(f2 "$(med "$c" 5)")" "$r" "$([ -z "$op" ] || target "$r" "$op" "$bound")"
done
say ""
row "2. sliding log, 100 per 60 s" "req/s" "p50 ms" "p99 ms" "us/req" "module /" ""
ms=$(med mod:slog 2)
row "  SL.THROTTLE sliding_log 100 60000" "$(f0 "$ms")" "$(f3 "$(med mod:slog 3)")" \
    "$(f3 "$(med mod:slog 4)")" "$(f2 "$(med mod:slog 5)")" - ""
for spec in "lua:zset|EVALSHA zset_log.lua|>=|5" "lua:slog|EVALSHA src/store/lua/sliding_log.lua||" \
    "mod:slog:P1|-P 1: SL.THROTTLE sliding_log||" \
    "mod:slog:full|keys filling up (-r $FULL_R): SL.THROTTLE||" \
    "lua:zset:full|keys filling up (-r $FULL_R): zset_log.lua|>=|5"; do
    IFS='|' read -r c label op bound <<<"$spec"
    r=-
    [ "$c" = mod:slog:full ] || [ "$c" = mod:slog:P1 ] || r=$(ratio "$([ "$c" = lua:zset:full ] && med mod:slog:full 2 || echo "$ms")" "$(med "$c" 2)")
    row "  $label" "$(f0 "$(med "$c" 2)")" "$(f3 "$(med "$c" 3)")" "$(f3 "$(med "$c" 4)")" \
        "$(f2 "$(med "$c" 5)")" "$r" "$([ -z "$op" ] || target "$r" "$op" "$bound")"
done
for m in 100 10; do
    a=$(mem_get "mod-log$m")
    z=$(mem_get "zset-log$m")
    r=$(mem_ratio "mod-log$m" "zset-log$m")
    say "  memory per stored request, keys with $m of 100 stamps: module $a B, ZSET $z B," \
        "module / ZSET $r ($(target "$r" "<=" 0.25))"
done
say "    (sluiced's Lua sliding_log.lua, keys full: $(mem_get lua-log100) B per stored request)"
say "  a user at the limit (100 stamps 600 ms apart), module: $USER_KEY_B B per key (the capacity plan's figure)"
say ""
a=$(mem_get gcra-mod)
s=$(mem_get set)
r=$(mem_ratio gcra-mod set)
say "3. memory per key: SL.THROTTLE gcra $a B, SET k v PX $s B, module / SET $r ($(target "$r" "<=" 1));"
say "   the key src/store/lua/gcra.lua writes (the TAT as an integer string): $(mem_get lua-gcra) B"
say ""
row "4. sluiced --threads 1, SL.THROTTLE" "req/s" "p50 ms" "p99 ms" "sluiced" "Redis" "decisions per core-second"
row "   (us/req: CPU per decision of each)" "" "" "" "us/req" "us/req" "sluiced / Redis"
for spec in "sl:redis|redis://, gcra 100 1000" "sl:redis:P1|redis://, gcra, -P 1" \
    "sl:redis:slog|redis://, sliding_log 100 60000" \
    "sl:cluster|redis-cluster:// 3 shards, gcra" "sl:cluster:P1|redis-cluster://, gcra, -P 1" \
    "sl:cluster:slog|redis-cluster://, sliding_log" "sl:cluster:slog:P1|redis-cluster://, sliding_log, -P 1" \
    "sl:memory|memory store (no Redis), gcra"; do
    IFS='|' read -r c label <<<"$spec"
    su=$(med "$c" 9)
    if [ "$c" = sl:memory ]; then
        ru=-
    elif [[ $c == sl:cluster* ]]; then
        ru=$(med "$c" 10 12)
    else
        ru=$(med "$c" 10)
    fi
    per=$(awk -v s="$su" -v r="$ru" 'BEGIN {
        a = s == "-" || s == 0 ? "-" : sprintf("%.0f k", 1e3 / s)
        b = r == "-" || r == 0 ? "-" : sprintf("%.0f k", 1e3 / r)
        printf "%s / %s", a, b }')
    row "  $label" "$(f0 "$(med "$c" 2)")" "$(f3 "$(med "$c" 3)")" "$(f3 "$(med "$c" 4)")" \
        "$(f2 "$su")" "$(f2 "$ru")" "$per"
done
say "  (sluiced and Redis share CPU 0, so req/s through sluiced is what one core does for both;"
say "   per core-second = 1 / CPU per decision. Cluster: Redis us/req is the sum over the 3 nodes.)"
say "  sluiced's Redis store: $STORE_FAILS decisions timed out or failed in all (each was decided by"
say "  on_store_error, not by Redis)"
disturbed_report
