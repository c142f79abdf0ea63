#!/usr/bin/env bash
# test_server_cluster.sh - sluiced on a Redis Cluster of 3 primaries + 3 replicas with sluice.so
# in every node (--store redis-cluster://): keys spread over all shards; a slot moved to another
# primary is followed (MOVED) with the key's count intact; a primary killed: decisions for keys
# in its slots follow on_store_error (deny and allow) and count as store errors until its
# replica takes over, sluiced does not crash, then those keys are decided by Redis again (on the
# promoted replica) and the errors stop; no key is admitted over its limit. Every step waits for
# the event it needs (a node's role, the cluster's state), not for time.
#
# The over-limit cache takes no part: no key here is ever refused by Redis (the failover's keys
# have a limit they cannot reach), so every decision goes to Redis or fails there; the cache has
# its own case in test_server_redis.sh.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
LIMIT=5
ROOMY=1000000 # the failover's keys: a limit no key reaches here
cat >"$TMP/rules.yaml" <<YAML
rules:
  - name: strict
    algorithm: sliding_log
    limit: $LIMIT
    window: 1h
    on_store_error: deny
  - name: roomy
    algorithm: token_bucket
    limit: $ROOMY
    window: 1h
    on_store_error: deny
  - name: roomy_open
    algorithm: token_bucket
    limit: $ROOMY
    window: 1h
    on_store_error: allow
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
metric() { # metric NAME: its value in sluiced's /metrics (0 when absent)
    curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v m="$1" '$1 == m {v = $2} END {print v + 0}'
}

start_cluster 3 2000 --loadmodule "$MODULE" || { cat "$TMP"/node*.log; exit 1; }
P=("${CLUSTER_PORTS[@]}")
# One loop: each loop keeps its own connections and slot map and learns of a failover by itself
# (its first decision for a dead node's slot fails and reloads the map), so with one loop
# "decisions reach Redis again" is one event after which no store error may follow.
start_sluiced s1 --threads 1 --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" \
    --store "redis-cluster://127.0.0.1:${P[0]},127.0.0.1:${P[1]}" --store-timeout 2s ||
    { cat "$TMP/s1.log"; exit 1; }
check module-detected grep -q "request store redis (sluice.so module)" "$TMP/s1.log"

# Every decision's answer is logged: "<key> <allowed>", to count admissions per key at the end.
ALLOWED=$TMP/allowed.txt
: >"$ALLOWED"
decide() { # decide KEY: one SL.ALLOW, logged; prints the reply
    local r
    r=$(sc SL.ALLOW strict "$1")
    echo "$1 ${r%% *}" >>"$ALLOWED"
    echo "$r"
}

# --- keys spread over all three shards
for i in $(seq 1 60); do decide "k$i" >/dev/null; done
primaries=$(redis-cli -p "${P[0]}" CLUSTER NODES | awk '$3 ~ /master/ {split($2, a, "[:@]"); print a[2]}')
for port in $primaries; do
    check "shard $port holds keys" test "$(redis-cli -p "$port" DBSIZE)" -gt 0
done
check all-first-admitted test "$(awk '$2 == 1' "$ALLOWED" | wc -l)" -eq 60

# --- SL.ALLOWALL: one client key under two rules shares a slot (one atomic script); two client
# keys on different shards take the step-by-step path; both answer the same way
check allowall-one-slot matches "$(sc SL.ALLOWALL strict j1 strict j1)" "^1 $LIMIT $((LIMIT - 2)) 0 "
check allowall-two-slots matches "$(sc SL.ALLOWALL strict j2 strict j3)" "^1 $LIMIT $((LIMIT - 1)) 0 "

# --- move the slot of k1 to another primary by hand (IMPORTING/MIGRATING, MIGRATE, SETSLOT):
# sluiced's map still points at the old owner, which answers MOVED; the count moved with the key
move_slot() { # move_slot KEY: moves KEY's slot to another primary; sets slot, src_port, dst_port
    local nodes src_line src_id dst_line dst_id keys port
    slot=$(redis-cli -p "${P[0]}" CLUSTER KEYSLOT "$1")
    nodes=$(redis-cli -p "${P[0]}" CLUSTER NODES)
    src_line=$(echo "$nodes" | awk -v s="$slot" '$3 ~ /master/ { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]; if (s >= r[1] && s <= r[2]) print } }')
    src_id=$(echo "$src_line" | awk '{print $1}')
    src_port=$(echo "$src_line" | awk '{split($2, a, "[:@]"); print a[2]}')
    dst_line=$(echo "$nodes" | awk -v id="$src_id" '$3 ~ /master/ && $1 != id' | head -n 1)
    dst_id=$(echo "$dst_line" | awk '{print $1}')
    dst_port=$(echo "$dst_line" | awk '{split($2, a, "[:@]"); print a[2]}')
    redis-cli -p "$dst_port" CLUSTER SETSLOT "$slot" IMPORTING "$src_id" >/dev/null
    redis-cli -p "$src_port" CLUSTER SETSLOT "$slot" MIGRATING "$dst_id" >/dev/null
    keys=$(redis-cli -p "$src_port" CLUSTER GETKEYSINSLOT "$slot" 100)
    [ -n "$keys" ] && redis-cli -p "$src_port" MIGRATE 127.0.0.1 "$dst_port" "" 0 5000 KEYS $keys >/dev/null
    for port in $primaries; do redis-cli -p "$port" CLUSTER SETSLOT "$slot" NODE "$dst_id" >/dev/null; done
}
move_slot k1
check moved-key-migrated test "$(redis-cli -p "$dst_port" CLUSTER COUNTKEYSINSLOT "$slot")" -ge 1
check moved-followed matches "$(decide k1)" "^1 $LIMIT $((LIMIT - 2)) 0 "
check moved-counted matches "$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics")" 'sluice_redis_redirects_total [1-9]'

# --- a pipelined batch into a slot just moved: every request is answered MOVED and sent again
# (the client's requests are reused); the replies come in order, each its own (request i has
# limit 100 + i). Client keys "m1}x<i>" make Redis keys "sl:{m1}x<i>}:..", all of hash tag m1.
move_slot m1
redirects=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk '$1 == "sluice_redis_redirects_total" {print $2}')
out=$(for i in $(seq 0 49); do printf 'SL.THROTTLE m1}x%d sliding_log %d 60000\r\n' "$i" $((100 + i)); done |
    timeout 20 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; cat >&3; head -n 300 <&3' | tr -d '\r' |
    awk 'NR % 6 == 3 {printf "%s ", substr($0, 2)} NR % 6 == 4 {print substr($0, 2)}')
want=$(for i in $(seq 0 49); do echo "$((100 + i)) $((99 + i))"; done)
check moved-pipelined-in-order test "$out" = "$want"
check moved-pipelined-redirected test "$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
    awk '$1 == "sluice_redis_redirects_total" {print $2}')" -gt "$redirects"

# --- a primary killed. The victim: a primary that took no moved slot; its replica; client keys
# in its slots. sluiced's Redis key is "sl:{<client key>}:<rule>:<hash>", so the client key's
# CLUSTER KEYSLOT is the slot.
check victim-found cluster_victim "$dst_port" v 4
nodes=$(redis-cli -p "${P[0]}" CLUSTER NODES)

# from_redis KEY: both rules answer from Redis (allowed, something left); from_error KEY: both
# answer by on_store_error (roomy denied, roomy_open allowed with nothing left)
from_redis() {
    matches "$(sc SL.ALLOW roomy "$1")" "^1 $ROOMY [1-9][0-9]* 0 " &&
        matches "$(sc SL.ALLOW roomy_open "$1")" "^1 $ROOMY [1-9][0-9]* 0 "
}
from_error() {
    local deny open
    deny=$(sc SL.ALLOW roomy "$1")
    open=$(sc SL.ALLOW roomy_open "$1")
    matches "$deny" "^0 $ROOMY 0 [1-9][0-9]* " && matches "$open" "^1 $ROOMY 0 0 "
}
role() { redis-cli -p "$1" ROLE 2>/dev/null | head -n 1; }
throttles() { # throttles PORT: SL.THROTTLE calls the node has run
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' '$1 == "cmdstat_sl.throttle" {print $3}'
}
for k in "${VKEYS[@]}"; do check "before-kill $k" from_redis "$k"; done
errors0=$(metric 'sluice_store_errors_total{rule="roomy"}')
open_errors0=$(metric 'sluice_store_errors_total{rule="roomy_open"}')

echo "killing $victim (port $victim_port)"
stop_bg "$victim" KILL
# Until the replica takes over nobody serves the victim's slots. A decision counts when the
# replica still reported itself a replica after it had been answered.
samples=0
wrong=0
for ((n = 0; n < 400 && samples < 8; n++)); do
    [ "$(role "$replica_port")" = slave ] || break
    k=${VKEYS[$((n % 4))]}
    out=$(from_error "$k" 2>&1)
    ok=$?
    [ "$(role "$replica_port")" = slave ] || break
    samples=$((samples + 1))
    [ "$ok" -eq 0 ] || { wrong=$((wrong + 1)); echo "$out"; }
done
echo "$samples decisions while the replica had not taken over"
check failover-decided test "$samples" -ge 1
check failover-on-store-error test "$wrong" -eq 0
check failover-errors-counted test "$(metric 'sluice_store_errors_total{rule="roomy"}')" -gt "$errors0"
check failover-open-errors-counted \
    test "$(metric 'sluice_store_errors_total{rule="roomy_open"}')" -gt "$open_errors0"
check alive matches "$(sc PING)" '^PONG$'

# the replica takes over: every live node's CLUSTER NODES shows it a primary, and every live
# node says the cluster is whole again
replica_id=$(echo "$nodes" | awk -v id="$victim_id" '$4 == id {print $1}')
promoted() {
    local p
    for p in "${P[@]}"; do
        [ "$p" = "$victim_port" ] && continue
        redis-cli -p "$p" CLUSTER NODES | awk -v id="$replica_id" '$1 == id && $3 ~ /master/' |
            grep -q . || return 1
        redis-cli -p "$p" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok || return 1
    done
}
check replica-promoted poll 30 promoted

# decisions reach Redis again (sluiced learns the new owner), then errors stop rising and the
# decisions are run by the promoted replica
reached() { [[ "$(sc SL.ALLOW roomy "${VKEYS[0]}")" =~ ^1\ $ROOMY\ [1-9] ]]; }
check recovers-after-failover poll 20 reached
errors1=$(metric 'sluice_store_errors_total{rule="roomy"}')
calls1=$(throttles "$replica_port")
for k in "${VKEYS[@]}" "${VKEYS[@]}"; do check "after-failover $k" from_redis "$k"; done
check errors-stopped test "$(metric 'sluice_store_errors_total{rule="roomy"}')" -eq "$errors1"
check decided-by-new-primary test "$(throttles "$replica_port")" -ge $((calls1 + 16))
# and fresh keys over every slot are admitted
all_admitted() {
    local j
    for j in $(seq 1 20); do
        [[ "$(decide "after-$j")" =~ ^1\  ]] || return 1
    done
}
check fresh-keys-after-failover all_admitted

# no key was admitted more than its limit over the whole test, and no answer came from the
# over-limit cache
over=$(awk '$2 == 1 {n[$1]++} END {for (k in n) if (n[k] > '"$LIMIT"') print k, n[k]}' "$ALLOWED")
check never-over-limit test -z "$over"
[ -n "$over" ] && echo "over the limit: $over"
check no-cache-hits test "$(metric sluice_redis_cache_hits_total)" -eq 0
stop_bg s1 TERM
check exit-0 test $? -eq 0
finish
