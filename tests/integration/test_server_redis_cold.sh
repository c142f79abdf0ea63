#!/usr/bin/env bash
# test_server_redis_cold.sh - cold_start: closed with the Redis store, with the sluice.so module
# and with the Lua scripts. State lives in Redis, so a start of sluiced keeps every key's usage;
# keys start without their usage in three cases, and a closed rule then takes a key that Redis
# does not hold as having used its whole quota, for one window (an open rule's key is fresh):
#
#   1. sluiced starts: nothing is closed (Redis kept every key)
#   2. a rule's algorithm changes (its keys get other names): refused for one window (also after
#      its numbers change within it), then admitted as a fresh key would be; a peek writes
#      nothing; an open rule's keys are fresh
#   3. Redis restarts without persistence (another run_id on the same address: the data is
#      lost), found on the first connection after: logged once; the closed rule's keys are
#      refused (SL.ALLOWALL too: all or nothing, the open pair not charged; a refund gives back
#      only what it charged), then admitted after one window; the open rule's are fresh
#   4. (module) the module unloaded under open connections: the keys are under the scripts'
#      names now, so the same as 3
#
# Rules are sliding logs of 3 per 6 s: a key that took the whole quota at the closed start is
# refused until exactly one window after it. The window is long so that the checks made after a
# closed start (a handful of commands) fall within it on a loaded machine too: with 2 s, a
# machine busy enough to take longer between them saw a fresh key, rightly. No store errors
# throughout (a failed decision would look like a refusal).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: closed
    algorithm: sliding_log
    limit: 3
    window: 6s
    cold_start: closed
  - name: open
    algorithm: sliding_log
    limit: 3
    window: 6s
  - name: algc
    algorithm: sliding_window
    limit: 3
    window: 6s
    cold_start: closed
  - name: algo
    algorithm: sliding_window
    limit: 3
    window: 6s
YAML
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
# RULE KEY [LIMIT]: a refusal for at most one window (6000 ms) from now: allowed 0, remaining 0,
# retry in (0, 6000]
refused_for_a_window() {
    local r retry
    r=$(sc SL.ALLOW "$1" "$2")
    matches "$r" "^0 ${3:-3} 0 [0-9]+ [0-9]+\$" || return 1
    retry=$(echo "$r" | cut -d' ' -f4)
    [ "$retry" -gt 0 ] && [ "$retry" -le 6000 ] || { echo "  retry $retry"; return 1; }
}
admitted() { matches "$(sc SL.ALLOW "$1" "$2")" "^1 ${3:-3} $((${3:-3} - 1)) 0 " >/dev/null; }
redis_keys() { redis-cli -p "$1" --scan --pattern "$2" | wc -l; } # REDIS_PORT PATTERN
no_store_errors() { # of the closed rules (the refusals checked were no store errors)
    local n
    n=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
        awk '/^sluice_store_errors_total\{rule="(closed|algc)"\}/ {n += $2} END {print n + 0}')
    [ "$n" -eq 0 ] || { echo "  $n store errors"; return 1; }
}
spec() { # ALGORITHM COLD_START [LIMIT]: a rule of 3 (or LIMIT) per 6 s as JSON
    printf '{"algorithm":"%s","limit":%d,"window":"6s","cold_start":"%s"}' "$1" "${3:-3}" "$2"
}
LOST="cold start closed on this node: its data was lost"
MOVED="cold start closed on this node: its keys are under the new mode's names"

# run_suite MODE SLUICED REDIS: REDIS (module or not) is restarted on its port by step 3
run_suite() {
    local m=$1 s=$2 r=$3 rp=$REDIS_PORT
    shift 3
    local redis_args=("$@")
    start_sluiced "$s" --rules "$TMP/rules.yaml" --config-store "$TMP/$s.db" --snapshot "" \
        --store "redis://127.0.0.1:$rp" --store-timeout 1s --threads 2 ||
        { cat "$TMP/$s.log"; exit 1; }

    # 1. a start of sluiced closes nothing: Redis holds the keys
    check "$m: start-fresh" matches "$(sc SL.ALLOW closed k1)" '^1 3 2 0 '

    # 2. an algorithm change: closed for one window, open fresh
    check "$m: algc-spent" matches "$(sc SL.ALLOW algc k2)" '^1 3 2 0 '
    check "$m: algc-set" matches "$(sc SL.RULE SET algc "$(spec sliding_log closed)")" '^OK$'
    check "$m: algo-set" matches "$(sc SL.RULE SET algo "$(spec sliding_log open)")" '^OK$'
    check "$m: algc-logged" wait_log "$s" "rule 'algc' changed algorithm (.* they start as having used their whole quota, for one window (cold_start: closed)"
    check "$m: algc-refused" refused_for_a_window algc k2
    check "$m: algc-new-key-refused" refused_for_a_window algc k3
    check "$m: algc-peek" matches "$(sc SL.PEEK algc k4)" '^1 3 0 0 [0-9]+$'
    check "$m: algc-peek-no-write" test "$(redis_keys "$rp" 'sl:{k4}:*')" -eq 0
    check "$m: algo-fresh" matches "$(sc SL.ALLOW algo k2)" '^1 3 2 0 '
    # its numbers change within the window: the window goes on
    check "$m: algc-numbers" matches "$(sc SL.RULE SET algc "$(spec sliding_log closed 4)")" '^OK$'
    check "$m: algc-numbers-refused" refused_for_a_window algc k8 4
    check "$m: algc-after-window" poll 16 admitted algc k8 4
    check "$m: algc-new-after-window" admitted algc k9 4

    # 3. Redis restarted empty on its address
    check "$m: closed-spent" matches "$(sc SL.ALLOW closed k5)" '^1 3 2 0 '
    check "$m: open-spent" matches "$(sc SL.ALLOW open k5)" '^1 3 2 0 '
    stop_bg "$r" KILL
    start_redis_at "$r" "$rp" "${redis_args[@]}" || { cat "$TMP/$r.log"; exit 1; }
    sc SL.ALLOW open reconnect >/dev/null # the first connection after, on some loop
    check "$m: lost-logged" wait_log "$s" "$LOST"
    check "$m: closed-refused" refused_for_a_window closed k5
    check "$m: closed-new-key-refused" refused_for_a_window closed k6
    check "$m: open-fresh" matches "$(sc SL.ALLOW open k5)" '^1 3 2 0 '
    # all or nothing: the closed pair refuses, so the open one is not charged
    check "$m: allowall-refused" matches "$(sc SL.ALLOWALL open ka closed ka)" '^0 3 0 [0-9]+ '
    check "$m: allowall-open-uncharged" matches "$(sc SL.PEEK open ka)" '^1 3 3 0 0$'
    # a refund on a key Redis lost gives back what it charged, from a full log
    check "$m: refund-saturated" matches "$(sc SL.SETTLE closed kr 1 0)" '^1 3 1 0 [0-9]+$'
    check "$m: closed-after-window" poll 16 admitted closed k5
    check "$m: lost-logged-once" test "$(grep -c -- "$LOST" "$TMP/$s.log")" -eq 1
    check "$m: no-store-errors" no_store_errors
}

# --- with the module
start_redis rm --enable-module-command local --loadmodule "$MODULE" || { cat "$TMP/rm.log"; exit 1; }
run_suite module s1 rm --enable-module-command local --loadmodule "$MODULE"
check "module: detected" wait_log s1 "request store redis (sluice.so module)"

# 4. the module unloaded under open connections: the scripts' names hold nothing yet
check "module: k7-spent" matches "$(sc SL.ALLOW closed k7)" '^1 3 2 0 '
check "module: open-k7-spent" matches "$(sc SL.ALLOW open k7)" '^1 3 2 0 '
check "module: unload" matches "$(redis-cli -p "$REDIS_PORT" MODULE UNLOAD sluice)" '^OK$'
sc SL.ALLOW open unloaded >/dev/null # meets "unknown command": the node is asked again
check "module: moved-logged" wait_log s1 "$MOVED"
check "module: moved-refused" refused_for_a_window closed k7
check "module: moved-open-fresh" matches "$(sc SL.ALLOW open k7)" '^1 3 2 0 '
check "module: moved-no-store-errors" no_store_errors
stop_bg s1 TERM
check "module: s1-exit-0" test $? -eq 0

# --- with the Lua scripts
start_redis rl || { cat "$TMP/rl.log"; exit 1; }
run_suite lua s2 rl
check "lua: detected" wait_log s2 "request store redis (Lua scripts)"
stop_bg s2 TERM
check "lua: s2-exit-0" test $? -eq 0
finish
