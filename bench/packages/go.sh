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
if [ "${QUICK:-0}" = 1 ]; then
    ROUNDS=${ROUNDS:-1} N=${N:-500} N_CLIENT=${N_CLIENT:-5000}
else
    ROUNDS=${ROUNDS:-5} N=${N:-4000} N_CLIENT=${N_CLIENT:-40000}
fi
CONC=${CONC:-8}
BENCH_NAME=bench/packages/go.sh
# shellcheck source=bench/packages/common.sh
. bench/packages/common.sh

need_tools go redis-server redis-cli taskset python3 curl cmake
pkg_init sluiced sluice_module
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
pkg_servers <<'YAML'
rules:
  - name: bench
    algorithm: gcra
    limit: 1000000
    window: 1s
    burst: 1000000
YAML

for spec in bare:bare:0 sluice-memory:sluice:"$SM_PORT" sluice-redis:sluice:"$SR_PORT"; do
    IFS=: read -r name kind store <<<"$spec"
    port=$(free_port)
    pkg_app "$name" "$port" "$GB" serve "$kind" "127.0.0.1:$port" "127.0.0.1:$store"
done

# ---- 1. net/http: added latency ------------------------------------------------------------------
pkg_load() { "${CLI_PIN[@]}" "$GB" load "127.0.0.1:$1" "${@:2}"; } # PORT N KEYS SEED
say ""
say "== 1. net/http, GET /hello, $N requests per round one at a time over one keep-alive connection, $KEYS keys"
say "\$ go_bench load 127.0.0.1:PORT $N $KEYS SEED   (pinned to CPU 1; once per case per round, cases interleaved)"
pkg_rounds 1000
say ""
say "medians over $ROUNDS rounds (added = the median of the per-round differences from bare; app CPU:"
say "the net/http process's CPU time per request, /proc/PID/stat, the client's code included)"
pkg_medians

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
pkg_what_decided
