#!/usr/bin/env bash
# test_grpc_kuadrant.sh - limitador's Kuadrant extension on sluiced's gRPC port
# (kuadrant.service.ratelimit.v1: CheckRateLimit, Report) with a real client, Python's grpcio:
# a check counts nothing and needs room for one hit; a report counts its hits_addend, past the
# limit up to max_debt, and the next check sees it; statuses per descriptor; shadow mode; the
# error statuses; the health check of the service; a report whose caller gave up while Redis
# held it is counted when Redis answers (its stream freed then: ASan sees a leak or a use after
# free). The same cases and answers on every request store: memory, Redis through
# Lua, Redis with sluice.so, Redis Cluster with sluice.so. The driver is kuadrant_client.py.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

PY=/usr/bin/python3 # Debian's, where python3-grpcio and python3-grpc-tools install
need "$PY" redis-server redis-cli
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || {
    echo "SKIP: needs python3-grpcio and python3-grpc-tools"
    exit 77
}

mkdir -p "$TMP/stubs"
"$PY" -m grpc_tools.protoc -I "$SLUICE_SOURCE_DIR/src/proto/grpc" --python_out="$TMP/stubs" \
    --grpc_python_out="$TMP/stubs" rls.proto kuadrantrls.proto health.proto || {
    echo "grpc_tools could not compile the .proto files"
    exit 1
}

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: llm.user
    algorithm: fixed_window
    limit: 100
    window: 1h
  - name: llm.tiny
    algorithm: sliding_log
    limit: 1
    window: 1h
  - name: llm.dry
    algorithm: sliding_log
    limit: 1
    window: 1h
    shadow: true
YAML

KCASES=(check_counts_nothing report_then_check room_for_one descriptors shadow debt_bound errors
    health)
client() { # the cases named, on the keys of the current run (KPREFIX)
    PAUSE_REDIS="${PAUSE_REDIS:-}" "$PY" "$SLUICE_SOURCE_DIR/tests/integration/kuadrant_client.py" \
        "$GRPC_PORT" "$TMP/stubs" "$KPREFIX" "$@"
}
# run_on NAME [sluiced ARGS..]: every case against a fresh sluiced with those arguments (with
# PAUSE_REDIS=PORT, then a report abandoned while that Redis is paused)
run_on() {
    local name=$1
    shift
    start_sluiced "$name" --rules "$TMP/rules.yaml" --config-store "$TMP/$name.db" --snapshot "" \
        --threads 2 "$@" || { cat "$TMP/$name.log"; return 1; }
    local out
    KPREFIX="$name-"
    out=$(client "${KCASES[@]}" 2>&1)
    echo "$out"
    for c in "${KCASES[@]}"; do
        check "$name $c" grep -qx "ok $c" <<<"$out"
    done
    if [ -n "${PAUSE_REDIS:-}" ]; then # a report abandoned while Redis holds its settle
        check "$name abandoned report" client abandon_report
        check "$name abandoned report counted" client abandoned_counted
    fi
    check "$name stops cleanly" stop_bg "$name" TERM
}

run_on memory

start_redis lua || { cat "$TMP/lua.log"; exit 1; }
PAUSE_REDIS=$REDIS_PORT run_on lua --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s
stop_bg lua TERM

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then # redis-server cannot load a module built with TSan
    echo "sluice.so is built with TSan: its part runs in the plain and ASan builds"
    finish
fi
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }
PAUSE_REDIS=$REDIS_PORT run_on module --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s
stop_bg module TERM

start_cluster 3 2000 --loadmodule "$MODULE" || { cat "$TMP"/node*.log; exit 1; }
run_on cluster --store "redis-cluster://127.0.0.1:${CLUSTER_PORTS[0]}" --store-timeout 2s
finish
