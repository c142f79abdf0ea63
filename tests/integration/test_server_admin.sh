#!/usr/bin/env bash
# test_server_admin.sh - admin safety. Deciding and administering are separate permissions: with
# --admin-password, only the RESP user "admin" may change rules, overrides and reset keys (the
# CLI with --user admin too); admin open to every client is refused beyond loopback unless
# --insecure-admin, and logged as a warning on loopback. A web page that makes a browser POST to
# 127.0.0.1:6390 runs nothing (the connection is closed at the request line, as Redis does);
# HELLO SETNAME sets no name before AUTH and checks names as CLIENT SETNAME does.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: login
    algorithm: sliding_log
    limit: 5
    window: 1h
YAML
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }

start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" \
    --admin-token secret || { cat "$TMP/s1.log"; exit 1; }

# 1. a browser's POST to the RESP port (what a form on any web page can make it send): its body
# lines would be commands; nothing runs, the connection is closed
curl -s -m 5 -X POST "http://127.0.0.1:$RESP_PORT/" -H 'Content-Type: text/plain' \
    --data-binary $'SL.RULE DEL login\r\nSL.OVERRIDE SET login x {"limit":0}\r\n' >"$TMP/post.out" 2>&1
check post-nothing-ran matches "$(cli SL.RULE LIST)" '^login$'
check post-no-override matches "$(cli SL.OVERRIDE GET login x)" '^$'
check post-logged grep -q "sent an HTTP request to the RESP port: possible cross-protocol attack" \
    "$TMP/s1.log"
check post-no-reply test ! -s "$TMP/post.out"
# the same with a Host: line first, and a GET
timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; printf "Host: 127.0.0.1\r\nSL.RULE DEL login\r\n" >&3; cat <&3' >"$TMP/host.out" 2>&1
check host-closed-silently test ! -s "$TMP/host.out"
check host-nothing-ran matches "$(cli SL.RULE LIST)" '^login$'
curl -s -m 5 "http://127.0.0.1:$RESP_PORT/?SL.RULE%20DEL%20login" >/dev/null 2>&1
check get-nothing-ran matches "$(cli SL.RULE LIST)" '^login$'
check serving matches "$(cli SL.ALLOW login k)" '^1 5 4 0 '
# a flood of them: every one counted, but the log gets a line per second at most, the lines left
# out counted in the next one ("and N more like it")
for i in $(seq 1 200); do
    timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; printf "POST / HTTP/1.1\r\n\r\n" >&3; cat <&3' >/dev/null 2>&1
done
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
check flood-counted matches "$(metric sluice_cross_protocol_total)" '^203$'
lines=$(grep -c "sent an HTTP request to the RESP port" "$TMP/s1.log")
told=$(grep -o 'and [0-9]* more like it' "$TMP/s1.log" | awk '{s += $2} END {print s + 0}')
check flood-log-bounded test "$((lines + told))" -le 203 -a "$lines" -lt 203
stop_bg s1 TERM

# 2. HELLO SETNAME: no name before AUTH; the same checks as CLIENT SETNAME
start_sluiced s2 --config-store "$TMP/store2.db" --snapshot "" --requirepass pw ||
    { cat "$TMP/s2.log"; exit 1; }
PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$RESP_PORT" >"$TMP/hello.out" 2>&1 <<'PY'
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
print(c.call("HELLO", "2", "SETNAME", "early"))
print(c.call("AUTH", "pw"))
print(c.call("CLIENT", "GETNAME"))
print(c.call("HELLO", "2", "SETNAME", "evil\r\nid=1 addr=forged"))
print(c.call("CLIENT", "GETNAME"))
print(c.call("HELLO", "2", "AUTH", "default", "pw", "SETNAME", "ok-name")[0])
print(c.call("CLIENT", "GETNAME"))
PY
check hello-noauth matches "$(sed -n 1p "$TMP/hello.out")" '^-NOAUTH HELLO must be called'
check hello-no-name-before-auth matches "$(sed -n 3p "$TMP/hello.out")" '^None$'
check hello-bad-name matches "$(sed -n 4p "$TMP/hello.out")" '^-ERR Client names cannot contain spaces'
check hello-bad-name-not-set matches "$(sed -n 5p "$TMP/hello.out")" '^None$'
check hello-name-set matches "$(sed -n 7p "$TMP/hello.out")" "^b'ok-name'$"
stop_bg s2 TERM

# 3. deciding and administering: separate users
start_sluiced s3 --rules "$TMP/rules.yaml" --config-store "$TMP/store3.db" --snapshot "" \
    --requirepass pw --admin-password 'ad min' || { cat "$TMP/s3.log"; exit 1; }
check admin-resp-not-warned bash -c "! grep -q 'open to every client that can connect over RESP' '$TMP/s3.log'"
check admin-http-warned grep -q "open to every client that can connect over HTTP; set --admin-token" "$TMP/s3.log"
dflt() { redis-cli -p "$RESP_PORT" -a pw --no-auth-warning "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
adm() { redis-cli -p "$RESP_PORT" --user admin --pass 'ad min' --no-auth-warning "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
check default-decides matches "$(dflt SL.ALLOW login k)" '^1 5 4 0 '
check default-no-rule-set matches "$(dflt SL.RULE SET x '{"algorithm":"gcra","limit":1,"window":"1s"}')" \
    "^NOPERM this user has no permissions to run the 'sl.rule' command"
check default-no-rule-list matches "$(dflt SL.RULE LIST)" '^NOPERM'
check default-no-override matches "$(dflt SL.OVERRIDE SET login k '{"limit":100}')" '^NOPERM'
check default-no-reset matches "$(dflt SL.RESET login k)" "^NOPERM this user has no permissions to run the 'sl.reset' command"
check default-kept-usage matches "$(dflt SL.PEEK login k)" '^1 5 4 0 '
check admin-rule-set matches "$(adm SL.RULE SET x '{"algorithm":"gcra","limit":1,"window":"1s"}')" '^OK$'
check admin-reset matches "$(adm SL.RESET login k)" '^OK$'
check admin-decides matches "$(adm SL.ALLOW login k)" '^1 5 4 0 '
check admin-wrong matches "$(redis-cli -p "$RESP_PORT" --user admin --pass nope --no-auth-warning PING 2>&1)" '^AUTH failed: WRONGPASS'
check admin-hello matches "$(cli HELLO 2 AUTH admin 'ad min')" '^server sluice '
check cli-default matches "$("$SLUICE" -p "$RESP_PORT" -a pw rules list 2>&1)" '^sluice: NOPERM'
check cli-admin matches "$("$SLUICE" -p "$RESP_PORT" --user admin -a 'ad min' rules list 2>&1 | tr '\n' ' ')" '^login x $'
stop_bg s3 TERM

# 4. admin open to everyone: refused beyond loopback (nothing is listened on), warned on loopback
"$SLUICED" --grpc-port 0 --bind 0.0.0.0 --port "$(free_port)" --http-port 0 --config-store "$TMP/store4.db" \
    --snapshot "" >"$TMP/open.out" 2>&1
check open-refused test $? -eq 2
check open-why grep -q "listening on 0.0.0.0, which is not loopback, with rule changes open to every client over RESP: set --admin-password" "$TMP/open.out"
"$SLUICED" --grpc-port 0 --bind 0.0.0.0 --port 0 --http-port "$(free_port)" --admin-password x \
    --config-store "$TMP/store4.db" --snapshot "" >"$TMP/open2.out" 2>&1
check open-http-refused test $? -eq 2
check open-http-why grep -q "over HTTP: set --admin-token" "$TMP/open2.out"
check loopback-warned grep -q "rule and override changes are open to every client that can connect over RESP; set --admin-password" "$TMP/s1.log"
finish
