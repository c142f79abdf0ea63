#!/usr/bin/env bash
# test_server_rules_file.sh - what a rules file owns. `--rules FILE` imports the file at start and
# on SIGHUP: the rules it names are added or changed, rules it named before and no longer names
# are removed, rules made through the API are kept; every rule added, changed and removed is
# logged by name. `--rules-replace FILE` makes the store exactly the file. A file whose rules list
# is empty (cut short) is refused and turns nothing off. SL.RULE IMPORT adds and changes; with
# REPLACE it replaces.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
rules_file() { # rules_file NAME:LIMIT...
    printf 'rules:\n' >"$TMP/rules.yaml"
    for r in "$@"; do
        printf '  - name: %s\n    algorithm: sliding_log\n    limit: %s\n    window: 1h\n' \
            "${r%%:*}" "${r##*:}" >>"$TMP/rules.yaml"
    done
}
ARGS=(--config-store "$TMP/store.db" --snapshot "" --poll-interval 100ms)

# 1. start: the file's rules are added and logged
rules_file login:10 api:100
start_sluiced s --rules "$TMP/rules.yaml" "${ARGS[@]}" || { cat "$TMP/s.log"; exit 1; }
check start-added grep -q "rules file $TMP/rules.yaml: added 2 rules: api, login" "$TMP/s.log"

# 2. a rule made through the API survives SIGHUP
check api-set matches "$(cli SL.RULE SET extra '{"algorithm":"gcra","limit":5,"window":"1s"}')" '^OK$'
rules_file login:20 search:50 # api dropped from the file, login changed, search added
kill -HUP "$(cat "$TMP/s.pid")"
check hup-removed wait_log s "SIGHUP: rules file $TMP/rules.yaml: removed 1 rules (and their overrides): api"
check hup-added grep -q "SIGHUP: rules file $TMP/rules.yaml: added 1 rules: search" "$TMP/s.log"
check hup-changed grep -q "SIGHUP: rules file $TMP/rules.yaml: changed 1 rules: login" "$TMP/s.log"
check hup-kept grep -q "kept 1 rules it does not name (made through the API)" "$TMP/s.log"
for ((i = 0; i < 100; i++)); do
    [ "$(cli SL.RULE LIST)" = "extra login search" ] && break
    sleep 0.05
done
check hup-list matches "$(cli SL.RULE LIST)" '^extra login search$'
check hup-login matches "$(cli SL.PEEK login k)" '^1 20 20 '

# 3. a rules file cut short (an empty list) is refused: nothing is turned off
printf 'rules:\n' >"$TMP/rules.yaml"
kill -HUP "$(cat "$TMP/s.pid")"
check empty-refused wait_log s "SIGHUP: rules not reloaded (the rules in force stay): .*rules: is empty"
check empty-kept matches "$(cli SL.RULE LIST)" '^extra login search$'

# 4. SL.RULE IMPORT adds and changes; REPLACE replaces; an empty list is refused
check import-merge matches "$(cli SL.RULE IMPORT "$(printf 'rules:\n  - name: more\n    algorithm: gcra\n    limit: 3\n    window: 1s\n')")" '^OK$'
check import-merge-list matches "$(cli SL.RULE LIST)" '^extra login more search$'
check import-merge-logged wait_log s "SL.RULE IMPORT: added 1 rules: more"
check import-empty matches "$(cli SL.RULE IMPORT 'rules: []')" '^ERR invalid rules: .*rules: is empty'
check import-replace matches "$(cli SL.RULE IMPORT "$(printf 'rules:\n  - name: only\n    algorithm: gcra\n    limit: 3\n    window: 1s\n')" REPLACE)" '^OK$'
check import-replace-list matches "$(cli SL.RULE LIST)" '^only$'
check import-replace-logged wait_log s "SL.RULE IMPORT REPLACE: removed 4 rules (and their overrides): extra, login, more, search"
check import-bad-word matches "$(cli SL.RULE IMPORT 'rules: []' EVERYTHING)" '^ERR syntax error$'
stop_bg s TERM

# 5. a restart with --rules keeps the API's rules too
rules_file login:10
start_sluiced s2 --rules "$TMP/rules.yaml" "${ARGS[@]}" || { cat "$TMP/s2.log"; exit 1; }
check restart-kept matches "$(cli SL.RULE LIST)" '^login only$'
stop_bg s2 TERM

# 6. --rules-replace: the store becomes the file
start_sluiced s3 --rules-replace "$TMP/rules.yaml" "${ARGS[@]}" || { cat "$TMP/s3.log"; exit 1; }
check replace-list matches "$(cli SL.RULE LIST)" '^login$'
check replace-logged grep -q "removed 1 rules (and their overrides): only" "$TMP/s3.log"
stop_bg s3 TERM
"$SLUICED" --grpc-port 0 --port 0 --http-port "$(free_port)" --rules "$TMP/rules.yaml" \
    --rules-replace "$TMP/rules.yaml" "${ARGS[@]}" >"$TMP/both.out" 2>&1
check both-refused test $? -eq 2
check both-message grep -q "give files to one of them, not both" "$TMP/both.out"
finish
