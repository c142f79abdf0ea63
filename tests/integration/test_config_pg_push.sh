#!/usr/bin/env bash
# test_config_pg_push.sh - two sluiced on one PostgreSQL (started here: initdb in a temporary
# directory, an unprivileged user, 127.0.0.1 and a free port): a rule or override changed through
# one is in force on the other long before its poll could have seen it (the poll interval is an
# hour: only the push can have told it); then PostgreSQL is stopped and started again under
# bounded load: no decision fails, the rules in force stay, changes are refused with the reason,
# each state change is one log line and the sluice_config_store_up gauge follows, and after the
# restart the push works again.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need_postgres
need redis-cli curl

start_postgres pg || { cat "$TMP/pg.log"; exit 1; }
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: gcra
    limit: 100000
    window: 1s
  - name: vip
    algorithm: gcra
    limit: 100000
    window: 1s
    on_store_error: allow
    overrides:
      - key: gold
        limit: 200000
YAML
start_sluiced a --config-store "$PG_URL" --rules "$TMP/rules.yaml" --snapshot "" --poll-interval 1h ||
    { cat "$TMP/a.log"; exit 1; }
A=$RESP_PORT
start_sluiced b --config-store "$PG_URL" --snapshot "" --poll-interval 1h --threads 2 ||
    { cat "$TMP/b.log"; exit 1; }
B=$RESP_PORT
B_HTTP=$HTTP_PORT

on() { redis-cli -p "$1" "${@:2}" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
answers() { # answers PORT REGEX CMD..: the reply to CMD matches REGEX
    local port=$1 re=$2
    shift 2
    matches "$(on "$port" "$@")" "$re"
}
in_force() { [[ "$(on "$B" SL.ALLOW "$1" k)" =~ ^1\  ]]; }
gauge() { curl -s "localhost:$B_HTTP/metrics" | awk -v n="$1" '$1 == n {print $2}'; }

# 1. A change through a is in force on b at once: b polls once an hour, so the push told it.
check b-has-file-rules answers "$B" '^1 ' SL.ALLOW api k
check new-rule-unknown-on-b answers "$B" 'unknown rule' SL.ALLOW fresh k
check set-through-a answers "$A" '^OK$' SL.RULE SET fresh '{"algorithm":"gcra","limit":7,"window":"1s"}'
check pushed-rule poll 5 in_force fresh
check pushed-numbers answers "$B" '^1 8 7 ' SL.ALLOW fresh k2
check gold-override answers "$B" '^1 200001 ' SL.ALLOW vip gold
check override-through-a answers "$A" '^OK$' SL.OVERRIDE SET vip gold '{"limit":0}'
blocked() { [[ "$(on "$B" SL.ALLOW vip gold)" =~ ^0\  ]]; }
check pushed-override poll 5 blocked
check del-through-a answers "$A" '^1$' SL.RULE DEL fresh
gone() { [[ "$(on "$B" SL.ALLOW fresh k)" =~ unknown\ rule ]]; }
check pushed-delete poll 5 gone
check gauge-up test "$(gauge sluice_config_store_up)" = 1

# 2. Bounded load on b (every 20 ms a pipeline of decisions on a rule without overrides, on
# the overridden key, and on new keys of the rule with overrides, whose lookups need the store)
# while PostgreSQL stops and starts again. It writes its counts to load.out after each batch.
python3 - "$B" "$TMP/load.out" "$TMP/load.stop" <<'PY' >"$TMP/load.log" 2>&1 &
import os, sys, time
sys.path.insert(0, os.environ["SLUICE_SOURCE_DIR"] + "/tests/integration")
from resp_client import Conn, enc
port, out, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = Conn(port)
decisions = errors = 0
first_error = ""
end = time.monotonic() + 60  # at most a minute, whatever happens
n = 0
while not os.path.exists(stop) and time.monotonic() < end:
    cmds = []
    for i in range(10):
        n += 1
        cmds += [["SL.ALLOW", "api", "u%d" % n], ["SL.ALLOW", "vip", "n%d" % n], ["SL.ALLOW", "vip", "gold"]]
    c.s.sendall(b"".join(enc(x) for x in cmds))
    for _ in cmds:
        r = c.reply()
        if isinstance(r, list) and len(r) == 5:
            decisions += 1
        else:
            errors += 1
            first_error = first_error or repr(r)
    with open(out + ".tmp", "w") as f:
        f.write("%d %d %s\n" % (decisions, errors, first_error))
    os.replace(out + ".tmp", out)
    time.sleep(0.02)
PY
LOAD=$!
LIB_PIDS+=("$LOAD")
decided() { awk '{print $1}' "$TMP/load.out" 2>/dev/null || echo 0; }
more_than() { [ "$(decided)" -gt "$1" ]; }
check load-running poll 10 more_than 100

PGPORT=$PG_PORT
stop_bg pg INT
check pg-stopped test $? -eq 0
check down-logged wait_log b "config store unreachable"
gauge_is() { [ "$(gauge sluice_config_store_up)" = "$1" ]; }
check gauge-down poll 10 gauge_is 0
at_down=$(decided)
check decisions-while-down poll 10 more_than "$((at_down + 300))"
check rules-stay answers "$B" '^1 100001 ' SL.ALLOW api k
check write-refused answers "$B" \
    "^ERR config store: postgresql: cannot connect to postgresql://sluice@127.0.0.1:$PGPORT/sluice" \
    SL.RULE SET x '{"algorithm":"gcra","limit":1,"window":"1s"}'

start_postgres_at pg "$PGPORT" || { cat "$TMP/pg.log"; exit 1; }
check up-logged wait_log b "config store reachable again"
check gauge-up-again poll 10 gauge_is 1
check a-up-logged wait_log a "config store reachable again"
check set-after-restart answers "$A" '^OK$' SL.RULE SET later '{"algorithm":"gcra","limit":5,"window":"1s"}'
check pushed-after-restart poll 5 in_force later
check write-accepted-again answers "$B" '^OK$' SL.RULE SET x '{"algorithm":"gcra","limit":1,"window":"1s"}'

touch "$TMP/load.stop"
wait "$LOAD"
read -r total errors first <"$TMP/load.out"
check no-failed-decision test "$errors" -eq 0
[ "$errors" -eq 0 ] || echo "  $errors failed of $((total + errors)); first: $first"
# one line per state change, no more (a poll failing every second while down says nothing)
check one-down-line test "$(grep -c 'config store unreachable' "$TMP/b.log")" -eq 1
check one-up-line test "$(grep -c 'config store reachable again' "$TMP/b.log")" -eq 1
check no-poll-noise test "$(grep -c 'rules not reloaded' "$TMP/b.log")" -eq 0

stop_bg a
stop_bg b
stop_bg pg INT
finish
