#!/usr/bin/env bash
# test_nginx.sh - nginx (Debian's nginx-light) in front of sluiced with auth_request, configured
# as docs/nginx.md tells users to: sluiced's 204 lets the request through to the protected
# content, its 429 becomes nginx's 429 with Retry-After and the RateLimit fields, anything else
# (sluiced down) a 500. Keys: the client address (the rule's key template "{ip}", through
# X-Forwarded-For from a trusted nginx), ?key= built from a request header, a header through the
# template, and the client's method and path ({method}, {path}) from the X-Original-Method and
# X-Original-URI nginx sets (a client's own X-Forwarded-Method/Uri, which sluiced would read
# first, cleared).
#
# Clients connect from 127.0.0.2 / 127.0.0.3 (Linux routes all of 127/8 to lo), nginx talks to
# sluiced from 127.0.0.1, and sluiced trusts only 127.0.0.1/32: so the rightmost X-Forwarded-For
# entry that is not a trusted hop is the address nginx appended for the client, and whatever a
# client writes into X-Forwarded-For itself sits to the left of it and is never believed.
# Skipped (exit 77, "Skipped" in ctest) when nginx or curl is not installed.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

NGINX=${NGINX:-/usr/sbin/nginx}
need "$NGINX" curl redis-cli

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: per-ip
    algorithm: sliding_log
    limit: 3
    window: 1h
    key: "{ip}"
  - name: by-key
    algorithm: sliding_log
    limit: 2
    window: 1h
  - name: by-header
    algorithm: sliding_log
    limit: 2
    window: 1h
    key: "{header:x-api-key}"
  - name: by-path
    algorithm: sliding_log
    limit: 2
    window: 1h
    key: "{header:x-user}:{method}:{path}"
    overrides:
      - key: "bulk:GET:/up/content.txt"
        limit: 5
YAML

start_sluiced srv --rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" --snapshot "" --threads 1 \
    --trusted-proxy 127.0.0.1 || {
    cat "$TMP/srv.log"
    exit 1
}
SLUICED_HTTP=$HTTP_PORT
SLUICED_RESP=$RESP_PORT

mkdir -p "$TMP/www" "$TMP/nginx-tmp"
echo "protected content" >"$TMP/www/content.txt"
echo "other content" >"$TMP/www/other.txt"
# As root, nginx's workers would switch to "nobody", who cannot read $TMP (mode 700).
user_line=""
if [ "$(id -u)" -eq 0 ]; then
    user_line="user root;"
fi

# The check of ?key= (a map, and an if for the location) is docs/nginx.md's own text.
key_check=$(python3 "$SLUICE_SOURCE_DIR/tests/docs/block.py" "$SLUICE_SOURCE_DIR/docs/nginx.md" \
    nginx-key-check.conf) || exit 1
KEY_MAP=$(printf '%s\n' "$key_check" | sed '/^# in the location/,$d')
KEY_IF=$(printf '%s\n' "$key_check" | sed '1,/^# in the location/d')
case "$KEY_MAP|$KEY_IF" in
*'map $http_x_api_key $rl_key_ok'*'|'*'if ($rl_key_ok = 0)'*) ;;
*)
    echo "docs/nginx.md's nginx-key-check.conf is not a map, then '# in the location', then an if:"
    printf '%s\n' "$key_check"
    exit 1
    ;;
esac

# launch_nginx NAME: nginx on the port serve chose, with the recipe of docs/nginx.md (this
# test's paths and ports); nginx reports a port it cannot bind in its error log.
launch_nginx() {
    NGINX_PORT=${SERVE_PORTS[0]}
    rm -f "$TMP/nginx-error.log"
    SERVE_LOGS=("$TMP/nginx-error.log")
    cat >"$TMP/nginx.conf" <<NGINX
$user_line
daemon off;
worker_processes 1;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log info;
events { worker_connections 64; }
http {
    access_log $TMP/nginx-access.log;
    client_body_temp_path $TMP/nginx-tmp/body;
    proxy_temp_path $TMP/nginx-tmp/proxy;
    fastcgi_temp_path $TMP/nginx-tmp/fastcgi;
    uwsgi_temp_path $TMP/nginx-tmp/uwsgi;
    scgi_temp_path $TMP/nginx-tmp/scgi;
    default_type text/plain;

    # ?key= is put into the URL unescaped: admit only keys that need no escaping.
$KEY_MAP

    upstream sluiced {
        server 127.0.0.1:$SLUICED_HTTP;
        keepalive 8;
    }

    server {
        listen 127.0.0.1:$NGINX_PORT;

        # The decision: sluiced answers 204 (allowed) or 429 (denied) with the RateLimit fields.
        location = /_ratelimit/per-ip {
            internal;
            proxy_pass http://sluiced/v1/auth/per-ip;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Original-Method \$request_method;
            proxy_set_header X-Original-URI \$request_uri;
            proxy_set_header X-Forwarded-Method "";
            proxy_set_header X-Forwarded-Uri "";
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        # {method} and {path} of the client's request: nginx names it in X-Original-Method and
        # X-Original-URI; sluiced reads X-Forwarded-Method/Uri before them, so a client's own
        # are not passed on.
        location = /_ratelimit/by-path {
            internal;
            proxy_pass http://sluiced/v1/auth/by-path;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Original-Method \$request_method;
            proxy_set_header X-Original-URI \$request_uri;
            proxy_set_header X-Forwarded-Method "";
            proxy_set_header X-Forwarded-Uri "";
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location = /_ratelimit/by-key {
            internal;
            proxy_pass http://sluiced/v1/auth/by-key?key=\$http_x_api_key;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        # The rule's key template {header:x-api-key} reads the header nginx passes on.
        location = /_ratelimit/by-header {
            internal;
            proxy_pass http://sluiced/v1/auth/by-header;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }

        location /ip/ {
            auth_request /_ratelimit/per-ip;
            auth_request_set \$rl_status \$upstream_status;
            auth_request_set \$rl_policy \$upstream_http_ratelimit_policy;
            auth_request_set \$rl_fields \$upstream_http_ratelimit;
            auth_request_set \$rl_retry \$upstream_http_retry_after;
            add_header RateLimit-Policy \$rl_policy always;
            add_header RateLimit \$rl_fields always;
            error_page 500 = @ratelimited;
            alias $TMP/www/;
        }
        location /key/ {
$KEY_IF
            auth_request /_ratelimit/by-key;
            auth_request_set \$rl_status \$upstream_status;
            auth_request_set \$rl_policy \$upstream_http_ratelimit_policy;
            auth_request_set \$rl_fields \$upstream_http_ratelimit;
            auth_request_set \$rl_retry \$upstream_http_retry_after;
            add_header RateLimit-Policy \$rl_policy always;
            add_header RateLimit \$rl_fields always;
            error_page 500 = @ratelimited;
            alias $TMP/www/;
        }

        location /hdr/ {
            auth_request /_ratelimit/by-header;
            auth_request_set \$rl_status \$upstream_status;
            auth_request_set \$rl_policy \$upstream_http_ratelimit_policy;
            auth_request_set \$rl_fields \$upstream_http_ratelimit;
            auth_request_set \$rl_retry \$upstream_http_retry_after;
            add_header RateLimit-Policy \$rl_policy always;
            add_header RateLimit \$rl_fields always;
            error_page 500 = @ratelimited;
            alias $TMP/www/;
        }

        location /up/ {
            auth_request /_ratelimit/by-path;
            auth_request_set \$rl_status \$upstream_status;
            auth_request_set \$rl_policy \$upstream_http_ratelimit_policy;
            auth_request_set \$rl_fields \$upstream_http_ratelimit;
            auth_request_set \$rl_retry \$upstream_http_retry_after;
            add_header RateLimit-Policy \$rl_policy always;
            add_header RateLimit \$rl_fields always;
            error_page 500 = @ratelimited;
            alias $TMP/www/;
        }

        # auth_request turns every status but 2xx, 401 and 403 into 500: tell sluiced's 429 apart
        # from a real failure (sluiced unreachable: 502) by the subrequest's upstream status.
        location @ratelimited {
            if (\$rl_status != 429) {
                return 500;
            }
            add_header Retry-After \$rl_retry always;
            add_header RateLimit-Policy \$rl_policy always;
            add_header RateLimit \$rl_fields always;
            default_type application/problem+json;
            return 429 '{"title":"Too Many Requests","status":429}\n';
        }
    }
}
NGINX
    start_bg "$1" "$NGINX" -p "$TMP/" -e "$TMP/nginx-error.log" -c "$TMP/nginx.conf"
}
serve nginx 1 launch_nginx || {
    cat "$TMP/nginx.log" "$TMP/nginx-error.log"
    exit 1
}

# req NAME FROM [curl args..] PATH: one request from local address FROM; the status line's code
# goes to $TMP/NAME.code, the response head to $TMP/NAME.head, the body to $TMP/NAME.body.
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
cli() { redis-cli -p "$SLUICED_RESP" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
resp_matches() {
    local want=$1
    shift
    [[ "$(cli "$@")" =~ $want ]]
}

URL=http://127.0.0.1:$NGINX_PORT

# --- per client address: 3 allowed, then 429 with Retry-After and the RateLimit fields
for i in 1 2 3; do
    req ip$i 127.0.0.2 "$URL/ip/content.txt"
    check "ip-allowed-$i" code_is ip$i 200
    check "ip-body-$i" grep -qx "protected content" "$TMP/ip$i.body"
    check "ip-policy-$i" header_is ip$i RateLimit-Policy '"per-ip";q=3;w=3600'
    check "ip-remaining-$i" header_matches ip$i RateLimit "^\"per-ip\";r=$((3 - i));t=[0-9]+\$"
done
req ip4 127.0.0.2 "$URL/ip/content.txt"
check ip-denied code_is ip4 429
check ip-denied-no-content test "$(grep -c "protected content" "$TMP/ip4.body")" -eq 0
check ip-denied-problem grep -q '"status":429' "$TMP/ip4.body"
check ip-denied-type header_is ip4 Content-Type application/problem+json
check ip-retry-after header_matches ip4 Retry-After '^[1-9][0-9]*$'
check ip-retry-le-window test "$(header ip4 Retry-After)" -le 3600
check ip-denied-policy header_is ip4 RateLimit-Policy '"per-ip";q=3;w=3600'
check ip-denied-fields header_matches ip4 RateLimit '^"per-ip";r=0;t=[1-9][0-9]*$'

# The key is the client's address as nginx saw it, taken from the X-Forwarded-For nginx wrote
# (sluiced's TCP peer is nginx at 127.0.0.1): the budget of 127.0.0.2 is spent, 127.0.0.1's
# (nginx's own address) untouched, and another client has its own. (SL.PEEK costs 0, which
# even a spent key admits, so the remaining count is what tells.)
check ip-key-client resp_matches "^[01] 3 0 " SL.PEEK per-ip 127.0.0.2
check ip-key-not-proxy resp_matches "^1 3 3 0 " SL.PEEK per-ip 127.0.0.1
req other 127.0.0.3 "$URL/ip/content.txt"
check ip-other-client code_is other 200
check ip-other-remaining header_matches other RateLimit '^"per-ip";r=2;t='

# --- a client writing its own X-Forwarded-For is not believed. nginx appends the client's
# address: "203.0.113.7, 127.0.0.2". Walking from the right, 127.0.0.2 is not a trusted hop, so
# it is the client; the spoofed entry to its left is never looked at.
for i in 1 2 3; do
    req spoof$i 127.0.0.2 -H "X-Forwarded-For: 203.0.113.$i" "$URL/ip/content.txt"
    check "spoof-still-denied-$i" code_is spoof$i 429
done
check spoof-not-charged resp_matches "^1 3 3 0 " SL.PEEK per-ip 203.0.113.1
# The same spoof from a fresh client is charged to that client, not to the address it claims.
req spoof-fresh 127.0.0.4 -H "X-Forwarded-For: 127.0.0.2" "$URL/ip/content.txt"
check spoof-fresh-allowed code_is spoof-fresh 200
check spoof-fresh-own-budget header_matches spoof-fresh RateLimit '^"per-ip";r=2;t='
# A spoofed trusted address does not help either: "127.0.0.1, 127.0.0.5" -> 127.0.0.5.
req spoof-trusted 127.0.0.5 -H "X-Forwarded-For: 127.0.0.1" "$URL/ip/content.txt"
check spoof-trusted-own-budget header_matches spoof-trusted RateLimit '^"per-ip";r=2;t='
check spoof-trusted-not-charged resp_matches "^1 3 3 0 " SL.PEEK per-ip 127.0.0.1

# Directly to sluiced (no trusted proxy in between), X-Forwarded-For is ignored altogether:
# the TCP peer 127.0.0.6 is the key.
got=$(curl -sS --max-time 10 --interface 127.0.0.6 -o /dev/null -w '%{http_code}' \
    -H "X-Forwarded-For: 198.51.100.1" "http://127.0.0.1:$SLUICED_HTTP/v1/auth/per-ip")
check direct-allowed test "$got" = 204
check direct-key-peer resp_matches "^1 3 2 " SL.PEEK per-ip 127.0.0.6
check direct-xff-ignored resp_matches "^1 3 3 0 " SL.PEEK per-ip 198.51.100.1

# --- key from a request header, passed as ?key=
for i in 1 2; do
    req key$i 127.0.0.2 -H "X-Api-Key: alice" "$URL/key/content.txt"
    check "key-allowed-$i" code_is key$i 200
    check "key-remaining-$i" header_matches key$i RateLimit "^\"by-key\";r=$((2 - i));t="
done
req key3 127.0.0.2 -H "X-Api-Key: alice" "$URL/key/content.txt"
check key-denied code_is key3 429
check key-retry-after header_matches key3 Retry-After '^[1-9][0-9]*$'
check key-denied-fields header_matches key3 RateLimit '^"by-key";r=0;t='
# Same client address, another key: its own budget; the key is what sluiced counted.
req key-bob 127.0.0.2 -H "X-Api-Key: bob" "$URL/key/content.txt"
check key-other code_is key-bob 200
check key-counted resp_matches "^[01] 2 0 " SL.PEEK by-key alice
req key-none 127.0.0.2 "$URL/key/content.txt"
check key-missing-401 code_is key-none 401
# A key that would need escaping never reaches the URL (it would add its own &key=).
req key-inject 127.0.0.2 -H "X-Api-Key: x&key=carol" "$URL/key/content.txt"
check key-unsafe-401 code_is key-inject 401
check key-inject-not-charged resp_matches "^1 2 2 0 " SL.PEEK by-key carol

# --- key from a request header through the rule's key template {header:x-api-key}
for i in 1 2; do
    req hdr$i 127.0.0.2 -H "X-Api-Key: dave" "$URL/hdr/content.txt"
    check "hdr-allowed-$i" code_is hdr$i 200
    check "hdr-remaining-$i" header_matches hdr$i RateLimit "^\"by-header\";r=$((2 - i));t="
done
req hdr3 127.0.0.2 -H "X-Api-Key: dave" "$URL/hdr/content.txt"
check hdr-denied code_is hdr3 429
check hdr-counted resp_matches "^[01] 2 0 " SL.PEEK by-header dave
req hdr-other 127.0.0.2 -H "X-Api-Key: erin" "$URL/hdr/content.txt"
check hdr-other-key code_is hdr-other 200
# Without the header sluiced cannot build the key (400): nginx fails closed with a 500.
req hdr-none 127.0.0.2 "$URL/hdr/content.txt"
check hdr-missing-500 code_is hdr-none 500
check hdr-missing-no-content test "$(grep -c "protected content" "$TMP/hdr-none.body")" -eq 0

# --- keys from the client's method and path, {header:x-user}:{method}:{path}
for i in 1 2; do
    req path$i 127.0.0.2 -H "X-User: u1" "$URL/up/content.txt"
    check "path-allowed-$i" code_is path$i 200
    check "path-remaining-$i" header_matches path$i RateLimit "^\"by-path\";r=$((2 - i));t="
done
check path-key resp_matches "^[01] 2 0 " SL.PEEK by-path u1:GET:/up/content.txt
# the query string is not part of {path}: the same key, spent
req path-query 127.0.0.2 -H "X-User: u1" "$URL/up/content.txt?part=2"
check path-query-same-key code_is path-query 429
check path-query-fields header_matches path-query RateLimit '^"by-path";r=0;t=[1-9]'
# another path, another method: keys of their own
req path-other 127.0.0.2 -H "X-User: u1" "$URL/up/other.txt"
check path-other-allowed code_is path-other 200
check path-other-own-key header_matches path-other RateLimit '^"by-path";r=1;t='
req path-head 127.0.0.2 -H "X-User: u1" -I "$URL/up/content.txt"
check path-method-allowed code_is path-head 200
check path-method-own-key header_matches path-head RateLimit '^"by-path";r=1;t='
check path-method-key resp_matches "^1 2 1 " SL.PEEK by-path u1:HEAD:/up/content.txt
# the override of one user, method and path applies to that request only
req path-bulk 127.0.0.2 -H "X-User: bulk" "$URL/up/content.txt"
check path-override-policy header_is path-bulk RateLimit-Policy '"by-path";q=5;w=3600'
check path-override-fields header_matches path-bulk RateLimit '^"by-path";r=4;t='
req path-bulk-other 127.0.0.2 -H "X-User: bulk" "$URL/up/other.txt"
check path-override-not-other header_is path-bulk-other RateLimit-Policy '"by-path";q=2;w=3600'
# A client naming another request itself is not believed: nginx clears X-Forwarded-Method/Uri
# (which sluiced would read first) and overwrites X-Original-*; u1's spent key stays spent.
req path-spoof-fwd 127.0.0.2 -H "X-User: u1" -H "X-Forwarded-Method: PUT" \
    -H "X-Forwarded-Uri: /elsewhere" "$URL/up/content.txt"
check path-spoof-fwd-denied code_is path-spoof-fwd 429
check path-spoof-fwd-not-charged resp_matches "^1 2 2 0 " SL.PEEK by-path u1:PUT:/elsewhere
req path-spoof-orig 127.0.0.2 -H "X-User: u1" -H "X-Original-Method: PUT" \
    -H "X-Original-URI: /elsewhere" "$URL/up/content.txt"
check path-spoof-orig-denied code_is path-spoof-orig 429
# Directly to sluiced from a peer that is not a trusted proxy, the headers naming another
# request are ignored: {method} and {path} are the request's own.
got=$(curl -sS --max-time 10 --interface 127.0.0.6 -o /dev/null -w '%{http_code}' \
    -H "X-User: u2" -H "X-Forwarded-Method: PUT" -H "X-Forwarded-Uri: /elsewhere" \
    -H "X-Original-Method: PUT" -H "X-Original-URI: /elsewhere" \
    "http://127.0.0.1:$SLUICED_HTTP/v1/auth/by-path")
check direct-path-allowed test "$got" = 204
check direct-path-own resp_matches "^1 2 1 " SL.PEEK by-path u2:GET:/v1/auth/by-path
check direct-path-not-named resp_matches "^1 2 2 0 " SL.PEEK by-path u2:PUT:/elsewhere

# --- sluiced unreachable: a 500 (fail closed), not a 429 and not the content
stop_bg srv TERM
check sluiced-exit-0 test $? -eq 0
req down 127.0.0.3 "$URL/ip/content.txt"
check down-500 code_is down 500
check down-no-retry-after test -z "$(header down Retry-After)"

kill -0 "$(cat "$TMP/nginx.pid")" 2>/dev/null
check nginx-alive test $? -eq 0
stop_bg nginx QUIT
check nginx-exit-0 test $? -eq 0
finish
