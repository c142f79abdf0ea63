#!/usr/bin/env bash
# test_server_memory_cap.sh - --max-memory caps keys, never the rule set: a small cap still loads
# and serves every rule; a rule one key of which can never fit is refused when it is set or
# imported, with the reason; a store that already holds such a rule (written under a larger cap)
# never stops a start: the rule is in force, logged, and its keys get on_store_error.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: token_bucket
    limit: 100
    window: 1h
  - name: login
    algorithm: sliding_log
    limit: 10
    window: 1h
YAML
BIG='{"algorithm":"sliding_log","limit":200000,"window":"1h","on_store_error":"deny"}'

# 1. the smallest cap: every rule loads and decides
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/a.db" --snapshot "" \
    --max-memory 64k || { cat "$TMP/s1.log"; exit 1; }
check small-cap-rules matches "$(cli SL.RULE LIST)" '^api login$'
check small-cap-api matches "$(cli SL.ALLOW api k)" '^1 100 99 0 '
check small-cap-login matches "$(cli SL.ALLOW login k)" '^1 10 9 0 '
check small-cap-not-oom bash -c "! grep -q 'out of memory' '$TMP/s1.log'"
# a rule one key of which takes 1.6 MB can never limit anyone under 64k: refused, with why
check big-refused matches "$(cli SL.RULE SET big "$BIG")" \
    "^ERR invalid rule: one key of this rule takes 3200032 bytes of state, more than --max-memory \(65536 bytes"
check big-not-in matches "$(cli SL.RULE LIST)" '^api login$'
check big-override-refused matches "$(cli SL.OVERRIDE SET login vip '{"limit":200000}')" \
    '^ERR invalid override: one key of this rule takes 3200032 bytes'
check big-import-refused matches "$(cli SL.RULE IMPORT "$(printf 'rules:\n  - name: big\n    algorithm: sliding_log\n    limit: 200000\n    window: 1h\n')")" \
    "^ERR invalid rules: rules\[0\] 'big': one key of this rule takes 3200032 bytes"
stop_bg s1 TERM

# 2. a store holding such a rule (set with no cap) starts under the cap: in force, logged, every
# new key of it gets on_store_error, the other rules work
start_sluiced s2 --config-store "$TMP/b.db" --snapshot "" || { cat "$TMP/s2.log"; exit 1; }
check set-uncapped matches "$(cli SL.RULE SET big "$BIG")" '^OK$'
check set-api matches "$(cli SL.RULE SET api '{"algorithm":"gcra","limit":5,"window":"1h"}')" '^OK$'
stop_bg s2 TERM
start_sluiced s3 --config-store "$TMP/b.db" --snapshot "" --max-memory 1m ||
    { cat "$TMP/s3.log"; exit 1; }
check capped-start-rules matches "$(cli SL.RULE LIST)" '^api big$'
check capped-start-logged grep -q "rule 'big' is in force but one key of this rule takes 3200032 bytes" "$TMP/s3.log"
check capped-big-denied matches "$(cli SL.ALLOW big k)" '^0 200000 0 [1-9]'
check capped-api matches "$(cli SL.ALLOW api k)" '^1 6 5 0 '
check capped-store-error matches "$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk '$1 ~ /^sluice_store_errors_total\{rule="big"\}/ {print $2}')" '^[1-9]'
stop_bg s3 TERM
check capped-exit-0 test $? -eq 0
finish
