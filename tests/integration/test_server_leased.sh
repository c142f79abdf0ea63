#!/usr/bin/env bash
# test_server_leased.sh - rules with mode: leased over one Redis shared by three sluiced, with the
# sluice.so module and then with the Lua scripts (a redis-server without the module):
#
#   1. one hot key (an override's numbers) and 100 warm keys hammered from all three at once
#      (a count of decisions, the time only capped): every decision is answered, no fixed
#      window admits more than its key's limit, counted from the replies, every reply on the
#      hot key shows the override's limit, and decisions were answered from leases (/metrics:
#      lease hits). How many Redis commands a decision costs is a figure of
#      speed (a slower client spreads its requests over more, smaller leases): bench/leased
#      measures it, the test prints it
#   1b. a lease with units left at its window's end is not spent in the next window: another
#      sluiced takes that window's whole limit, and the first admits nothing more in it
#   2. SIGTERM: a sluiced holding a lease gives it back before it exits (Redis shows the units)
#   3. SIGKILL: a sluiced holding a lease dies with it: its units stay used (under-admission
#      only: the other sluiced admit no more than the limit less them)
#   4. a rule's numbers change: the leases under the old numbers go back
#   5. SL.ALLOWALL on keys whose leases have the units: no Redis command; one key at its limit:
#      all or nothing, the other not charged
#   6. a refund of a leased rule's unit goes to Redis
#   7. Redis killed: the lease in hand serves (no store error), then on_store_error (deny), then
#      Redis restarted on its port: decisions recover; a leased rule with cold_start: closed is
#      refused for one window (its keys were lost); a lease the lost Redis granted is never given
#      back to the new one, one it granted is
# And with the memory store a leased rule decides strictly, said once in the log. Each sluiced
# runs one loop: leases are per loop, and the checks of what one holds need every connection on
# the same one.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl
export PYTHONPATH=$SLUICE_SOURCE_DIR/tests/integration

MODULE=${SLUICE_MODULE:-$SLUICE_BUILD_DIR/src/module/sluice.so}
# (SLUICE_MODULE: another build's sluice.so, for a TSan build's sluiced: its own cannot load in Redis)
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: lh
    algorithm: fixed_window
    limit: 50
    window: 1s
    mode: leased
    lease_time: 200ms
    overrides:
      - key: hot
        limit: 2000
  - name: le
    algorithm: fixed_window
    limit: 100
    window: 2s
    mode: leased
    lease_time: 2s
  - name: lt
    algorithm: fixed_window
    limit: 1000
    window: 10m
    mode: leased
    lease_time: 20s
  - name: lr
    algorithm: token_bucket
    limit: 1000
    window: 10m
    mode: leased
    lease_time: 20s
    on_store_error: deny
  - name: lc
    algorithm: sliding_window
    limit: 5
    window: 1m
    mode: leased
    cold_start: closed
  - name: la
    algorithm: fixed_window
    limit: 3
    window: 10m
    mode: leased
  - name: lb
    algorithm: sliding_buckets
    limit: 1000
    window: 10m
    buckets: 10
    mode: leased
    lease_time: 20s
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
sc() { redis-cli -p "$1" "${@:2}" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
field() { echo "$1" | cut -d' ' -f"$2"; }
# PORT RULE KEY: what Redis holds for the key (a strict peek through sluiced): remaining
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
sl_cmd_calls() { # REDIS_PORT COMMAND: calls of one command since the last RESETSTAT
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[=,:]' -v c="cmdstat_$2" '$1 == c {n += $3} END {print n + 0}'
}
metric() { # HTTP_PORT NAME: a metric's value (summed over its series)
    curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m) == 1 {n += $2} END {print n + 0}'
}
store_errors() { curl -s "http://127.0.0.1:$1/metrics" | awk -v r="$2" '$1 == "sluice_store_errors_total{rule=\"" r "\"}" {print $2}'; }
remaining_is() { [ "$(remaining "$1" "$2" "$3")" -eq "$4" ]; } # PORT RULE KEY N
returns_seen() { [ "$(sl_cmd_calls "$1" sl.return)" -ge 1 ]; }   # REDIS_PORT
admits() { [[ "$(sc "$1" SL.ALLOW "$2" "$3")" =~ ^1 ]]; }          # PORT RULE KEY
admits_all() { [ "$(allow_n "$1" "$2" "$3" "$4")" -eq "$2" ]; }      # PORT N RULE KEY
lt() { [ "$1" -lt "$2" ] || { echo "  $1 is not < $2"; return 1; }; }
le() { [ "$1" -le "$2" ] || { echo "  $1 is not <= $2"; return 1; }; }
eq() { [ "$1" -eq "$2" ] || { echo "  $1 is not $2"; return 1; }; }
now_ms() { date +%s%3N; }
early_in_window() { [ $(($(now_ms) % 2000)) -lt 500 ]; } # the le rule's 2 s windows
window_after() { [ $(($(now_ms) / 2000)) -gt "$1" ]; }
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

    # 1. hammered from all three
    redis-cli -p "$rp" CONFIG RESETSTAT >/dev/null
    local out
    out=$(python3 "$SLUICE_SOURCE_DIR/tests/integration/leased_hammer.py" \
        "$p1,$p2,$p3" lh 1000 2000 50 100 5000 240)
    check "$m: hammer-no-window-over" test $? -eq 0
    echo "  $m hammer: $out"
    local calls
    calls=$(sl_calls "$rp")
    check "$m: hammer-decided" eq "$(hammer_field "$out" decisions)" 15000
    check "$m: hot-override-applied" test "$(hammer_field "$out" hot_limits)" = "[2000]"
    check "$m: hot-admitted" lt 0 "$(hammer_field "$out" hot_admitted)"
    echo "  $m: $calls Redis commands for $(hammer_field "$out" decisions) decisions (a figure: bench/leased)"
    check "$m: lease-hits" lt 0 "$(metric "${https[0]}" sluice_redis_lease_hits_total)"
    check "$m: leases-taken" lt 0 "$(metric "${https[1]}" 'sluice_redis_leases_total{event="taken"}')"
    check "$m: no-store-errors" eq "$(store_errors "${https[2]}" lh)" 0

    # 1b. a window's end ends its leases: p1 spends from a lease in one window; in a later one p2
    # takes the whole limit, and p1 admits nothing more there. Each pair of steps must fall in
    # one window: a try whose pair straddles an edge (a slow machine) proves nothing, and is made
    # again on a new key (at most 5 tries)
    local w w2 try key spent left took more
    for ((try = 1; try <= 5; try++)); do
        key=e$try
        poll 5 early_in_window
        w=$(($(now_ms) / 2000))
        spent=$(allow_n "$p1" 5 le "$key")
        left=$(remaining "$p2" le "$key")
        if [ $(($(now_ms) / 2000)) -ne "$w" ]; then
            echo "  $m: try $try straddled a window's edge; again on a new key"
            continue
        fi
        poll 5 window_after "$w"
        poll 5 early_in_window
        w2=$(($(now_ms) / 2000))
        took=$(allow_n "$p2" 100 le "$key")
        more=$(allow_n "$p1" 30 le "$key")
        [ $(($(now_ms) / 2000)) -eq "$w2" ] && break
        echo "  $m: try $try straddled a window's edge; again on a new key"
    done
    check "$m: edge-one-window" test "$try" -le 5
    check "$m: edge-spent" eq "$spent" 5
    check "$m: edge-leased" lt "$left" 95 # units left in p1's lease
    check "$m: edge-next-window" test "$w2" -gt "$w"
    check "$m: edge-others-take-all" eq "$took" 100
    check "$m: edge-nothing-more" eq "$more" 0

    # 2. SIGTERM gives the leases back: Redis holds exactly what was spent
    check "$m: term-spent" eq "$(allow_n "$p1" 50 lt t1)" 50
    check "$m: term-leased" lt "$(remaining "$p2" lt t1)" 950 # more than 50 went out
    stop_bg "${m}1" TERM
    check "$m: term-exit-0" test $? -eq 0
    check "$m: term-returned" eq "$(remaining "$p2" lt t1)" 950

    # 3. SIGKILL keeps them used: the others admit no more than the limit less what it held
    check "$m: kill-spent" eq "$(allow_n "$p2" 50 lt t2)" 50
    local left
    left=$(remaining "$p3" lt t2)
    check "$m: kill-leased" lt "$left" 950
    stop_bg "${m}2" KILL
    check "$m: kill-still-used" eq "$(remaining "$p3" lt t2)" "$left"
    local more
    more=$(allow_n "$p3" 1000 lt t2)
    check "$m: kill-under-admission" le $((more + 50)) 1000
    check "$m: kill-others-admit" lt 0 "$more"

    # 4. a rule's numbers change: the leases under the old ones go back
    check "$m: change-spent" eq "$(allow_n "$p3" 30 lt t5)" 30
    check "$m: change-leased" lt "$(remaining "$p3" lt t5)" 970
    redis-cli -p "$rp" CONFIG RESETSTAT >/dev/null
    check "$m: change-set" matches "$(sc "$p3" SL.RULE SET lt \
        '{"algorithm":"fixed_window","limit":2000,"window":"10m","mode":"leased","lease_time":"20s"}')" '^OK$'
    check "$m: change-rule-shown" matches "$(sc "$p3" SL.RULE GET lt)" '"mode":"leased","lease_time":"20s"'
    # a decision under the new numbers moves the loop to them; the old ones are let go of, and
    # their leases go back (long before they end, in 20 s)
    allow_n "$p3" 1 lt t9 >/dev/null
    if [ "$m" = module ]; then
        check "$m: change-returned" poll 5 returns_seen "$rp"
    fi
    check "$m: change-units-back" poll 5 remaining_is "$p3" lt t5 1970

    # 5. SL.ALLOWALL: from the leases when both have the units, else all or nothing in Redis
    # The leases last 20 s but end with their bucket (a minute): a try across a bucket's edge
    # proves nothing and is made again on new keys (at most 3 tries)
    local b bk
    for ((try = 1; try <= 3; try++)); do
        b=$(($(now_ms) / 60000))
        bk=$((try * 2 - 1))
        allow_n "$p3" 5 lb "b$bk" >/dev/null
        allow_n "$p3" 5 lb "b$((bk + 1))" >/dev/null
        # what Redis runs meanwhile on those two keys (MONITOR: other keys' leases end and go
        # back at any time, so a count of every command would race with them)
        start_bg "$m-aa-monitor" redis-cli -p "$rp" MONITOR
        poll 10 grep -q '^OK' "$TMP/$m-aa-monitor.log"
        got=$(sc "$p3" SL.ALLOWALL lb "b$bk" lb "b$((bk + 1))")
        redis-cli -p "$rp" ECHO allowall-done >/dev/null
        wait_log "$m-aa-monitor" allowall-done
        stop_bg "$m-aa-monitor" TERM
        [ $(($(now_ms) / 60000)) -eq "$b" ] && break
        echo "  $m: try $try straddled a bucket's edge; again on new keys"
    done
    check "$m: allowall-one-bucket" test "$try" -le 3
    check "$m: allowall-leased" matches "$got" '^1 '
    check "$m: allowall-no-command" eq "$(grep -c "sl:{b$bk}\\|sl:{b$((bk + 1))}" "$TMP/$m-aa-monitor.log")" 0
    check "$m: allowall-a1-spent" eq "$(allow_n "$p3" 4 la a1)" 3
    local a2
    a2=$(remaining "$p3" la a2)
    check "$m: allowall-refused" matches "$(sc "$p3" SL.ALLOWALL la a1 la a2)" '^0 '
    check "$m: allowall-a2-uncharged" eq "$(remaining "$p3" la a2)" "$a2"

    # 6. a refund goes to Redis
    local before
    before=$(remaining "$p3" lb "b$bk")
    check "$m: refund" matches "$(sc "$p3" SL.SETTLE lb "b$bk" 1 0)" '^1 '
    check "$m: refund-in-redis" eq "$(remaining "$p3" lb "b$bk")" $((before + 1))

    # 7. Redis killed: the lease in hand serves, then on_store_error, then recovery
    check "$m: lr-spent" eq "$(allow_n "$p3" 20 lr t3)" 20
    check "$m: lr-spent-more" eq "$(allow_n "$p3" 20 lr t3)" 20
    check "$m: lc-spent" eq "$(allow_n "$p3" 1 lc c1)" 1
    check "$m: lost-lease-spent" eq "$(allow_n "$p3" 5 lr t8)" 5 # units left, never returned
    stop_bg "$r" KILL
    check "$m: down-lease-serves" matches "$(sc "$p3" SL.ALLOW lr t3)" '^1 '
    check "$m: down-no-store-error" eq "$(store_errors "${https[2]}" lr)" 0
    local n=0 got=""
    for ((n = 0; n < 300; n++)); do
        got=$(sc "$p3" SL.ALLOW lr t3)
        [[ "$got" =~ ^0 ]] && break
    done
    check "$m: down-then-refused" matches "$got" '^0 '
    check "$m: down-store-error" lt 0 "$(store_errors "${https[2]}" lr)"
    start_redis_at "$r" "$rp" "${redis_args[@]}" || { cat "$TMP/$r.log"; exit 1; }
    # every command the new Redis runs, to tell whose leases come back to it
    start_bg "$m-monitor" redis-cli -p "$rp" MONITOR
    check "$m: up-recovers" poll 10 admits "$p3" lr t6
    check "$m: up-recovers-leased" poll 10 admits_all "$p3" 20 lr t7
    check "$m: up-lost-logged" wait_log "${m}3" "its data was lost"
    # (closed for one window, a minute: longer than the steps above take on a loaded machine)
    check "$m: up-closed-refused" matches "$(sc "$p3" SL.ALLOW lc c2)" '^0 5 0 '
    stop_bg "${m}3" TERM
    check "$m: s3-exit-0" test $? -eq 0
    # t7's lease goes back to the new Redis (t6's too when its lease was sized above what it
    # spent, which depends on how soon the connection was made again), t8's (the old one's) never
    if [ "$m" = module ]; then
        check "$m: new-lease-returned" poll 5 grep -q 'SL.RETURN" "sl:{t7}' "$TMP/$m-monitor.log"
        check "$m: lost-lease-not-returned" bash -c "! grep -q 'SL.RETURN\" \"sl:{t8}' '$TMP/$m-monitor.log'"
    fi
    stop_bg "$m-monitor" TERM
    stop_bg "$r" TERM
}

run_suite module rm --enable-module-command local --loadmodule "$MODULE"
run_suite lua rl

# the memory store: accepted, and strict, said once
start_sluiced mem --rules "$TMP/rules.yaml" --config-store "$TMP/mem.db" --snapshot "" ||
    { cat "$TMP/mem.log"; exit 1; }
check "memory: said" wait_log mem "rule 'lt' has mode: leased, but the memory store keeps every key in this process: it decides strictly here"
check "memory: strict" matches "$(sc "$RESP_PORT" SL.ALLOW lt m1)" '^1 1000 999 '
check "memory: strict-peek" matches "$(sc "$RESP_PORT" SL.PEEK lt m1)" '^1 1000 999 '
sc "$RESP_PORT" SL.RULE SET lh '{"algorithm":"fixed_window","limit":60,"window":"1s","mode":"leased"}' >/dev/null
# over HTTP too: the fields go in and come back
check "memory: http-put" matches "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    "http://127.0.0.1:$HTTP_PORT/v1/rules/hx" \
    -d '{"algorithm":"gcra","limit":10,"window":"1s","burst":5,"mode":"leased","lease_time":"300ms"}')" '^20[01]$'
check "memory: http-get" matches "$(curl -s "http://127.0.0.1:$HTTP_PORT/v1/rules/hx")" '"mode":"leased","lease_time":"300ms"'
check "memory: http-refused" matches "$(curl -s -X PUT -H 'Content-Type: application/json' "http://127.0.0.1:$HTTP_PORT/v1/rules/hy" \
    -d '{"algorithm":"gcra","limit":10,"window":"1s","burst":5,"mode":"leased","lease_time":"1s"}')" \
    'lease_time: 1s is longer than the bucket.s room for a lease, 500ms'
check "memory: said-once" test "$(grep -c "rule 'lt' has mode: leased" "$TMP/mem.log")" -eq 1
stop_bg mem TERM

finish
