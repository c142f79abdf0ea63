#!/usr/bin/env bash
# test_server_redis_mode.sh - sluiced follows a Redis that gains or loses sluice.so without being
# restarted itself: each connection to a node asks whether the module is loaded, and a decision
# sent as a module command to a node that lost it is re-sent as a Lua script rather than failed.
#
#   1. module: decisions through SL.THROTTLE
#   2. Redis restarted on the same port without the module: the first decision after is admitted
#      (through the scripts), the log says so once, INFO and /metrics show it
#   3. Redis restarted with the module: back to the module's commands, logged
#   4. the module unloaded while connected (no reconnect): the decision that meets "unknown
#      command" is re-sent as a script (a second sluiced with one loop, connected before, makes
#      sure a decision meets it); the module's state and the scripts' live under distinct names,
#      so neither reads the other's bytes
#   5. the module loaded again, sluiced's connections dropped: back to the module
#
# The rule denies on a store error, so a decision that failed would show as a denial; and the
# store error count stays 0 throughout.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: d
    algorithm: sliding_log
    limit: 100
    window: 1h
    on_store_error: deny
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
sc() { redis-cli -p "$1" "${@:2}" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
calls() { # PORT COMMAND: how many times Redis ran COMMAND (0 if never)
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[=,:]' -v c="cmdstat_$2" '$1 == c {n = $3} END {print n + 0}'
}
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
errors() { # PORT: error replies Redis has sent ("ERR ...")
    redis-cli -p "$1" INFO errorstats | tr -d '\r' |
        awk -F'[=:]' '$1 == "errorstat_ERR" {n = $3} END {print n + 0}'
}
LOST="redis 127.0.0.1:[0-9]*: sluice.so is not loaded: deciding with the Lua scripts"
FOUND="redis 127.0.0.1:[0-9]*: sluice.so is loaded: deciding with its commands"
redis_args=(--enable-module-command local)

# --- 1. with the module
start_redis r1 "${redis_args[@]}" --loadmodule "$MODULE" || { cat "$TMP/r1.log"; exit 1; }
RP=$REDIS_PORT
start_sluiced s --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" \
    --store "redis://127.0.0.1:$RP" --store-timeout 1s --threads 2 || { cat "$TMP/s.log"; exit 1; }
P=$RESP_PORT H=$HTTP_PORT
check module-at-start wait_log s "request store redis (sluice.so module)" 1
check module-decides matches "$(sc "$P" SL.ALLOW d k1)" '^1 100 99 0 '
check module-command-used test "$(calls "$RP" sl.throttle)" -ge 1
check info-module matches "$(sc "$P" INFO server)" 'request_store:redis \(sluice\.so module\)'
check metric-module test "$(metric "$H" 'sluice_redis_nodes{mode="module"}')" = 1

# --- 2. Redis restarted without the module, same port
stop_bg r1 KILL
start_redis_at r2 "$RP" "${redis_args[@]}" || { cat "$TMP/r2.log"; exit 1; }
check lua-first-decision matches "$(sc "$P" SL.ALLOW d k1)" '^1 100 99 0 '
check lua-logged wait_log s "$LOST" 1
for i in 1 2 3 4; do sc "$P" SL.ALLOW d k1 >/dev/null; done # both loops, most likely
check lua-same-state matches "$(sc "$P" SL.ALLOW d k1)" '^1 100 94 0 '
check lua-scripts-used test $(($(calls "$RP" evalsha) + $(calls "$RP" eval))) -ge 6
check lua-no-module-command test "$(calls "$RP" sl.throttle)" -eq 0
check lua-logged-once test "$(grep -c -- "$LOST" "$TMP/s.log")" -eq 1
check info-lua matches "$(sc "$P" INFO server)" 'request_store:redis \(Lua scripts\)'
check metric-lua test "$(metric "$H" 'sluice_redis_nodes{mode="lua"}')" = 1
check metric-lua-no-module test "$(metric "$H" 'sluice_redis_nodes{mode="module"}')" = 0

# --- 3. Redis restarted with the module
stop_bg r2 KILL
start_redis_at r3 "$RP" "${redis_args[@]}" --loadmodule "$MODULE" || { cat "$TMP/r3.log"; exit 1; }
check module-again-first-decision matches "$(sc "$P" SL.ALLOW d k1)" '^1 100 99 0 '
check module-again-logged wait_log s "$FOUND" 1
check module-again-decides matches "$(sc "$P" SL.ALLOW d k1)" '^1 100 98 0 '
check module-again-command-used test "$(calls "$RP" sl.throttle)" -ge 1
check metric-module-again test "$(metric "$H" 'sluice_redis_nodes{mode="module"}')" = 1

# --- 4. the module unloaded under open connections
start_sluiced t --config-store "$TMP/s.db" --snapshot "" --store "redis://127.0.0.1:$RP" \
    --store-timeout 1s --threads 1 || { cat "$TMP/t.log"; exit 1; }
PT=$RESP_PORT
check state-module matches "$(sc "$PT" SL.ALLOW d k2)" '^1 100 99 0 '
errs=$(errors "$RP")
check unload matches "$(sc "$RP" MODULE UNLOAD sluice)" '^OK$'
# an all-or-nothing script meets the missing module first: nothing was written, so it is decided
# pair by pair instead of failing
check unloaded-allowall matches "$(sc "$PT" SL.ALLOWALL d k3 d k4)" '^1 100 99 0 '
check unloaded-allowall-charged matches "$(sc "$PT" SL.PEEK d k3)" '^1 100 99 0 '
check unloaded-first-decision matches "$(sc "$PT" SL.ALLOW d k2)" '^1 100 99 0 '
check unknown-command-met test "$(errors "$RP")" -gt "$errs"
check unloaded-logged wait_log t "$LOST" 1
check unloaded-decides matches "$(sc "$PT" SL.ALLOW d k2)" '^1 100 98 0 '
check unloaded-other-sluiced matches "$(sc "$P" SL.ALLOW d k2)" '^1 100 97 0 '
check unloaded-other-logged wait_log s "$LOST" 2
check two-states test "$(sc "$RP" KEYS 'sl:{k2}:d:*' | wc -w)" -eq 2
check t-no-store-errors test "$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
    awk '$1 == "sluice_store_errors_total{rule=\"d\"}" {print $2}')" -eq 0
stop_bg t TERM

# --- 5. loaded again; sluiced's connections dropped, so each loop asks again
check load matches "$(sc "$RP" MODULE LOAD "$MODULE")" '^OK$'
check kill-clients matches "$(sc "$RP" CLIENT KILL TYPE normal)" '^[1-9]'
check reloaded-decides matches "$(sc "$P" SL.ALLOW d k2)" '^1 100 98 0 '
check reloaded-logged wait_log s "$FOUND" 2

check no-store-errors test "$(curl -s "http://127.0.0.1:$H/metrics" |
    awk '$1 == "sluice_store_errors_total{rule=\"d\"}" {print $2}')" -eq 0
stop_bg s TERM
check s-exit-0 test $? -eq 0
finish
