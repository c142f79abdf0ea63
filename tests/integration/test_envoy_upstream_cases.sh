#!/usr/bin/env bash
# test_envoy_upstream_cases.sh - envoyproxy/ratelimit's own integration cases
# (test/integration/integration_test.go: basic, another's one and two keys, the duration until
# reset, share_threshold, a file added to and removed from the watched runtime directory) asked
# of sluiced given that test's runtime directory, its files unchanged
# (tests/envoy_upstream/integration/), with grpcio (envoy_upstream_cases.py) and with
# @grpc/grpc-js (tests/node/envoy_cases.js), on the memory store and on Redis with sluice.so,
# each run on a fresh server and store. The expected answers are upstream's, whole, as its test
# writes them (a limit's name too: empty, as these files name no limit), with sluice's one
# documented difference (docs/envoy.md): a request over one limit charges none (upstream with
# STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

PY=/usr/bin/python3 # Debian's, where python3-grpcio and python3-grpc-tools install
UP=$SLUICE_SOURCE_DIR/tests/envoy_upstream/integration
NODE_DIR=$SLUICE_SOURCE_DIR/tests/node
need "$PY" redis-server redis-cli
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || {
    echo "SKIP: needs python3-grpcio and python3-grpc-tools"
    exit 77
}
mkdir -p "$TMP/stubs"
"$PY" -m grpc_tools.protoc -I "$SLUICE_SOURCE_DIR/src/proto/grpc" --python_out="$TMP/stubs" \
    --grpc_python_out="$TMP/stubs" rls.proto || exit 1
# node is a test dependency (scripts/deps.sh installs it): without it, the @grpc/grpc-js half
# would pass by being left out, so its absence is a failure, not a skip
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "FAIL: no node or npm: the @grpc/grpc-js runs need them (scripts/deps.sh installs them)"
    exit 1
fi
node_packages "$NODE_DIR" || exit 1
CLIENTS=(python node)
CASES_RUN=(basic basic_local another another_local duration duration_local share_threshold
    reload_absent)

ask() { # CLIENT CASE..
    local client=$1
    shift
    if [ "$client" = python ]; then
        "$PY" "$SLUICE_SOURCE_DIR/tests/integration/envoy_upstream_cases.py" "$GRPC_PORT" \
            "$TMP/stubs" "$@"
    else
        SLUICE_GRPC_PORT=$GRPC_PORT SLUICE_PROTO_DIR=$SLUICE_SOURCE_DIR/src/proto/grpc \
            timeout 120 node "$NODE_DIR/envoy_cases.js" "$@"
    fi
}
blocked() { "$PY" "$SLUICE_SOURCE_DIR/tests/integration/envoy_upstream_cases.py" "$GRPC_PORT" \
    "$TMP/stubs" 'blocked?'; }
unblocked() { ! blocked; }

run() { # LABEL CLIENT NAME STORE-ARGS..: a fresh runtime directory and server, every case
    local label=$1 client=$2 name=$3 out c dir
    shift 3
    dir=$TMP/$name/runtime/current/ratelimit/config
    mkdir -p "$dir"
    cp "$UP/basic.yaml" "$UP/another.yaml" "$UP/share_threshold.yaml" "$dir/"
    start_sluiced "$name" --rules "$dir" --config-store "$TMP/$name.db" --snapshot "" "$@" ||
        { cat "$TMP/$name.log"; exit 1; }
    out=$(ask "$client" "${CASES_RUN[@]}" 2>&1)
    echo "$out"
    for c in "${CASES_RUN[@]}"; do
        check "$label $client $c" grep -qx "ok $c" <<<"$out"
    done
    # testConfigReload: reload.yaml copied into the watched directory, then removed
    cp "$UP/reload.yaml" "$dir/reload.yaml"
    check "$label $client reload.yaml applies" poll 10 blocked
    out=$(ask "$client" reload_present 2>&1)
    echo "$out"
    check "$label $client reload_present" grep -qx "ok reload_present" <<<"$out"
    rm "$dir/reload.yaml"
    check "$label $client reload.yaml's removal applies" poll 10 unblocked
    check "$label $client stops cleanly" stop_bg "$name" TERM
}

for client in "${CLIENTS[@]}"; do
    run memory "$client" "mem-$client"
done

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then # redis-server cannot load a module built with TSan
    echo "sluice.so is built with TSan: its part runs in the plain and ASan builds"
    finish
fi
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }
for client in "${CLIENTS[@]}"; do
    redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null
    run "redis (sluice.so)" "$client" "red-$client" --store "redis://127.0.0.1:$REDIS_PORT" \
        --store-timeout 2s
done
finish
