#!/usr/bin/env bash
# bench/packages/go.sh - the Go package sluice.dev/go on this machine, side by side in one run.
# Prints figures (asserts nothing), every command before its output, medians of ROUNDS rounds
# and ratios.
#
#   1. net/http: the latency Limiter.Middleware adds to a request. One server per case, GET
#      /hello, a key per request drawn from KEYS keys (X-Key header): the bare handler (the
#      floor); the middleware over sluiced's memory store; the middleware over sluiced whose
#      store is a redis-server with sluice.so. go_bench's own client sends N requests one at a
#      time over one keep-alive connection per round; p50 and p99 per round, then per case the
#      medians and the median of the per-round differences from the bare handler's.
#   2. The client against redis_rate's recipe: decisions/s of Client.Allow through sluiced
#      (memory store; the redis-server with sluice.so) against GCRA in one Lua call straight to
#      that same redis-server (bench/packages/gcra_redis_rate.lua: the Redis calls and arithmetic
#      of go-redis/redis_rate's AllowN, written here; redis_rate itself cannot be fetched here,
#      there is no module proxy), sent by the package's own RESP connection (Client.Do EVALSHA),
#      from 1 goroutine and from CONC goroutines sharing one Client.
#
# The package is used as a user gets it (as tests/integration/test_go.sh does): bindings/go
# zipped as a release carries it, unpacked, and required through a `replace` by a module made
# here; GOPROXY=off, caches under the build tree. Servers (sluiced, redis-server, the net/http
# servers) run pinned to CPU 0, the load and the client loops to CPU 1. Everything listens on
# 127.0.0.1 on free ports; every process started here is stopped by its PID on exit.
#
#   bench/packages/go.sh                      ROUNDS=5 N=4000 KEYS=10000; about 3 minutes
#   QUICK=1 bench/packages/go.sh              a smoke run (figures not comparable)
#   ROUNDS=9 bench/packages/go.sh             more rounds on a noisy machine
#   BUILD_DIR=/tmp/b bench/packages/go.sh     build (RelWithDebInfo, no sanitizer) there
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-pkg}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
if [ "${QUICK:-0}" = 1 ]; then
    ROUNDS=${ROUNDS:-1} N=${N:-500} N_CLIENT=${N_CLIENT:-5000}
else
    ROUNDS=${ROUNDS:-5} N=${N:-4000} N_CLIENT=${N_CLIENT:-40000}
fi
KEYS=${KEYS:-10000}
CONC=${CONC:-8}
BENCH_NAME=bench/packages/go.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools go redis-server redis-cli taskset python3 curl cmake
bench_build "$BUILD" sluiced sluice_module
SLUICED=$BUILD/src/server/sluiced
MODULE=$BUILD/src/module/sluice.so
bench_init
bench_machine
say "$(go version), $(redis-server --version | cut -d' ' -f1-3)"

# ---- the package as a user gets it: zipped, unpacked, required through a replace --------------------
GODIR=$BUILD/go
mkdir -p "$GODIR/cache" "$GODIR/path"
export GOCACHE=$GODIR/cache GOPATH=$GODIR/path GOMODCACHE=$GODIR/path/pkg/mod \
    GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off GOENV=off GOTOOLCHAIN=local CGO_ENABLED=0
VERSION=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
say "\$ (zip bindings/go as sluice.dev/go@v$VERSION, unpack, go build a module that replaces to it)"
python3 - "$ROOT/bindings/go" "$TMP/sluice-go-$VERSION.zip" "sluice.dev/go@v$VERSION" <<'EOF'
import os, sys, zipfile
src, out, prefix = sys.argv[1:4]
with zipfile.ZipFile(out, "w") as z:
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            z.write(p, prefix + "/" + os.path.relpath(p, src))
EOF
mkdir -p "$TMP/vendored" "$TMP/gobench"
(cd "$TMP/vendored" && python3 -m zipfile -e "$TMP/sluice-go-$VERSION.zip" .)
cp "$ROOT/bench/packages/go_bench/main.go" "$TMP/gobench/"
cat >"$TMP/gobench/go.mod" <<EOF
module example.com/gobench

go 1.19

require sluice.dev/go v$VERSION

replace sluice.dev/go => $TMP/vendored/sluice.dev/go@v$VERSION
EOF
(cd "$TMP/gobench" && go build -o go_bench . >"$TMP/gobuild.log" 2>&1) || die "go build failed: $(cat "$TMP/gobuild.log")"
GB=$TMP/gobench/go_bench

# ---- servers -----------------------------------------------------------------------------------------
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: bench
    algorithm: gcra
    limit: 1000000
    window: 1s
    burst: 1000000
YAML
RD_PORT=$(free_port)
mkdir -p "$TMP/redis"
start redis "${SRV_PIN[@]}" redis-server --port "$RD_PORT" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --dir "$TMP/redis" --loadmodule "$MODULE"
wait_port "$RD_PORT"
# --store-timeout 2s: on a busy shared core the default 5 ms would let decisions be made by
# on_store_error instead of by Redis; the end reads sluiced's counters to show none were.
start_sluiced() { # NAME STORE: sets SL_PORT, SL_HTTP
    SL_PORT=$(free_port)
    SL_HTTP=$(free_port)
    start "$1" "${SRV_PIN[@]}" "$SLUICED" --grpc-port 0 --threads 1 --port "$SL_PORT" --http-port "$SL_HTTP" \
        --store "$2" --store-timeout 2s --rules "$TMP/rules.yaml" --config-store "$TMP/$1.db" \
        --snapshot "" --log-level info
    wait_port "$SL_PORT"
}
start_sluiced sluiced-memory memory
SM_PORT=$SL_PORT SM_HTTP=$SL_HTTP
start_sluiced sluiced-redis "redis://127.0.0.1:$RD_PORT"
SR_PORT=$SL_PORT SR_HTTP=$SL_HTTP
grep -q 'request store redis (sluice.so module)' "$TMP/sluiced-redis.log" ||
    die "sluiced-redis does not use sluice.so: $(cat "$TMP/sluiced-redis.log")"

declare -A APP_PORT APP_PID
for spec in bare:bare:0 sluice-memory:sluice:"$SM_PORT" sluice-redis:sluice:"$SR_PORT"; do
    IFS=: read -r name kind store <<<"$spec"
    port=$(free_port)
    start "app-$name" "${SRV_PIN[@]}" "$GB" serve "$kind" "127.0.0.1:$port" "127.0.0.1:$store"
    APP_PORT[$name]=$port
    APP_PID[$name]=$LAST_PID
    wait_port "$port"
done
CASES=(bare sluice-memory sluice-redis)

# ---- 1. net/http: added latency ------------------------------------------------------------------
say ""
say "== 1. net/http, GET /hello, $N requests per round one at a time over one keep-alive connection, $KEYS keys"
say "\$ go_bench load 127.0.0.1:PORT $N $KEYS SEED   (pinned to CPU 1; once per case per round, cases interleaved)"
for c in "${CASES[@]}"; do
    "${CLI_PIN[@]}" "$GB" load "127.0.0.1:${APP_PORT[$c]}" 1000 "$KEYS" 99 >/dev/null # warm-up
done
: >"$TMP/http.txt"
for ((r = 1; r <= ROUNDS; r++)); do
    for c in "${CASES[@]}"; do
        wait_quiet
        t0=$(cpu_ticks "${APP_PID[$c]}")
        read -r p50 p99 rps bad < <("${CLI_PIN[@]}" "$GB" load "127.0.0.1:${APP_PORT[$c]}" "$N" "$KEYS" "$r")
        cpu=$(awk -v d="$(($(cpu_ticks "${APP_PID[$c]}") - t0))" -v hz="$CLK_TCK" -v n="$N" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }')
        echo "$r $c $p50 $p99 $rps $bad $cpu" >>"$TMP/http.txt"
        printf '  round %d  %-14s p50 %7s us  p99 %7s us  %6s req/s  app CPU %6s us/req  non-200 %s\n' "$r" "$c" "$p50" "$p99" "$rps" "$cpu" "$bad"
    done
done
say ""
say "medians over $ROUNDS rounds (added = the median of the per-round differences from bare; app CPU:"
say "the net/http process's CPU time per request, /proc/PID/stat, the client's code included)"
printf '  %-14s %10s %10s %10s %14s %14s %12s %12s\n' case "p50 us" "p99 us" "req/s" "added p50 us" "added p99 us" "app CPU us" "added CPU us"
for c in "${CASES[@]}"; do
    awk -v c="$c" '
        function med(a, n,   i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $2 == "bare" { b50[$1] = $3; b99[$1] = $4; bcpu[$1] = $7 }
        $2 == c { n++; p50[n] = $3; p99[n] = $4; rps[n] = $5; r[n] = $1; cpu[n] = $7 }
        END {
            for (i = 1; i <= n; i++) { d50[i] = p50[i] - b50[r[i]]; d99[i] = p99[i] - b99[r[i]]; dcpu[i] = cpu[i] - bcpu[r[i]] }
            printf "  %-14s %10.1f %10.1f %10.0f %14.1f %14.1f %12.1f %12.1f\n", c, med(p50, n), med(p99, n), med(rps, n),
                med(d50, n), med(d99, n), med(cpu, n), med(dcpu, n)
        }' "$TMP/http.txt"
done

# ---- 2. the client against redis_rate's GCRA script ----------------------------------------------
say ""
say "== 2. Client decisions against redis_rate's GCRA in Lua (bench/packages/gcra_redis_rate.lua)"
for conc in 1 "$CONC"; do
    say "\$ go_bench client $N_CLIENT $KEYS $ROUNDS $conc bench/packages/gcra_redis_rate.lua ...   (pinned to CPU 1)"
    wait_quiet
    "${CLI_PIN[@]}" "$GB" client "$N_CLIENT" "$KEYS" "$ROUNDS" "$conc" "$ROOT/bench/packages/gcra_redis_rate.lua" \
        "127.0.0.1:$SM_PORT" "127.0.0.1:$SR_PORT" "127.0.0.1:$RD_PORT"
done

# ---- what decided -----------------------------------------------------------------------------------
say ""
for name in sluiced-memory:"$SM_HTTP" sluiced-redis:"$SR_HTTP"; do
    port=${name#*:}
    m=$(curl -s "http://127.0.0.1:$port/metrics" |
        awk '$1 ~ /^sluice_redis_(timeouts|errors)_total/ { s += $2 } END { print s + 0 }')
    say "${name%%:*}: store timeouts and errors counted: $m"
done
say "redis-server error replies: $(redis-cli -h 127.0.0.1 -p "$RD_PORT" INFO stats | tr -d '\r' | sed -n 's/^total_error_replies://p')"
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
