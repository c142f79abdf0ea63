#!/usr/bin/env bash
# test_server_cluster_holds.sh - in-flight holds through a Redis Cluster failover: sluiced over a
# cluster of 3 primaries + 3 replicas with sluice.so, two concurrency rules (limit 3), one with
# replicas: 1 (each admission acknowledged by a replica before sluiced answers it). Every key of
# the failed primary's slots is filled to its limit, then the primary is killed (SIGKILL) right
# after the last acquire. Once its replica has taken over:
#   - replicas: 1: no hold is lost: every key is still full and every hold releases, once;
#   - without: a hold can be lost (acknowledged by the primary, not yet sent to its replica: its
#     units are free again, its release answers "no such hold"); the test counts them and checks
#     what holds whatever was lost: per key, the holds that still release plus the acquires the
#     key admits again make exactly its limit (never more in flight than the limit by what the
#     new primary knows), and a lost hold's release changes nothing.
# Every step waits for the event it needs (a node's role, the cluster's state), not for time.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
LIMIT=3
cat >"$TMP/rules.yaml" <<YAML
rules:
  - name: jobs
    algorithm: concurrency
    limit: $LIMIT
    hold_timeout: 1h
    on_store_error: deny
  - name: jobs_safe
    algorithm: concurrency
    limit: $LIMIT
    hold_timeout: 1h
    on_store_error: deny
    replicas: 1
    replica_wait: 1s
YAML
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }

start_cluster 3 2000 --loadmodule "$MODULE" || { cat "$TMP"/node*.log; exit 1; }
P=("${CLUSTER_PORTS[@]}")
start_sluiced s1 --threads 1 --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" \
    --store "redis-cluster://127.0.0.1:${P[0]},127.0.0.1:${P[1]}" --store-timeout 3s ||
    { cat "$TMP/s1.log"; exit 1; }
check victim-found cluster_victim "" h 4

# fill RULE: LIMIT holds on every victim key; records "RULE KEY ID" lines in $TMP/holds
: >"$TMP/holds"
fill() {
    local k i r ok=0
    for k in "${VKEYS[@]}"; do
        for ((i = 0; i < LIMIT; i++)); do
            r=$(sc SL.ACQUIRE "$1" "$k")
            [[ "$r" =~ ^1\ $LIMIT\ [0-9]+\ 0\ [0-9]+\ ([1-9][0-9]*)$ ]] || {
                echo "  acquire $1 $k: $r"
                continue
            }
            echo "$1 $k ${BASH_REMATCH[1]}" >>"$TMP/holds"
            ok=$((ok + 1))
        done
    done
    [ "$ok" -eq $((LIMIT * ${#VKEYS[@]})) ]
}
check fill-safe fill jobs_safe
check fill-jobs fill jobs
full() { # full RULE: every victim key refuses one more
    local k
    for k in "${VKEYS[@]}"; do
        matches "$(sc SL.ACQUIRE "$1" "$k")" "^0 $LIMIT 0 [1-9][0-9]* [0-9]+ 0$" || return 1
    done
}
check full-before full jobs

echo "killing $victim (port $victim_port)"
stop_bg "$victim" KILL
replica_primary() { redis-cli -p "$replica_port" ROLE 2>/dev/null | head -n 1 | grep -qx master; }
check replica-promoted poll 30 replica_primary
cluster_ok() {
    local p
    for p in "${P[@]}"; do
        [ "$p" = "$victim_port" ] && continue
        redis-cli -p "$p" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok || return 1
    done
}
check cluster-whole poll 30 cluster_ok
# sluiced learns the new owner: a peek of a victim key is answered by Redis again
reached() { matches "$(sc SL.PEEK jobs_safe "${VKEYS[0]}")" "^1 $LIMIT 0 0 [0-9]+$" >/dev/null; }
check reached poll 20 reached

# replicas: 1: nothing lost
check safe-still-full full jobs_safe
released() { # released RULE: the holds of RULE that release now, once each
    local rule key id n=0
    while read -r rule key id; do
        [ "$rule" = "$1" ] || continue
        [ "$(sc SL.RELEASE "$rule" "$key" "$id")" = OK ] && n=$((n + 1))
    done <"$TMP/holds"
    echo "$n"
}
safe_total=$(awk '$1 == "jobs_safe"' "$TMP/holds" | wc -l)
check safe-all-released test "$(released jobs_safe)" -eq "$safe_total"
check safe-released-once test "$(released jobs_safe)" -eq 0

# without replicas: per key, kept holds + admitted again = the limit
lost=0
for k in "${VKEYS[@]}"; do
    kept=0
    while read -r rule key id; do
        [ "$rule" = jobs ] && [ "$key" = "$k" ] || continue
        r=$(sc SL.RELEASE jobs "$k" "$id")
        if [ "$r" = OK ]; then
            kept=$((kept + 1))
        else
            check "lost-release-refused $k" matches "$r" '^ERR no such hold'
            lost=$((lost + 1))
        fi
    done <"$TMP/holds"
    # every kept hold was released just now: the key admits exactly its limit again
    admitted=0
    for ((i = 0; i <= LIMIT; i++)); do
        [[ "$(sc SL.ACQUIRE jobs "$k")" =~ ^1\  ]] && admitted=$((admitted + 1))
    done
    check "key-limit $k" test "$admitted" -eq "$LIMIT"
done
echo "holds lost in the failover without replicas: $lost of $((LIMIT * ${#VKEYS[@]})); with replicas: 1: 0"
check alive matches "$(sc PING)" '^PONG$'
stop_bg s1 TERM
check exit-0 test $? -eq 0
finish
