#!/usr/bin/env bash
# test_server_auth_delay.sh - /v1/auth under a rule with max_delay holds the answer for the
# delay, then says 204, as nginx's `limit_req ... delay` holds the request. A held answer never
# delays another connection.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: paced
    algorithm: gcra
    limit: 1
    window: 2s
    burst: 0
    max_delay: 3s
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" \
    --threads 1 || { cat "$TMP/s1.log"; exit 1; }
URL="http://127.0.0.1:$HTTP_PORT/v1/auth/paced?key=k"

# the first passes at once; the second is admitted with the delay left of the 2 s after the
# first: its answer is held until 2 s after the first was admitted, so at least 2 s after the
# first was sent, however slow the machine (both are sent from one process, timed from the first)
PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$HTTP_PORT" "$URL" <<'PY' >"$TMP/held.out" 2>&1
import socket, sys, time, urllib.request
port, url = int(sys.argv[1]), sys.argv[2]
path = url[url.index("/v1/"):]
start = time.monotonic()
with urllib.request.urlopen(url, timeout=10) as r:
    print("first", r.status)
held = socket.create_connection(("127.0.0.1", port))
held.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
# another connection is served while the first answer is held
with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=10) as r:
    print("other", r.status)
held.settimeout(15)
head = held.recv(4096).decode()
print("held", head.split("\r\n")[0], "after_ds", int((time.monotonic() - start) * 10))
PY
check first grep -q "^first 204$" "$TMP/held.out"
check other-served grep -q "^other 200$" "$TMP/held.out"
check held-204 grep -q "^held HTTP/1.1 204" "$TMP/held.out"
# held until 2 s after the first admission (1.9 s: the clocks' milliseconds; a slow machine only
# makes it longer)
check held-long-enough test "$(sed -n 's/.*after_ds \([0-9]*\)$/\1/p' "$TMP/held.out")" -ge 19
stop_bg s1 TERM
check stop-exit-0 test $? -eq 0
finish
