#!/usr/bin/env bash
# test_server_redis_usage.sh - with the Redis store, an override or a rule change changes a key's
# numbers, not its usage, as with the memory store (test_server_override_usage.sh), with the
# sluice.so module and with the Lua scripts: an override set and removed (sliding_buckets: the
# same window and buckets, exact; token_bucket: the units not yet refilled, at the new rate), a
# rule whose numbers change, and an algorithm change (another Redis key: the keys start fresh).
# One Redis key per client key and rule, whatever its numbers. Two loops: each redis-cli call is
# a new connection, on either loop, each with its own over-limit cache. Windows are an hour long
# and sliding (no count crosses a window boundary during the test).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: up
    algorithm: sliding_buckets
    limit: 50
    window: 1h
    buckets: 20
  - name: tb
    algorithm: token_bucket
    limit: 10
    window: 1h
  - name: log
    algorithm: sliding_log
    limit: 10
    window: 1h
  - name: alg
    algorithm: sliding_window
    limit: 10
    window: 1h
YAML
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
field() { echo "$1" | cut -d' ' -f"$2"; }
spend() { # RULE KEY N: N single requests, all admitted
    local i
    for ((i = 0; i < $3; i++)); do
        [ "$(field "$(sc SL.ALLOW "$1" "$2")" 1)" = 1 ] || { echo "  request $i refused"; return 1; }
    done
}
refused_everywhere() { # RULE KEY: refused on 6 connections (both loops)
    local i r
    for i in 1 2 3 4 5 6; do
        r=$(sc SL.ALLOW "$1" "$2")
        [ "$(field "$r" 1)" = 0 ] || { echo "  got '$r'"; return 1; }
    done
}
# redis_keys REDIS_PORT PATTERN: how many keys match
redis_keys() { redis-cli -p "$1" --scan --pattern "$2" | wc -l; }

# run_suite MODE REDIS_PORT
run_suite() {
    local m=$1 rp=$2 r
    # 1. an override set and removed: 6 of 50 used, then a limit of 2 refuses everywhere, and
    # without it the key has 43 left after one more request
    check "$m: up-spent" matches "$(sc SL.ALLOW up k1 COST 6)" '^1 50 44 0 '
    check "$m: up-ov-set" matches "$(sc SL.OVERRIDE SET up k1 '{"limit":2}')" '^OK$'
    check "$m: up-ov-refused" refused_everywhere up k1
    check "$m: up-ov-limit" matches "$(sc SL.ALLOW up k1 COST 0)" '^0 2 0 '
    check "$m: up-ov-del" matches "$(sc SL.OVERRIDE DEL up k1)" '^1$'
    check "$m: up-back" matches "$(sc SL.ALLOW up k1)" '^1 50 43 0 '
    check "$m: up-back-other-loop" matches "$(sc SL.ALLOW up k1)" '^1 50 42 0 '
    check "$m: up-one-key" test "$(redis_keys "$rp" 'sl:{k1}:up:*')" -eq 1

    # 2. token_bucket: 4 units at 6 min each owed 24 min; at 3 min each that is 4 units of 20
    check "$m: tb-spent" matches "$(sc SL.ALLOW tb k2 COST 4)" '^1 10 6 0 '
    check "$m: tb-ov-set" matches "$(sc SL.OVERRIDE SET tb k2 '{"limit":20}')" '^OK$'
    check "$m: tb-ov-carried" matches "$(sc SL.ALLOW tb k2)" '^1 20 15 0 '
    check "$m: tb-ov-del" matches "$(sc SL.OVERRIDE DEL tb k2)" '^1$'
    check "$m: tb-back" matches "$(sc SL.ALLOW tb k2 COST 0)" '^1 10 5 0 '

    # 3. sliding_log held to a smaller limit keeps every unit (the oldest entries merged into the
    # newest the limit's number allows); back at the larger limit the key has what it had left
    spend log k4 6
    check "$m: log-down-set" matches "$(sc SL.OVERRIDE SET log k4 '{"limit":2}')" '^OK$'
    check "$m: log-down-refused" refused_everywhere log k4
    check "$m: log-down-del" matches "$(sc SL.OVERRIDE DEL log k4)" '^1$'
    check "$m: log-down-back-kept" matches "$(sc SL.ALLOW log k4)" '^1 10 3 0 '

    # 4. a rule whose numbers change keeps its keys' usage (8 of "up" used by k1)
    check "$m: up-rule-set" matches "$(sc SL.RULE SET up '{"algorithm":"sliding_buckets","limit":100,"window":"1h","buckets":20}')" '^OK$'
    check "$m: up-rule-carried" matches "$(sc SL.ALLOW up k1 COST 0)" '^1 100 92 0 '
    check "$m: up-rule-one-key" test "$(redis_keys "$rp" 'sl:{k1}:up:*')" -eq 1

    # 5. an algorithm change cannot carry usage: another Redis key, which starts fresh
    spend alg k6 3
    check "$m: alg-set" matches "$(sc SL.RULE SET alg '{"algorithm":"fixed_window","limit":10,"window":"1h"}')" '^OK$'
    # ... and the log says so: fresh, by the rule's cold_start (open)
    local log=s1
    [ "$m" = module ] || log=s2
    check "$m: alg-logged" wait_log "$log" "rule 'alg' changed algorithm (.* they start fresh (cold_start: open)"
    check "$m: alg-fresh" matches "$(sc SL.ALLOW alg k6)" '^1 10 9 0 '
    check "$m: alg-two-keys" test "$(redis_keys "$rp" 'sl:{k6}:alg:*')" -eq 2
}

# --- with the module
start_redis redis --loadmodule "$MODULE" || { cat "$TMP/redis.log"; exit 1; }
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/s1.db" --snapshot "" \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 1s --threads 2 ||
    { cat "$TMP/s1.log"; exit 1; }
check module-detected wait_log s1 "request store redis (sluice.so module)"
run_suite module "$REDIS_PORT"
stop_bg s1 TERM
check s1-exit-0 test $? -eq 0

# --- with the Lua scripts (a Redis without the module)
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/s2.db" --snapshot "" \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 1s --threads 2 ||
    { cat "$TMP/s2.log"; exit 1; }
check lua-detected wait_log s2 "request store redis (Lua scripts)"
run_suite lua "$REDIS_PORT"
stop_bg s2 TERM
check s2-exit-0 test $? -eq 0
finish
