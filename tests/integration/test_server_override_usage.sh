#!/usr/bin/env bash
# test_server_override_usage.sh - an override changes a key's numbers, not its usage (memory
# store). Where overrides meet usage: an override set and removed (the rule's last override, and
# one of several), each algorithm's conversion (exact, and sliding_log's safe side: merged entries), a rule whose
# numbers change under keys with and without overrides, an algorithm change (cold_start closed),
# a restart from a snapshot between setting and removing an override, and an override set by a
# rules file and SIGHUP. Two loops: each redis-cli call is a new connection, on either loop.
# Windows are an hour long and sliding (no count crosses a window boundary during the test).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

write_rules() { # $1: extra YAML for the rule "log"
    cat >"$TMP/rules.yaml" <<YAML
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
    overrides:
      - key: vip
        limit: 100
  - name: log
    algorithm: sliding_log
    limit: 10
    window: 1h
$1
  - name: alg
    algorithm: sliding_window
    limit: 10
    window: 1h
YAML
}
write_rules ""
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
# field N of a decision: 1 allowed, 2 limit, 3 remaining, 4 retry_after_ms
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

start() {
    start_sluiced "$1" --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" \
        --snapshot "$TMP/snap.bin" --threads 2 "${@:2}" || { cat "$TMP/$1.log"; exit 1; }
}
start s1

# 1. the rule's only override, set and removed (sliding_buckets: same window and buckets, exact)
check up-spent matches "$(sc SL.ALLOW up k1 COST 6)" '^1 50 44 0 '
check up-ov-set matches "$(sc SL.OVERRIDE SET up k1 '{"limit":2}')" '^OK$'
check up-ov-refused refused_everywhere up k1
check up-ov-limit matches "$(sc SL.ALLOW up k1 COST 0)" '^0 2 0 '
check up-ov-del matches "$(sc SL.OVERRIDE DEL up k1)" '^1$'
check up-back matches "$(sc SL.ALLOW up k1)" '^1 50 43 0 '
check up-back-other-loop matches "$(sc SL.ALLOW up k1)" '^1 50 42 0 '

# 2. one override among others (token_bucket: units not yet refilled, at the new rate)
check tb-spent matches "$(sc SL.ALLOW tb k2 COST 4)" '^1 10 6 0 '
check tb-ov-set matches "$(sc SL.OVERRIDE SET tb k2 '{"limit":20}')" '^OK$'
# 4 units at 6 min each owed 24 min; at 3 min each that is 4 units of 20: 16 left, then 15
check tb-ov-carried matches "$(sc SL.ALLOW tb k2)" '^1 20 15 0 '
check tb-ov-del matches "$(sc SL.OVERRIDE DEL tb k2)" '^1$'
# 5 units not yet refilled (15 min at 3 min each) are 5 units again at 6 min each: 5 left
check tb-back matches "$(sc SL.ALLOW tb k2 COST 0)" '^1 10 5 0 '
check tb-vip-untouched matches "$(sc SL.ALLOW tb vip)" '^1 100 99 0 '

# 3. sliding_log: a larger limit carries every entry; a smaller one keeps every unit too (the
# oldest entries merged into the newest the limit's number allows), so back at the larger limit
# the key has what it had left: 6 of 10 used, 3 left after one more
spend log k3 6
check log-up-set matches "$(sc SL.OVERRIDE SET log k3 '{"limit":20}')" '^OK$'
check log-up matches "$(sc SL.ALLOW log k3)" '^1 20 13 0 '
check log-up-del matches "$(sc SL.OVERRIDE DEL log k3)" '^1$'
check log-up-back matches "$(sc SL.ALLOW log k3)" '^1 10 2 0 '
spend log k4 6
check log-down-set matches "$(sc SL.OVERRIDE SET log k4 '{"limit":2}')" '^OK$'
check log-down-refused refused_everywhere log k4
check log-down-del matches "$(sc SL.OVERRIDE DEL log k4)" '^1$'
r=$(sc SL.ALLOW log k4)
check log-down-back-kept matches "$r" '^1 10 3 0 '
check log-down-other-key matches "$(sc SL.ALLOW log k4b)" '^1 10 9 0 '

# 4. a rule whose numbers change: keys with and without overrides keep their usage
check up-rule-set matches "$(sc SL.RULE SET up '{"algorithm":"sliding_buckets","limit":100,"window":"1h","buckets":20}')" '^OK$'
check up-rule-carried matches "$(sc SL.ALLOW up k1 COST 0)" '^1 100 92 0 '
spend tb k5 0
check tb-k5-ov matches "$(sc SL.OVERRIDE SET tb k5 '{"limit":20}')" '^OK$'
check tb-k5-spent matches "$(sc SL.ALLOW tb k5 COST 4)" '^1 20 16 0 '
check tb-rule-set matches "$(sc SL.RULE SET tb '{"algorithm":"token_bucket","limit":12,"window":"1h"}')" '^OK$'
r=$(sc SL.ALLOW tb k5 COST 0)
check tb-rule-ov-kept matches "$r" '^1 20 '
check tb-rule-ov-not-fresh test "$(field "$r" 3)" -le 16

# 5. an algorithm change cannot carry usage: the keys start as after a cold start (closed)
spend alg k6 3
check alg-set matches "$(sc SL.RULE SET alg '{"algorithm":"fixed_window","limit":10,"window":"1h","cold_start":"closed"}')" '^OK$'
check alg-closed matches "$(sc SL.ALLOW alg k6)" '^0 10 0 '
check alg-closed-new-key matches "$(sc SL.ALLOW alg k7)" '^0 10 0 '
check alg-logged wait_log s1 "rule 'alg' changed algorithm (sliding_window to fixed_window)" 1

# 6. a restart from a snapshot between setting and removing an override (the restart imports
# the rules file again: "up" is back to its limit of 50, with its keys' usage)
check up-k8-ov matches "$(sc SL.OVERRIDE SET up k8 '{"limit":60}')" '^OK$'
check up-k8-spent matches "$(sc SL.ALLOW up k8 COST 10)" '^1 60 50 0 '
stop_bg s1 TERM
start s2
check up-k8-restored matches "$(sc SL.ALLOW up k8 COST 0)" '^1 60 50 0 '
check up-k8-del matches "$(sc SL.OVERRIDE DEL up k8)" '^1$'
check up-k8-back matches "$(sc SL.ALLOW up k8)" '^1 50 39 0 '

# 7. an override a rules file sets (SIGHUP)
spend log k9 3
write_rules "    overrides:
      - key: k9
        limit: 20"
kill -HUP "$(cat "$TMP/s2.pid")"
check log-k9-hup wait_log s2 "SIGHUP: rules file .*: 1 overrides added or changed"
check log-k9-carried matches "$(sc SL.ALLOW log k9)" '^1 20 16 0 '

finish
