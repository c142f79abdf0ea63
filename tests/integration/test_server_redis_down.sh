#!/usr/bin/env bash
# test_server_redis_down.sh - the Redis request store's failures are seen: Redis frozen (SIGSTOP),
# then killed, then started again on its port.
#   - frozen: decisions past --store-timeout get on_store_error, each counted in
#     sluice_redis_failures_total{kind="timeout"} and logged, far fewer lines than timeouts;
#   - killed: sluice_redis_up goes to 0 and one line says which node went down; decisions fail,
#     counted as errors and logged at a limited rate;
#   - started again: sluice_redis_up is 1 again without any request asking (the connection is
#     made again by itself), a line says so, and decisions are Redis's again.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli redis-server curl

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: fixed_window
    limit: 1000000
    window: 1h
    on_store_error: deny
YAML
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
REDIS_ARGS=()
[ -f "$MODULE" ] && REDIS_ARGS=(--loadmodule "$MODULE")
start_redis r "${REDIS_ARGS[@]}" || { cat "$TMP/r.log"; exit 1; }
RPORT=$REDIS_PORT
start_sluiced s --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" \
    --threads 2 --store "redis://127.0.0.1:$RPORT" --store-timeout 50ms ||
    { cat "$TMP/s.log"; exit 1; }

on() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
failures() { metric "sluice_redis_failures_total{kind=\"$1\"}"; }
up_is() { [ "$(metric sluice_redis_up)" = "$1" ]; }
lines() { grep -c -- "$1" "$TMP/s.log"; }
# burst N: N decisions on one connection, pipelined; prints how many were admitted
burst() {
    PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" timeout 60 python3 -c '
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
r = c.pipeline([("SL.ALLOW", "api", "k%d" % i) for i in range(int(sys.argv[2]))])
print(sum(1 for x in r if isinstance(x, list) and x[0] == 1))' "$RESP_PORT" "$1"
}

check serving matches "$(on SL.ALLOW api k)" '^1 1000000 999999 '
check up-at-start up_is 1
check nothing-failed test "$(failures timeout)" -eq 0

# Frozen: every decision times out, each counted; the log has a few lines, not one each.
kill -STOP "$(cat "$TMP/r.pid")"
check frozen-denied test "$(burst 300)" -eq 0
check timeouts-counted test "$(failures timeout)" -ge 300
check timeouts-logged wait_log s "redis: no reply within the decision timeout (50 ms, --store-timeout)"
check timeouts-rate-limited test "$(lines 'no reply within the decision timeout')" -lt 300
kill -CONT "$(cat "$TMP/r.pid")"
answers_again() { [[ "$(on SL.ALLOW api again)" =~ ^1\ 1000000\  ]]; }
check thawed poll 10 answers_again

# Killed: the gauge goes to 0, one line names the node.
stop_bg r KILL
check down-gauge poll 10 up_is 0
check down-logged wait_log s "redis 127.0.0.1:$RPORT: .*reconnecting"
errors=$(failures error)
check down-denied test "$(burst 300)" -eq 0
check errors-counted test "$(failures error)" -ge $((errors + 300))
check errors-rate-limited test "$(lines 'not connected\|is down')" -lt 300
check down-counted test "$(failures down)" -ge 1

# Started again on its port: the connection is made again with no request asking for it.
start_redis_at r "$RPORT" "${REDIS_ARGS[@]}" || { cat "$TMP/r.log"; exit 1; }
check up-again poll 20 up_is 1
check up-logged wait_log s "redis 127.0.0.1:$RPORT: connected again"
check reconnected-counted test "$(metric sluice_redis_reconnected_total)" -ge 1
check serving-again poll 10 answers_again
stop_bg s TERM
check exit-0 test $? -eq 0
finish
