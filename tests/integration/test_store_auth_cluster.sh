#!/usr/bin/env bash
# test_store_auth_cluster.sh - the Redis Cluster store with a password, with sluice.so in every
# node and then with the Lua scripts: a cluster of 3 primaries + 3 replicas whose nodes all have
# requirepass (and masterauth, so replicas sync) and an ACL user, reached with
# --store redis-cluster://:PASSWORD@host:port naming one node only. The nodes sluiced learns from
# the slot map are authenticated too: keys of a strict, a leased and an approximate rule land on
# every shard, a rule with `replicas: 1` is acknowledged, and after a primary is killed its
# promoted replica (a node sluiced had not connected to) decides that primary's keys again with
# the store errors stopped. USER:PASSWORD is the client on every shard; a wrong password, or none,
# stops the start naming AUTH. The password is in no log line, INFO or /metrics.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
PW='cl5ter-p@ss:w/rd' # every character a URL needs encoded
PW_URL='cl5ter-p%40ss%3Aw%2Frd'
# every redis-cli to a Redis node here, lib.sh's too, authenticates with it
export REDISCLI_AUTH=$PW
ROOMY=1000000
cat >"$TMP/rules.yaml" <<YAML
rules:
  - name: strict
    algorithm: sliding_log
    limit: 5
    window: 1h
    on_store_error: deny
  - name: leased
    algorithm: fixed_window
    limit: 100
    window: 1h
    on_store_error: deny
    mode: leased
    lease_time: 200ms
  - name: approx
    algorithm: fixed_window
    limit: 100
    window: 1h
    on_store_error: deny
    mode: approximate
    sync_interval: 10ms
  - name: acked
    algorithm: fixed_window
    limit: 100
    window: 1h
    on_store_error: deny
    replicas: 1
    replica_wait: 1s
  - name: roomy
    algorithm: token_bucket
    limit: $ROOMY
    window: 1h
    on_store_error: deny
YAML
# sluiced takes no password on RESP here: its redis-cli must not send one
sc() { env -u REDISCLI_AUTH redis-cli -p "$1" "${@:2}" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
metric() { # HTTP_PORT NAME: its value in /metrics; fails when sluiced does not show it
    curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {v = $2; n++} END {if (n) print v + 0; exit !n}'
}
# errors_are PORT RULE N: the rule's store errors are N
errors_are() {
    local got
    got=$(metric "$1" "sluice_store_errors_total{rule=\"$2\"}") || { echo "  no store errors of $2 in /metrics"; return 1; }
    [ "$got" -eq "$3" ] || { echo "  $2: $got store errors, want $3"; return 1; }
}
no_secret() { # FILE..: none holds a password (the right ones, the user's, the wrong one)
    ! grep -l -e 'cl5ter' -e 'c4rol-pw' -e 'wr0ng-pw' "$@"
}
# PRIMARIES: the cluster's primaries now; fails unless there are 3
primaries() {
    mapfile -t PRIMARIES < <(redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER NODES |
        awk '$3 ~ /master/ && $3 !~ /fail/ {split($2, a, "[:@]"); print a[2]}')
    [ "${#PRIMARIES[@]}" -eq 3 ] || { echo "  ${#PRIMARIES[@]} primaries: ${PRIMARIES[*]}"; return 1; }
}
# on_every_shard PREFIX RULE: every primary holds a key of RULE for a client key PREFIX<i>
on_every_shard() {
    local p
    primaries || return 1
    for p in "${PRIMARIES[@]}"; do
        [ -n "$(redis-cli -p "$p" --scan --pattern "sl:{$1*}:$2:*" | head -n 1)" ] || return 1
    done
}
# clients PORT: the normal clients of a Redis node, but for this redis-cli; fails when the node
# does not answer (its reply has this redis-cli's own line)
clients() {
    local list
    list=$(redis-cli -p "$1" CLIENT LIST TYPE normal 2>&1) || { echo "  CLIENT LIST on $1: $list"; return 1; }
    grep -q 'cmd=client|list' <<<"$list" || { echo "  no CLIENT LIST from $1: $list"; return 1; }
    CLIENTS=$(grep -v 'cmd=client|list' <<<"$list")
    return 0 # (grep -v finds no other client: none)
}
admitted_all() { # PORT RULE PREFIX N: PREFIX1..N each admitted once under RULE
    local i r
    for ((i = 1; i <= $4; i++)); do
        r=$(sc "$1" SL.ALLOW "$2" "$3$i")
        [[ "$r" =~ ^1\  ]] || { echo "  $2 $3$i: '$r'"; return 1; }
    done
}

# run_suite NAME MODE_LOG [NODE ARGS..]: the checks on a fresh cluster; MODE_LOG is what sluiced's
# log says of the nodes' mode
run_suite() {
    local m=$1 mode_log=$2 p r want i
    shift 2
    # (a node timeout of 5 s: a node starved on a loaded machine is not failed over unasked)
    start_cluster 3 5000 --requirepass "$PW" --masterauth "$PW" "$@" ||
        { cat "$TMP"/node*.log; exit 1; }
    local nodes=("${CLUSTER_PORTS[@]}")
    for p in "${nodes[@]}"; do # ACL users are each node's own: set on replicas too
        redis-cli -p "$p" ACL SETUSER carol on '>c4rol-pw' '~*' '&*' '+@all' >/dev/null
    done

    echo "== $m: step 1 at ${SECONDS}s"
    # 1. the password in the URL, one node named: every shard decides
    start_scratch_sluiced "$m" --threads 1 --rules "$TMP/rules.yaml" \
        --store "redis-cluster://:$PW_URL@127.0.0.1:${nodes[0]}" --store-timeout 3s
    local port=$RESP_PORT http=$HTTP_PORT
    check "$m: mode" wait_log "$m" "request store redis ($mode_log"
    want=$(for i in 1 2 3 4 5; do echo -n "1 5 $((5 - i)) "; done)
    r=$(for i in 1 2 3 4 5; do sc "$port" SL.ALLOW strict one | cut -d' ' -f1-3 | tr '\n' ' '; done)
    check "$m: strict counts in Redis" test "$r" = "$want"
    check "$m: strict refuses the sixth" matches "$(sc "$port" SL.ALLOW strict one)" '^0 5 0 [1-9]'
    check "$m: strict on every shard" admitted_all "$port" strict s 30
    check "$m: strict keys on every shard" on_every_shard s strict
    check "$m: leased on every shard" admitted_all "$port" leased l 30
    check "$m: leased keys on every shard" poll 10 on_every_shard l leased
    check "$m: approximate on every shard" admitted_all "$port" approx a 30
    check "$m: approximate counts synced to every shard" poll 10 on_every_shard a approx
    check "$m: replicas acknowledge on every shard" admitted_all "$port" acked d 30
    check "$m: acked keys on every shard" on_every_shard d acked
    for r in strict leased approx acked; do
        check "$m: no store error ($r)" errors_are "$http" "$r" 0
    done
    sc "$port" INFO >"$TMP/$m.info"
    curl -s "http://127.0.0.1:$http/metrics" >"$TMP/$m.metrics"

    echo "== $m: step 2 at ${SECONDS}s"
    # 2. USER:PASSWORD: that user is sluiced's client on every primary
    start_scratch_sluiced "$m-user" --threads 1 --rules "$TMP/rules.yaml" \
        --store "redis-cluster://carol:c4rol-pw@127.0.0.1:${nodes[1]}" --store-timeout 3s
    check "$m: user and password decide on every shard" admitted_all "$RESP_PORT" strict u 30
    check "$m: three primaries" primaries
    for p in "${PRIMARIES[@]}"; do
        check "$m: user is the client on $p" sh -c "redis-cli -p $p CLIENT LIST | grep -q 'user=carol'"
    done
    check "$m: user stops cleanly" stop_bg "$m-user" TERM

    echo "== $m: step 3 at ${SECONDS}s"
    # 3. a wrong password, and none: the start stops naming AUTH (bounded: not a hang)
    local out rc
    for url in "redis-cluster://:wr0ng-pw@127.0.0.1:${nodes[2]}" "redis-cluster://127.0.0.1:${nodes[2]}"; do
        out=$(timeout 60 "$SLUICED" --port "$(free_port)" --http-port 0 --grpc-port 0 \
            --rules "$TMP/rules.yaml" --config-store "$TMP/$m-wrong.db" --snapshot "" --store "$url" 2>&1)
        rc=$?
        echo "$out"
        check "$m: $url refused" test "$rc" -ne 0 -a "$rc" -ne 124
        check "$m: $url names AUTH" grep -Eq "AUTH refused|NOAUTH" <<<"$out"
        check "$m: $url shows no password" no_secret <(echo "$out")
    done

    echo "== $m: step 4 at ${SECONDS}s"
    # 4. a primary killed: its replica, which sluiced never connected to, takes over and decides
    #    the primary's keys again once sluiced has authenticated to it
    check "$m: victim found" cluster_victim "" v 4
    for k in "${VKEYS[@]}"; do
        check "$m: before the kill $k" matches "$(sc "$port" SL.ALLOW roomy "$k")" "^1 $ROOMY [1-9]"
    done
    check "$m: the replica answers" clients "$replica_port"
    check "$m: sluiced has not connected to the replica" test -z "$CLIENTS"
    stop_bg "$victim" KILL
    promoted() { [ "$(redis-cli -p "$replica_port" ROLE 2>/dev/null | head -n 1)" = master ]; }
    check "$m: replica promoted" poll 30 promoted
    reached() { [[ "$(sc "$port" SL.ALLOW roomy "${VKEYS[0]}")" =~ ^1\ $ROOMY\ [1-9] ]]; }
    check "$m: decides on the promoted replica" poll 30 reached
    local errors
    errors=$(metric "$http" 'sluice_store_errors_total{rule="roomy"}')
    for k in "${VKEYS[@]}"; do
        check "$m: after the failover $k" matches "$(sc "$port" SL.ALLOW roomy "$k")" "^1 $ROOMY [1-9]"
    done
    check "$m: store errors stopped" errors_are "$http" roomy "$errors"
    check "$m: the promoted replica answers" clients "$replica_port"
    check "$m: sluiced's decisions run there" grep -Eq 'cmd=(sl\.throttle|evalsha|eval) ' <<<"$CLIENTS"

    check "$m: password in no log, INFO or /metrics" no_secret "$TMP/$m.log" "$TMP/$m-user.log" \
        "$TMP/$m.info" "$TMP/$m.metrics"
    check "$m: stops cleanly" stop_bg "$m" TERM
    for ((i = 1; i <= ${#nodes[@]}; i++)); do
        [ "node$i" = "$victim" ] || stop_bg "node$i" KILL >/dev/null
    done
}

run_suite module "sluice.so module" --loadmodule "$MODULE"
run_suite lua "Lua"
finish
