#!/usr/bin/env bash
# test_server_http.sh - sluiced's HTTP interface driven by curl: decisions (/v1/allow), the
# forward-auth endpoint (/v1/auth/{rule}) with key templates and trusted proxies, RateLimit
# headers, problem+json errors, rule and override CRUD behind the admin token, metrics, health.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need curl

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 2
    window: 1h
  - name: byip
    algorithm: sliding_log
    limit: 1
    window: 1h
    key: "{ip}"
  - name: bynet
    algorithm: sliding_log
    limit: 1
    window: 1h
    key: "{ip/24}"
  - name: bykey
    algorithm: sliding_log
    limit: 1
    window: 1h
    key: "{header:x-api-key}:{method}"
  - name: bypath
    algorithm: sliding_log
    limit: 1
    window: 1h
    key: "{method} {path}"
YAML

TOKEN=s3cret
start_sluiced srv --rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" --snapshot "" \
    --admin-token "$TOKEN" --trusted-proxy 127.0.0.1 || { cat "$TMP/srv.log"; exit 1; }
BASE=http://127.0.0.1:$HTTP_PORT

# req ARGS...: curl with the status in $STATUS, headers in $TMP/h, body in $TMP/b; bodies go as
# JSON, and every request names its client (as a DELETE must)
req() {
    STATUS=$(curl -s -o "$TMP/b" -D "$TMP/h" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H 'X-Sluice-Client: test_server_http' "$@")
}
has_header() { grep -qi "^$1" "$TMP/h"; }
body_has() { grep -q -- "$1" "$TMP/b"; }

req "$BASE/healthz"
check healthz test "$STATUS" = 200
req "$BASE/readyz"
check readyz test "$STATUS" = 200

# --- /v1/allow
req -X POST "$BASE/v1/allow" -d '{"rule":"api","key":"u1"}'
check allow-200 test "$STATUS" = 200
check allow-body body_has '"allowed":true,"limit":2,"remaining":1,"retry_after_ms":0'
check allow-policy has_header 'RateLimit-Policy: "api";q=2;w=3600'
check allow-ratelimit has_header 'RateLimit: "api";r=1;t='
req -X POST "$BASE/v1/allow" -d '{"rule":"api","key":"u1","cost":1}'
req -X POST "$BASE/v1/allow" -d '{"rule":"api","key":"u1"}'
check allow-denied body_has '"allowed":false,"limit":2,"remaining":0,"retry_after_ms":[1-9]'
req -X POST "$BASE/v1/allow" -d '{"checks":[{"rule":"api","key":"u2"},{"rule":"byip","key":"u2"}]}'
check checks-200 test "$STATUS" = 200
check checks-body body_has '"allowed":true}$'
req -X POST "$BASE/v1/allow" -d '{"rule":"api",'
check badjson-400 test "$STATUS" = 400
check badjson-type has_header 'Content-Type: application/problem+json'
check badjson-pos body_has 'invalid JSON: line 1, column'
req -X POST "$BASE/v1/allow" -d '{"rule":"nope","key":"k"}'
check unknown-rule-404 test "$STATUS" = 404
check unknown-rule-detail body_has "unknown rule 'nope'"
req -X POST "$BASE/v1/allow" -d '{"rule":"api","key":"k","cost":-1}'
check cost-neg-400 test "$STATUS" = 400
req -X POST "$BASE/v1/allow" -d '{"rule":"api","key":"k","cost":3}'
check cost-big-400 test "$STATUS" = 400
check cost-big-detail body_has "cost 3 exceeds what rule 'api' can ever admit"
req "$BASE/v1/allow"
check allow-get-405 test "$STATUS" = 405
check allow-405-allow has_header 'Allow: POST'

# --- /v1/auth: ?key=, key templates, 429
req "$BASE/v1/auth/api?key=a1"
check auth-204 test "$STATUS" = 204
check auth-204-headers has_header 'RateLimit: "api";r=1;t='
req "$BASE/v1/auth/api?key=a1"
req "$BASE/v1/auth/api?key=a1"
check auth-429 test "$STATUS" = 429
check auth-retry-after has_header 'Retry-After: [1-9]'
check auth-problem has_header 'Content-Type: application/problem+json'
check auth-problem-body body_has '"status":429'
req "$BASE/v1/auth/nope"
check auth-unknown-404 test "$STATUS" = 404
# {ip}: the TCP peer 127.0.0.1 is a trusted proxy, so X-Forwarded-For's rightmost untrusted
# address is the client.
req -H 'X-Forwarded-For: 203.0.113.7' "$BASE/v1/auth/byip"
check xff-1 test "$STATUS" = 204
req -H 'X-Forwarded-For: 203.0.113.7' "$BASE/v1/auth/byip"
check xff-same-client-429 test "$STATUS" = 429
req -H 'X-Forwarded-For: 203.0.113.8' "$BASE/v1/auth/byip"
check xff-other-client-204 test "$STATUS" = 204
# a client-written entry left of the proxy's is not believed
req -H 'X-Forwarded-For: 198.51.100.1, 203.0.113.7' "$BASE/v1/auth/byip"
check xff-spoof-429 test "$STATUS" = 429
# {ip/24}: .9 is in the same /24 as .8 (used above? no: bynet is a separate rule)
req -H 'X-Forwarded-For: 192.0.2.10' "$BASE/v1/auth/bynet"
check net-1 test "$STATUS" = 204
req -H 'X-Forwarded-For: 192.0.2.99' "$BASE/v1/auth/bynet"
check net-same-24-429 test "$STATUS" = 429
req -H 'X-Forwarded-For: 192.0.3.10' "$BASE/v1/auth/bynet"
check net-other-24-204 test "$STATUS" = 204
# {header:x-api-key}:{method}
req -H 'X-Api-Key: k1' "$BASE/v1/auth/bykey"
check hdr-1 test "$STATUS" = 204
req -H 'X-Api-Key: k1' "$BASE/v1/auth/bykey"
check hdr-429 test "$STATUS" = 429
req -H 'X-Api-Key: k2' "$BASE/v1/auth/bykey"
check hdr-other-204 test "$STATUS" = 204
req "$BASE/v1/auth/bykey"
check hdr-missing-400 test "$STATUS" = 400
check hdr-missing-detail body_has 'lacks what rule'

# {method} {path}: from a trusted proxy, the forwarded request's (Traefik/Caddy and nginx
# header conventions); the query is not part of {path}
req -H 'X-Forwarded-Method: POST' -H 'X-Forwarded-Uri: /orders?x=1' "$BASE/v1/auth/bypath"
check fwd-1 test "$STATUS" = 204
req -H 'X-Original-Method: POST' -H 'X-Original-URI: /orders?y=2' "$BASE/v1/auth/bypath"
check fwd-same-request-429 test "$STATUS" = 429
req -H 'X-Forwarded-Method: GET' -H 'X-Forwarded-Uri: /orders' "$BASE/v1/auth/bypath"
check fwd-other-method-204 test "$STATUS" = 204
req "$BASE/v1/auth/bypath"
check fwd-own-path-204 test "$STATUS" = 204

# --- rules: reads open, changes behind the admin token
req "$BASE/v1/rules"
check rules-read-open test "$STATUS" = 200
check rules-read-open-body body_has '"name":"api"'
req "$BASE/v1/rules/api"
check rule-read-open test "$STATUS" = 200
req -X POST "$BASE/v1/rules" -d 'rules: []'
check rules-401 test "$STATUS" = 401
check rules-401-www has_header 'WWW-Authenticate: Bearer'
req -H "Authorization: Bearer wrong" -X DELETE "$BASE/v1/rules/api"
check rules-bad-token-401 test "$STATUS" = 401
req "$BASE/v1/rules/api/overrides"
check overrides-read-401 test "$STATUS" = 401
AUTH=(-H "Authorization: Bearer $TOKEN")
req "${AUTH[@]}" "$BASE/v1/rules"
check rules-list test "$STATUS" = 200
check rules-list-body body_has '"name":"api"'
req "${AUTH[@]}" -X PUT "$BASE/v1/rules/fresh" -d '{"algorithm":"sliding_log","limit":1,"window":"1h"}'
check rule-put test "$STATUS" = 200
req "$BASE/v1/auth/fresh?key=z"
check rule-put-in-force test "$STATUS" = 204
req "$BASE/v1/auth/fresh?key=z"
check rule-put-limits test "$STATUS" = 429
req "${AUTH[@]}" -X PUT "$BASE/v1/rules/fresh" -d $'{"algorithm":"sliding_log",\n "limit":"many","window":"1h"}'
check rule-put-bad-400 test "$STATUS" = 400
check rule-put-bad-detail body_has 'limit'
check rule-put-bad-field body_has '"field":"limit"'
req "${AUTH[@]}" -X PUT "$BASE/v1/rules/fresh" -d '{"algorithm":"sliding_log","limit":1}'
check rule-put-missing-field body_has '"field":"window"'
req "${AUTH[@]}" -X PUT "$BASE/v1/rules/bad%20name" -d '{"algorithm":"gcra","limit":1,"window":"1s"}'
check rule-put-name-field body_has '"field":"name"'
req "${AUTH[@]}" -X PUT "$BASE/v1/rules/fresh/overrides/k" -d '{"window":"soon"}'
check ov-put-bad-field body_has '"field":"window"'
req "$BASE/v1/auth/fresh?key=z"
check rule-old-still-in-force test "$STATUS" = 429
req "${AUTH[@]}" -X PUT "$BASE/v1/rules/fresh" -d '{"algorithm":'
check rule-put-badjson-pos body_has 'line 1, column'
check rule-put-badjson-no-field test "$(grep -c "\"field\"" "$TMP/b")" -eq 0
req "${AUTH[@]}" "$BASE/v1/rules/fresh"
check rule-get test "$STATUS" = 200
check rule-get-body body_has '"algorithm":"sliding_log"'
req -X PUT "$BASE/v1/rules/fresh" -d '{}'
check rule-put-401 test "$STATUS" = 401
# overrides
req "${AUTH[@]}" -X PUT "$BASE/v1/rules/fresh/overrides/vip%3A1" -d '{"limit":2}'
check ov-put test "$STATUS" = 200
req "$BASE/v1/auth/fresh?key=vip:1"
req "$BASE/v1/auth/fresh?key=vip:1"
check ov-in-force test "$STATUS" = 204
req "$BASE/v1/auth/fresh?key=vip:1"
check ov-limits test "$STATUS" = 429
req "${AUTH[@]}" "$BASE/v1/rules/fresh/overrides/vip%3A1"
check ov-get body_has '"limit":2'
req "${AUTH[@]}" -X DELETE "$BASE/v1/rules/fresh/overrides/vip%3A1"
check ov-del test "$STATUS" = 204
req "${AUTH[@]}" "$BASE/v1/rules/fresh/overrides/vip%3A1"
check ov-gone-404 test "$STATUS" = 404
req "${AUTH[@]}" -X DELETE "$BASE/v1/rules/fresh"
check rule-del test "$STATUS" = 204
req "$BASE/v1/auth/fresh?key=z"
check rule-gone-404 test "$STATUS" = 404
req "${AUTH[@]}" -X DELETE "$BASE/v1/rules/fresh"
check rule-del-again-404 test "$STATUS" = 404

# --- metrics
req "$BASE/metrics"
check metrics-200 test "$STATUS" = 200
check metrics-decisions body_has 'sluice_decisions_total{rule="api",result="denied"} [1-9]'
check metrics-hist body_has 'sluice_request_duration_seconds_bucket{le="+Inf"}'
check metrics-reloads body_has 'sluice_rules_reloads_total [1-9]'
check metrics-keys body_has 'sluice_keys{rule="api"} [1-9]'

# --- malformed HTTP: a clear error and the connection closed
got=$(timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$HTTP_PORT"'; printf "GARBAGE\r\n\r\n" >&3; head -n 1 <&3')
check bad-request-400 test "${got%$'\r'}" = "HTTP/1.1 400 Bad Request"
# Expect: 100-continue is answered, so the client sends its body at once
curl -s -o /dev/null -D "$TMP/h" -H 'Expect: 100-continue' -H 'Content-Type: application/json' -X POST "$BASE/v1/allow" \
    -d '{"rule":"api","key":"e1"}'
check expect-100 has_header 'HTTP/1.1 100 Continue'
# pipelined: three requests in one write, three responses in their order
got=$(timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$HTTP_PORT"'
printf "GET /v1/auth/api?key=p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/auth/api?key=p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/auth/api?key=p1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" >&3
cat <&3' | tr -d '\r' | grep '^HTTP/1.1' | paste -sd' ' -)
check pipelined-in-order test "$got" = "HTTP/1.1 204 No Content HTTP/1.1 204 No Content HTTP/1.1 429 Too Many Requests"
req "$BASE/nope"
check unknown-path-404 test "$STATUS" = 404
# keep-alive: two requests on one connection
n=$(curl -s -o /dev/null -w '%{num_connects}\n' "$BASE/healthz" "$BASE/healthz" | awk '{s += $1} END {print s}')
check keepalive-one-connect test "$n" = 1

stop_bg srv TERM
check exit-0 test $? -eq 0
finish
