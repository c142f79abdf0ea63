#!/usr/bin/env bash
# test_server_persistence.sh - the memory request store across restarts: SIGTERM writes a
# snapshot that the next start loads (counts kept); kill -9 with no snapshot starts per
# cold_start (open: fresh, closed: saturated for a window); a periodic snapshot survives kill -9;
# a corrupt snapshot is reported, set aside, and never stops start-up. A cold_start: closed
# window outlives restarts within it (keys not yet seen are not in the snapshot); rule numbers
# changed while sluiced was stopped carry the keys' usage.
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
  - name: brief
    algorithm: fixed_window
    limit: 2
    window: 1s
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
# the snapshot was written within closed's one-hour closed window, which goes on: a key it
# has not seen may have used its quota before the first start
check still-closed matches "$(cli SL.ALLOW closed fresh)" '^0 3 0 [1-9]'
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
# brief's closed window (1 s) ends; a snapshot begun after that carries none for it
brief_open() { matches "$(cli SL.PEEK brief never)" '^1 2 2 '; }
check brief-window-ends poll 15 brief_open
check periodic-after-brief poll 15 snapped $(($(snapshots) + 2))
stop_bg s4 KILL

# 5. restart after kill -9: the periodic snapshot kept the count
start_sluiced s5 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s5.log"; exit 1; }
check periodic-kept matches "$(cli SL.ALLOW open k)" '^1 5 3 0 '
# a snapshot written within a closed window keeps it: a key never seen is still refused ...
check periodic-closed-kept matches "$(cli SL.ALLOW closed never-seen)" '^0 3 0 [1-9]'
# ... and one written after the window ended has none
check periodic-brief-open matches "$(cli SL.ALLOW brief never-seen)" '^1 2 1 '
stop_bg s5 TERM

# 6. a corrupt snapshot: reported, moved aside, start-up goes on cold
printf 'SLUICESN\x01\x00\x00\x00garbage' >"$SNAP"
start_sluiced s6 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s6.log"; exit 1; }
check corrupt-log grep -q "unusable, cold start" "$TMP/s6.log"
check corrupt-set-aside bash -c "ls '$SNAP'.corrupt-* >/dev/null"
check corrupt-cold-closed matches "$(cli SL.ALLOW closed k2)" '^0 3 0 [1-9]'
check corrupt-serving matches "$(cli PING)" '^PONG$'
cli SL.ALLOW open used >/dev/null
cli SL.ALLOW open used >/dev/null # 2 of 5 used
stop_bg s6 TERM
check corrupt-exit-0 test $? -eq 0

# 7. numbers changed while sluiced was stopped: the key's usage is converted, not dropped (open:
# 5 -> 8 per hour); an algorithm change cannot be converted and starts by cold_start
sed -i -e 's/^    limit: 5$/    limit: 8/' -e 's/^    algorithm: gcra$/    algorithm: fixed_window/' \
    -e '/^    burst: 2$/d' "$TMP/rules.yaml"
start_sluiced s7 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s7.log"; exit 1; }
check changed-numbers-kept matches "$(cli SL.ALLOW open used)" '^1 8 5 0 '
check changed-numbers-log grep -q "rule 'open' changed its numbers since the snapshot" "$TMP/s7.log"
check changed-algorithm-log grep -q "rule 'closed' changed algorithm (gcra to fixed_window)" "$TMP/s7.log"
check changed-algorithm-closed matches "$(cli SL.ALLOW closed k9)" '^0 3 0 [1-9]'
stop_bg s7 TERM

# 8. a final snapshot that cannot be written (its directory is gone): logged, and the exit
# status says so (the keys' usage since the last snapshot is lost)
mkdir -p "$TMP/gone"
start_sluiced s8 --rules "$TMP/rules.yaml" --config-store "$TMP/s8.db" --snapshot "$TMP/gone/s.snap" \
    --snapshot-interval 0 || { cat "$TMP/s8.log"; exit 1; }
cli SL.ALLOW open k >/dev/null
rm -rf "$TMP/gone"
stop_bg s8 TERM
check final-failed-exit test $? -eq 1
check final-failed-logged grep -q "stopped without the final snapshot" "$TMP/s8.log"
finish
