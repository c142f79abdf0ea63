#!/usr/bin/env bash
# test_node_sdk.sh - the npm package sluice (bindings/node) as users get it: `npm pack` makes the
# .tgz, which is installed with npm into a fresh directory (with koffi, its optional peer), and
# the tests run from there against real servers: every case of tests/sdk/cases.json
# (cases.js), the C client's seeded backoff sequences of tests/sdk/backoff.json, the client's
# TLS, pipelining, pool, version and ES module face (client.js), the key functions against
# tests/sdk/keys.json (keys.js),
# Express and Fastify serving real HTTP requests (middleware.js), rate-limiter-flexible's
# documented usage on RateLimiterSluice beside RateLimiterRedis on a real redis-server
# (flexible.js), and libsluice in-process under seeded random operations (native.js); then the
# shared cases, the client, the middleware and rate-limiter-flexible's usage again against sluiced on a Redis
# store (redis-server with sluice.so). The middleware's tests have the shell kill a sluiced by its PID mid-test and start
# it again (handshake files: NAME.stop, NAME.kill, NAME.start).
# The frameworks and rate-limiter-flexible come from tests/node_sdk/package-lock.json (npm ci).
# The .tgz carries the project's LICENSE (npm pack --dry-run lists it).
# Skipped (exit 77) without node, npm, redis-server or openssl.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

SDK_DIR=$SLUICE_SOURCE_DIR/tests/node_sdk
PKG_DIR=$SLUICE_SOURCE_DIR/bindings/node
need node npm redis-server openssl
node_packages "$SDK_DIR" || exit 1

# ---- the package, packed and installed as a user installs it
mkdir -p "$TMP/pack" "$TMP/app" "$TMP/hs"
(cd "$PKG_DIR" && npm pack --silent --pack-destination "$TMP/pack" >"$TMP/pack.log" 2>&1)
check npm-pack test $? -eq 0
TGZ=$(ls "$TMP"/pack/sluice-*.tgz 2>/dev/null | head -n 1)
check tgz-made test -n "$TGZ"
check tgz-has-no-tests sh -c "! tar tzf '$TGZ' | grep -q -e node_modules -e '\\.tgz'"
# the licence travels with the package: npm pack lists it, and it is the project's LICENSE
(cd "$PKG_DIR" && npm pack --dry-run --json >"$TMP/pack.json" 2>/dev/null)
check pack-lists-license python3 -c 'import json, sys; files = [f["path"] for f in json.load(open(sys.argv[1]))[0]["files"]]; sys.exit("LICENSE" not in files)' "$TMP/pack.json"
check tgz-license-is-the-projects sh -c "tar xzOf '$TGZ' package/LICENSE | cmp -s - '$SLUICE_SOURCE_DIR/LICENSE'"
KOFFI=$(node -p "require('$SDK_DIR/package.json').dependencies.koffi")
echo '{"name":"sluice-sdk-app","version":"0.0.0","private":true}' >"$TMP/app/package.json"
(cd "$TMP/app" && timeout 300 npm install --no-audit --no-fund --prefer-offline "$TGZ" "koffi@$KOFFI" \
    >"$TMP/install.log" 2>&1)
check npm-install test $? -eq 0 || cat "$TMP/install.log"
cp "$SDK_DIR"/*.js "$SDK_DIR"/*.mjs "$TMP/app/"
check installed test -f "$TMP/app/node_modules/sluice/package.json"

# ---- the servers
sdk_cases_rules "$TMP/cases.yaml"
middleware_rules "$TMP/rules.yaml"
cat >>"$TMP/rules.yaml" <<'YAML'
  - name: pipe
    algorithm: sliding_log
    limit: 1000
    window: 1h
  - name: flex
    algorithm: sliding_log
    limit: 5
    window: 1d
YAML
# the sluiced servers a test may stop (or kill) and start again: each one's ports and arguments
declare -A SRV_AT SRV_ARGS
start_restartable() { # NAME ARGS..: start_scratch_sluiced, noting how to start it again
    local name=$1
    shift
    start_scratch_sluiced "$name" "$@"
    SRV_AT[$name]="$RESP_PORT $HTTP_PORT"
    SRV_ARGS[$name]="$*"
}
start_restartable cases --rules "$TMP/cases.yaml"
CASES_PORT=$RESP_PORT
start_scratch_sluiced main --rules "$TMP/rules.yaml"
MAIN_PORT=$RESP_PORT
start_restartable kill --rules "$TMP/rules.yaml"
KILL_PORT=$RESP_PORT
# a sluiced that shows its rules to the admin user only
start_scratch_sluiced locked --rules "$TMP/rules.yaml" --requirepass pw --admin-password apw
LOCKED_PORT=$RESP_PORT
# TLS: a CA and a certificate for 127.0.0.1 made here
(cd "$TMP" && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=sluice node test CA" 2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1\n' >san.ext &&
    openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj "/CN=127.0.0.1" 2>/dev/null &&
    openssl x509 -req -in tls.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out tls.pem \
        -extfile san.ext 2>/dev/null)
check tls-certificates test -s "$TMP/tls.pem"
start_scratch_sluiced tls --rules "$TMP/rules.yaml" --tls-cert "$TMP/tls.pem" --tls-key "$TMP/tls.key"
TLS_PORT=$RESP_PORT
start_redis redis --save "" --appendonly no || exit 1
PLAIN_REDIS_PORT=$REDIS_PORT # rate-limiter-flexible's RateLimiterRedis
# the same rules on a Redis store: a redis-server loading the built sluice.so
start_redis rstore --loadmodule "$SLUICE_BUILD_DIR/src/module/sluice.so" || { cat "$TMP/rstore.log"; exit 1; }
STORE="--store redis://127.0.0.1:$REDIS_PORT --store-timeout 5s"
# shellcheck disable=SC2086 # STORE is words
start_restartable rcases --rules "$TMP/cases.yaml" $STORE
RCASES_PORT=$RESP_PORT
# shellcheck disable=SC2086
start_scratch_sluiced rmain --rules "$TMP/rules.yaml" $STORE
RMAIN_PORT=$RESP_PORT
check redis-store-module poll 10 grep -q "request store redis (sluice.so module)" "$TMP/rmain.log"
# shellcheck disable=SC2086
start_restartable rkill --rules "$TMP/rules.yaml" $STORE
RKILL_PORT=$RESP_PORT

# a port whose connections are refused all through the tests: bound, never listening
hold_port refused closed || exit 1
# ---- the tests, each a node process; the shell serves its requests to stop or start sluiced
export SDK_HANDSHAKE=$TMP/hs SDK_CASES=$SLUICE_SOURCE_DIR/tests/sdk/cases.json
export SDK_BACKOFF=$SLUICE_SOURCE_DIR/tests/sdk/backoff.json SDK_KEYS=$SLUICE_SOURCE_DIR/tests/sdk/keys.json
export SDK_CASES_PORT=$CASES_PORT SDK_PORT=$MAIN_PORT SDK_TLS_PORT=$TLS_PORT SDK_TLS_CA=$TMP/ca.pem
export SDK_KILL_PORT=$KILL_PORT SDK_KILL_NAME=kill SDK_STORE=memory SDK_LOCKED_PORT=$LOCKED_PORT
export SDK_REFUSED_PORT=$HELD_PORT SDK_REDIS_PORT=$PLAIN_REDIS_PORT SDK_VERSION_FILE=$SLUICE_SOURCE_DIR/CMakeLists.txt
export SLUICE_LIBRARY=$SLUICE_BUILD_DIR/src/libsluice.so.2 NODE_PATH=$SDK_DIR/node_modules

serve_requests() {
    local f base op name
    for f in "$TMP"/hs/*.stop.* "$TMP"/hs/*.kill.* "$TMP"/hs/*.start.*; do
        [ -e "$f" ] || continue
        base=${f%.*.*}
        op=${f#"$base".}
        name=${op#*.}
        op=${op%%.*}
        rm -f "$f"
        case $op in
        stop) stop_bg "$name" TERM ;;
        kill) stop_bg "$name" KILL ;;
        *) # shellcheck disable=SC2086 # the arguments are words
            start_sluiced_at "$name" ${SRV_AT[$name]} --config-store "$TMP/$name.db" --snapshot "" \
                ${SRV_ARGS[$name]} ;;
        esac
        touch "$base.done"
    done
}

run_node() { # NAME FILE: runs FILE from the app directory, at most 240 s
    local name=$1 file=$2 pid i rc
    start_bg "$name" sh -c "cd '$TMP/app' && exec timeout 240 node '$file'"
    pid=$(cat "$TMP/$name.pid")
    for ((i = 0; i < 4800; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        serve_requests
        sleep 0.05
    done
    wait "$pid"
    rc=$?
    lib_forget "$pid"
    grep -E '^(not ok|# (tests|pass|fail|SLUICE_SEED))' "$TMP/$name.log" | sed "s/^/$name: /"
    [ "$rc" -eq 0 ] || cat "$TMP/$name.log"
    return "$rc"
}

tests=(cases client keys middleware flexible native)
if sanitized "$SLUICE_LIBRARY"; then # the plain build runs native.js
    echo "native.js skipped: libsluice is built with a sanitizer, which node cannot load"
    tests=(cases client keys middleware flexible)
fi
for t in "${tests[@]}"; do
    run_node "node-$t" "$t.js"
    check "$t" test $? -eq 0
done
run_node node-esm esm.mjs
check esm test $? -eq 0

# the shared cases, the client, the middleware and RateLimiterSluice again, every sluiced on the
# Redis store
SDK_CASES_PORT=$RCASES_PORT SDK_CASES_NAME=rcases run_node node-cases-redis cases.js
check cases-redis-store test $? -eq 0
SDK_PORT=$RMAIN_PORT SDK_STORE=redis run_node node-client-redis client.js
check client-redis-store test $? -eq 0
SDK_PORT=$RMAIN_PORT SDK_KILL_PORT=$RKILL_PORT SDK_KILL_NAME=rkill SDK_STORE=redis \
    run_node node-middleware-redis middleware.js
check middleware-redis-store test $? -eq 0
SDK_PORT=$RMAIN_PORT run_node node-flexible-redis flexible.js
check flexible-redis-store test $? -eq 0

for name in cases main tls kill locked rcases rmain rkill; do
    stop_bg "$name" TERM
    check "$name-exit-0" test $? -eq 0
done
finish
