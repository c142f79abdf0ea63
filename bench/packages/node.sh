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
if [ "${QUICK:-0}" = 1 ]; then
    ROUNDS=${ROUNDS:-1} N=${N:-500} N_INPROC=${N_INPROC:-50000} N_CLIENT=${N_CLIENT:-20000}
else
    ROUNDS=${ROUNDS:-5} N=${N:-4000} N_INPROC=${N_INPROC:-500000} N_CLIENT=${N_CLIENT:-100000}
fi
BATCH=${BATCH:-100}
BENCH_NAME=bench/packages/node.sh
# shellcheck source=bench/packages/common.sh
. bench/packages/common.sh

need_tools node npm redis-server redis-cli taskset python3 flock cmake
pkg_init sluiced sluice_module sluice
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
pkg_servers <<'YAML'
rules:
  - name: bench
    algorithm: fixed_window
    limit: 1000000000
    window: 1h
YAML

for spec in bare:bare:0 sluice-memory:sluice:"$SM_PORT" sluice-redis:sluice:"$SR_PORT" rlf-redis:rlf:"$RD_PORT"; do
    IFS=: read -r name kind store <<<"$spec"
    port=$(free_port)
    pkg_app "$name" "$port" sh -c "cd '$TMP/app' && exec node node_bench.js serve $kind $port $store"
done

# ---- 1. Express: added latency -----------------------------------------------------------------
pkg_load() { "${CLI_PIN[@]}" node "$TMP/app/node_bench.js" load "$@"; } # PORT N KEYS SEED
say ""
say "== 1. Express, GET /hello, $N requests per round one at a time over one keep-alive connection, $KEYS keys"
say "\$ node node_bench.js load PORT $N $KEYS SEED   (pinned to CPU 1; once per case per round, cases interleaved)"
pkg_rounds 1000
say ""
say "medians over $ROUNDS rounds (added = the median of the per-round differences from bare; app CPU:"
say "the Express process's CPU time per request, /proc/PID/stat, the limiter's client code included)"
pkg_medians

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
pkg_what_decided
