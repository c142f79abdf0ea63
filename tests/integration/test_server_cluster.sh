#!/usr/bin/env bash
# test_server_cluster.sh - sluiced on a Redis Cluster of 3 primaries + 3 replicas with sluice.so
# in every node (--store redis-cluster://): keys spread over all shards; a slot moved to another
# primary is followed (MOVED) with the key's count intact; a primary killed during a bounded
# load: decisions follow on_store_error (deny) while the replica takes over, sluiced does not
# crash, decisions recover, and no key is admitted over its limit.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
LIMIT=5
cat >"$TMP/rules.yaml" <<YAML
rules:
  - name: strict
    algorithm: sliding_log
    limit: $LIMIT
    window: 1h
    on_store_error: deny
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | sed '/^$/d' | paste -sd' ' -; }

start_cluster 3 2000 --loadmodule "$MODULE" || { cat "$TMP"/node*.log; exit 1; }
P=("${CLUSTER_PORTS[@]}")
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" \
    --store "redis-cluster://127.0.0.1:${P[0]},127.0.0.1:${P[1]}" --store-timeout 100ms ||
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

# --- a primary killed during a bounded load (at most 12 s, 40 keys round robin)
victim_port=$(echo "$primaries" | grep -v "^$dst_port$" | head -n 1)
victim=""
for ((i = 1; i <= 6; i++)); do [ "${P[$((i - 1))]}" = "$victim_port" ] && victim=node$i; done
(
    end=$((SECONDS + 12))
    n=0
    while [ $SECONDS -lt $end ] && [ $n -lt 4000 ]; do
        decide "f$((n % 40))" >/dev/null
        n=$((n + 1))
    done
) &
load=$!
sleep 2
echo "killing $victim (port $victim_port)"
stop_bg "$victim" KILL
wait $load
check alive matches "$(sc PING)" '^PONG$'
check store-errors-during-failover matches "$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics")" \
    'sluice_store_errors_total\{rule="strict"\} [1-9]'
# after the failover, fresh keys on every slot are admitted again
ok=0
for i in $(seq 1 100); do
    bad=0
    for j in $(seq 1 20); do
        [[ "$(decide "after$i-$j")" =~ ^1\  ]] || bad=1
    done
    [ $bad -eq 0 ] && { ok=1; break; }
    sleep 0.2
done
check recovers-after-failover test $ok -eq 1
# no key was admitted more than its limit over the whole test
over=$(awk '$2 == 1 {n[$1]++} END {for (k in n) if (n[k] > '"$LIMIT"') print k, n[k]}' "$ALLOWED")
check never-over-limit test -z "$over"
[ -n "$over" ] && echo "over the limit: $over"
stop_bg s1 TERM
check exit-0 test $? -eq 0
finish
