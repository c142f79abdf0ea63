#!/usr/bin/env bash
# test_server_snapshot_thread.sh - a periodic snapshot is written on a thread of its own. One is
# held up in the file system on purpose: PATH.tmp is a FIFO that nobody has opened for reading,
# so the snapshot's open() blocks until the test opens it (seen as a sluiced thread sleeping in
# the kernel's FIFO open, /proc/PID/task/*/wchan). Meanwhile:
#   - decisions go on, and SIGHUP reloads the rules (the main loop is not the one waiting);
#   - later ticks are skipped (one snapshot at a time), and say so once in the log;
#   - SIGTERM waits for it: once the FIFO is opened that snapshot fails (a FIFO is no file), and
#     the last snapshot is written after it, as a file holding every decision made.
# Every wait is an event polled for, bounded.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli mkfifo timeout

# The test watches a blocked open() through wchan; a kernel that does not name it cannot be used.
mkfifo "$TMP/probe"
(exec 3>"$TMP/probe") &
probe=$!
probe_wchan=""
for ((i = 0; i < 100; i++)); do
    probe_wchan=$(cat "/proc/$probe/wchan" 2>/dev/null)
    [[ "$probe_wchan" =~ ^(wait_for_partner|fifo_open)$ ]] && break
    sleep 0.05
done
exec 4<"$TMP/probe" # lets the probe's open complete
wait "$probe"
exec 4<&-
if ! [[ "$probe_wchan" =~ ^(wait_for_partner|fifo_open)$ ]]; then
    echo "SKIP: /proc/PID/wchan does not show a blocked FIFO open here ('$probe_wchan')"
    exit 77
fi

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: open
    algorithm: sliding_log
    limit: 5
    window: 1h
YAML
SNAP=$TMP/sluice.snapshot
mkfifo "$SNAP.tmp"
ARGS=(--rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" --snapshot "$SNAP" --threads 1)
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
# the number of sluiced's threads blocked opening the FIFO
blocked_opens() {
    local n=0 w
    for w in /proc/"$PID"/task/*/wchan; do
        [[ "$(cat "$w" 2>/dev/null)" =~ ^(wait_for_partner|fifo_open)$ ]] && n=$((n + 1))
    done
    echo "$n"
}
snapshot_blocked() { [ "$(blocked_opens)" -ge 1 ]; }

start_sluiced s1 "${ARGS[@]}" --snapshot-interval 100ms || { cat "$TMP/s1.log"; exit 1; }
PID=$(cat "$TMP/s1.pid")
check snapshot-under-way poll 10 snapshot_blocked

# decisions go on while it waits
check decide-1 matches "$(cli SL.ALLOW open k)" '^1 5 4 0 '
check decide-2 matches "$(cli SL.ALLOW open k)" '^1 5 3 0 '
check decide-3 matches "$(cli SL.ALLOW open k)" '^1 5 2 0 '

# SIGHUP is handled: the rules file gains a rule, which comes into force
cat >>"$TMP/rules.yaml" <<'YAML'
  - name: added
    algorithm: fixed_window
    limit: 7
    window: 1h
YAML
kill -HUP "$PID"
added() { matches "$(cli SL.PEEK added k)" '^1 7 7 0 ' >/dev/null; }
check hup-handled-during-snapshot poll 10 added

# one at a time: later ticks are skipped, reported once; still one open blocked
skipped() { grep -q "takes longer than --snapshot-interval" "$TMP/s1.log"; }
check tick-skipped poll 10 skipped
check one-snapshot-at-a-time test "$(blocked_opens)" -eq 1
check skip-reported-once test "$(grep -c "takes longer than --snapshot-interval" "$TMP/s1.log")" -eq 1
check still-under-way snapshot_blocked

# SIGTERM: stops serving, then waits for the snapshot under way; opening the FIFO lets it go on
kill -TERM "$PID"
stopping() { grep -q "SIGTERM: stopping" "$TMP/s1.log"; }
check term-logged poll 10 stopping
check fifo-opened timeout 10 cat "$SNAP.tmp" >/dev/null
stop_bg s1 0 # no second signal: wait for the exit the SIGTERM began
check term-exit-0 test $? -eq 0
check held-snapshot-failed grep -q "snapshot $SNAP not written" "$TMP/s1.log"
check last-snapshot-a-file test -f "$SNAP" -a -s "$SNAP"
check no-tmp-left test ! -e "$SNAP.tmp"

# the last snapshot holds the decisions made while the other was held up
start_sluiced s2 "${ARGS[@]}" --snapshot-interval 0 || { cat "$TMP/s2.log"; exit 1; }
check loaded grep -q "snapshot .* loaded" "$TMP/s2.log"
check kept matches "$(cli SL.ALLOW open k)" '^1 5 1 0 '
stop_bg s2 TERM
check s2-exit-0 test $? -eq 0

finish
