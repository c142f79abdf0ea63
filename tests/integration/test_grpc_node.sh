#!/usr/bin/env bash
# test_grpc_node.sh - sluiced's gRPC port under Node's gRPC client (@grpc/grpc-js, messages
# from sluice's .proto files through @grpc/proto-loader, at the versions of
# tests/node/package-lock.json): the health check, limits and statuses, all or nothing with a
# descriptor no rule names, error statuses, 200 calls at once on one connection, and an
# envoyproxy/ratelimit configuration (values, prefixes, nesting, unlimited, replaces, shadow
# mode, hits_addend, a descriptor's own limit). The cases
# are in tests/node/grpc.js; this script installs the packages (npm ci, into
# tests/node/node_modules, when they are missing) and runs sluiced.
# Skipped (exit 77, "Skipped" in ctest) when node or npm is not installed.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

NODE_DIR=$SLUICE_SOURCE_DIR/tests/node
need node npm
node_packages "$NODE_DIR" || exit 1

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: edge.remote_address
    algorithm: fixed_window
    limit: 2
    window: 1m
  - name: edge.wide
    algorithm: sliding_log
    limit: 10
    window: 1h
  - name: edge.narrow
    algorithm: sliding_log
    limit: 1
    window: 1h
YAML

cat >"$TMP/shop.yaml" <<'YAML'
domain: shop
descriptors:
  - key: path
    value: /cart
    rate_limit: {unit: minute, requests_per_unit: 2, name: cart}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: vendor
    value: acme
    descriptors:
      - key: sku
        rate_limit: {unit: hour, requests_per_unit: 2}
      - key: sku
        value: free
        rate_limit: {unlimited: true}
  - key: guest
    rate_limit: {unit: hour, requests_per_unit: 1, name: guest}
  - key: coupon
    rate_limit: {unit: hour, requests_per_unit: 9, replaces: [{name: guest}]}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
YAML

start_sluiced s1 --rules "$TMP/rules.yaml" --rules "$TMP/shop.yaml" --config-store "$TMP/store.db" \
    --snapshot "" --threads 2 || { cat "$TMP/s1.log"; exit 1; }
out=$(SLUICE_GRPC_PORT=$GRPC_PORT SLUICE_PROTO_DIR=$SLUICE_SOURCE_DIR/src/proto/grpc \
    timeout 120 node "$NODE_DIR/grpc.js" 2>&1)
rc=$?
echo "$out"
check "grpc.js passes" test "$rc" -eq 0
check "grpc.js ran its cases" test "$(grep -c '^ok - ' <<<"$out")" -eq 6
check "s1 stops cleanly" stop_bg s1 TERM
finish
