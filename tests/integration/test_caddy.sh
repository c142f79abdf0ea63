#!/usr/bin/env bash
# test_caddy.sh - Caddy (Debian's caddy 2.6) in front of sluiced with forward_auth, configured as
# docs/nginx.md tells users to: sluiced's 204 lets the request through to the protected content
# (with the RateLimit fields copied into the request the content gets and into the response),
# its 429 (or 400) reaches the client as sluiced wrote it, and sluiced down is a 502 (fail
# closed) or the content (the fail-open variant). Keys: the client address ("{ip}", through the
# X-Forwarded-For Caddy writes) and the client's method and path ({method}, {path}, from the
# X-Forwarded-Method/Uri Caddy writes).
#
# Clients connect from 127.0.0.2 / 127.0.0.3 (Linux routes all of 127/8 to lo), Caddy talks to
# sluiced from 127.0.0.1, and sluiced trusts only 127.0.0.1/32. Skipped (exit 77, "Skipped" in
# ctest) when caddy or curl is not installed.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

CADDY=${CADDY:-caddy}
need "$CADDY" curl redis-cli

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: per-ip
    algorithm: sliding_log
    limit: 3
    window: 1h
    key: "{ip}"
  - name: uploads
    algorithm: sliding_log
    limit: 2
    window: 1h
    key: "{header:x-user}:{method}:{path}"
    overrides:
      - key: "bulk:POST:/v1/upload"
        limit: 5
YAML

start_sluiced srv --rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" --snapshot "" --threads 1 \
    --trusted-proxy 127.0.0.1 || {
    cat "$TMP/srv.log"
    exit 1
}
SLUICED_HTTP=$HTTP_PORT
SLUICED_RESP=$RESP_PORT

# The fail-open variant is docs/nginx.md's own text, its ports this test's.
fail_open=$(python3 "$SLUICE_SOURCE_DIR/tests/docs/block.py" "$SLUICE_SOURCE_DIR/docs/nginx.md" \
    Caddyfile.fail-open) || exit 1
for part in ':80 {' '127.0.0.1:8390' '127.0.0.1:8081' 'handle_errors'; do
    case "$fail_open" in
    *"$part"*) ;;
    *)
        echo "docs/nginx.md's Caddyfile.fail-open has no '$part':"
        printf '%s\n' "$fail_open"
        exit 1
        ;;
    esac
done

# launch_caddy NAME: one Caddy with three sites on the ports serve chose: the recipe of
# docs/nginx.md (fail closed), its fail-open variant, and the protected content, which answers
# with what it received (and drops the connection of a request to /v1/abort), logging each
# request. No admin endpoint (port 2019 may be anyone's); Caddy's storage in $TMP.
launch_caddy() {
    CLOSED_PORT=${SERVE_PORTS[0]}
    OPEN_PORT=${SERVE_PORTS[1]}
    APP_PORT=${SERVE_PORTS[2]}
    cat >"$TMP/Caddyfile" <<CADDY
{
	admin off
}

http://:$CLOSED_PORT {
	bind 127.0.0.1
	header ?RateLimit {http.request.header.RateLimit}
	header ?RateLimit-Policy {http.request.header.RateLimit-Policy}

	handle /ip/* {
		forward_auth 127.0.0.1:$SLUICED_HTTP {
			uri /v1/auth/per-ip?
			copy_headers RateLimit RateLimit-Policy
		}
		reverse_proxy 127.0.0.1:$APP_PORT
	}
	handle {
		forward_auth 127.0.0.1:$SLUICED_HTTP {
			uri /v1/auth/uploads?
			copy_headers RateLimit RateLimit-Policy
		}
		reverse_proxy 127.0.0.1:$APP_PORT
	}
}

$(printf '%s\n' "$fail_open" | sed -e "s|^:80 {\$|http://:$OPEN_PORT {\n\tbind 127.0.0.1|" \
        -e "s|127\.0\.0\.1:8390|127.0.0.1:$SLUICED_HTTP|g" -e "s|127\.0\.0\.1:8081|127.0.0.1:$APP_PORT|g")

http://:$APP_PORT {
	bind 127.0.0.1
	log {
		output file $TMP/app-access.log
	}
	handle /v1/abort {
		abort
	}
	handle {
		respond "content: {method} {uri} body={http.request.body} ratelimit={header.RateLimit}"
	}
}
CADDY
    XDG_DATA_HOME=$TMP/caddy-data XDG_CONFIG_HOME=$TMP/caddy-config HOME=$TMP \
        start_bg "$1" "$CADDY" run --config "$TMP/Caddyfile" --adapter caddyfile
}
serve caddy 3 launch_caddy || {
    cat "$TMP/caddy.log"
    exit 1
}

# req NAME FROM [curl args..] URL: one request from local address FROM; the status code goes to
# $TMP/NAME.code, the response head to $TMP/NAME.head, the body to $TMP/NAME.body.
req() {
    local name=$1 from=$2
    shift 2
    curl -sS --max-time 10 --interface "$from" -D "$TMP/$name.head" -o "$TMP/$name.body" \
        -w '%{http_code}' "$@" >"$TMP/$name.code" 2>"$TMP/$name.err"
}
code_is() { test "$(cat "$TMP/$1.code")" = "$2"; }
# header NAME FIELD: the value of FIELD in NAME's response head (case-insensitive), CR stripped.
header() { grep -i "^$2:" "$TMP/$1.head" | head -n 1 | sed -e 's/^[^:]*: *//' -e 's/\r$//'; }
header_is() { test "$(header "$1" "$2")" = "$3"; }
header_matches() { [[ "$(header "$1" "$2")" =~ $3 ]]; }
body_has() { grep -qF -- "$2" "$TMP/$1.body"; }
no_content() { ! grep -q "^content:" "$TMP/$1.body"; }
cli() { redis-cli -p "$SLUICED_RESP" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
resp_matches() {
    local want=$1
    shift
    [[ "$(cli "$@")" =~ $want ]]
}

URL=http://127.0.0.1:$CLOSED_PORT
OPEN=http://127.0.0.1:$OPEN_PORT

# --- per client address: 3 allowed, the fields in the response and in the request the content
# gets; then sluiced's 429 as it wrote it
for i in 1 2 3; do
    req ip$i 127.0.0.2 "$URL/ip/page"
    check "ip-allowed-$i" code_is ip$i 200
    check "ip-content-$i" body_has ip$i "content: GET /ip/page"
    check "ip-policy-$i" header_is ip$i RateLimit-Policy '"per-ip";q=3;w=3600'
    check "ip-remaining-$i" header_matches ip$i RateLimit "^\"per-ip\";r=$((3 - i));t=[0-9]+\$"
    check "ip-content-got-fields-$i" body_has ip$i "ratelimit=\"per-ip\";r=$((3 - i));t="
done
req ip4 127.0.0.2 "$URL/ip/page"
check ip-denied code_is ip4 429
check ip-denied-no-content no_content ip4
check ip-denied-problem body_has ip4 '"status":429'
check ip-denied-detail body_has ip4 "rule 'per-ip' allows 3 per 3600s"
check ip-denied-type header_is ip4 Content-Type application/problem+json
check ip-retry-after header_matches ip4 Retry-After '^[1-9][0-9]*$'
check ip-retry-le-window test "$(header ip4 Retry-After)" -le 3600
check ip-denied-policy header_is ip4 RateLimit-Policy '"per-ip";q=3;w=3600'
check ip-denied-fields header_matches ip4 RateLimit '^"per-ip";r=0;t=[1-9][0-9]*$'
check ip-key-client resp_matches "^[01] 3 0 " SL.PEEK per-ip 127.0.0.2
check ip-key-not-proxy resp_matches "^1 3 3 0 " SL.PEEK per-ip 127.0.0.1

# Caddy writes X-Forwarded-For itself (the client is not a proxy it trusts): what a client
# sends there is dropped, and its own address is charged.
req xff 127.0.0.3 -H "X-Forwarded-For: 203.0.113.1" "$URL/ip/page"
check xff-allowed code_is xff 200
check xff-own-budget header_matches xff RateLimit '^"per-ip";r=2;t='
check xff-not-charged resp_matches "^1 3 3 0 " SL.PEEK per-ip 203.0.113.1

# The client's query string does not reach sluiced (the uri ends in "?"): a spent client asking
# for ?cost=0 (a peek, which even a spent key admits) or ?key=another is still refused.
req ip-cost0 127.0.0.2 "$URL/ip/page?cost=0"
check query-cost-not-passed code_is ip-cost0 429
req ip-key 127.0.0.2 "$URL/ip/page?key=fresh"
check query-key-not-passed code_is ip-key 429
check query-key-not-charged resp_matches "^1 3 3 0 " SL.PEEK per-ip fresh

# --- keys from the client's method and path, {header:x-user}:{method}:{path}
req up1 127.0.0.2 -H "X-User: u1" --data-binary 'rows-1' "$URL/v1/upload"
check up-allowed-1 code_is up1 200
check up-remaining-1 header_matches up1 RateLimit '^"uploads";r=1;t='
# the body and the query reach the content untouched by the question to sluiced
req up2 127.0.0.2 -H "X-User: u1" --data-binary 'rows-2' "$URL/v1/upload?part=2"
check up-allowed-2 code_is up2 200
check up-body-passed body_has up2 "content: POST /v1/upload?part=2 body=rows-2"
check up-query-same-key header_matches up2 RateLimit '^"uploads";r=0;t='
check up-key resp_matches "^[01] 2 0 " SL.PEEK uploads u1:POST:/v1/upload
req up3 127.0.0.2 -H "X-User: u1" --data-binary 'rows-3' "$URL/v1/upload"
check up-denied code_is up3 429
check up-denied-no-content no_content up3
check up-denied-fields header_matches up3 RateLimit '^"uploads";r=0;t=[1-9]'
req up-get 127.0.0.2 -H "X-User: u1" "$URL/v1/upload"
check up-other-method code_is up-get 200
check up-other-method-key header_matches up-get RateLimit '^"uploads";r=1;t='
req up-other 127.0.0.2 -H "X-User: u1" --data-binary 'x' "$URL/v1/other"
check up-other-path code_is up-other 200
check up-other-path-key resp_matches "^1 2 1 " SL.PEEK uploads u1:POST:/v1/other
# the override of one user, method and path applies to that request only
req bulk 127.0.0.2 -H "X-User: bulk" --data-binary 'x' "$URL/v1/upload"
check bulk-override-policy header_is bulk RateLimit-Policy '"uploads";q=5;w=3600'
check bulk-override-fields header_matches bulk RateLimit '^"uploads";r=4;t='
req bulk-other 127.0.0.2 -H "X-User: bulk" --data-binary 'x' "$URL/v1/other"
check bulk-not-other header_is bulk-other RateLimit-Policy '"uploads";q=2;w=3600'
# A client naming another request itself is not believed: Caddy writes X-Forwarded-Method/Uri,
# which sluiced reads before X-Original-*; u1's spent key stays spent.
req spoof-fwd 127.0.0.2 -H "X-User: u1" -H "X-Forwarded-Method: PUT" \
    -H "X-Forwarded-Uri: /elsewhere" --data-binary 'x' "$URL/v1/upload"
check spoof-fwd-denied code_is spoof-fwd 429
check spoof-fwd-not-charged resp_matches "^1 2 2 0 " SL.PEEK uploads u1:PUT:/elsewhere
req spoof-orig 127.0.0.2 -H "X-User: u1" -H "X-Original-Method: PUT" \
    -H "X-Original-URI: /elsewhere" --data-binary 'x' "$URL/v1/upload"
check spoof-orig-denied code_is spoof-orig 429
# Without the header the key is built from, sluiced's 400 reaches the client as it is.
req no-user 127.0.0.2 --data-binary 'x' "$URL/v1/upload"
check no-user-400 code_is no-user 400
check no-user-detail body_has no-user "lacks what rule 'uploads' builds its key from"
check no-user-no-content no_content no-user

# --- the fail-open variant decides as the recipe does while sluiced answers
req open1 127.0.0.3 -H "X-User: u3" --data-binary 'x' "$OPEN/v1/upload"
check open-allowed code_is open1 200
check open-fields header_matches open1 RateLimit '^"uploads";r=1;t='
req open2 127.0.0.3 -H "X-User: u3" --data-binary 'x' "$OPEN/v1/upload"
req open3 127.0.0.3 -H "X-User: u3" --data-binary 'x' "$OPEN/v1/upload"
check open-denied code_is open3 429
check open-denied-no-content no_content open3
# An error after sluiced answered (the content drops the connection) stays an error: the
# request is not sent to the content a second time from handle_errors.
req open-abort 127.0.0.3 -H "X-User: u3" --data-binary 'x' "$OPEN/v1/abort"
check open-abort-502 code_is open-abort 502
check open-abort-sent-once test "$(grep -c '"uri":"/v1/abort"' "$TMP/app-access.log")" -eq 1

# --- sluiced unreachable: the recipe answers 502 (fail closed), the variant serves the content
stop_bg srv TERM
check sluiced-exit-0 test $? -eq 0
req down 127.0.0.3 -H "X-User: u4" --data-binary 'x' "$URL/v1/upload"
check down-502 code_is down 502
check down-no-content no_content down
check down-no-retry-after test -z "$(header down Retry-After)"
check down-no-fields test -z "$(header down RateLimit)"
req down-open 127.0.0.3 -H "X-User: u4" --data-binary 'rows-open' "$OPEN/v1/upload"
check down-open-200 code_is down-open 200
check down-open-content body_has down-open "content: POST /v1/upload body=rows-open"
check down-open-no-fields test -z "$(header down-open RateLimit)"

kill -0 "$(cat "$TMP/caddy.pid")" 2>/dev/null
check caddy-alive test $? -eq 0
stop_bg caddy TERM
check caddy-exit-0 test $? -eq 0
finish
