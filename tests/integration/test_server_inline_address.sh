#!/usr/bin/env bash
# test_server_inline_address.sh - the probe that took the server-wide cap of inline rules: 8
# connections from one address each making 128 distinct SL.THROTTLE parameter sets (8 x 128 =
# --max-inline-rules, 1024). Together they stop at --max-inline-per-address (a quarter,
# 256), with an error naming the setting, counted and logged at a limited rate; a client from
# another address (127.0.0.2: loopback too) still makes its own, and CL.THROTTLE counts
# against the same cap.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli curl

start_sluiced s --config-store "$TMP/store.db" --snapshot "" --threads 2 ||
    { cat "$TMP/s.log"; exit 1; }
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

# flood SOURCE CONNS PER BASE: CONNS connections from SOURCE, each making PER distinct
# parameter sets (limits BASE + ...), all at once; prints "admitted refused" and the first error
flood() {
    PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" timeout 120 python3 - "$RESP_PORT" "$@" <<'PY'
import socket, sys, threading
from resp_client import Conn, enc
port, source, conns, per, base = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
results = [None] * conns
def one(c):
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    conn = Conn.__new__(Conn)
    conn.s, conn.buf = s, b""
    cmds = [("SL.THROTTLE", "k", "fixed_window", str(base + c * per + i), "60000") for i in range(per)]
    s.sendall(b"".join(enc(x) for x in cmds))
    results[c] = [conn.reply() for _ in cmds]
threads = [threading.Thread(target=one, args=(c,)) for c in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
replies = [r for rs in results for r in rs]
errors = [r for r in replies if isinstance(r, str)]
made = [base + c * per + i for c in range(conns) for i in range(per) if not isinstance(results[c][i], str)]
print(len(replies) - len(errors), len(errors))
print(errors[0] if errors else "")
print(made[0] if made else 0)
PY
}

flood 127.0.0.1 8 128 1 >"$TMP/one.out"
read -r OK REFUSED <"$TMP/one.out"
check one-address-capped test "$OK" -eq 256
check one-address-refused test "$REFUSED" -eq $((8 * 128 - 256))
check error-names-setting grep -q \
    '^-ERR the connections from 127.0.0.1 made 256 distinct inline rules, the most one client address may (--max-inline-per-address)' \
    "$TMP/one.out"
check refusals-counted test "$(metric 'sluice_inline_rule_refusals_total{cap="address"}')" -eq "$REFUSED"
check refusals-logged wait_log s "the connections from 127.0.0.1 made 256 distinct inline rules"
check log-rate-limited test "$(grep -c 'the connections from 127.0.0.1 made' "$TMP/s.log")" -lt "$REFUSED"

# another address gets its own share, as many as one connection may make
flood 127.0.0.2 1 128 5000 >"$TMP/two.out"
read -r OK2 REFUSED2 <"$TMP/two.out"
check other-address-served test "$OK2" -eq 128
check other-address-not-refused test "$REFUSED2" -eq 0
# the first address's rules serve anyone; CL.THROTTLE counts against the same cap
MADE=$(sed -n 3p "$TMP/one.out")
check rule-reused bash -c "redis-cli -p $RESP_PORT SL.THROTTLE other fixed_window $MADE 60000 | head -1 | grep -qx 1"
check cl-refused bash -c "redis-cli -p $RESP_PORT CL.THROTTLE k 99999 10 60 | grep -q 'max-inline-per-address'"
stop_bg s TERM
check exit-0 test $? -eq 0
finish
