#!/usr/bin/env bash
# test_config_pg_outage.sh - blocking overrides across a PostgreSQL config store's outages, the
# probes that found them bypassed:
#   1. stopped after a rule change: the blocking override cached before it still applies (it
#      used to be admitted, [1,5,0,0,0]), and so does one set through this server and never
#      asked; a key never looked up gets on_store_error; both counted;
#   2. frozen (SIGSTOP on the postmaster and its backends, so connections stay open and nothing
#      answers): a decision on a key nothing is known of is answered by on_store_error once
#      --override-timeout has passed, counted as a timeout; a cached blocking override applies;
#   3. resumed (SIGCONT): an override set before the freeze and never asked applies again.
# The test asserts replies and counts, never how long anything took.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need_postgres
need redis-cli curl pgrep

start_postgres pg || { cat "$TMP/pg.log"; exit 1; }
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: vip
    algorithm: fixed_window
    limit: 5
    window: 1h
    on_store_error: allow
    overrides:
      - key: gold
        limit: 0
      - key: frozen
        limit: 0
YAML
start_sluiced s --config-store "$PG_URL" --rules "$TMP/rules.yaml" --snapshot "" \
    --threads 1 --override-ttl 1h --override-timeout 200ms || { cat "$TMP/s.log"; exit 1; }
PGPORT=$PG_PORT

on() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
answers() { # answers REGEX CMD..: the reply to CMD matches REGEX
    local re=$1
    shift
    matches "$(on "$@")" "$re"
}
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
failures() { metric "sluice_override_lookup_failures_total{reason=\"$1\",decided_by=\"$2\"}"; }
gauge_is() { [ "$(metric sluice_config_store_up)" = "$1" ]; }

# 1. Stopped after a rule change.
check gold-blocked answers '^0 0 0 -1 ' SL.ALLOW vip gold
check rule-change answers '^OK$' SL.RULE SET vip \
    '{"algorithm":"fixed_window","limit":6,"window":"1h","on_store_error":"allow"}'
check new-rule answers '^1 6 5 ' SL.ALLOW vip someone
# a block set through this server, never asked before the outage, is known all the same
check banned-set answers '^OK$' SL.OVERRIDE SET vip banned '{"limit":0}'
stop_bg pg INT
check pg-stopped test $? -eq 0
check gold-still-blocked answers '^0 0 0 -1 ' SL.ALLOW vip gold
check banned-blocked answers '^0 0 0 -1 ' SL.ALLOW vip banned
check stranger-on-store-error answers '^1 6 ' SL.ALLOW vip stranger
check counted-known test "$(failures error known)" -ge 1
check counted-on-store-error test "$(failures error on_store_error)" -ge 1
check failure-logged wait_log s "override lookup failed .* decided by the key's last known override"

start_postgres_at pg "$PGPORT" || { cat "$TMP/pg.log"; exit 1; }
check up-again poll 20 gauge_is 1
fresh_gold() { [[ "$(on SL.ALLOW vip gold)" =~ ^0\ 0\ 0\ -1 ]]; }
check gold-after-restart poll 10 fresh_gold

# 2. Frozen: every process of the cluster stopped by its PID, its connections left open.
PG_PIDS=("$(cat "$TMP/pg.pid")")
mapfile -t -O 1 PG_PIDS < <(pgrep -P "${PG_PIDS[0]}")
kill -STOP "${PG_PIDS[@]}"
before=$(failures timeout on_store_error)
check frozen-unknown-on-store-error answers '^1 6 ' SL.ALLOW vip nobody-knows
check frozen-counted test "$(failures timeout on_store_error)" -ge $((before + 1))
check frozen-not-yet-known answers '^1 6 ' SL.ALLOW vip frozen
check frozen-gold-cached answers '^0 0 0 -1 ' SL.ALLOW vip gold
check timeout-logged wait_log s "did not answer an override lookup within 200 ms (override-timeout)"

# 3. Resumed: the override never asked before applies again.
kill -CONT "${PG_PIDS[@]}"
frozen_blocked() { [[ "$(on SL.ALLOW vip frozen)" =~ ^0\ 0\ 0\ -1 ]]; }
check resumed-override-applies poll 20 frozen_blocked

stop_bg s TERM
check exit-0 test $? -eq 0
stop_bg pg INT
finish
