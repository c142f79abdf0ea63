#!/usr/bin/env bash
# test_server_backup.sh - overrides can be listed (SL.OVERRIDE LIST with a cursor, GET
# /v1/rules/{name}/overrides with ?after=, `sluice overrides list`) and backed up: SL.RULE EXPORT
# holds every rule and every override, and importing it with REPLACE into a store changed
# meanwhile gives back exactly the store that was exported; a copy of the store file put back in
# place of the file (renamed over it) while sluiced runs is opened, and gives back exactly the
# store it copied.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: token_bucket
    limit: 100
    window: 1s
    burst: 200
  - name: login
    algorithm: sliding_log
    limit: 10
    window: 1m
YAML
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
http() { curl -s "http://127.0.0.1:$HTTP_PORT$1"; }
# dump: every rule and every override, in order: what "the store" means for the comparison
dump() {
    local r
    for r in $(redis-cli -p "$RESP_PORT" SL.RULE LIST); do
        echo "rule $r $(redis-cli -p "$RESP_PORT" SL.RULE GET "$r")"
        "$SLUICE" -p "$RESP_PORT" overrides list "$r" | sed "s/^/override $r /"
    done
}

start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" ||
    { cat "$TMP/s1.log"; exit 1; }

# 250 overrides on api, a few on login, one blocked, one with a key that is not a word
for i in $(seq -w 1 250); do
    printf 'SL.OVERRIDE SET api tenant:%s {"limit":%d}\r\n' "$i" "$((1000 + 10#$i))"
done | redis-cli -p "$RESP_PORT" --pipe >/dev/null
check ov-login matches "$(cli SL.OVERRIDE SET login 'a user' '{"limit":3,"window":"10m"}')" '^OK$'
check ov-blocked matches "$(cli SL.OVERRIDE SET login banned '{"limit":0}')" '^OK$'

# SL.OVERRIDE LIST pages by key with a cursor, like SCAN
PAGE=$(redis-cli -p "$RESP_PORT" SL.OVERRIDE LIST api 0 COUNT 100)
CURSOR=$(echo "$PAGE" | head -1)
check list-page-size test "$(echo "$PAGE" | tail -n +2 | wc -l)" -eq 200
check list-first matches "$(echo "$PAGE" | sed -n 2p)" '^tenant:001$'
check list-cursor matches "$CURSOR" '^[0-9a-f]+$'
n=100
while [ "$CURSOR" != "0" ]; do
    PAGE=$(redis-cli -p "$RESP_PORT" SL.OVERRIDE LIST api "$CURSOR" COUNT 100)
    CURSOR=$(echo "$PAGE" | head -1)
    n=$((n + $(echo "$PAGE" | tail -n +2 | grep -c '^tenant:')))
    [ "$n" -gt 1000 ] && break
done
check list-all test "$n" -eq 250
check list-bad-cursor matches "$(cli SL.OVERRIDE LIST api zz)" '^ERR invalid cursor$'
check list-bad-count matches "$(cli SL.OVERRIDE LIST api 0 COUNT 0)" '^ERR count must be 1 to 1000$'
check list-unknown-rule matches "$(cli SL.OVERRIDE LIST nope)" "^ERR unknown rule 'nope'$"

# over HTTP: the same pages, as JSON
BODY=$(http "/v1/rules/login/overrides")
check http-list matches "$BODY" '^\{"overrides":\[\{"key":"a user","override":\{"limit":3,"window":"10m"\}\},\{"key":"banned","override":\{"limit":0\}\}\],"next":null\}$'
BODY=$(http "/v1/rules/api/overrides?limit=2")
check http-page matches "$BODY" '"next":"74656e616e743a303032"'
BODY=$(http "/v1/rules/api/overrides?limit=1&after=74656e616e743a303032")
check http-after matches "$BODY" '^\{"overrides":\[\{"key":"tenant:003"'
check http-bad-after matches "$(http "/v1/rules/api/overrides?after=xyz")" 'after: must be a cursor'

# the CLI lists them all
check cli-list test "$("$SLUICE" -p "$RESP_PORT" overrides list api | wc -l)" -eq 250
check cli-list-line matches "$("$SLUICE" -p "$RESP_PORT" overrides list login | head -1)" \
    $'^a user\t\\{"limit":3,"window":"10m"\\}$'

# export holds every override; importing it with REPLACE restores the store exactly
dump >"$TMP/before.txt"
"$SLUICE" -p "$RESP_PORT" rules export >"$TMP/backup.yaml"
check export-overrides test "$(grep -c 'key: "tenant:' "$TMP/backup.yaml")" -eq 250
check export-blocked grep -q 'key: "banned"' "$TMP/backup.yaml"
# change the store: a rule added and one changed, overrides added, changed and deleted
cli SL.RULE SET extra '{"algorithm":"gcra","limit":5,"window":"1s"}' >/dev/null
cli SL.RULE SET login '{"algorithm":"sliding_log","limit":20,"window":"1m"}' >/dev/null
cli SL.OVERRIDE SET api tenant:999 '{"limit":7}' >/dev/null
cli SL.OVERRIDE SET api tenant:001 '{"limit":8}' >/dev/null
cli SL.OVERRIDE DEL login banned >/dev/null
dump >"$TMP/changed.txt"
check changed-differs bash -c "! cmp -s '$TMP/before.txt' '$TMP/changed.txt'"
check restore matches "$("$SLUICE" -p "$RESP_PORT" rules import --replace "$TMP/backup.yaml")" '^OK$'
dump >"$TMP/after.txt"
check round-trip cmp "$TMP/before.txt" "$TMP/after.txt"
check restore-logged grep -q "SL.RULE IMPORT REPLACE: removed 1 rules (and their overrides): extra" "$TMP/s1.log"

# a copy of the store file (SQLite's own backup, taken while sluiced runs) put back in place of
# the file, renamed over it: sluiced opens it at its next poll, and serves exactly what it held
sqlite3 "$TMP/store.db" ".backup '$TMP/file-backup.db'"
check file-backup-taken test -s "$TMP/file-backup.db"
cli SL.RULE SET later '{"algorithm":"gcra","limit":5,"window":"1s"}' >/dev/null
cli SL.OVERRIDE SET api tenant:002 '{"limit":9}' >/dev/null
check later-in-force matches "$(cli SL.RULE GET later)" 'gcra'
cp "$TMP/file-backup.db" "$TMP/store.db.new"
mv "$TMP/store.db.new" "$TMP/store.db"
reopened() { grep -q "another file was put in place of sqlite $TMP/store.db" "$TMP/s1.log"; }
check file-put-back poll 10 reopened
gone() { [[ "$(cli SL.RULE GET later)" =~ not\ found|unknown|nil|^$ ]]; }
check file-rules-back poll 10 gone
dump >"$TMP/put-back.txt"
check file-round-trip cmp "$TMP/before.txt" "$TMP/put-back.txt"
check file-override-back matches "$(cli SL.ALLOW api tenant:002)" '^1 2004 ' # {"limit":1002}, burst 2x
check file-writable matches "$(cli SL.RULE SET later '{"algorithm":"gcra","limit":5,"window":"1s"}')" '^OK$'
stop_bg s1 TERM
finish
