#!/usr/bin/env bash
# test_grpc_envoy.sh - envoyproxy/ratelimit's configuration files served to a real gRPC client
# (Python's grpcio): two files given with --rules, one per domain, beside a sluice rules file;
# nested descriptors, a value before a prefix before any value, a value with no limit, unlimited,
# replaces (not charged; in any order, along a chain; not by a descriptor asking its own limit),
# shadow_mode, hits_addend, a second domain; the rules answer over RESP
# too (SL.PEEK); SIGHUP with a changed file (in force), a broken one (logged with its position,
# the rules in force stay) and an API-made rule kept; the same format imported over RESP, HTTP
# and the CLI; a domain in two files refused at start; quota_mode (a quota descriptor over its
# limit refuses only when every quota descriptor is; a refused request charges nothing) and
# unit: week. Then the Redis store (sluice.so).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

PY=/usr/bin/python3 # Debian's, where python3-grpcio and python3-grpc-tools install
need "$PY" curl redis-server redis-cli
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || {
    echo "SKIP: needs python3-grpcio and python3-grpc-tools"
    exit 77
}
mkdir -p "$TMP/stubs"
"$PY" -m grpc_tools.protoc -I "$SLUICE_SOURCE_DIR/src/proto/grpc" --python_out="$TMP/stubs" \
    --grpc_python_out="$TMP/stubs" rls.proto health.proto || exit 1

edge_yaml() { # $1: remote_address's requests_per_unit
    cat <<YAML
domain: edge
descriptors:
  - key: remote_address
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: $1}
  - key: path
    value: /login
    rate_limit: {unit: minute, requests_per_unit: 2, name: login}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 4, algorithm: sliding_log}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    value: /health
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
      - key: user
        value: admin
        rate_limit: {unlimited: true}
  - key: plan
    value: free
    rate_limit: {unit: hour, requests_per_unit: 1, name: free_plan}
  - key: promo
    rate_limit: {unit: hour, requests_per_unit: 100, replaces: [{name: free_plan}]}
  - key: dry
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: ra
    rate_limit: {unit: hour, requests_per_unit: 100, name: A, replaces: [{name: B}]}
  - key: rb
    rate_limit: {unit: hour, requests_per_unit: 100, name: B, replaces: [{name: C}]}
  - key: rc
    rate_limit: {unit: hour, requests_per_unit: 1, name: C}
  - key: service
    value: s1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: service
    value: s2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: service
    value: s3
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: service
    value: s4
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: qplain
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: weekly
    value_to_metric: true
    metadata: {team: {name: growth}}
    rate_limit: {unit: week, requests_per_unit: 1}
YAML
}
edge_yaml 3 >"$TMP/edge.yaml"
cat >"$TMP/api.yaml" <<'YAML'
domain: api
descriptors:
  - key: client_id
    rate_limit: {unit: minute, requests_per_unit: 2}
YAML
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: plain
    algorithm: gcra
    limit: 10
    window: 1s
YAML
domain_file() { printf 'domain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n' "$1"; }

client() {
    "$PY" "$SLUICE_SOURCE_DIR/tests/integration/grpc_client.py" "$GRPC_PORT" "$TMP/stubs" "$@"
}
run_cases() { # PREFIX CASE..: each case must say ok
    local prefix=$1 out c
    shift
    out=$(client "$@" 2>&1)
    echo "$out"
    for c in "$@"; do
        check "$prefix$c" grep -qx "ok $c" <<<"$out"
    done
}

start_sluiced s1 --rules "$TMP/edge.yaml" --rules "$TMP/rules.yaml" --rules "$TMP/api.yaml" \
    --config-store "$TMP/s1.db" --snapshot "" --threads 2 || { cat "$TMP/s1.log"; exit 1; }
check "start logs the three files" grep -q "rules files $TMP/edge.yaml, $TMP/rules.yaml, $TMP/api.yaml" "$TMP/s1.log"
# fields that change nothing in sluice are told, once each, where first used
check "detailed_metric is told" grep -q "$TMP/edge.yaml: line 3, column 5: descriptors\[0\].detailed_metric: taken: names envoyproxy/ratelimit's statistics after each value; sluiced counts per rule" "$TMP/s1.log"
check "value_to_metric is told" grep -q "$TMP/edge.yaml: line [0-9]*, column 5: descriptors\[[0-9]*\].value_to_metric: taken: puts values in envoyproxy/ratelimit's statistics' names" "$TMP/s1.log"
check "metadata is told" grep -q "$TMP/edge.yaml: line [0-9]*, column 5: descriptors\[[0-9]*\].metadata: taken: envoyproxy/ratelimit sends it as a response's dynamic metadata; sluiced sends none" "$TMP/s1.log"
check "each once" test "$(grep -c "descriptors\[0\].detailed_metric: taken" "$TMP/s1.log")" = 1
run_cases "" envoy_nested envoy_values envoy_unlimited envoy_replaces envoy_replaces_chain \
    envoy_shadow envoy_second_file envoy_limit_3 envoy_quota envoy_week

# /metrics: a descriptor's rule carries its domain, escaped as the exposition format asks
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" >"$TMP/metrics.txt"
check "metrics: the rule's series carries its domain" grep -Eq \
    '^sluice_decisions_total\{rule="edge\.tenant:acme\.user",domain="edge",result="denied"\} [1-9]' "$TMP/metrics.txt"
check "metrics: a plain rule has no domain" grep -Eq '^sluice_keys\{rule="plain"\} [0-9]+$' "$TMP/metrics.txt"
check "RESP rule in an awkward domain" test "$(redis-cli -p "$RESP_PORT" SL.RULE SET odd.k \
    '{"algorithm":"gcra","limit":1,"window":"1h","domain":"a\"b\\c","descriptor":"k"}')" = OK
check "metrics: the domain escaped" grep -Fq 'sluice_keys{rule="odd.k",domain="a\"b\\c"} 0' \
    <(curl -s "http://127.0.0.1:$HTTP_PORT/metrics")

# the same rules over RESP: bob has used both of his
peek=$(redis-cli -p "$RESP_PORT" SL.PEEK "edge.tenant:acme.user" "acme|bob" | sed -n 2,3p | tr '\n' ' ')
check "RESP peeks the nested limit: 2, none left" test "$peek" = "2 0 "
check "RESP: bob is refused" test "$(redis-cli -p "$RESP_PORT" SL.ALLOW "edge.tenant:acme.user" "acme|bob" | head -1)" = 0
check "RESP: the rule's descriptor" grep -q '"descriptor":"tenant=acme, user"' \
    <(redis-cli -p "$RESP_PORT" SL.RULE GET "edge.tenant:acme.user")

# a rule made over RESP with a descriptor of its own, kept across SIGHUP
check "RESP rule with a descriptor" test "$(redis-cli -p "$RESP_PORT" SL.RULE SET edge.country \
    '{"algorithm":"fixed_window","limit":1,"window":"1h","domain":"edge","descriptor":"country=xx"}')" = OK
run_cases "" envoy_api_rule

# SIGHUP: a changed file is in force; a broken one is logged with its position and changes nothing
edge_yaml 10 >"$TMP/edge.yaml"
kill -HUP "${LIB_PIDS[0]}"
check "SIGHUP: the new limit" poll 10 client envoy_limit_10
printf 'domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight}\n' >"$TMP/edge.yaml"
kill -HUP "${LIB_PIDS[0]}"
check "SIGHUP: the broken file is logged" wait_log s1 "edge.yaml: line 4, column 24: descriptors\[0\].rate_limit.unit: unknown unit 'fortnight'"
run_cases "after the broken file: " envoy_limit_10
check "the API-made rule stays" test "$(redis-cli -p "$RESP_PORT" SL.RULE GET edge.country | head -c 1)" = "{"

# the format over RESP, HTTP and the CLI
check "SL.RULE IMPORT" test "$(redis-cli -p "$RESP_PORT" SL.RULE IMPORT "$(domain_file viaresp)")" = OK
domain_file viahttp >"$TMP/viahttp.yaml"
curl -s -X POST -H 'Content-Type: application/yaml' --data-binary @"$TMP/viahttp.yaml" "http://127.0.0.1:$HTTP_PORT/v1/rules" >"$TMP/http.out"
check "POST /v1/rules" grep -q '"added":\["viahttp.k"\]' "$TMP/http.out"
# a broken file over HTTP: 400 naming where, and nothing changes
printf 'domain: viahttp\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n' >"$TMP/bad.yaml"
code=$(curl -s -o "$TMP/bad.out" -w '%{http_code}' -X POST -H 'Content-Type: application/yaml' --data-binary @"$TMP/bad.yaml" \
    "http://127.0.0.1:$HTTP_PORT/v1/rules")
check "a broken file is refused (400)" test "$code" = 400
check "naming where" grep -q "line 4, column 24: descriptors\[0\].rate_limit.unit: unknown unit 'fortnight'" "$TMP/bad.out"
check "nothing changed" grep -q '"descriptor":"k"' <(redis-cli -p "$RESP_PORT" SL.RULE GET viahttp.k)
domain_file viacli >"$TMP/viacli.yaml"
check "sluice rules import" "$SLUICE" -p "$RESP_PORT" rules import "$TMP/viacli.yaml"
run_cases "" envoy_imported
check "s1 stops cleanly" stop_bg s1 TERM

# QUOTA_MODE=true (--grpc-quota-mode): every descriptor in quota mode, one no limit applies to
# counting as one with room
edge_yaml 3 >"$TMP/edge.yaml"
QUOTA_MODE=true start_sluiced s3 --rules "$TMP/edge.yaml" --config-store "$TMP/s3.db" \
    --snapshot "" || { cat "$TMP/s3.log"; exit 1; }
run_cases "QUOTA_MODE=true: " envoy_quota_global
check "s3 stops cleanly" stop_bg s3 TERM

# one domain, two files: refused at start, naming both
cp "$TMP/api.yaml" "$TMP/api2.yaml"
"$SLUICED" --port 0 --http-port "$(free_port)" --grpc-port 0 --config-store "$TMP/dup.db" \
    --snapshot "" --rules "$TMP/api.yaml" --rules "$TMP/api2.yaml" >"$TMP/dup.out" 2>&1
check "a domain in two files is refused" test $? -ne 0
check "naming both files" grep -q "api2.yaml: domain 'api' is also configured by $TMP/api.yaml" "$TMP/dup.out"

# the Redis store, through sluice.so
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then # redis-server cannot load a module built with TSan
    echo "sluice.so is built with TSan: its part runs in the plain and ASan builds"
    finish
fi
edge_yaml 3 >"$TMP/edge.yaml"
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }
start_sluiced s2 --rules "$TMP/edge.yaml" --config-store "$TMP/s2.db" --snapshot "" --threads 2 \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/s2.log"; exit 1; }
run_cases "redis " envoy_nested envoy_values envoy_unlimited envoy_replaces envoy_replaces_chain \
    envoy_shadow envoy_quota envoy_week
check "s2 stops cleanly" stop_bg s2 TERM
finish
