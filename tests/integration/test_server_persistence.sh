#!/usr/bin/env bash
# test_server_persistence.sh - the memory request store across restarts: SIGTERM writes a
# snapshot that the next start loads (counts kept); kill -9 with no snapshot starts per
# cold_start (open: fresh, closed: saturated for a window); a periodic snapshot survives kill -9;
# a corrupt snapshot is reported, set aside, and never stops start-up.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli curl

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: open
    algorithm: sliding_log
    limit: 5
    window: 1h
  - name: closed
    algorithm: gcra
    limit: 3
    window: 1h
    burst: 2
    cold_start: closed
YAML
SNAP=$TMP/sluice.snapshot
ARGS=(--rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" --snapshot "$SNAP" --threads 2)
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }

# 1. first start, no snapshot: cold start. closed keys are saturated, open keys fresh.
start_sluiced s1 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s1.log"; exit 1; }
check cold-log grep -q "no snapshot at" "$TMP/s1.log"
check cold-open matches "$(cli SL.ALLOW open k)" '^1 5 4 0 '
check cold-closed matches "$(cli SL.ALLOW closed k)" '^0 3 0 [1-9][0-9]* '
cli SL.ALLOW open k >/dev/null
cli SL.ALLOW open k >/dev/null   # 3 of 5 used
cli SL.THROTTLE inl sliding_log 10 3600000 COST 4 >/dev/null
stop_bg s1 TERM
check term-exit-0 test $? -eq 0
check term-snapshot-written test -s "$SNAP"
check term-log grep -q "stopped" "$TMP/s1.log"

# 2. restart: the snapshot is loaded, counts kept (named and inline rules)
start_sluiced s2 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s2.log"; exit 1; }
check loaded-log grep -q "snapshot .* loaded" "$TMP/s2.log"
check kept-open matches "$(cli SL.ALLOW open k)" '^1 5 1 0 '
check kept-inline matches "$(cli SL.THROTTLE inl sliding_log 10 3600000)" '^1 10 5 0 '
# a snapshot exists, so closed is not cold: a new key is fresh
check not-cold-closed matches "$(cli SL.ALLOW closed fresh)" '^1 3 2 0 '
stop_bg s2 KILL

# 3. kill -9 after a clean stop's snapshot: that snapshot is what comes back
start_sluiced s3 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s3.log"; exit 1; }
check after-kill-open matches "$(cli SL.ALLOW open k)" '^1 5 1 0 '
stop_bg s3 KILL

# 4. kill -9 with no snapshot at all: cold start again
rm -f "$SNAP"
start_sluiced s4 "${ARGS[@]}" --snapshot-interval 1s || { cat "$TMP/s4.log"; exit 1; }
check kill-cold-open matches "$(cli SL.ALLOW open k)" '^1 5 4 0 '
check kill-cold-closed matches "$(cli SL.ALLOW closed other)" '^0 3 0 [1-9]'
# the periodic snapshot (every 1 s) is written by itself; wait for one begun after our
# decision: the second one completed after it (the first may have been under way already)
snapshots() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk '$1 == "sluice_snapshots_total" {print $2}'; }
snapped() { [ "$(snapshots)" -ge "$1" ] && [ -s "$SNAP" ]; }
check periodic-written poll 15 snapped $(($(snapshots) + 2))
stop_bg s4 KILL

# 5. restart after kill -9: the periodic snapshot kept the count
start_sluiced s5 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s5.log"; exit 1; }
check periodic-kept matches "$(cli SL.ALLOW open k)" '^1 5 3 0 '
stop_bg s5 TERM

# 6. a corrupt snapshot: reported, moved aside, start-up goes on cold
printf 'SLUICESN\x01\x00\x00\x00garbage' >"$SNAP"
start_sluiced s6 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s6.log"; exit 1; }
check corrupt-log grep -q "unusable, cold start" "$TMP/s6.log"
check corrupt-set-aside bash -c "ls '$SNAP'.corrupt-* >/dev/null"
check corrupt-cold-closed matches "$(cli SL.ALLOW closed k2)" '^0 3 0 [1-9]'
check corrupt-serving matches "$(cli PING)" '^PONG$'
stop_bg s6 TERM
check corrupt-exit-0 test $? -eq 0
finish
