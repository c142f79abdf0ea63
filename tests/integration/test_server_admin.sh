#!/usr/bin/env bash
# test_server_admin.sh - admin safety on the RESP port: a web page that makes a browser POST to
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
finish
