#!/usr/bin/env bash
# test_node_cluster.sh - ioredis's Cluster client calling SL.THROTTLE / CL.THROTTLE on a Redis
# Cluster of 3 primaries + 3 replicas with sluice.so in every node, as users would (the cases
# are in tests/node/cluster.js). Skipped (exit 77, "Skipped" in ctest) when node or npm is missing.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

NODE_DIR=$SLUICE_SOURCE_DIR/tests/node
need node npm redis-server redis-cli
node_packages "$NODE_DIR" || exit 1
start_cluster 3 5000 --loadmodule "$SLUICE_BUILD_DIR/src/module/sluice.so" ||
    { cat "$TMP"/node*.log; exit 1; }
SLUICE_CLUSTER_PORT=${CLUSTER_PORTS[0]} timeout 120 node "$NODE_DIR/cluster.js"
