#!/usr/bin/env bash
# test_server_store.sh - the config store while sluiced serves: another process holding SQLite's
# write lock stalls no loop (a rule change waits for the lock on the config store's thread while
# decisions on the same loop, with and without overrides, are answered meanwhile); a store file
# deleted or replaced under sluiced is logged, keeps the rules in force, and refuses changes;
# a store file put back (a backup renamed into place) is opened and its rules put in force; an
# immutable store file refuses changes, saying why, and sluice_config_store_writable says so.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 5
    window: 1h
    overrides:
      - key: gold
        limit: 50
YAML
DB=$TMP/store.db
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds (bounded)
wait_for() {
    local secs=$1 i
    shift
    for ((i = 0; i < secs * 20; i++)); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}

# One loop, so the rule change and the decisions share it.
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$DB" --snapshot "" --threads 1 \
    --poll-interval 100ms --override-ttl 1ms || { cat "$TMP/s1.log"; exit 1; }

# 1. Another process takes the store's write lock and holds it until told to let go.
python3 - "$DB" "$TMP/locked" "$TMP/release" <<'PY' &
import os, sqlite3, sys, time
db, locked, release = sys.argv[1:]
c = sqlite3.connect(db, isolation_level=None, timeout=10)
c.execute("BEGIN IMMEDIATE")
open(locked, "w").close()
for _ in range(600):  # at most 60 s
    if os.path.exists(release):
        break
    time.sleep(0.1)
c.execute("ROLLBACK")
PY
LOCKER=$!
LIB_PIDS+=("$LOCKER")
check lock-taken wait_for 10 test -e "$TMP/locked"

# A rule change now waits for the lock (up to 5 s) ...
redis-cli -p "$RESP_PORT" SL.RULE SET extra '{"algorithm":"sliding_log","limit":10,"window":"1h"}' \
    >"$TMP/set.out" 2>&1 &
SETTER=$!
# ... while decisions on the same loop are answered, an override looked up meanwhile too.
check allow-while-locked matches "$(cli SL.ALLOW api k1)" '^1 5 4 0 '
check override-while-locked matches "$(cli SL.ALLOW api gold)" '^1 50 49 0 '
# every lookup went through the store's one connection: no loop opened the file itself
for k in g1 g2 g3 g4 g5 g6; do cli SL.ALLOW api "$k" >/dev/null; done
store_fds() { find "/proc/$(cat "$TMP/s1.pid")/fd" -lname "$DB" 2>/dev/null | wc -l; }
check one-connection test "$(store_fds)" -eq 1
check peek-while-locked matches "$(cli SL.PEEK api k1)" '^1 5 4 0 [0-9]+$'
check set-still-waiting test ! -s "$TMP/set.out"
touch "$TMP/release"
wait "$SETTER"
check set-after-lock matches "$(cat "$TMP/set.out")" '^OK$'
check set-in-force matches "$(cli SL.ALLOW extra k)" '^1 10 9 0 '
wait "$LOCKER"

metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
gauge_is() { [ "$(metric "$1")" = "$2" ]; }

# 2. The store file is deleted under sluiced: logged once, the rules in force stay, every change
# is refused (nothing is written to a file that no longer exists, no new file appears).
sqlite3 "$DB" "VACUUM INTO '$TMP/backup.db'" # (a backup, for part 4)
rm -f "$DB"
check deleted-logged wait_for 10 grep -q "config store '$DB' was deleted while sluiced runs" \
    "$TMP/s1.log"
check deleted-refused matches "$(cli SL.RULE SET more '{"algorithm":"gcra","limit":1,"window":"1s"}')" \
    "^ERR config store: config store '$DB' was deleted while sluiced runs"
check deleted-override-refused matches "$(cli SL.OVERRIDE SET api k9 '{"limit":1}')" \
    "was deleted while sluiced runs"
check deleted-rules-stay matches "$(cli SL.ALLOW extra k)" '^1 10 8 0 '
check deleted-rule-list matches "$(cli SL.RULE LIST)" '^api extra$'
check deleted-no-new-file test ! -e "$DB"
check deleted-counted matches "$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
    awk '$1 == "sluice_config_store_errors_total" {print $2}')" '^[1-9]'

# 3. Another file put in its place: also refused (the rules in force are those read before).
sqlite3 "$DB" 'CREATE TABLE t(x)'
check replaced-logged wait_for 10 grep -q "config store '$DB' was replaced by another file" \
    "$TMP/s1.log"
check replaced-refused matches "$(cli SL.RULE DEL extra)" 'was replaced by another file'
check replaced-rules-stay matches "$(cli SL.ALLOW extra k)" '^1 10 7 0 '
check replaced-not-writable gauge_is sluice_config_store_writable 0

# 4. A store file put back (the backup, renamed over the foreign one): opened at the next poll,
# logged, its rules put in force, changes accepted and written into it.
mv "$TMP/backup.db" "$DB"
check put-back-logged wait_for 10 grep -q "another file was put in place of sqlite $DB" "$TMP/s1.log"
check put-back-writable poll 10 gauge_is sluice_config_store_writable 1
check put-back-up gauge_is sluice_config_store_up 1
check put-back-change matches "$(cli SL.RULE SET more '{"algorithm":"gcra","limit":1,"window":"1s"}')" '^OK$'
check put-back-in-file matches "$(sqlite3 "$DB" "SELECT name FROM rules ORDER BY name" | tr '\n' ' ')" '^api extra more $'
check put-back-override matches "$(cli SL.ALLOW api gold)" '^1 50 '

# 5. The file made immutable (chattr +i; where that is not permitted, made read-only by its
# mode, which binds a process that is not root): the gauge says it, a change is refused saying
# why, nothing is written; writable again once the flag or the mode is back.
UNDO=()
if chattr +i "$DB" 2>/dev/null; then
    UNDO=(chattr -i "$DB")
elif [ "$(id -u)" -ne 0 ]; then
    chmod 0444 "$DB"
    UNDO=(chmod 0644 "$DB")
fi
if [ "${#UNDO[@]}" -gt 0 ]; then
    check immutable-gauge poll 10 gauge_is sluice_config_store_writable 0
    check immutable-up gauge_is sluice_config_store_up 1
    check immutable-logged wait_for 10 grep -q "config store not writable: config store '$DB' is not writable (" "$TMP/s1.log"
    check immutable-refused matches "$(cli SL.RULE SET no '{"algorithm":"gcra","limit":1,"window":"1s"}')" \
        "^ERR config store: config store '$DB' is not writable \\((Operation not permitted|Permission denied)\\): changes are refused until it is"
    check immutable-decides matches "$(cli SL.ALLOW more k)" '^1 '
    "${UNDO[@]}"
    check writable-again poll 10 gauge_is sluice_config_store_writable 1
    check writable-logged wait_for 10 grep -q "config store writable again" "$TMP/s1.log"
    check writable-change matches "$(cli SL.RULE SET no '{"algorithm":"gcra","limit":1,"window":"1s"}')" '^OK$'
else
    echo "skipped the unwritable file: chattr +i is not permitted here, and root writes any mode"
fi
stop_bg s1 TERM
check stop-exit-0 test $? -eq 0
finish
