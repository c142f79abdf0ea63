#!/usr/bin/env bash
# test_server_approx.sh - rules with mode: approximate over one Redis shared by three sluiced,
# with the sluice.so module and then with the Lua scripts (a redis-server without the module):
#
#   1. one hot key (an override's numbers) and 10 warm keys hammered from all three at once
#      (a count of decisions, the time only capped): every decision is answered, no fixed
#      window admits more than its key's limit plus approximate's bound, taken from the
#      replies (leased_hammer.py: what each node admitted in a sync interval and the longest
#      trip seen, never a rate), every reply on the hot key shows the override's limit, some
#      decisions were made locally and /metrics counts syncs and local decisions. How many
#      Redis commands a decision costs is a figure of speed: bench/leased measures it, the
#      test prints it
#   2. a rule's numbers change: the key's count is asked again, and the new limit holds
#   3. SIGTERM: a sluiced sends what it admitted and not yet synced before it exits
#   4. Redis killed: decisions go on from the last count (no store error), then
#      on_store_error (deny); Redis restarted on its port: decisions recover
# And with the memory store an approximate rule decides strictly, said once in the log; mode and
# sync_interval go in and come back over HTTP. Each sluiced runs one loop: a loop is a node of
# the bound.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl
export PYTHONPATH=$SLUICE_SOURCE_DIR/tests/integration

MODULE=${SLUICE_MODULE:-$SLUICE_BUILD_DIR/src/module/sluice.so}
# (SLUICE_MODULE: another build's sluice.so, for a TSan build's sluiced: its own cannot load in Redis)
SYNC_MS=10
cat >"$TMP/rules.yaml" <<YAML
rules:
  - name: ah
    algorithm: fixed_window
    limit: 50
    window: 1s
    mode: approximate
    sync_interval: ${SYNC_MS}ms
    overrides:
      - key: hot
        limit: 2000
  - name: at
    algorithm: fixed_window
    limit: 100
    window: 10m
    mode: approximate
  - name: al
    algorithm: fixed_window
    limit: 1000
    window: 10m
    mode: approximate
    sync_interval: 1h
  - name: ar
    algorithm: token_bucket
    limit: 1000
    window: 10m
    mode: approximate
    sync_interval: 500ms
    on_store_error: deny
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
sc() { redis-cli -p "$1" "${@:2}" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
field() { echo "$1" | cut -d' ' -f"$2"; }
# PORT RULE KEY: what Redis holds for the key (a peek is strict): remaining
remaining() { field "$(sc "$1" SL.PEEK "$2" "$3")" 3; }
# PORT N RULE KEY: N pipelined SL.ALLOW; prints how many were admitted
allow_n() {
    python3 - "$@" <<'PY'
import sys
from resp_client import Conn
port, n, rule, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
r = Conn(port).pipeline([["SL.ALLOW", rule, key]] * n)
bad = [x for x in r if not isinstance(x, list)]
if bad:
    raise SystemExit("error reply: %r" % bad[0])
print(sum(1 for x in r if x[0] == 1))
PY
}
sl_calls() { # REDIS_PORT: calls of sl.* commands and EVALSHA/EVAL since the last RESETSTAT
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[=,:]' '/^cmdstat_(sl\.|evalsha|eval)/ {n += $3} END {print n + 0}'
}
metric() { # HTTP_PORT NAME: a metric's value (summed over its series)
    curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m) == 1 {n += $2} END {print n + 0}'
}
store_errors() { curl -s "http://127.0.0.1:$1/metrics" | awk -v r="$2" '$1 == "sluice_store_errors_total{rule=\"" r "\"}" {print $2}'; }
remaining_is() { [ "$(remaining "$1" "$2" "$3")" -eq "$4" ]; } # PORT RULE KEY N
admits() { [[ "$(sc "$1" SL.ALLOW "$2" "$3")" =~ ^1 ]]; }          # PORT RULE KEY
lt() { [ "$1" -lt "$2" ] || { echo "  $1 is not < $2"; return 1; }; }
le() { [ "$1" -le "$2" ] || { echo "  $1 is not <= $2"; return 1; }; }
eq() { [ "$1" -eq "$2" ] || { echo "  $1 is not $2"; return 1; }; }
now_ms() { date +%s%3N; }
hammer_field() { echo "$1" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[sys.argv[1]]).replace(" ", ""))' "$2"; }

# run_suite MODE REDIS [REDIS ARGS..]: three sluiced over one Redis started here
run_suite() {
    local m=$1 r=$2 rp
    shift 2
    local redis_args=("$@")
    start_redis "$r" "${redis_args[@]}" || { cat "$TMP/$r.log"; exit 1; }
    rp=$REDIS_PORT
    local ports=() https=() i
    for i in 1 2 3; do
        start_sluiced "$m$i" --rules "$TMP/rules.yaml" --config-store "$TMP/$m$i.db" \
            --snapshot "" --store "redis://127.0.0.1:$rp" --store-timeout 500ms --threads 1 ||
            { cat "$TMP/$m$i.log"; exit 1; }
        ports+=("$RESP_PORT")
        https+=("$HTTP_PORT")
    done
    local p1=${ports[0]} p2=${ports[1]} p3=${ports[2]}

    # 1. hammered from all three, within the bound (the hammer raises each limit by it, from
    # the rates it measures)
    redis-cli -p "$rp" CONFIG RESETSTAT >/dev/null
    local out
    out=$(python3 "$SLUICE_SOURCE_DIR/tests/integration/leased_hammer.py" \
        "$p1,$p2,$p3" ah 1000 2000 50 10 5000 240 1 "$SYNC_MS")
    check "$m: hammer-within-bound" test $? -eq 0
    echo "  $m hammer: $out"
    local calls
    calls=$(sl_calls "$rp")
    echo "  $m: $calls Redis commands for $(hammer_field "$out" decisions) decisions (a figure: bench/leased)"
    check "$m: hammer-decided" eq "$(hammer_field "$out" decisions)" 15000
    check "$m: hot-override-applied" test "$(hammer_field "$out" hot_limits)" = "[2000]"
    check "$m: hot-admitted" lt 0 "$(hammer_field "$out" hot_admitted)"
    check "$m: local-decisions" lt 0 "$(metric "${https[0]}" sluice_redis_approx_local_total)"
    check "$m: syncs" lt 0 "$(metric "${https[1]}" 'sluice_redis_approx_syncs_total{event="sent"}')"
    check "$m: synced-units" lt 0 "$(metric "${https[2]}" sluice_redis_approx_units_total)"
    check "$m: no-store-errors" eq "$(store_errors "${https[2]}" ah)" 0

    # 2. a rule's numbers change: the count is asked again, the new limit holds
    check "$m: change-spent" eq "$(allow_n "$p1" 120 at k1)" 100
    check "$m: change-synced" poll 5 remaining_is "$p2" at k1 0
    check "$m: change-set" matches "$(sc "$p1" SL.RULE SET at \
        '{"algorithm":"fixed_window","limit":150,"window":"10m","mode":"approximate","sync_interval":"200ms"}')" '^OK$'
    check "$m: change-rule-shown" matches "$(sc "$p1" SL.RULE GET at)" '"mode":"approximate","sync_interval":"200ms"'
    check "$m: change-new-limit" eq "$(allow_n "$p1" 80 at k1)" 50
    check "$m: change-new-synced" poll 5 remaining_is "$p2" at k1 0
    check "$m: change-others-refused" eq "$(allow_n "$p3" 10 at k1)" 0

    # 3. SIGTERM sends what was admitted and not yet synced (sync_interval 1h): a first decision
    # (strict: the key is new here), then 29 from its count
    check "$m: term-first" eq "$(allow_n "$p1" 1 al t1)" 1
    check "$m: term-admitted" eq "$(allow_n "$p1" 29 al t1)" 29
    # a local decision answers the count less what was admitted, and the key's reset time
    check "$m: local-reply" matches "$(sc "$p1" SL.ALLOW al t1)" '^1 1000 969 0 [1-9][0-9]+$'
    check "$m: term-unsynced" eq "$(remaining "$p2" al t1)" 999 # the first decision only
    stop_bg "${m}1" TERM
    check "$m: term-exit-0" test $? -eq 0
    check "$m: term-synced" eq "$(remaining "$p2" al t1)" 969

    # 4. Redis killed: the last count serves, then on_store_error, then recovery
    check "$m: ar-admitted" eq "$(allow_n "$p3" 20 ar t3)" 20
    stop_bg "$r" KILL
    check "$m: down-count-serves" matches "$(sc "$p3" SL.ALLOW ar t3)" '^1 '
    check "$m: down-no-store-error" eq "$(store_errors "${https[2]}" ar)" 0
    local n=0 got=""
    for ((n = 0; n < 300; n++)); do
        got=$(sc "$p3" SL.ALLOW ar t3)
        [[ "$got" =~ ^0 ]] && break
    done
    check "$m: down-then-refused" matches "$got" '^0 '
    check "$m: down-store-error" lt 0 "$(store_errors "${https[2]}" ar)"
    start_redis_at "$r" "$rp" "${redis_args[@]}" || { cat "$TMP/$r.log"; exit 1; }
    check "$m: up-recovers" poll 10 admits "$p3" ar t6
    check "$m: up-recovers-count" poll 10 admits "$p3" ar t3
    stop_bg "${m}2" TERM
    check "$m: s2-exit-0" test $? -eq 0
    stop_bg "${m}3" TERM
    check "$m: s3-exit-0" test $? -eq 0
    stop_bg "$r" TERM
}

run_suite module rm --enable-module-command local --loadmodule "$MODULE"
run_suite lua rl

# the memory store: accepted, and strict, said once
start_sluiced mem --rules "$TMP/rules.yaml" --config-store "$TMP/mem.db" --snapshot "" ||
    { cat "$TMP/mem.log"; exit 1; }
check "memory: said" wait_log mem "rule 'at' has mode: approximate, but the memory store keeps every key in this process: it decides strictly here"
check "memory: strict" matches "$(sc "$RESP_PORT" SL.ALLOW at m1)" '^1 100 99 '
check "memory: strict-peek" matches "$(sc "$RESP_PORT" SL.PEEK at m1)" '^1 100 99 '
check "memory: http-put" matches "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    "http://127.0.0.1:$HTTP_PORT/v1/rules/hx" \
    -d '{"algorithm":"sliding_log","limit":10,"window":"1s","mode":"approximate","sync_interval":"30ms"}')" '^20[01]$'
check "memory: http-get" matches "$(curl -s "http://127.0.0.1:$HTTP_PORT/v1/rules/hx")" '"mode":"approximate","sync_interval":"30ms"'
check "memory: http-refused" matches "$(curl -s -X PUT -H 'Content-Type: application/json' "http://127.0.0.1:$HTTP_PORT/v1/rules/hy" \
    -d '{"algorithm":"gcra","limit":10,"window":"1s","mode":"leased","sync_interval":"1s"}')" \
    'sync_interval: only applies to a rule with mode: approximate'
sc "$RESP_PORT" SL.RULE SET at '{"algorithm":"fixed_window","limit":60,"window":"1s","mode":"approximate"}' >/dev/null
check "memory: said-once" test "$(grep -c "rule 'at' has mode: approximate" "$TMP/mem.log")" -eq 1
stop_bg mem TERM

finish
