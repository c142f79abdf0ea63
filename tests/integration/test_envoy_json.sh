#!/usr/bin/env bash
# test_envoy_json.sh - envoyproxy/ratelimit's HTTP routes on sluiced's HTTP port: POST /json
# answers every request as the gRPC port answers it (the JSON protobuf's json_format writes, both
# names of each field, 64-bit integers as strings; statuses, limits, all or nothing, unlimited,
# a descriptor's own limit, hits_addend, an unknown domain), 200 / 429 as the overall code says,
# any method and content type as upstream; 400 naming what is wrong for a body that cannot be
# read (and nothing charged); GET /healthcheck 200 "OK". With the memory store, then Redis with
# sluice.so, where every answer comes later. The driver is envoy_json_client.py.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

need curl redis-server
need_grpc
# sluice's rls.proto carries its own copies of google.protobuf's Duration and UInt64Value (the
# same bytes on the wire); JSON writes those two as upstream's well-known types, so the stubs
# here are built with the real ones, for json_format to write what protojson writes
mkdir -p "$TMP/stubs" "$TMP/proto"
"$PY" - "$SLUICE_SOURCE_DIR/src/proto/grpc/rls.proto" >"$TMP/proto/rls.proto" <<'PY' || exit 1
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"\nmessage (Duration|UInt64Value) \{[^}]*\}\n", "\n", text)
text = text.replace("package envoy.service.ratelimit.v3;", "package envoy.service.ratelimit.v3;\n"
                    'import "google/protobuf/duration.proto";\n'
                    'import "google/protobuf/wrappers.proto";')
text = re.sub(r"\b(Duration|UInt64Value) (\w+) =", r"google.protobuf.\1 \2 =", text)
print(text)
PY
grep -q "google.protobuf.UInt64Value hits_addend" "$TMP/proto/rls.proto" || exit 1
"$PY" -m grpc_tools.protoc -I "$TMP/proto" -I "$("$PY" -c 'import grpc_tools, os;
print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')" \
    --python_out="$TMP/stubs" --grpc_python_out="$TMP/stubs" rls.proto || exit 1

cat >"$TMP/edge.yaml" <<'YAML'
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /health
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
      - key: user
        value: admin
        rate_limit: {unlimited: true}
YAML

client() {
    "$PY" "$SLUICE_SOURCE_DIR/tests/integration/envoy_json_client.py" "$GRPC_PORT" "$HTTP_PORT" \
        "$TMP/stubs" "$@"
}
run_cases() { # $1: label
    local out c
    out=$(client parity shapes bad healthcheck 2>&1)
    echo "$out"
    for c in parity shapes bad healthcheck; do
        check "$1 $c" grep -qx "ok $c" <<<"$out"
    done
}

start_sluiced mem --rules "$TMP/edge.yaml" --config-store "$TMP/mem.db" --snapshot "" ||
    { cat "$TMP/mem.log"; exit 1; }
run_cases memory
# upstream's own example: curl --data, which sends a form content type
out=$(echo '{"domain": "edge", "descriptors": [{"entries": [{"key": "path", "value": "/x"}]}]}' |
    curl -s -XPOST --data @/dev/stdin "http://127.0.0.1:$HTTP_PORT/json")
check "curl --data" grep -q '"overallCode":"OK"' <<<"$out"
check "mem stops cleanly" stop_bg mem TERM

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then # redis-server cannot load a module built with TSan
    echo "sluice.so is built with TSan: its part runs in the plain and ASan builds"
    finish
fi
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }
start_sluiced red --rules "$TMP/edge.yaml" --config-store "$TMP/red.db" --snapshot "" \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/red.log"; exit 1; }
run_cases "redis (sluice.so)"
check "red stops cleanly" stop_bg red TERM
finish
