#!/usr/bin/env bash
# bench/packages/node.sh - the npm package sluice beside rate-limiter-flexible on this machine,
# side by side in one run. Prints figures (asserts nothing), every command before its output,
# medians of ROUNDS rounds and ratios.
#
#   1. Express: the latency a rate limiter adds to a request. One Express app per case, GET
#      /hello, a key per request drawn from KEYS keys (x-key header): no limiter (the floor);
#      sluice.express over sluiced's memory store; sluice.express over sluiced whose store is a
#      redis-server with sluice.so; rate-limiter-flexible's RateLimiterRedis on that same
#      redis-server, as its README shows for Express. The load is node_bench.js's own
#      keep-alive client: N requests one at a time over one connection per round; p50 and p99
#      per round, then per case the medians and the median of the per-round differences from the
#      bare app's (the added latency).
#   2. In-process: the koffi binding's table.decide against RateLimiterMemory.consume, the same
#      key stream, decisions/s.
#   3. Client: decisions/s over one connection, BATCH calls in flight (auto-pipelined): Client.allow
#      and RateLimiterSluice.consume against RateLimiterRedis.consume.
#
# The package is used as users get it: `npm pack` of bindings/node installed with npm (and koffi)
# into a fresh directory; express, ioredis and rate-limiter-flexible are tests/node_sdk's, from
# its package-lock.json (npm ci, as the integration test installs them). Servers (sluiced,
# redis-server, the Express apps) run pinned to CPU 0, the load and the in-process and client
# loops to CPU 1. Everything listens on 127.0.0.1 on free ports; every process started here is
# stopped by its PID on exit.
#
#   bench/packages/node.sh                      ROUNDS=5 N=4000 KEYS=10000; about 6 minutes
#   QUICK=1 bench/packages/node.sh              a smoke run (figures not comparable)
#   ROUNDS=9 bench/packages/node.sh             more rounds on a noisy machine
#   BUILD_DIR=/tmp/b bench/packages/node.sh     build (RelWithDebInfo, no sanitizer) there
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-pkg}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
if [ "${QUICK:-0}" = 1 ]; then
    ROUNDS=${ROUNDS:-1} N=${N:-500} N_INPROC=${N_INPROC:-50000} N_CLIENT=${N_CLIENT:-20000}
else
    ROUNDS=${ROUNDS:-5} N=${N:-4000} N_INPROC=${N_INPROC:-500000} N_CLIENT=${N_CLIENT:-100000}
fi
KEYS=${KEYS:-10000}
BATCH=${BATCH:-100}
BENCH_NAME=bench/packages/node.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools node npm redis-server redis-cli taskset python3 flock cmake
bench_build "$BUILD" sluiced sluice_module sluice
SLUICED=$BUILD/src/server/sluiced
MODULE=$BUILD/src/module/sluice.so
bench_init
bench_machine
say "node $(node --version), npm $(npm --version), $(redis-server --version | cut -d' ' -f1-3)"

# ---- the package, packed and installed as a user installs it -------------------------------------
SDK_DIR=$ROOT/tests/node_sdk
(
    flock -w 360 9 || die "$SDK_DIR stayed locked"
    if ! (cd "$SDK_DIR" && node -e '
        for (const d of Object.keys(require("./package.json").dependencies)) require.resolve(d + "/package.json");') 2>/dev/null; then
        say "\$ (cd tests/node_sdk && npm ci)"
        (cd "$SDK_DIR" && timeout 300 npm ci --no-audit --no-fund >"$TMP/npm-ci.log" 2>&1) ||
            die "npm ci failed in $SDK_DIR: $(tail -n 5 "$TMP/npm-ci.log")"
    fi
) 9>"$SDK_DIR/.npm-ci.lock"
mkdir -p "$TMP/pack" "$TMP/app"
say "\$ (cd bindings/node && npm pack) && npm install sluice-*.tgz koffi"
(cd "$ROOT/bindings/node" && npm pack --silent --pack-destination "$TMP/pack" >"$TMP/pack.log" 2>&1) ||
    die "npm pack failed: $(cat "$TMP/pack.log")"
TGZ=$(ls "$TMP"/pack/sluice-*.tgz)
KOFFI=$(node -p "require('$SDK_DIR/package.json').dependencies.koffi")
echo '{"name":"sluice-bench-app","version":"0.0.0","private":true}' >"$TMP/app/package.json"
(cd "$TMP/app" && timeout 300 npm install --no-audit --no-fund --prefer-offline "$TGZ" "koffi@$KOFFI" \
    >"$TMP/install.log" 2>&1) || die "npm install failed: $(tail -n 5 "$TMP/install.log")"
cp "$ROOT/bench/packages/node_bench.js" "$TMP/app/"
export NODE_PATH=$SDK_DIR/node_modules SLUICE_LIBRARY=$BUILD/src/libsluice.so.2
nb() { (cd "$TMP/app" && exec node node_bench.js "$@"); }

# ---- servers ---------------------------------------------------------------------------------------
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: bench
    algorithm: fixed_window
    limit: 1000000000
    window: 1h
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
for spec in bare:bare:0 sluice-memory:sluice:"$SM_PORT" sluice-redis:sluice:"$SR_PORT" rlf-redis:rlf:"$RD_PORT"; do
    IFS=: read -r name kind store <<<"$spec"
    port=$(free_port)
    start "app-$name" "${SRV_PIN[@]}" sh -c "cd '$TMP/app' && exec node node_bench.js serve $kind $port $store"
    APP_PORT[$name]=$port
    APP_PID[$name]=$LAST_PID
    wait_port "$port"
done
CASES=(bare sluice-memory sluice-redis rlf-redis)

# ---- 1. Express: added latency -----------------------------------------------------------------
say ""
say "== 1. Express, GET /hello, $N requests per round one at a time over one keep-alive connection, $KEYS keys"
say "\$ node node_bench.js load PORT $N $KEYS SEED   (pinned to CPU 1; once per case per round, cases interleaved)"
for c in "${CASES[@]}"; do
    "${CLI_PIN[@]}" node "$TMP/app/node_bench.js" load "${APP_PORT[$c]}" 1000 "$KEYS" 99 >/dev/null # warm-up
done
: >"$TMP/express.txt"
for ((r = 1; r <= ROUNDS; r++)); do
    for c in "${CASES[@]}"; do
        wait_quiet
        t0=$(cpu_ticks "${APP_PID[$c]}")
        read -r p50 p99 rps bad < <("${CLI_PIN[@]}" node "$TMP/app/node_bench.js" load "${APP_PORT[$c]}" "$N" "$KEYS" "$r")
        cpu=$(awk -v d="$(($(cpu_ticks "${APP_PID[$c]}") - t0))" -v hz="$CLK_TCK" -v n="$N" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }')
        echo "$r $c $p50 $p99 $rps $bad $cpu" >>"$TMP/express.txt"
        printf '  round %d  %-14s p50 %7s us  p99 %7s us  %6s req/s  app CPU %6s us/req  non-200 %s\n' "$r" "$c" "$p50" "$p99" "$rps" "$cpu" "$bad"
    done
done
say ""
say "medians over $ROUNDS rounds (added = the median of the per-round differences from bare; app CPU:"
say "the Express process's CPU time per request, /proc/PID/stat, the limiter's client code included)"
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
        }' "$TMP/express.txt"
done

# ---- 2. in-process -------------------------------------------------------------------------------
say ""
say "== 2. In-process decisions"
say "\$ node node_bench.js inproc $N_INPROC $KEYS $ROUNDS   (pinned to CPU 1)"
wait_quiet
"${CLI_PIN[@]}" node "$TMP/app/node_bench.js" inproc "$N_INPROC" "$KEYS" "$ROUNDS"

# ---- 3. client over one connection -------------------------------------------------------------
say ""
say "== 3. Client decisions over one connection"
say "\$ node node_bench.js client $N_CLIENT $KEYS $ROUNDS $BATCH ...   (pinned to CPU 1)"
wait_quiet
"${CLI_PIN[@]}" node "$TMP/app/node_bench.js" client "$N_CLIENT" "$KEYS" "$ROUNDS" "$BATCH" "$SM_PORT" "$SR_PORT" "$RD_PORT"

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
