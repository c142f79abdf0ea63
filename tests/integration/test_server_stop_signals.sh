#!/usr/bin/env bash
# test_server_stop_signals.sh - a stopping sluiced signalled again stops as cleanly as if it had
# been signalled once: SIGTERMs every millisecond from the first until the process is gone
# (bounded: 20000 signals, 20 s) land in every part of its stop, the final snapshot's writing
# included, and it still exits 0 with that snapshot written. (libuv gives a signal back its
# default action when its last handle closes: a second SIGTERM then ended the process with
# status 143, which a supervisor reads as a crash.)
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli python3

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 100000
    window: 1h
YAML
for round in 1 2 3; do
    rm -f "$TMP/s.snapshot"
    start_sluiced "s$round" --rules "$TMP/rules.yaml" --config-store "$TMP/s$round.db" \
        --snapshot "$TMP/s.snapshot" --threads 2 || { cat "$TMP/s$round.log"; exit 1; }
    # some state, so that the final snapshot takes a moment to write
    python3 - "$RESP_PORT" <<'PY'
import sys
sys.path.insert(0, __import__("os").environ["SLUICE_SOURCE_DIR"] + "/tests/integration")
from resp_client import Conn
c = Conn(int(sys.argv[1]))
for batch in range(20):
    c.pipeline([["SL.ALLOW", "api", "k%d" % (batch * 1000 + i)] for i in range(1000)])
PY
    pid=$(cat "$TMP/s$round.pid")
    python3 - "$pid" <<'PY'
import os, signal, sys, time
pid = int(sys.argv[1])
for _ in range(20000):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        break
    time.sleep(0.001)
PY
    { wait "$pid"; } 2>/dev/null
    rc=$?
    lib_forget "$pid"
    check "round $round: exit 0 though signalled again while stopping" test "$rc" -eq 0
    check "round $round: final snapshot written" test -s "$TMP/s.snapshot"
done
finish
