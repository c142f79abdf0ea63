#!/usr/bin/env bash
# test_store_contract.sh - request_store.h's completion contract over every Redis store: the
# unit program test_store_contract (tests/unit) runs against Redis with sluice.so, Redis through
# the Lua scripts, and a Redis Cluster of 3 primaries with the module: no store calls back inside
# the call that asked, each answer comes once, and the answers at once include the ones that
# used to be called back inside (a cached refusal, a lease's units, a key's count).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
PROG=$SLUICE_BUILD_DIR/tests/test_store_contract
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }
MP=$REDIS_PORT
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
LP=$REDIS_PORT
start_cluster 3 5000 --loadmodule "$MODULE" || exit 1
urls="redis://127.0.0.1:$MP redis://127.0.0.1:$LP"
urls+=" redis-cluster://127.0.0.1:${CLUSTER_PORTS[0]},127.0.0.1:${CLUSTER_PORTS[1]}"
check contract env SLUICE_CONTRACT_REDIS="$urls" "$PROG"
finish
