#!/usr/bin/env bash
# test_store_conformance.sh - one answer in every request store: the same scripted scenarios and
# seeded random command sequences (tests/integration/conformance/conform.py) against four
# sluiced, each fresh, over (a) the memory store, (b) Redis with sluice.so, (c) Redis through the
# Lua scripts (no module), (d) a Redis Cluster of three primaries with sluice.so; every answer
# (RESP, HTTP, gRPC) must equal the memory store's. Every RESP command and HTTP route that
# decides, peeks, settles, resets or overrides, the six algorithms, costs at, under and past the
# limit, multi-checks admitted and refused (in one cluster slot and across slots), envoyproxy's
# descriptors (quota_mode too), and the clock moving.
#
# The clock: every sluiced and redis-server runs with fakeclock.so preloaded, which answers the
# wall clock from one file that this test writes; it stands still between steps, so every store
# decides at the same nanosecond and a step moves every process at once. Monotonic clocks (event
# loops, timeouts) are the kernel's. (libfaketime cannot be used: Debian's redis-server is built
# with jemalloc, which clashes with it at start.)
#
# SLUICE_SEED=N replays the random sequences of a failed run (the seed is printed).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

PY=/usr/bin/python3 # Debian's, where python3-grpcio and python3-grpc-tools install
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
need "$PY" redis-server redis-cli cc "$MODULE"
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || {
    echo "SKIP: needs python3-grpcio and python3-grpc-tools"
    exit 77
}
CONF=$SLUICE_SOURCE_DIR/tests/integration/conformance

mkdir -p "$TMP/stubs"
"$PY" -m grpc_tools.protoc -I "$SLUICE_SOURCE_DIR/src/proto/grpc" --python_out="$TMP/stubs" \
    --grpc_python_out="$TMP/stubs" rls.proto || {
    echo "grpc_tools could not compile rls.proto"
    exit 1
}
cc -shared -fPIC -O2 -o "$TMP/fakeclock.so" "$CONF/fakeclock.c" || exit 1
# setclock S: the clock at S seconds before the scenarios' start (2030-01-01T00:00:00Z, where
# conform.py sets it)
setclock() {
    "$PY" -c 'import os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
os.pwrite(fd, struct.pack("<q", (1893456000 - int(sys.argv[2])) * 10**9), 0)' "$TMP/clock" "$1"
}
setclock 120

# A program linked with ASan wants its runtime first among the preloaded libraries.
preload() { # BINARY: the LD_PRELOAD value for it
    if ldd "$1" | grep -q libasan; then
        echo "$(gcc -print-file-name=libasan.so) $TMP/fakeclock.so"
    else
        echo "$TMP/fakeclock.so"
    fi
}
REDIS_WRAP=(env "LD_PRELOAD=$(preload "$MODULE")" "SLUICE_FAKECLOCK=$TMP/clock")
cat >"$TMP/sluiced" <<EOF
#!/bin/sh
exec env "LD_PRELOAD=$(preload "$SLUICED")" "SLUICE_FAKECLOCK=$TMP/clock" "$SLUICED" "\$@"
EOF
chmod +x "$TMP/sluiced"
SLUICED=$TMP/sluiced

start_redis module --loadmodule "$MODULE" || exit 1
MODULE_PORT=$REDIS_PORT
start_redis lua || exit 1
LUA_PORT=$REDIS_PORT

# Three primaries, no replicas. The node timeout is longer than any step of the clock: a jump
# must not look like a node that stopped answering pings.
NODES=()
for i in 1 2 3; do
    serve "node$i" bus lib_launch_node 10000000000 --loadmodule "$MODULE" || exit 1
    NODES+=("$REDIS_PORT")
done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${NODES[@]}") --cluster-replicas 0 \
    --cluster-yes >"$TMP/cluster-create.log" 2>&1 || {
    cat "$TMP/cluster-create.log"
    exit 1
}
cluster_ok() {
    local p
    for p in "${NODES[@]}"; do
        redis-cli -p "$p" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok || return 1
    done
}
setclock 60 # a primary waits 2 s of its clock before it serves: the clock must move
poll 30 cluster_ok || { echo "cluster not ok after 30 s"; exit 1; }

TARGETS=()
start() { # NAME STORE
    start_sluiced "$1" --rules "$CONF/rules.yaml" --rules "$CONF/another.yaml" --rules "$CONF/quota.yaml" \
        --config-store "$TMP/$1.db" --snapshot "" --threads 1 --store "$2" \
        --store-timeout 30s --override-timeout 0 --grpc-ratelimit-headers || {
        cat "$TMP/$1.log"
        exit 1
    }
    TARGETS+=(--target "$1:$RESP_PORT:$HTTP_PORT:$GRPC_PORT")
}
start memory memory
start module "redis://127.0.0.1:$MODULE_PORT"
start lua "redis://127.0.0.1:$LUA_PORT"
start cluster "redis-cluster://$(printf '127.0.0.1:%s,' "${NODES[@]}" | sed 's/,$//')"
check module-mode grep -q "request store redis (sluice.so module)" "$TMP/module.log"
check lua-mode grep -qi "lua" "$TMP/lua.log"

seed=()
[ -z "${SLUICE_SEED:-}" ] || seed=(--seed "$SLUICE_SEED")
# CONFORM_ARGS: more arguments for conform.py (--only NAME, --trace) when looking into a case
read -r -a more <<<"${CONFORM_ARGS:-}"
seed+=("${more[@]}")
check conformance "$PY" "$CONF/conform.py" --clock "$TMP/clock" --stubs "$TMP/stubs" \
    "${TARGETS[@]}" "${seed[@]}"
finish
