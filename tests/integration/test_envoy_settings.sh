#!/usr/bin/env bash
# test_envoy_settings.sh - sluiced started with envoyproxy/ratelimit's environment variables and
# no flag of its own but the RESP port, the config store and the snapshot the harness needs:
# RUNTIME_ROOT/_SUBDIRECTORY/_APPDIRECTORY find upstream's runtime directory, PORT and
# GRPC_PORT the ports, HOST the address, REDIS_* the Redis store (with sluice.so), LOG_LEVEL
# the log level; it answers a gRPC call and POST /json with the limits of that directory, counted
# in that Redis. A variable it cannot honour stops the start naming it; one it can honour only
# at one value is taken at that value; a flag given wins over a variable.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

PY=/usr/bin/python3
need "$PY" curl redis-server redis-cli
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || {
    echo "SKIP: needs python3-grpcio and python3-grpc-tools"
    exit 77
}
mkdir -p "$TMP/stubs" "$TMP/runtime/current/ratelimit/config"
"$PY" -m grpc_tools.protoc -I "$SLUICE_SOURCE_DIR/src/proto/grpc" --python_out="$TMP/stubs" \
    --grpc_python_out="$TMP/stubs" rls.proto || exit 1
cp "$SLUICE_SOURCE_DIR/tests/envoy_upstream/integration/basic.yaml" \
    "$TMP/runtime/current/ratelimit/config/"

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then
    echo "SKIP: sluice.so is built with TSan"
    exit 77
fi
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }

UPSTREAM_ENV=( # the variables of upstream's integration test, as a deployment sets them
    RUNTIME_ROOT="$TMP/runtime/current" RUNTIME_SUBDIRECTORY=ratelimit \
        RUNTIME_APPDIRECTORY=config RUNTIME_WATCH_ROOT=false RUNTIME_IGNOREDOTFILES=true \
        USE_STATSD=false LOG_LEVEL=debug LOG_FORMAT=text BACKEND_TYPE=redis \
        REDIS_SOCKET_TYPE=tcp REDIS_TYPE=single REDIS_URL="127.0.0.1:$REDIS_PORT" \
        HOST=127.0.0.1 GRPC_HOST=127.0.0.1)
launch() { # NAME: ports from SERVE_PORTS, given as upstream's PORT and GRPC_PORT
    RESP_PORT=${SERVE_PORTS[0]} HTTP_PORT=${SERVE_PORTS[1]} GRPC_PORT=${SERVE_PORTS[2]}
    start_bg "$1" env "${UPSTREAM_ENV[@]}" PORT="$HTTP_PORT" GRPC_PORT="$GRPC_PORT" "$SLUICED" \
        --port "$RESP_PORT" --config-store "$TMP/$1.db" --snapshot "" --store-timeout 10s
    # (a store timeout far above Redis's first answers on a slow build: a decision taken by
    # on_store_error would answer OK with nothing remaining)
}
serve up 3 launch || { cat "$TMP/up.log"; exit 1; }
out=$("$PY" "$SLUICE_SOURCE_DIR/tests/integration/envoy_upstream_cases.py" "$GRPC_PORT" \
    "$TMP/stubs" basic 2>&1)
echo "$out"
check "gRPC answers with basic.yaml's limits" grep -qx "ok basic" <<<"$out"
out=$(curl -s -w ' %{http_code}' --data \
    '{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"x"}]}]}' \
    "http://127.0.0.1:$HTTP_PORT/json")
echo "$out"
check "/json on PORT: basic.yaml's 1 a minute" grep -q '"requestsPerUnit":1,"unit":"MINUTE"}' <<<"$out"
check "/json on PORT: none left (protojson leaves out 0), 200" grep -q '"MINUTE"},"duration.* 200$' <<<"$out"
check "the counts are in REDIS_URL's Redis" test "$(redis-cli -p "$REDIS_PORT" DBSIZE)" -gt 0
check "up stops cleanly" stop_bg up TERM

refused() { # LABEL VAR=VALUE..: sluiced does not start, and says which variable
    local label=$1 var=${2%%=*} o
    shift
    o=$(env "${UPSTREAM_ENV[@]}" PORT=0 GRPC_PORT=0 "$@" timeout 10 "$SLUICED" --port 0 \
        --config-store "$TMP/refused.db" --snapshot "" 2>&1)
    local rc=$?
    echo "$o"
    check "$label: refused" test "$rc" -ne 0 -a "$rc" -ne 124
    check "$label: names $var" grep -q "$var" <<<"$o"
}
refused "statsd" USE_STATSD=true
refused "unix socket" REDIS_SOCKET_TYPE=unix
refused "sentinel" REDIS_TYPE=sentinel
refused "memcache" BACKEND_TYPE=memcache
refused "pool size" REDIS_POOL_SIZE=10
refused "charging passing descriptors" STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false
refused "a bad port" PORT=http

# a flag wins over the variable: PORT is not a port, --http-port is
launch_flag() {
    RESP_PORT=${SERVE_PORTS[0]} HTTP_PORT=${SERVE_PORTS[1]} GRPC_PORT=${SERVE_PORTS[2]}
    start_bg "$1" env "${UPSTREAM_ENV[@]}" PORT=http GRPC_PORT=1 "$SLUICED" --port "$RESP_PORT" \
        --http-port "$HTTP_PORT" --grpc-port "$GRPC_PORT" --config-store "$TMP/$1.db" \
        --snapshot ""
}
serve flags 3 launch_flag || { cat "$TMP/flags.log"; exit 1; }
check "--http-port wins over PORT" curl -sf "http://127.0.0.1:$HTTP_PORT/healthcheck"
check "flags stops cleanly" stop_bg flags TERM
finish
