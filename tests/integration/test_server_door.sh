#!/usr/bin/env bash
# test_server_door.sh - the admin door, probed as an attacker would, with curl and raw sockets:
#
#   1. browsers: the exact probe that found the hole (POST /v1/rules, text/plain, Origin and
#      Host evil.example) is refused and changes nothing; so are a foreign Host on reads
#      (DNS rebinding), a foreign Origin, Sec-Fetch-Site cross-site, a form's body type, a
#      DELETE without X-Sluice-Client, and with a token set a cross-site POST /v1/settle; what
#      programs send still works; /v1/auth, /metrics and /healthz answer any Host; --http-host
#      names a server; every refusal counted by reason.
#   2. guessing: a burst of wrong AUTHs (both users) counted exactly; the sixth held back, then
#      the address hot: every attempt refused unchecked and held, in order, while others are
#      served; a right password of either user (AUTH, HELLO) from a hot address refused, and a
#      right one in between clears nothing; the admin token the same (429, Retry-After); a held
#      refusal's connection closed when its client closes; a full queue closes the connection
#      unanswered; a loop of "connect, AUTH wrong, close" leaves no connection open while PING
#      and /healthz are answered; log lines name the peer.
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
# Each part speaks from an address of its own (127.0.0.N): the guard counts per address, and an
# address cools only a minute after its last attempt. RESP from Python bound to the address,
# HTTP with curl --interface. Claims are counted or ordered, never timed.
cat >"$TMP/src_conn.py" <<'PY'
import socket, time, urllib.request
from resp_client import Conn, enc
class From(Conn):
    """A RESP connection to 127.0.0.1:port from source address src."""
    def __init__(self, port, src):
        self.s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
        self.s.settimeout(60)
        self.buf = b""
    def rest(self):
        """Everything the server still sends, until it closes: bytes."""
        data = self.buf
        while True:
            d = self.s.recv(65536)
            if not d:
                return data
            data += d
def metric(http, name):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http).read().decode()
    return int(float([l.split()[1] for l in body.splitlines() if l.split()[:1] == [name]][0]))
def poll_metric(http, name, at_least):
    """Waits (20 s at most) until the metric reaches at_least; whether it did."""
    for _ in range(400):
        if metric(http, name) >= at_least:
            return True
        time.sleep(0.05)
    return False
PY
export PYTHONPATH="$TMP:$SLUICE_SOURCE_DIR/tests/integration"
HOT='-ERR too many failed AUTH attempts from your address; retry in (5[0-9]|60) s'
MARKED=('sluice_auth_failures_total{protocol="resp"}' 'sluice_auth_locked_total{protocol="resp"}'
    'sluice_auth_failures_total{protocol="http"}' 'sluice_auth_locked_total{protocol="http"}'
    sluice_auth_delayed_total sluice_auth_dropped_total)
mark() { local m; for m in "${MARKED[@]}"; do echo "$m $(metric "$m")"; done >"$TMP/mark"; }
# grew NAME N: the metric grew by exactly N since mark
grew() {
    local was now
    was=$(awk -v m="$1" '$1 == m {print $2}' "$TMP/mark")
    now=$(metric "$1")
    [ "$((now - was))" = "$2" ] || { echo "  $1 grew by $((now - was)), want $2"; return 1; }
}

# a. 18 wrong AUTHs pipelined on one connection (both users), then PING: five WRONGPASS, the
# sixth held back, and from then on the address hot: the rest refused unchecked, each held behind
# the one before (the 18th 9.55 s out). Meanwhile others are served: another address logs in,
# and /metrics, read after that, still counts replies held (a state of the queue, read while it
# is served). Then every reply arrives, in order, and the PING's after them.
mark
timeout 60 python3 - "$RESP_PORT" "$HTTP_PORT" >"$TMP/burst.out" 2>&1 <<'PY'
import sys
from src_conn import From, enc, metric, poll_metric
port, http = int(sys.argv[1]), int(sys.argv[2])
held0 = metric(http, "sluice_auth_delayed_total")
a = From(port, "127.0.0.2")
cmds = [("AUTH", "admin", "wrong%d" % i) if i % 3 == 0 else ("AUTH", "wrong%d" % i)
        for i in range(18)]
a.s.sendall(b"".join(enc(c) for c in cmds) + enc(("PING",)))
first = [a.reply() for _ in range(5)]
print("first5", all(r.startswith("-WRONGPASS") for r in first))
print("all taken", poll_metric(http, "sluice_auth_delayed_total", held0 + 13))
b = From(port, "127.0.0.3")
print("other", b.call("PING"), b.call("AUTH", "pw"), b.call("PING"))
print("held meanwhile", metric(http, "sluice_held_replies") > 0)
rest = [a.reply() for _ in range(14)]
print("sixth", rest[0])
for r in rest[1:]:
    print("hot", r)
PY
check "burst: five answered" grep -qx "first5 True" "$TMP/burst.out"
check "burst: every AUTH taken" grep -qx "all taken True" "$TMP/burst.out"
check "burst: another address served meanwhile" grep -qx "other -NOAUTH Authentication required. OK PONG" "$TMP/burst.out"
check "burst: ... while replies were held" grep -qx "held meanwhile True" "$TMP/burst.out"
check "burst: the sixth a WRONGPASS" grep -qx "sixth -WRONGPASS invalid username-password pair or user is disabled." "$TMP/burst.out"
check "burst: twelve refused unchecked, saying when to retry" test "$(grep -cE "^hot $HOT$" "$TMP/burst.out")" = 12
check "burst: then the PING's answer" grep -qx "hot -NOAUTH Authentication required." "$TMP/burst.out"
check "burst: six wrong passwords counted" grew 'sluice_auth_failures_total{protocol="resp"}' 6
check "burst: twelve locked out" grew 'sluice_auth_locked_total{protocol="resp"}' 12
check "burst: thirteen held back" grew sluice_auth_delayed_total 13
check "burst: logged with the peer" grep -q "WARN RESP: wrong password for user 'admin' from 127.0.0.2:[0-9]* (failure 1 from this address without a minute's pause)" "$TMP/tok.log"
check "burst: the slowdown logged" grep -q "WARN RESP: slowing down 127.0.0.2:[0-9]*: failure 6 from its address without a minute's pause; this reply held back 50 ms" "$TMP/tok.log"
check "burst: the lockout logged" grep -q "WARN RESP: AUTH for user 'admin' from 127.0.0.2:[0-9]* refused: its address is locked (failure 7 without a minute's pause)" "$TMP/tok.log"

# b. a right password of the other user after every five wrong ones clears nothing (the attack a
# client knowing --requirepass could make on the admin password): the sixth wrong one is held,
# and then the right passwords, of either user, AUTH or HELLO, are refused like any guess: the
# reply tells nothing, and nothing is logged in (the connection is not authenticated)
mark
timeout 60 python3 - "$RESP_PORT" >"$TMP/mixed.out" 2>&1 <<'PY'
import sys
from src_conn import From
port = int(sys.argv[1])
a = From(port, "127.0.0.4")
print("first", a.call("AUTH", "pw"))
print("five", [a.call("AUTH", "admin", "guess%d" % i)[:10] for i in range(5)])
print("again", a.call("AUTH", "pw"))
print("sixth", a.call("AUTH", "admin", "guess5")[:10])
print("right", a.call("AUTH", "pw"))
print("admin", a.call("AUTH", "admin", "adm"))
n = From(port, "127.0.0.4")
hello = n.call("HELLO", "2", "AUTH", "default", "pw")
print("hello", hello)
print("not in", n.call("PING"))
PY
check "mixed: the right password first" grep -qx "first OK" "$TMP/mixed.out"
check "mixed: five wrong" grep -qx "five \['-WRONGPASS', '-WRONGPASS', '-WRONGPASS', '-WRONGPASS', '-WRONGPASS'\]" "$TMP/mixed.out"
check "mixed: a right one before the sixth" grep -qx "again OK" "$TMP/mixed.out"
check "mixed: the sixth wrong one" grep -qx "sixth -WRONGPASS" "$TMP/mixed.out"
check "mixed: then the right password refused" grep -qE "^right $HOT$" "$TMP/mixed.out"
check "mixed: the admin's too" grep -qE "^admin $HOT$" "$TMP/mixed.out"
check "mixed: HELLO AUTH too" grep -qE "^hello $HOT$" "$TMP/mixed.out"
check "mixed: and nothing logged in" grep -qx "not in -NOAUTH Authentication required." "$TMP/mixed.out"
check "mixed: six wrong passwords" grew 'sluice_auth_failures_total{protocol="resp"}' 6
check "mixed: three right ones locked out" grew 'sluice_auth_locked_total{protocol="resp"}' 3
check "mixed: four held back" grew sluice_auth_delayed_total 4

# c. the admin token likewise: five wrong, the right one, the sixth wrong (held), then the right
# one refused with 429 and Retry-After, its DELETE not done
mark
tok() { code --interface 127.0.0.5 -D "$TMP/head" "$@" "$BASE/v1/rules/api/overrides"; }
check "tokens: the right one" test "$(tok -H 'Authorization: Bearer s3cret')" = 200
for i in 1 2 3 4 5; do
    tok -H "Authorization: Bearer guess$i" >>"$TMP/tokens.out"
    echo >>"$TMP/tokens.out"
done
check "tokens: five refused 401" test "$(grep -c '^401$' "$TMP/tokens.out")" = 5
check "tokens: the right one still" test "$(tok -H 'Authorization: Bearer s3cret')" = 200
check "tokens: the sixth wrong one 401" test "$(tok -H 'Authorization: Bearer guess6')" = 401
check "tokens: then the right one 429" test "$(tok -H 'Authorization: Bearer s3cret')" = 429
check "tokens: ... with Retry-After" grep -qiE '^Retry-After: (5[0-9]|60)' "$TMP/head"
check "tokens: ... saying why" grep -qE '"detail":"too many failed admin token attempts from your address; retry in (5[0-9]|60) s"' "$TMP/body"
check "tokens: a right DELETE refused" test "$(code --interface 127.0.0.5 -X DELETE \
    -H 'X-Sluice-Client: it' -H 'Authorization: Bearer s3cret' "$BASE/v1/rules/tok")" = 429
check "tokens: ... and not done" test "$(code "$BASE/v1/rules/tok")" = 200
check "tokens: six wrong counted" grew 'sluice_auth_failures_total{protocol="http"}' 6
check "tokens: two locked out" grew 'sluice_auth_locked_total{protocol="http"}' 2
check "tokens: three held back" grew sluice_auth_delayed_total 3
check "tokens: logged with the peer" grep -q "WARN HTTP: wrong admin token from 127.0.0.5:[0-9]*" "$TMP/tok.log"
check "tokens: the lockout logged" grep -q "WARN HTTP: admin token from 127.0.0.5:[0-9]* refused: its address is locked" "$TMP/tok.log"

# d. a held refusal does not keep a connection its client closed: with the address's queue
# filling (16 replies pipelined on one connection, the last 7.55 s out, all taken: counted), a
# new connection's AUTH, the right password, is held behind them; its client closes its side,
# and the server closes it without a word (not dropped for the queue: counted). One that asked
# for something else too (a PING) gets both answers, then is closed.
mark
timeout 60 python3 - "$RESP_PORT" "$HTTP_PORT" >"$TMP/drop.out" 2>&1 <<'PY'
import socket, sys
from src_conn import From, enc, metric, poll_metric
port, http = int(sys.argv[1]), int(sys.argv[2])
held0 = metric(http, "sluice_auth_delayed_total")
q = From(port, "127.0.0.6")
q.s.sendall(b"".join(enc(("AUTH", "q%d" % i)) for i in range(16)))
print("queued", poll_metric(http, "sluice_auth_delayed_total", held0 + 11))
d = From(port, "127.0.0.6")
d.s.sendall(enc(("AUTH", "pw")))
d.s.shutdown(socket.SHUT_WR)
print("dropped", d.rest())
k = From(port, "127.0.0.6")
k.s.sendall(enc(("AUTH", "x")) + enc(("PING",)))
k.s.shutdown(socket.SHUT_WR)
print("kept", k.rest().decode().replace("\r\n", "|"))
PY
check "droppable: the queue filled first" grep -qx "queued True" "$TMP/drop.out"
check "droppable: closed without its reply" grep -qx "dropped b''" "$TMP/drop.out"
check "droppable: not when another answer is owed" grep -qE "^kept $HOT\|-NOAUTH Authentication required.\|$" "$TMP/drop.out"
check "droppable: both held, none dropped for the queue" grew sluice_auth_delayed_total 13
check "droppable: ..." grew sluice_auth_dropped_total 0

# e. a full queue: 40 wrong AUTHs pipelined; once a reply would wait more than 10 s the
# connection is closed at once, unanswered: the PING after them never runs
mark
timeout 60 python3 - "$RESP_PORT" >"$TMP/flood.out" 2>&1 <<'PY'
import sys
from src_conn import From, enc
f = From(int(sys.argv[1]), "127.0.0.7")
f.s.sendall(b"".join(enc(("AUTH", "x%d" % i)) for i in range(40)) + enc(("PING",)))
data = f.rest()
print("answers", data.count(b"\r\n"), "ping", b"NOAUTH" in data)
PY
check "flood: closed before a reply waited over 10 s" matches "$(cat "$TMP/flood.out")" '^answers ([0-9]|1[0-8]) ping False$'
check "flood: the drop counted" grew sluice_auth_dropped_total 1
# f. the abuse that held connections open: 2000 times "connect, AUTH wrong, close" from one
# address. Every attempt is counted, each after the fifth held or dropped; a connection kept
# open (authenticated) is answered PING every 100, and one keep-alive HTTP connection /healthz;
# and the open connections come back to what they were (/metrics, polled)
mark
timeout 120 python3 - "$RESP_PORT" "$HTTP_PORT" >"$TMP/abuse.out" 2>&1 <<'PY'
import http.client, socket, sys, time
from src_conn import From, enc
port, http_port = int(sys.argv[1]), int(sys.argv[2])
p = From(port, "127.0.0.1")
print("p", p.call("AUTH", "pw"))
h = http.client.HTTPConnection("127.0.0.1", http_port, timeout=60)
def get(path):
    h.request("GET", path)
    r = h.getresponse()
    return r.status, r.read().decode()
def clients():
    body = get("/metrics")[1]
    return int([l.split()[1] for l in body.splitlines() if l.startswith("sluice_clients ")][0])
base = clients()
pongs = healthz = 0
for i in range(2000):
    s = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.8", 0))
    s.sendall(enc(("AUTH", "guess%d" % i)))
    s.close()
    if i % 100 == 99:
        pongs += p.call("PING") == "PONG"
        healthz += get("/healthz")[0] == 200
print("served", pongs, healthz)
for _ in range(600):
    if clients() == base:
        break
    time.sleep(0.05)
print("clients back", clients() == base)
PY
check "abuse: the kept connection logged in" grep -qx "p OK" "$TMP/abuse.out"
check "abuse: PING and /healthz answered throughout" grep -qx "served 20 20" "$TMP/abuse.out"
check "abuse: no connection left open" grep -qx "clients back True" "$TMP/abuse.out"
check "abuse: every attempt counted" test "$(( $(metric 'sluice_auth_failures_total{protocol="resp"}') + $(metric 'sluice_auth_locked_total{protocol="resp"}') - $(awk '$1 == "sluice_auth_failures_total{protocol=\"resp\"}" || $1 == "sluice_auth_locked_total{protocol=\"resp\"}" {n += $2} END {print n}' "$TMP/mark") ))" = 2000
check "abuse: after the fifth, each held or dropped" test "$(( $(metric sluice_auth_delayed_total) + $(metric sluice_auth_dropped_total) - $(awk '$1 == "sluice_auth_delayed_total" || $1 == "sluice_auth_dropped_total" {n += $2} END {print n}' "$TMP/mark") ))" = 1995
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
