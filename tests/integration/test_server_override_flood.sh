#!/usr/bin/env bash
# test_server_override_flood.sh - the probe that let blocked keys through: 200 keys overridden to
# limit 0, first asked during a pipelined flood of 40,000 distinct keys (four connections
# sending 10,000 each at once) on a rule whose on_store_error is allow. Each key's override is
# looked up on the config thread; more lookups than a loop may have in flight used to fall to
# on_store_error and admit blocked keys. Now they wait their turn: no blocked key is admitted,
# no decision is made by on_store_error, every decision is answered. With the memory store,
# then with the Redis store (sluice.so when it is built, else the Lua scripts).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli redis-server curl

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: fixed_window
    limit: 1000000
    window: 1h
    on_store_error: allow
YAML
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

# flood LABEL: the flood against RESP_PORT; writes "decisions blocked_admitted store_errors" to
# $TMP/LABEL.out
flood() {
    PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" timeout 240 python3 - "$RESP_PORT" \
        >"$TMP/$1.out" 2>"$TMP/$1.err" <<'PY'
import socket, sys, threading
from resp_client import Conn, enc
port = int(sys.argv[1])
CONNS, PER = 4, 10000

def commands(c):
    cmds = []
    for i in range(PER):
        n = c * PER + i
        if n % 200 == 100:  # one blocked key every 200 requests: 200 of them, none asked before
            cmds.append(("SL.ALLOW", "api", "blocked:%d" % (n // 200)))
        else:
            cmds.append(("SL.ALLOW", "api", "flood:%d" % n))
    return cmds

def replies(sock, count):
    """count replies read from sock: SL.ALLOW's first integer (allowed), or an error's text."""
    c = Conn.__new__(Conn)
    c.s, c.buf = sock, b""
    out = []
    for _ in range(count):
        r = c.reply()
        out.append(r if isinstance(r, str) else r[0])
    return out

results = [None] * CONNS
def one(c):
    cmds = commands(c)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(200)
    sender = threading.Thread(target=lambda: s.sendall(b"".join(enc(x) for x in cmds)))
    sender.start()
    got = replies(s, len(cmds))
    sender.join()
    results[c] = list(zip(cmds, got))

threads = [threading.Thread(target=one, args=(c,)) for c in range(CONNS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
decisions = admitted = errors = 0
for r in results:
    for (cmd, reply) in r or []:
        decisions += 1
        if isinstance(reply, str):
            errors += 1
        elif cmd[2].startswith("blocked:") and reply == 1:
            admitted += 1
print(decisions, admitted, errors)
PY
}

# overrides BLOCKED: the 200 blocked keys, set through SL.OVERRIDE
overrides() {
    for i in $(seq 0 199); do
        printf 'SL.OVERRIDE SET api blocked:%d {"limit":0}\r\n' "$i"
    done | redis-cli -p "$RESP_PORT" --pipe >/dev/null
}

# run LABEL: the flood on the sluiced started, and its checks
run() {
    local label=$1
    overrides
    check "$label-overrides" test "$(redis-cli -p "$RESP_PORT" SL.OVERRIDE LIST api 0 COUNT 1000 | grep -c '^blocked:')" -eq 200
    flood "$label"
    read -r DECISIONS ADMITTED ERRORS <"$TMP/$label.out" || { cat "$TMP/$label.err"; }
    check "$label-all-answered" test "${DECISIONS:-0}" -eq 40000
    check "$label-no-blocked-admitted" test "${ADMITTED:-1}" -eq 0
    check "$label-no-errors" test "${ERRORS:-1}" -eq 0
    check "$label-blocked-still" bash -c "[[ \"\$(redis-cli -p $RESP_PORT SL.ALLOW api blocked:7 | head -1)\" == 0 ]]"
    check "$label-no-lookup-failures" test \
        "$(metric 'sluice_override_lookup_failures_total{reason="error",decided_by="on_store_error"}')" -eq 0
    echo "$label: $(metric sluice_override_lookup_waits_total) decisions waited for a free lookup"
}

start_sluiced mem --rules "$TMP/rules.yaml" --config-store "$TMP/mem.db" --snapshot "" \
    --threads 2 || { cat "$TMP/mem.log"; exit 1; }
run memory
check memory-store-errors test \
    "$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk '$1 == "sluice_store_errors_total{rule=\"api\"}" {print $2}')" -eq 0
stop_bg mem TERM
check memory-exit-0 test $? -eq 0

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if [ -f "$MODULE" ]; then
    start_redis r --loadmodule "$MODULE" || { cat "$TMP/r.log"; exit 1; }
else
    start_redis r || { cat "$TMP/r.log"; exit 1; }
fi
start_sluiced red --rules "$TMP/rules.yaml" --config-store "$TMP/red.db" --snapshot "" \
    --threads 2 --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 10s ||
    { cat "$TMP/red.log"; exit 1; }
run redis
stop_bg red TERM
check redis-exit-0 test $? -eq 0
finish
