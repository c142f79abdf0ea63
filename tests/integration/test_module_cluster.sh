#!/usr/bin/env bash
# test_module_cluster.sh - sluice.so in a Redis Cluster of 3 primaries + 3 replicas (created with
# redis-cli --cluster create on 6 free loopback ports, the module loaded in every node):
# SL.THROTTLE and CL.THROTTLE sent through `redis-cli -c` land on the shard that owns the key's
# slot, for many keys spread over all three shards; a node that does not own a key answers
# MOVED; hash-tagged keys share a shard; replicas hold the same bytes once they have caught up.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
[ -f "$MODULE" ] || { echo "no $MODULE"; exit 1; }
KEYS=150

start_cluster 3 5000 --loadmodule "$MODULE" || { cat "$TMP"/node*.log; exit 1; }
PORTS=("${CLUSTER_PORTS[@]}")
check cluster-ok true
P1=${PORTS[0]}

# The primaries and their slot ranges, from CLUSTER NODES: "port lo-hi lo-hi ...".
redis-cli -p "$P1" CLUSTER NODES | awk '$3 ~ /master/ && NF >= 9 {
    split($2, a, "[:@]"); line = a[2]
    for (i = 9; i <= NF; i++) line = line " " $i
    print line }' >"$TMP/primaries"
check three-primaries [ "$(wc -l <"$TMP/primaries")" -eq 3 ]
owner_of() { # owner_of SLOT: the port of the primary serving SLOT
    awk -v s="$1" '{ for (i = 2; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
        if (s >= r[1] + 0 && s <= r[2] + 0) print $1 } }' "$TMP/primaries"
}

# --- many keys through redis-cli -c: each decided on its owner (a fresh key's first answer)
for ((k = 0; k < KEYS; k++)); do
    echo "SL.THROTTLE user:$k gcra 5 3600000"
done | redis-cli -c -p "$P1" >"$TMP/answers"
check all-decided [ "$(grep -c '^720000$' "$TMP/answers")" -eq "$KEYS" ]
check no-redirect-errors bash -c "! grep -E 'MOVED|ASK|ERR' '$TMP/answers'"
placed=0
moved=0
for ((k = 0; k < KEYS; k++)); do
    slot=$(redis-cli -p "$P1" CLUSTER KEYSLOT "user:$k")
    owner=$(owner_of "$slot")
    [ "$(redis-cli -p "$owner" EXISTS "user:$k")" = 1 ] && placed=$((placed + 1))
    if [ "$k" -lt 10 ]; then
        for p in $(awk '{print $1}' "$TMP/primaries"); do
            [ "$p" = "$owner" ] && continue
            # a node that does not own the slot redirects instead of deciding
            out=$(redis-cli -p "$p" SL.THROTTLE "user:$k" gcra 5 3600000)
            [ "$out" = "MOVED $slot 127.0.0.1:$owner" ] && moved=$((moved + 1))
        done
    fi
done
check keys-on-owner [ "$placed" -eq "$KEYS" ]
check moved-elsewhere [ "$moved" -eq 20 ]
total=0
for p in $(awk '{print $1}' "$TMP/primaries"); do
    n=$(redis-cli -p "$p" DBSIZE)
    check "shard-$p-used" [ "$n" -gt 10 ]
    total=$((total + n))
done
check keys-counted-once [ "$total" -eq "$KEYS" ]

# --- CL.THROTTLE, SL.PEEK and SL.RESET route the same way; hash tags keep keys together
check cl-routed [ "$(redis-cli -c -p "$P1" CL.THROTTLE cl:3 5 5 3600 | paste -sd' ')" = \
    "0 6 5 -1 720" ]
# the same rule as SL.THROTTLE gcra 5 3600000: (allowed, limit, remaining) of a peek
check peek-routed [ "$(redis-cli -c -p "$P1" SL.PEEK cl:3 gcra 5 3600000 | head -3 | paste -sd' ')" = \
    "1 6 5" ]
check reset-routed [ "$(redis-cli -c -p "$P1" SL.RESET user:3)" = OK ]
check reset-done [ "$(redis-cli -c -p "$P1" EXISTS user:3)" = 0 ]
redis-cli -c -p "$P1" SL.THROTTLE "{acct7}:login" sliding_log 3 60000 >/dev/null
redis-cli -c -p "$P1" SL.THROTTLE "{acct7}:api" fixed_window 100 60000 >/dev/null
tag_owner=$(owner_of "$(redis-cli -p "$P1" CLUSTER KEYSLOT "{acct7}:x")")
check hashtag-together [ "$(redis-cli -p "$tag_owner" EXISTS "{acct7}:login" "{acct7}:api")" = 2 ]

# --- each primary's replica holds the same bytes and expiries, once it has caught up
for p in $(awk '{print $1}' "$TMP/primaries"); do
    id=$(redis-cli -p "$p" CLUSTER MYID)
    rp=$(redis-cli -p "$P1" CLUSTER NODES | awk -v id="$id" '$4 == id { split($2, a, "[:@]"); print a[2] }')
    check "caught-up-$rp" poll 20 caught_up "$p" "$rp"
    redis-cli -p "$p" --scan | sort >"$TMP/keys-$p"
    sed 's/^/DUMP /; p; s/^DUMP /PEXPIRETIME /' "$TMP/keys-$p" |
        redis-cli -p "$p" --no-raw >"$TMP/snap-$p"
    # a replica answers for its slots after READONLY, on the same connection
    { echo READONLY; sed 's/^/DUMP /; p; s/^DUMP /PEXPIRETIME /' "$TMP/keys-$p"; } |
        redis-cli -p "$rp" --no-raw | tail -n +2 >"$TMP/snap-$rp"
    check "replica-of-$p" cmp -s "$TMP/snap-$p" "$TMP/snap-$rp"
done

for i in 1 2 3 4 5 6; do
    stop_bg "node$i"
done
check no-sanitizer-report bash -c "! cat '$TMP'/node*.log | grep -E 'AddressSanitizer|runtime error:'"
finish
