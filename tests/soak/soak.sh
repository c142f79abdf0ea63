#!/usr/bin/env bash
# soak.sh - the chaos soak: SOAK_SECONDS (default 300) of mixed traffic from SOAK_CLIENTS
# (default 5) client processes against two sluiced while they are attacked:
#   - "mem": the memory store with a snapshot every second, killed with SIGKILL at random
#     (seeded) moments and restarted on its ports, sometimes with its snapshot removed first,
#     sometimes twice in a row (a crash loop within one window of a cold start);
#     its rules change meanwhile (SL.RULE SET / PUT of API-made rules, edits of its --rules file
#     followed by SIGHUP, sometimes killed right after one);
#   - "red": the Redis store on a Redis Cluster of 3 primaries and 3 replicas with sluice.so,
#     whose primaries are killed with SIGKILL one at a time (every 60 s from 20 s in) and fail
#     over to their replicas, the killed node then coming back as a replica.
# Then soak_check.py checks, from the replies the clients got and what the driver did, that no
# key of an exact algorithm was admitted over its limit beyond what a kill or a failover
# legitimately loses, that every reply was well formed and every broken connection explained
# by a kill; the driver itself checks that the rule set read back after every restart, reload
# and change is the expected one, that sluiced never exited unless killed (and then by the
# signal), and that RSS stays within its bound. Exit 1 on any violation, 77 when a tool is
# missing. SLUICE_SEED seeds the driver and the clients (the schedule; timing does the rest).
#
# Pacing between chaos events is a random sleep: the moments are the test. Every wait for a
# state (a server listening, a replica promoted, a reload applied) is a bounded poll.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli
HERE=$SLUICE_SOURCE_DIR/tests/soak
# ports below the ephemeral range: no connect() can take one while its server is down
LIB_FREE_PORT=$HERE/quiet_port.py
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
[ -f "$MODULE" ] || { echo "SKIP: needs $MODULE"; exit 77; }

DURATION=${SOAK_SECONDS:-300}
CLIENTS=${SOAK_CLIENTS:-5}
SEED=$((${SLUICE_SEED:-0x5117ce2024}))
NODE_TIMEOUT=2000 # ms: a killed primary's replica takes over after this, plus an election
# RSS bound (docs/dev/design.md): keys go fresh within their window (at most 10 s here) and are then
# reclaimed, so the tables hold only the keys of the last seconds (about 1 MiB); with the
# rules, SQLite's cache and buffers for a dozen connections a sluiced needs 5-8 MiB. 32 MiB
# leaves room for allocator slack and catches a leak of 10 bytes per decision in the run of the
# Redis-store sluiced, which lives through the whole soak.
RSS_BOUND_KB=$((32 * 1024))
SOAK=$TMP/soak
mkdir -p "$SOAK"
CTL=(python3 "$HERE/soak_ctl.py")
RANDOM=$((SEED % 32768))
echo "soak: $DURATION s, $CLIENTS clients, seed $SEED, files in $SOAK"

python3 "$HERE/soak_check.py" --self-test >"$SOAK/self-test.txt" ||
    { cat "$SOAK/self-test.txt"; echo "the checker's self-test failed"; exit 1; }

now_ns() { date +%s%N; }
event() { echo "$*" >>"$SOAK/events"; }
violation() { echo "VIOLATION: $*"; event violation "$*"; }
count() { event stat "$1" "${2:-1}"; }

"${CTL[@]}" init "$SOAK" || exit 1

# ---- the memory sluiced: one log per lifetime (mem1, mem2, ..) -----------------------------
SNAP=$SOAK/mem.snapshot
MEM_ARGS=(--rules "$SOAK/mem-rules.yaml" --config-store "$SOAK/mem.db" --snapshot "$SNAP"
    --snapshot-interval 1s)
LIFE=1
start_sluiced mem1 "${MEM_ARGS[@]}" || { cat "$TMP/mem1.log"; exit 1; }
MEM_RESP=$RESP_PORT
MEM_HTTP=$HTTP_PORT
for i in 0 1 2 3 4 5; do # the API rules, made alternately with SL.RULE SET and PUT
    "${CTL[@]}" api-change "$SOAK" "$i" "$MEM_RESP" "$MEM_HTTP" >/dev/null ||
        { echo "could not make the API rules"; exit 1; }
done
"${CTL[@]}" rules-check "$SOAK" m "$MEM_RESP" "$MEM_HTTP" ||
    { echo "the memory sluiced's first rules are not the expected ones"; exit 1; }

# ---- the Redis Cluster and its sluiced --------------------------------------------------------
NODE_ARGS=(--loadmodule "$MODULE" --min-replicas-to-write 1)
start_cluster 3 "$NODE_TIMEOUT" "${NODE_ARGS[@]}" || { cat "$TMP"/node*.log; exit 1; }
SEEDS=$(printf '127.0.0.1:%s,' "${CLUSTER_PORTS[@]}")
start_sluiced red --rules "$SOAK/redis-rules.yaml" --config-store "$SOAK/red.db" --snapshot "" \
    --store "redis-cluster://${SEEDS%,}" --store-timeout 500ms || { cat "$TMP/red.log"; exit 1; }
RED_RESP=$RESP_PORT
RED_HTTP=$HTTP_PORT
poll 10 grep -q "request store redis (sluice.so module)" "$TMP/red.log" ||
    { echo "the Redis-store sluiced does not use sluice.so"; cat "$TMP/red.log"; exit 1; }
"${CTL[@]}" rules-check "$SOAK" r "$RED_RESP" "$RED_HTTP" ||
    { echo "the Redis-store sluiced's rules are not the expected ones"; exit 1; }
echo "memory sluiced on $MEM_RESP/$MEM_HTTP, Redis-store sluiced on $RED_RESP/$RED_HTTP," \
    "cluster on ${CLUSTER_PORTS[*]}"

# ---- clients ----------------------------------------------------------------------------------
START=$(now_ns)
DEADLINE=$((START + DURATION * 1000000000))
for ((i = 1; i <= CLIENTS; i++)); do
    start_bg "client$i" python3 "$HERE/soak_client.py" "$i" "$SEED" "$SOAK" "$DEADLINE" \
        "$SOAK/stop" "$MEM_RESP" "$MEM_HTTP" "$RED_RESP" "$RED_HTTP"
done

# ---- watching: liveness and RSS of both sluiced ----------------------------------------------
RSS_MAX_M=0
RSS_MAX_R=0
ABORT=0 # a sluiced that would not start again ends the run early
rss_kb() { awk '$1 == "VmRSS:" {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# alive NAME: NAME still runs; else its exit is a violation (it was not killed on purpose)
alive() {
    local name=$1 pid rc
    pid=$(cat "$TMP/$name.pid")
    kill -0 "$pid" 2>/dev/null && return 0
    { wait "$pid"; } 2>/dev/null
    rc=$?
    lib_forget "$pid"
    violation "$name exited by itself (status $rc): $(tail -n 3 "$TMP/$name.log" | tr '\n' ' ')"
    return 1
}
sample() {
    local kb
    [ "$ABORT" = 0 ] || return
    if alive "mem$LIFE"; then
        kb=$(rss_kb "$(cat "$TMP/mem$LIFE.pid")")
        [ "${kb:-0}" -gt "$RSS_MAX_M" ] && RSS_MAX_M=$kb
    else
        restart_mem crash "$(now_ns)" 0
    fi
    if alive red; then
        kb=$(rss_kb "$(cat "$TMP/red.pid")")
        [ "${kb:-0}" -gt "$RSS_MAX_R" ] && RSS_MAX_R=$kb
    else
        if start_sluiced_at red "$RED_RESP" "$RED_HTTP" --rules "$SOAK/redis-rules.yaml" \
            --config-store "$SOAK/red.db" --snapshot "" --store "redis-cluster://${SEEDS%,}" \
            --store-timeout 500ms; then
            event "crash r $(now_ns)"
        else
            violation "the Redis-store sluiced would not restart"
            ABORT=1
        fi
    fi
}
# pace SECS: the time between two chaos events, watching both sluiced every 0.2 s
pace() {
    local until=$(($(now_ns) + $1 * 1000000)) # $1 in ms
    while [ "$ABORT" = 0 ] && [ "$(now_ns)" -lt "$until" ]; do
        sample
        sleep 0.2
    done
}

# ---- chaos: the memory sluiced ----------------------------------------------------------------
# restart_mem KIND SENT_NS REMOVE: after mem$LIFE ended (killed at SENT_NS, or found dead), read
# the snapshot's time, remove it when REMOVE is 1, start the next lifetime on the same ports
restart_mem() {
    local kind=$1 sent=$2 remove=$3 killed cut load restarted
    killed=$(now_ns)
    cut=$("${CTL[@]}" snapshot-time "$SNAP")
    if [ "$remove" = 1 ]; then
        rm -f "$SNAP"
        count snapshots_removed
    fi
    LIFE=$((LIFE + 1))
    start_sluiced_at "mem$LIFE" "$MEM_RESP" "$MEM_HTTP" "${MEM_ARGS[@]}" || {
        violation "the memory sluiced would not restart: $(tail -n 5 "$TMP/mem$LIFE.log")"
        ABORT=1
        return
    }
    restarted=$(now_ns)
    if grep -q "snapshot .* loaded" "$TMP/mem$LIFE.log"; then
        load=loaded
    elif grep -q "unusable" "$TMP/mem$LIFE.log"; then
        load=unusable
    else
        load=cold
    fi
    [ "$kind" = crash ] && sent=$killed
    event "$kind m $killed $cut $load $sent $restarted"
    count restarts
    check_rules_m 0
}
kill_mem() { # [REMOVE]: 1 removes the snapshot before the restart (default: one time in 4)
    local sent rc remove=${1:-$((RANDOM % 4 == 0 ? 1 : 0))}
    sent=$(now_ns)
    stop_bg "mem$LIFE" KILL
    rc=$?
    [ "$rc" -eq 137 ] || violation "mem$LIFE exited with status $rc when killed with SIGKILL"
    count kills
    restart_mem kill "$sent" "$remove"
}
snapshot_after() { # snapshot_after NS: the snapshot file was written after NS
    local t
    t=$("${CTL[@]}" snapshot-time "$SNAP")
    [[ $t =~ ^[0-9]+$ ]] && [ "$t" -gt "$1" ]
}
# a crash loop: killed with the snapshot lost (a cold start), then killed again once the new
# lifetime has written a periodic snapshot, within one window of the cold start. A key of its
# own, used up before and decided again after, must not get its quota back (f_slow: 3 in 10 s,
# cold_start: closed).
LOOPS=0
crash_loop() {
    local started key
    LOOPS=$((LOOPS + 1))
    key=loop$LOOPS
    "${CTL[@]}" probe "$SOAK" "$MEM_RESP" f_slow "$key" 4 >/dev/null
    kill_mem 1
    [ "$ABORT" = 0 ] || return
    started=$(now_ns)
    poll 5 snapshot_after "$started" || violation "mem$LIFE wrote no periodic snapshot in 5 s"
    kill_mem 0
    [ "$ABORT" = 0 ] || return
    "${CTL[@]}" probe "$SOAK" "$MEM_RESP" f_slow "$key" 4 >/dev/null
    count crash_loops
}
# check_rules_m WAIT_S: the memory sluiced serves the expected rules (waiting for a reload)
check_rules_m() {
    local out
    count rule_checks
    out=$("${CTL[@]}" rules-check "$SOAK" m "$MEM_RESP" "$MEM_HTTP" "$1") ||
        violation "rules lost or wrong (mem$LIFE): $out"
}
api_change() {
    "${CTL[@]}" api-change "$SOAK" "$RANDOM" "$MEM_RESP" "$MEM_HTTP" >/dev/null ||
        violation "an API rule change was refused"
    count api_changes
    check_rules_m 0
}
file_change() { # edit the rules file, SIGHUP; KILL_AFTER 1: kill at once, before the reload
    local kill_after=$1
    "${CTL[@]}" file-change "$SOAK" "$RANDOM" >/dev/null
    kill -HUP "$(cat "$TMP/mem$LIFE.pid")"
    count reloads
    if [ "$kill_after" = 1 ]; then
        kill_mem
    else
        check_rules_m 10
    fi
}

# ---- chaos: a Redis Cluster primary ---------------------------------------------------------
node_name() { # node_name PORT: the lib.sh name of the node on PORT
    local i
    for ((i = 0; i < ${#CLUSTER_PORTS[@]}; i++)); do
        [ "${CLUSTER_PORTS[$i]}" = "$1" ] && echo "node$((i + 1))"
    done
}
live_node() { # a node port that answers
    local p
    for p in "${CLUSTER_PORTS[@]}"; do
        redis-cli -p "$p" PING 2>/dev/null | grep -q PONG && { echo "$p"; return 0; }
    done
    return 1
}
soak_launch_node() { # NAME ARGS..: a cluster node started again with its nodes.conf
    local name=$1
    shift
    lib_launch_redis "$name" --cluster-enabled yes --cluster-config-file "$TMP/$name/nodes.conf" \
        --cluster-node-timeout "$NODE_TIMEOUT" --repl-diskless-sync-delay 0 "$@"
}
promoted() { # promoted ID DEAD_PORT: every live node sees ID as a primary and the cluster ok
    local p
    for p in "${CLUSTER_PORTS[@]}"; do
        [ "$p" = "$2" ] && continue
        redis-cli -p "$p" CLUSTER NODES | awk -v id="$1" '$1 == id && $3 ~ /master/' |
            grep -q . || return 1
        redis-cli -p "$p" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok || return 1
    done
}
PRIMARIES=""
FAILOVERS=0
primaries_now() { "${CTL[@]}" cluster-primaries "$(live_node)"; }
failover() {
    local port rport rid slots name pid rc killed promoted_at
    FAILOVERS=$((FAILOVERS + 1))
    read -r port _ rport rid slots < <("${CTL[@]}" cluster-victim "$(live_node)" "$RANDOM")
    name=$(node_name "$port")
    if [ -z "$name" ] || [ -z "$rport" ]; then
        violation "no primary to fail over"
        return
    fi
    pid=$(cat "$TMP/$name.pid")
    echo "failover $FAILOVERS: killing the primary $name (port $port), replica on $rport"
    "${CTL[@]}" kill-primary "$port" "$pid" "$SOAK/failover$FAILOVERS.json" ||
        { violation "could not sample and kill the primary on $port"; return; }
    { wait "$pid"; } 2>/dev/null
    rc=$?
    lib_forget "$pid"
    killed=$(now_ns)
    [ "$rc" -eq 137 ] || violation "redis-server $name exited with status $rc when killed"
    poll 60 promoted "$rid" "$port" ||
        { violation "the replica on $rport was not promoted"; return; }
    promoted_at=$(now_ns)
    "${CTL[@]}" failover-event "$SOAK" "$SOAK/failover$FAILOVERS.json" "$rport" "$killed" \
        "$promoted_at" "$slots" || violation "failover $FAILOVERS: the promoted replica's offsets"
    count failovers
    serve_at "$name" "$port" soak_launch_node "${NODE_ARGS[@]}" ||
        { violation "the killed node $name would not restart"; return; }
    poll 60 lib_cluster_ok 3 "${CLUSTER_PORTS[@]}" ||
        violation "the cluster was not whole again after failover $FAILOVERS"
    PRIMARIES=$(primaries_now)
    PRIMARIES_SEEN=$(now_ns)
    count rule_checks
    local out
    out=$("${CTL[@]}" rules-check "$SOAK" r "$RED_RESP" "$RED_HTTP") ||
        violation "rules lost or wrong (Redis-store sluiced): $out"
}
# a failover nobody asked for (a node thought dead while busy) would make the counts around it
# uncertain: noticed, reported and left out
check_primaries() {
    local now p
    now=$(now_ns)
    p=$(primaries_now)
    if [ -n "$p" ] && [ "$p" != "$PRIMARIES" ]; then
        echo "unplanned failover: primaries were $PRIMARIES, now $p"
        event "unplanned r $PRIMARIES_SEEN $now 0-16383"
        PRIMARIES=$p
    fi
    PRIMARIES_SEEN=$now
}
PRIMARIES=$(primaries_now)
PRIMARIES_SEEN=$(now_ns)

# ---- the schedule -----------------------------------------------------------------------------
NEXT_FAILOVER=$((START + 20 * 1000000000))
STEPS=0
while [ "$ABORT" = 0 ] && [ "$(now_ns)" -lt $((DEADLINE - 3 * 1000000000)) ] &&
    [ "$STEPS" -lt 100000 ]; do
    STEPS=$((STEPS + 1))
    pace $((200 + RANDOM % 1800))
    [ "$ABORT" = 0 ] || break
    check_primaries
    now=$(now_ns)
    if [ "$now" -ge "$NEXT_FAILOVER" ] && [ "$now" -lt $((DEADLINE - 15 * 1000000000)) ]; then
        failover
        NEXT_FAILOVER=$((NEXT_FAILOVER + 60 * 1000000000))
        continue
    fi
    r=$((RANDOM % 100))
    if [ "$r" -lt 30 ]; then
        kill_mem
    elif [ "$r" -lt 58 ]; then
        api_change
    elif [ "$r" -lt 78 ]; then
        file_change 0
    elif [ "$r" -lt 85 ]; then
        file_change 1
    elif [ "$r" -lt 93 ]; then
        api_change
        kill_mem # an acknowledged change must survive SIGKILL
    else
        crash_loop
    fi
done

# ---- the end: clients stop, both sluiced stop cleanly, the checker runs -------------------------
touch "$SOAK/stop"
exited() { ! kill -0 "$(cat "$TMP/$1.pid")" 2>/dev/null; }
for ((i = 1; i <= CLIENTS; i++)); do
    poll 90 exited "client$i" || violation "client $i did not finish"
    stop_bg "client$i"
    rc=$?
    [ "$rc" -eq 0 ] ||
        violation "client $i exited with status $rc: $(tail -n 5 "$TMP/client$i.log")"
done
sample
if [ "$ABORT" = 0 ]; then
    stop_bg "mem$LIFE" TERM
    rc=$?
    [ "$rc" -eq 0 ] || violation "mem$LIFE exited with status $rc on SIGTERM"
    stop_bg red TERM
    rc=$?
    [ "$rc" -eq 0 ] || violation "the Redis-store sluiced exited with status $rc on SIGTERM"
fi
event "stat rss_max_kb_m $RSS_MAX_M"
event "stat rss_max_kb_r $RSS_MAX_R"
event "stat rss_bound_kb $RSS_BOUND_KB"
[ "$RSS_MAX_M" -le "$RSS_BOUND_KB" ] ||
    violation "the memory sluiced's RSS reached $RSS_MAX_M kB, over $RSS_BOUND_KB kB"
[ "$RSS_MAX_R" -le "$RSS_BOUND_KB" ] ||
    violation "the Redis-store sluiced's RSS reached $RSS_MAX_R kB, over $RSS_BOUND_KB kB"
python3 "$HERE/soak_check.py" "$SOAK" "$DURATION" "$CLIENTS"
