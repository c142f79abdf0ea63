#!/usr/bin/env bash
# test_config_pg.sh - the PostgreSQL config store against a real PostgreSQL started here (initdb
# in a temporary directory, as an unprivileged user, on 127.0.0.1 and a free port): the
# conformance suite every store passes; sluiced on it by URL and by keyword string, the schema it
# creates, rules and overrides made through it landing in the database, a change waiting out
# another session's lock while decisions go on, a password never in its log, a million overrides
# never read at start, a SQLite store moved in with `sluice rules export`/`import`, a schema newer
# than it knows refused, and an unreachable database refused at start with the reason.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need_postgres
need redis-cli

start_postgres pg || { cat "$TMP/pg.log"; exit 1; }
sql() { psql -X -q -A -t -h 127.0.0.1 -p "$PG_PORT" -U sluice -d sluice -c "$1" 2>&1; }
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }

# 1. The conformance suite, each case in a schema of its own.
SLUICE_TEST_PG=$PG_URL "$SLUICE_BUILD_DIR/tests/test_config_conformance" >"$TMP/conformance.log" 2>&1
rc=$?
check conformance test "$rc" -eq 0
check conformance-ran test "$(grep -c 'PASSED  \] 11 test' "$TMP/conformance.log")" -eq 2
[ "$rc" -eq 0 ] || tail -40 "$TMP/conformance.log"

# 2. sluiced on it: the schema is created, the rules file imported, changes land in the database.
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 5
    window: 1h
    overrides:
      - key: "o'brien"
        limit: 50
YAML
# a password trust authentication ignores: it must not reach the log
URL="postgresql://sluice:s3cret-pw@127.0.0.1:$PG_PORT/sluice?sslmode=disable"
start_sluiced s1 --config-store "$URL" --rules "$TMP/rules.yaml" --snapshot "" --threads 2 ||
    { cat "$TMP/s1.log"; exit 1; }
check schema-version matches "$(sql 'SELECT version FROM sluice_schema')" '^1$'
check rules-imported matches "$(sql "SELECT name, origin FROM sluice_rules")" '^api\|file$'
check override-imported matches "$(sql "SELECT encode(key, 'escape') FROM sluice_overrides")" \
    "^o'brien$"
check decide matches "$(cli SL.ALLOW api k1)" '^1 5 4 0 '
check decide-override matches "$(cli SL.ALLOW api "o'brien")" '^1 50 49 0 '
check rule-set matches "$(cli SL.RULE SET extra '{"algorithm":"gcra","limit":3,"window":"1s"}')" '^OK$'
check rule-stored matches "$(sql "SELECT origin FROM sluice_rules WHERE name = 'extra'")" '^api$'
check rule-in-force matches "$(cli SL.ALLOW extra k)" '^1 4 3 0 '
check leased-set matches "$(cli SL.RULE SET leased '{"algorithm":"fixed_window","limit":3,"window":"1s","mode":"leased","lease_time":"250ms"}')" '^OK$'
check leased-stored matches "$(sql "SELECT json FROM sluice_rules WHERE name = 'leased'")" \
    '"mode":"leased","lease_time":"250ms"'
check leased-read-back matches "$(cli SL.RULE GET leased)" '"mode":"leased","lease_time":"250ms"'
check approx-set matches "$(cli SL.RULE SET approx '{"algorithm":"sliding_log","limit":3,"window":"1s","mode":"approximate","sync_interval":"40ms"}')" '^OK$'
check approx-stored matches "$(sql "SELECT json FROM sluice_rules WHERE name = 'approx'")" \
    '"mode":"approximate","sync_interval":"40ms"'
check approx-read-back matches "$(cli SL.RULE GET approx)" '"mode":"approximate","sync_interval":"40ms"'
check debt-set matches "$(cli SL.RULE SET debtor '{"algorithm":"gcra","limit":3,"window":"1s","max_debt":0}')" '^OK$'
check debt-stored matches "$(sql "SELECT json FROM sluice_rules WHERE name = 'debtor'")" '"max_debt":0'
check debt-read-back matches "$(cli SL.RULE GET debtor)" '"max_debt":0'
check debt-in-force matches "$(cli SL.SETTLE debtor k 0 5)" 'max_debt'
check override-set matches "$(cli SL.OVERRIDE SET extra "it's \"quoted\"" '{"limit":0}')" '^OK$'
check override-blocks matches "$(cli SL.ALLOW extra "it's \"quoted\"")" '^0 '
check version-bumped matches "$(sql 'SELECT version FROM sluice_meta')" '^[3-9]$'
check store-named grep -q "from postgresql://sluice@127.0.0.1:$PG_PORT/sluice" "$TMP/s1.log"
check no-password-in-log test "$(grep -c s3cret-pw "$TMP/s1.log")" -eq 0

# Another session holds the version row's lock (a writer mid-transaction): a change through
# sluiced waits for it on the config thread (retried, as SQLite's lock is) while decisions go on,
# and is made once the lock is let go.
psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U sluice -d sluice >"$TMP/locker.log" 2>&1 <<SQL &
BEGIN;
SELECT version FROM sluice_meta WHERE id = 1 FOR UPDATE;
\\! touch $TMP/locked
SELECT pg_sleep(1.5);
COMMIT;
SQL
LOCKER=$!
LIB_PIDS+=("$LOCKER")
check lock-taken poll 10 test -e "$TMP/locked"
redis-cli -p "$RESP_PORT" SL.RULE SET waited '{"algorithm":"gcra","limit":2,"window":"1s"}' \
    >"$TMP/waited.out" 2>&1 &
SETTER=$!
check decide-while-locked matches "$(cli SL.ALLOW api k2)" '^1 5 4 0 '
check set-still-waiting test ! -s "$TMP/waited.out"
wait "$SETTER"
check set-after-lock matches "$(cat "$TMP/waited.out")" '^OK$'
wait "$LOCKER"
stop_bg s1

# 3. A libpq keyword string names the same store.
start_sluiced s2 --config-store "host=127.0.0.1 port=$PG_PORT user=sluice dbname=sluice" \
    --snapshot "" || { cat "$TMP/s2.log"; exit 1; }
check keywords-same-store matches "$(cli SL.RULE GET extra)" '"limit":3'
stop_bg s2

# 4. A schema newer than this sluiced knows is refused, with the reason; nothing is changed.
sql 'UPDATE sluice_schema SET version = 99' >/dev/null
PORT=$(free_port)
timeout 20 "$SLUICED" --config-store "$PG_URL" --port "$PORT" --http-port 0 --grpc-port 0 \
    --snapshot "" >"$TMP/newer.log" 2>&1
check newer-refused test $? -ne 0
check newer-says-why grep -q "has schema version 99; this sluiced knows up to 1 (written by a newer sluiced?)" \
    "$TMP/newer.log"
check newer-untouched matches "$(sql 'SELECT version FROM sluice_schema')" '^99$'
sql 'UPDATE sluice_schema SET version = 1' >/dev/null

# 5. A million overrides, written straight into the database: sluiced starts without reading
# them (the table's read counters stay near zero: it asks only whether a rule has any) and
# answers one by looking it up, through its cache.
cat >"$TMP/many.yaml" <<'YAML'
rules:
  - name: many
    algorithm: fixed_window
    limit: 5
    window: 1h
YAML
start_sluiced s3 --config-store "$PG_URL" --rules "$TMP/many.yaml" --snapshot "" ||
    { cat "$TMP/s3.log"; exit 1; }
stop_bg s3
sql "INSERT INTO sluice_overrides(rule, key, json) SELECT 'many', convert_to('user:' || i, 'UTF8'),
     '{\"limit\":' || (i % 1000 + 1) || '}' FROM generate_series(1, 1000000) AS i;
     UPDATE sluice_meta SET version = version + 1" >/dev/null
check million-stored matches "$(sql "SELECT count(*) FROM sluice_overrides WHERE rule = 'many'")" \
    '^1000000$'
# rows read from the table so far, by index and by sequential scan (PostgreSQL's counters,
# reported by each session a moment after it goes idle)
read_rows() { sql "SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) FROM
                   pg_stat_user_tables WHERE relname = 'sluice_overrides'"; }
scans() { sql "SELECT coalesce(idx_scan, 0) + coalesce(seq_scan, 0) FROM pg_stat_user_tables
               WHERE relname = 'sluice_overrides'"; }
before_scans=$(scans)
before_rows=$(read_rows)
start_sluiced s4 --config-store "$PG_URL" --snapshot "" --threads 1 || { cat "$TMP/s4.log"; exit 1; }
check million-one-lookup matches "$(cli SL.ALLOW many user:777777)" '^1 778 777 0 '
check million-no-override matches "$(cli SL.ALLOW many somebody)" '^1 5 4 0 '
check million-cached matches "$(cli SL.ALLOW many user:777777)" '^1 778 776 0 '
# the start's "has this rule overrides?" and the two lookups: three index scans at least, once
# the sessions have reported them
scanned() { [ "$(scans)" -ge "$((before_scans + 3))" ]; }
check million-scans-reported poll 10 scanned
check million-not-loaded test "$(($(read_rows) - before_rows))" -lt 100
stop_bg s4

# 6. A SQLite store moved into PostgreSQL with `sluice rules export` and `import --replace`:
# the same rules, the same overrides (keys with quotes, 1 KiB), found the same way.
start_sluiced lite --config-store "$TMP/lite.db" --rules "$TMP/rules.yaml" --snapshot "" ||
    { cat "$TMP/lite.log"; exit 1; }
LITE=$RESP_PORT
LONG=$(printf 'k%.0s' $(seq 1024))
redis-cli -p "$LITE" SL.OVERRIDE SET api "it's \"quoted\"" '{"limit":9}' >/dev/null
redis-cli -p "$LITE" SL.OVERRIDE SET api "$LONG" '{"limit":11}' >/dev/null
"$SLUICE" -p "$LITE" rules export >"$TMP/backup.yaml"
check export-ok test $? -eq 0
"$SLUICE" -p "$LITE" overrides list api >"$TMP/lite.overrides"
start_sluiced moved --config-store "$PG_URL" --snapshot "" || { cat "$TMP/moved.log"; exit 1; }
check import-ok matches "$("$SLUICE" -p "$RESP_PORT" rules import --replace "$TMP/backup.yaml")" '^OK$'
check same-rules matches "$("$SLUICE" -p "$RESP_PORT" rules list | tr '\n' ' ')" '^api $'
"$SLUICE" -p "$RESP_PORT" overrides list api >"$TMP/pg.overrides"
check same-overrides cmp "$TMP/lite.overrides" "$TMP/pg.overrides"
check three-overrides test "$(wc -l <"$TMP/pg.overrides")" -eq 3
check moved-quoted matches "$(cli SL.ALLOW api "it's \"quoted\"")" '^1 9 8 0 '
check moved-long matches "$(cli SL.ALLOW api "$LONG")" '^1 11 10 0 '
stop_bg moved
stop_bg lite

# 7. A database nobody listens at: refused at start, saying where and why.
hold_port closed closed
timeout 20 "$SLUICED" --config-store "postgres://sluice@127.0.0.1:$HELD_PORT/sluice" \
    --port "$PORT" --http-port 0 --grpc-port 0 --snapshot "" >"$TMP/down.log" 2>&1
check down-refused test $? -ne 0
check down-says-where grep -q "cannot connect to postgresql://sluice@127.0.0.1:$HELD_PORT/sluice" \
    "$TMP/down.log"
check down-says-why grep -qi "refused" "$TMP/down.log"

stop_bg pg INT
finish
