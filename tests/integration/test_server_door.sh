#!/usr/bin/env bash
# test_server_door.sh - the admin door, probed as an attacker would, with curl and raw sockets:
#
#   1. browsers: the exact probe that found the hole (POST /v1/rules, text/plain, Origin and
#      Host evil.example) is refused and changes nothing; so are a foreign Host on reads
#      (DNS rebinding), a foreign Origin, Sec-Fetch-Site cross-site, a form's body type, a
#      DELETE without X-Sluice-Client, and with a token set a cross-site POST /v1/settle; what
#      programs send still works; /v1/auth, /metrics and /healthz answer any Host; --http-host
#      names a server; every refusal counted by reason.
#   2. guessing: a burst of wrong AUTHs (both users) counted exactly; after the fifth, replies
#      held back (counted), in order, while another client is served; a full queue closes the
#      connection; a right password clears the address; wrong admin tokens over HTTP the same;
#      log lines name the peer.
#   3. changes logged with where they came from (protocol, peer address and port, user or token,
#      client name) and what changed, over RESP and HTTP, imports and SIGHUP.
#   4. empty secrets refused at start: flags, the file, the environment.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need curl redis-cli

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 100
    window: 1h
  - name: tok
    algorithm: sliding_log
    limit: 100
    window: 1h
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# code ARGS..: the HTTP status of one curl request
code() { curl -s -o "$TMP/body" -w '%{http_code}' "$@"; }
J=(-H 'Content-Type: application/json')

# ---- 1. browsers ------------------------------------------------------------------------------
start_sluiced open --rules "$TMP/rules.yaml" --config-store "$TMP/open.db" --snapshot "" \
    --http-host limiter.test || { cat "$TMP/open.log"; exit 1; }
BASE=http://127.0.0.1:$HTTP_PORT
rule() { redis-cli -p "$RESP_PORT" SL.RULE GET api; }
before=$(rule)
EVIL_RULES=$'rules:\n  - name: api\n    algorithm: sliding_log\n    limit: 1\n    window: 1h\n'

# the probe that found it: a page's "simple" request, renamed (DNS rebinding) and cross-origin
check "probe: refused 421" test "$(code -X POST "$BASE/v1/rules" -H 'Content-Type: text/plain' \
    -H 'Origin: http://evil.example' -H 'Host: evil.example' --data-binary "$EVIL_RULES")" = 421
check "probe: the problem names the setting" grep -q "Host 'evil.example' is not a name of this server: .*--http-host" "$TMP/body"
check "probe: the rule is unchanged" test "$(rule)" = "$before"
# the same page without the rename: its Origin gives it away
check "cross-origin: 403" test "$(code -X POST "$BASE/v1/rules" -H 'Content-Type: text/plain' \
    -H 'Origin: http://evil.example' --data-binary "$EVIL_RULES")" = 403
check "cross-origin: says why" grep -q "Origin 'http://evil.example' is not this server's" "$TMP/body"
# an Origin of another port of the same address is another site
check "another port: 403" test "$(code -X PUT "${J[@]}" "$BASE/v1/rules/api" \
    -H "Origin: http://127.0.0.1:1" -d '{"algorithm":"gcra","limit":1,"window":"1s"}')" = 403
check "Sec-Fetch-Site cross-site: 403" test "$(code -X PUT "${J[@]}" "$BASE/v1/rules/api" \
    -H 'Sec-Fetch-Site: cross-site' -d '{"algorithm":"gcra","limit":1,"window":"1s"}')" = 403
# a form's body (what curl -d sends) and text/plain, even with no Origin: 415
check "form body: 415" test "$(code -X POST "$BASE/v1/rules" --data-binary "$EVIL_RULES")" = 415
check "form body: says what to send" grep -q "application/yaml (or application/json), not 'application/x-www-form-urlencoded'" "$TMP/body"
check "text/plain allow: 415" test "$(code -X POST "$BASE/v1/allow" -H 'Content-Type: text/plain' \
    -d '{"rule":"api","key":"victim"}')" = 415
# a body with no type at all (a page's fetch of a Blob or bytes sends none)
check "no type: 415" test "$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$BASE/v1/allow" \
    -H 'Content-Type:' --data-binary '{"rule":"api","key":"victim"}')" = 415
check "no type: says none" grep -q "not none" "$TMP/body"
check "the victim's key was never charged" matches "$(redis-cli -p "$RESP_PORT" SL.PEEK api victim | tr '\n' ' ')" '^1 100 100 '
check "DELETE without a header: 403" test "$(code -X DELETE "$BASE/v1/rules/api")" = 403
check "DELETE: says which header" grep -q "X-Sluice-Client" "$TMP/body"
check "after all that, the rule is unchanged" test "$(rule)" = "$before"
# reads under a foreign name are refused too (DNS rebinding reads what it likes otherwise)
check "rebinding read: 421" test "$(code -H 'Host: evil.example:'"$HTTP_PORT" "$BASE/v1/rules")" = 421
check "rebinding console: 421" test "$(code -H 'Host: evil.example' "$BASE/ui/")" = 421
check "a Host that is no name: 421" test "$(code -H 'Host: a@b' "$BASE/v1/rules")" = 421
# proxies and monitors name the server as they like
check "/v1/auth: any Host" test "$(code -H 'Host: shop.example' "$BASE/v1/auth/api?key=p")" = 204
check "/metrics: any Host" test "$(code -H 'Host: prometheus.target' "$BASE/metrics")" = 200
check "/healthz: any Host" test "$(code -H 'Host: lb.example' "$BASE/healthz")" = 200
# programs, the console, and the names given
check "JSON PUT: 200" test "$(code -X PUT "${J[@]}" "$BASE/v1/rules/fresh" \
    -d '{"algorithm":"gcra","limit":5,"window":"1s"}')" = 200
check "the console's own origin: 200" test "$(code -X PUT "${J[@]}" "$BASE/v1/rules/fresh" \
    -H "Origin: http://127.0.0.1:$HTTP_PORT" -H 'Sec-Fetch-Site: same-origin' \
    -d '{"algorithm":"gcra","limit":6,"window":"1s"}')" = 200
check "localhost is this server: 200" test "$(code -X POST "${J[@]}" \
    "http://localhost:$HTTP_PORT/v1/allow" -H "Origin: http://localhost:$HTTP_PORT" \
    -d '{"rule":"fresh","key":"k"}')" = 200
check "--http-host name: 200" test "$(code -X POST "${J[@]}" "$BASE/v1/allow" \
    -H 'Host: Limiter.Test' -H 'Origin: https://limiter.test' -d '{"rule":"fresh","key":"k"}')" = 200
check "YAML import: 200" test "$(code -X POST -H 'Content-Type: application/yaml' "$BASE/v1/rules" \
    --data-binary $'rules:\n  - name: more\n    algorithm: gcra\n    limit: 1\n    window: 1s\n')" = 200
check "DELETE with X-Sluice-Client: 204" test "$(code -X DELETE -H 'X-Sluice-Client: it' \
    "$BASE/v1/rules/more")" = 204
check "DELETE with the JSON type: 204" test "$(code -X DELETE "${J[@]}" "$BASE/v1/rules/fresh")" = 204
check "a read-only path answers 405, not 415" test "$(code -X POST "$BASE/v1/stats")" = 405
check "counted: host" test "$(metric 'sluice_http_refused_total{reason="host"}')" = 4
check "counted: origin" test "$(metric 'sluice_http_refused_total{reason="origin"}')" = 3
check "counted: content_type" test "$(metric 'sluice_http_refused_total{reason="content_type"}')" = 4
check "logged with the peer" grep -q "WARN HTTP: refused POST /v1/rules from 127.0.0.1:[0-9]*: Host 'evil.example' is not a name of this server" "$TMP/open.log"
check "no CORS" bash -c "! grep -qi '^access-control' <(curl -s -D - -o /dev/null -X OPTIONS \
    -H 'Origin: http://evil.example' -H 'Access-Control-Request-Method: PUT' '$BASE/v1/rules/api')"
check "open stops cleanly" stop_bg open TERM

# with a token: a cross-site POST /v1/settle (no token needed to settle) is refused
start_sluiced tok --rules "$TMP/rules.yaml" --config-store "$TMP/tok.db" --snapshot "" \
    --admin-token s3cret --requirepass pw --admin-password adm || { cat "$TMP/tok.log"; exit 1; }
BASE=http://127.0.0.1:$HTTP_PORT
redis-cli -p "$RESP_PORT" -a pw --no-auth-warning SL.ALLOW tok held COST 50 >/dev/null
check "settle from another site: 403" test "$(code -X POST "$BASE/v1/settle" \
    -H 'Content-Type: text/plain' -H 'Origin: http://evil.example' \
    -d '{"rule":"tok","key":"held","reserved":50,"actual":0}')" = 403
check "settle from another site: nothing given back" matches \
    "$(redis-cli -p "$RESP_PORT" -a pw --no-auth-warning SL.PEEK tok held | tr '\n' ' ')" '^1 100 50 '
check "settle from a program: 200" test "$(code -X POST "${J[@]}" "$BASE/v1/settle" \
    -d '{"rule":"tok","key":"held","reserved":50,"actual":0}')" = 200

# ---- 2. guessing --------------------------------------------------------------------------------
# 12 wrong AUTHs pipelined on one connection (both users), then PING: 12 WRONGPASS and the
# PING's NOAUTH, in order; the 6th to the 12th held back; meanwhile another connection from the
# same address is served (its answer arrives while the first still waits); then a right password
# clears the address, and the next failure is answered at once
PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" timeout 60 python3 - "$RESP_PORT" \
    >"$TMP/burst.out" 2>&1 <<'PY'
import socket, sys
from resp_client import Conn, enc
port = int(sys.argv[1])
a = Conn(port)
cmds = [("AUTH", "admin", "wrong%d" % i) if i % 3 == 0 else ("AUTH", "wrong%d" % i)
        for i in range(12)]
a.s.sendall(b"".join(enc(c) for c in cmds) + enc(("PING",)))
first = [a.reply() for _ in range(5)]  # answered at once
print("first5", all(r.startswith("-WRONGPASS") for r in first))
b = Conn(port)
print("other", b.call("PING"))  # served while the held replies wait (NOAUTH: not yet AUTHed)
a.s.setblocking(False)
try:
    a.buf += a.s.recv(1 << 16)
except BlockingIOError:
    pass
a.s.setblocking(True)
print("waiting", a.buf.count(b"\r\n") < 8)  # the first's last replies were not there yet
rest = [a.reply() for _ in range(8)]
print("rest", all(r.startswith("-WRONGPASS") for r in rest[:7]), rest[7])
print("right", b.call("AUTH", "pw"))
c = Conn(port)
print("after", c.call("AUTH", "nope")[:10])
PY
check "burst: five answered at once" grep -qx "first5 True" "$TMP/burst.out"
check "burst: another client served meanwhile" grep -qx "other -NOAUTH Authentication required." "$TMP/burst.out"
check "burst: ... before the first's held replies" grep -qx "waiting True" "$TMP/burst.out"
check "burst: the rest in order, then the PING's answer" grep -qx "rest True -NOAUTH Authentication required." "$TMP/burst.out"
check "burst: a right password" grep -qx "right OK" "$TMP/burst.out"
check "burst: counted exactly" test "$(metric 'sluice_auth_failures_total{protocol="resp"}')" = 13
check "burst: seven held back, none after the right password" test "$(metric sluice_auth_delayed_total)" = 7
check "burst: logged with the peer" grep -q "WARN RESP: wrong password for user 'admin' from 127.0.0.1:[0-9]* (1 from this address in the last minute)" "$TMP/tok.log"
check "burst: the slowdown logged" grep -q "WARN RESP: slowing down 127.0.0.1:[0-9]*: 6 wrong passwords from its address in the last minute; this reply held back 50 ms" "$TMP/tok.log"
# wrong admin tokens over HTTP (the same address: its count is shared with RESP, so a right
# token clears it first): 8 in a row, 3 held back; the right one clears; the next is free
check "tokens: the right one first" test "$(code -H 'Authorization: Bearer s3cret' "$BASE/v1/rules/api/overrides")" = 200
for i in 1 2 3 4 5 6 7 8; do
    code -X DELETE -H 'X-Sluice-Client: guesser' -H "Authorization: Bearer guess$i" "$BASE/v1/rules/api" >>"$TMP/tokens.out"
    echo >>"$TMP/tokens.out"
done
check "tokens: each refused 401" test "$(grep -c '^401$' "$TMP/tokens.out")" = 8
check "tokens: counted exactly" test "$(metric 'sluice_auth_failures_total{protocol="http"}')" = 8
check "tokens: three held back" test "$(metric sluice_auth_delayed_total)" = 10
check "tokens: logged with the peer" grep -q "WARN HTTP: wrong admin token from 127.0.0.1:[0-9]*" "$TMP/tok.log"
check "tokens: the right one" test "$(code -H 'Authorization: Bearer s3cret' "$BASE/v1/rules/api/overrides")" = 200
check "tokens: the address cleared" test "$(code -H 'Authorization: Bearer guess9' "$BASE/v1/rules/api/overrides")" = 401
check "tokens: not held" test "$(metric sluice_auth_delayed_total)" = 10
# a full queue: 40 wrong AUTHs pipelined get fewer than 40 answers (the address's queue of held
# replies reaches 10 s), then the connection closes; the PING after them never runs
PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" timeout 60 python3 - "$RESP_PORT" \
    >"$TMP/flood.out" 2>&1 <<'PY'
import socket, sys
from resp_client import enc
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"".join(enc(("AUTH", "x%d" % i)) for i in range(40)) + enc(("PING",)))
s.settimeout(50)
data = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    data += d
print("answers", data.count(b"-WRONGPASS"), "ping", b"NOAUTH" in data)
PY
check "flood: closed before all were answered" matches "$(cat "$TMP/flood.out")" '^answers (1[0-9]|2[0-9]|3[0-9]) ping False$'
check "tok stops cleanly" stop_bg tok TERM

# ---- 3. changes logged --------------------------------------------------------------------------
start_sluiced chg --rules "$TMP/rules.yaml" --config-store "$TMP/chg.db" --snapshot "" \
    --admin-token s3cret --admin-password adm || { cat "$TMP/chg.log"; exit 1; }
BASE=http://127.0.0.1:$HTTP_PORT
PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$RESP_PORT" >"$TMP/chg.out" 2>&1 <<'PY'
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
c.call("AUTH", "admin", "adm")
c.call("CLIENT", "SETNAME", "deployer")
info = c.call("CLIENT", "INFO").decode()
print("port", info.split("addr=127.0.0.1:")[1].split()[0])
print(c.call("SL.RULE", "SET", "made", '{"algorithm":"gcra","limit":3,"window":"1s"}'))
print(c.call("SL.OVERRIDE", "SET", "made", "tenant:\x01acme", '{"limit":9}'))
print(c.call("SL.OVERRIDE", "DEL", "made", "tenant:\x01acme"))
print(c.call("SL.RULE", "DEL", "made"))
PY
P=$(awk '$1 == "port" {print $2}' "$TMP/chg.out")
check "RESP: rule set" grep -q "INFO rule 'made' set by RESP 127.0.0.1:$P, user admin, client 'deployer': {\"name\":\"made\",\"algorithm\":\"gcra\",\"limit\":3" "$TMP/chg.log"
check "RESP: override set, its key escaped" grep -q "INFO override of rule 'made' for key 'tenant:\\\\x01acme' set by RESP 127.0.0.1:$P, user admin, client 'deployer': {" "$TMP/chg.log"
check "RESP: override deleted" grep -q "INFO override of rule 'made' for key 'tenant:\\\\x01acme' deleted by RESP 127.0.0.1:$P" "$TMP/chg.log"
check "RESP: rule deleted" grep -q "INFO rule 'made' deleted by RESP 127.0.0.1:$P, user admin, client 'deployer'$" "$TMP/chg.log"
AUTHH=(-H 'Authorization: Bearer s3cret' -H 'X-Sluice-Client: ci-job 7')
code -X PUT "${J[@]}" "${AUTHH[@]}" "$BASE/v1/rules/web" -d '{"algorithm":"gcra","limit":2,"window":"1s"}' >/dev/null
check "HTTP: rule set" grep -q "INFO rule 'web' set by HTTP 127.0.0.1:[0-9]*, admin token, client 'ci-job 7': {" "$TMP/chg.log"
code -X PUT "${J[@]}" "${AUTHH[@]}" "$BASE/v1/rules/web/overrides/vip" -d '{"limit":5}' >/dev/null
check "HTTP: override set" grep -q "INFO override of rule 'web' for key 'vip' set by HTTP 127.0.0.1:[0-9]*, admin token, client 'ci-job 7'" "$TMP/chg.log"
code -X POST -H 'Content-Type: application/yaml' "${AUTHH[@]}" "$BASE/v1/rules" \
    --data-binary $'rules:\n  - name: imported\n    algorithm: gcra\n    limit: 1\n    window: 1s\n' >/dev/null
check "HTTP: import, by whom" grep -q "INFO POST /v1/rules by HTTP 127.0.0.1:[0-9]*, admin token, client 'ci-job 7'" "$TMP/chg.log"
check "HTTP: import, what" grep -q "INFO POST /v1/rules: added 1 rules: imported" "$TMP/chg.log"
redis-cli -p "$RESP_PORT" --user admin --pass adm --no-auth-warning SL.RULE IMPORT \
    $'rules:\n  - name: viaresp\n    algorithm: gcra\n    limit: 1\n    window: 1s\n' >/dev/null
check "RESP: import, by whom" grep -q "INFO SL.RULE IMPORT by RESP 127.0.0.1:[0-9]*, user admin" "$TMP/chg.log"
sed -i 's/limit: 100/limit: 99/' "$TMP/rules.yaml"
kill -HUP "$(cat "$TMP/chg.pid")"
check "SIGHUP: the reload and its changes" wait_log chg "INFO SIGHUP: rules file $TMP/rules.yaml: changed 2 rules: api, tok"
check "chg stops cleanly" stop_bg chg TERM

# ---- 4. empty secrets -----------------------------------------------------------------------
refused() { # WANT ARGS..: sluiced exits non-zero saying WANT
    local want=$1 out
    shift
    out=$(env "${ENVS[@]}" "$SLUICED" --port 0 --http-port "$(free_port)" --grpc-port 0 \
        --snapshot "" --config-store "$TMP/e.db" "$@" 2>&1)
    [ $? -ne 0 ] && grep -qF -- "$want" <<<"$out" || { echo "  got: $out"; return 1; }
}
ENVS=(SLUICE_UNUSED=1)
check "--requirepass ''" refused "--requirepass: must not be empty" --requirepass ''
check "--admin-token=" refused "--admin-token: must not be empty" --admin-token=
check "--admin-password ''" refused "--admin-password: must not be empty" --admin-password ''
printf 'admin_password: ""\n' >"$TMP/empty.yaml"
check "admin_password in the file" refused "$TMP/empty.yaml: line 1, column 17: admin_password: must not be empty" \
    --config "$TMP/empty.yaml"
for v in SLUICE_REQUIREPASS SLUICE_ADMIN_TOKEN SLUICE_ADMIN_PASSWORD; do
    ENVS=("$v=")
    check "$v set but empty" refused "$v is set but empty: unset it to have no secret, or give one"
done
finish
