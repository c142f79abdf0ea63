# modes_cluster.sh - sourced by test_server_leased_cluster.sh and test_server_approx_cluster.sh:
# a rule of one mode on a Redis Cluster of 3 primaries + 3 replicas (--store redis-cluster://),
# with sluice.so in every node and then with the Lua scripts: one hot key and warm keys (spread
# over the shards) hammered from three sluiced at once by leased_hammer.py (bounded in count and
# time), which checks every fixed window against the mode's promise, counted from the replies,
# and every reply on the hot key shows its override's limit; /metrics shows decisions answered
# without a Redis command (lease hits, local decisions). Commands per decision is a figure of
# speed, printed here and measured by bench/leased. Each sluiced runs
# two loops, each hammered over a connection of its own (each loop holds leases or counts of its
# own). The caller sets:
#   MC_RULE          the rule's name
#   MC_MODE_YAML     the rule's mode lines (indented as fields of a rule)
#   MC_HAMMER_ARGS   leased_hammer.py's arguments after the rule, limits and hot key's limit
#   MC_HAMMER_CHECK  the name of the hammer's check
#   MC_LOCAL_METRIC  the /metrics counter of decisions answered without a Redis command
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl
export PYTHONPATH=$SLUICE_SOURCE_DIR/tests/integration

MODULE=${SLUICE_MODULE:-$SLUICE_BUILD_DIR/src/module/sluice.so}
# (SLUICE_MODULE: another build's sluice.so, for a TSan build's sluiced: its own cannot load in Redis)
cat >"$TMP/rules.yaml" <<YAML
rules:
  - name: $MC_RULE
    algorithm: fixed_window
    limit: 50
    window: 1s
$MC_MODE_YAML
    overrides:
      - key: hot
        limit: 2000
YAML
calls() { # PORTS..: calls of sl.* commands and scripts on those nodes since their RESETSTAT
    local p n=0 c
    for p in "$@"; do
        c=$(redis-cli -p "$p" INFO commandstats | tr -d '\r' |
            awk -F'[=,:]' '/^cmdstat_(sl\.|evalsha|eval)/ {n += $3} END {print n + 0}')
        n=$((n + c))
    done
    echo "$n"
}
lt() { [ "$1" -lt "$2" ] || { echo "  $1 is not < $2"; return 1; }; }
hammer_field() { echo "$1" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[sys.argv[1]]).replace(" ", ""))' "$2"; }
metric() { # HTTP_PORT NAME: a metric's value (summed over its series)
    curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m) == 1 {n += $2} END {print n + 0}'
}

# run_suite MODE [NODE ARGS..]
run_suite() {
    local m=$1 i p
    shift
    start_cluster 3 2000 "$@" || { cat "$TMP"/node*.log; exit 1; }
    local nodes=("${CLUSTER_PORTS[@]}") ports=() https=()
    for i in 1 2 3; do
        start_sluiced "$m$i" --threads 2 --rules "$TMP/rules.yaml" --config-store "$TMP/$m$i.db" \
            --snapshot "" --store "redis-cluster://127.0.0.1:${nodes[0]},127.0.0.1:${nodes[1]}" \
            --store-timeout 1s || { cat "$TMP/$m$i.log"; exit 1; }
        ports+=("$RESP_PORT")
        https+=("$HTTP_PORT")
    done
    for p in "${nodes[@]}"; do
        redis-cli -p "$p" CONFIG RESETSTAT >/dev/null
    done
    local out c local_n=0
    out=$(python3 "$SLUICE_SOURCE_DIR/tests/integration/leased_hammer.py" \
        "${ports[0]},${ports[1]},${ports[2]}" "$MC_RULE" 1000 2000 50 "${MC_HAMMER_ARGS[@]}")
    check "$m: $MC_HAMMER_CHECK" test $? -eq 0
    echo "  $m hammer: $out"
    c=$(calls "${nodes[@]}")
    echo "  $m: $c Redis commands for $(hammer_field "$out" decisions) decisions (a figure: bench/leased)"
    # 3 sluiced x 2 connections, each MC_HAMMER_ARGS[1] decisions
    check "$m: hammer-decided" test "$(hammer_field "$out" decisions)" -eq $((6 * MC_HAMMER_ARGS[1]))
    check "$m: hot-override-applied" test "$(hammer_field "$out" hot_limits)" = "[2000]"
    check "$m: hot-admitted" lt 0 "$(hammer_field "$out" hot_admitted)"
    for i in 0 1 2; do
        local_n=$((local_n + $(metric "${https[$i]}" "$MC_LOCAL_METRIC")))
    done
    check "$m: decided-without-redis" lt 0 "$local_n"
    for i in 1 2 3; do
        stop_bg "$m$i" TERM
        check "$m: s$i-exit-0" test $? -eq 0
    done
    for ((i = 1; i <= ${#nodes[@]}; i++)); do
        stop_bg "node$i" TERM
    done
}

run_suite module --loadmodule "$MODULE"
run_suite lua
finish
