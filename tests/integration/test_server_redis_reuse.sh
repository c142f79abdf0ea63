#!/usr/bin/env bash
# test_server_redis_reuse.sh - sluiced's Redis store reuses its per-loop objects (pending
# decisions, requests, reply objects, engine ops): pipelined batches where each request has a
# limit of its own (request i of a batch: sliding_log, limit BASE + i, a fresh key), so a reply
# given to the wrong request, or a decision answered twice or never, shows. Each batch's replies
# must come in order, each from Redis (remaining = limit - 1) or from on_store_error (allow:
# remaining 0) as the case says:
#   timeout    Redis paused: a batch is answered at its deadline; once the pause is lifted and
#              Redis has run the batch, its late replies are dropped; the next batch, on the
#              reused objects, is answered by Redis
#   reconnect  Redis killed with a batch in flight, then back on its port: the next batch is
#              answered by Redis on a new connection
#   noscript   the Lua scripts flushed from Redis: a batch is answered through EVALSHA, NOSCRIPT,
#              then EVAL, in order
# and sluiced exits 0 at the end (under ASan: nothing leaked).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
N=60 # requests per batch
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {v = $2} END {print v + 0}'; }
throttles() { # throttles PORT: SL.THROTTLE calls Redis has run
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' '$1 == "cmdstat_sl.throttle" {v = $3} END {print v + 0}'
}
at_least() { [ "$("$1" "$2")" -ge "$3" ]; } # at_least FN ARG N
metric_at_least() { [ "$(metric "$1" "$2")" -ge "$3" ]; }

# batch PORT BASE TAG: N pipelined SL.THROTTLE in one write, one reply per line ("a l r ..")
batch() {
    local port=$1 base=$2 tag=$3 i
    for ((i = 0; i < N; i++)); do
        printf 'SL.THROTTLE %s:%d sliding_log %d 60000\r\n' "$tag" "$i" $((base + i))
    done | timeout 20 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$port"'; cat >&3; head -n '$((N * 6))' <&3' |
        tr -d '\r' | awk 'NR % 6 == 1 {if (NR > 1) print line; line = ""; next} {line = line (line == "" ? "" : " ") substr($0, 2)} END {print line}'
}

# check_batch NAME OUT BASE WHO: every reply in order; WHO = redis (limit - 1 left) or error
# (on_store_error allow: 0 left) or either
check_batch() {
    local name=$1 out=$2 base=$3 who=$4
    local bad
    bad=$(echo "$out" | awk -v n="$N" -v base="$base" -v who="$who" '
        { lim = base + NR - 1
          if ($1 != 1 || $2 != lim) { print "reply " NR ": " $0 " (limit " lim " wanted)"; next }
          if (who == "redis" && $3 != lim - 1) print "reply " NR ": " $0 " (not from Redis)"
          if (who == "error" && $3 != 0) print "reply " NR ": " $0 " (not on_store_error)"
          if (who == "either" && $3 != 0 && $3 != lim - 1) print "reply " NR ": " $0 }
        END { if (NR != n) print NR " replies, " n " wanted" }' | head -n 3)
    check "$name" test -z "$bad"
    [ -z "$bad" ] || echo "$bad"
}

# --- the module
start_redis redis --loadmodule "$MODULE" || { cat "$TMP/redis.log"; exit 1; }
RP=$REDIS_PORT
# (every batch's limits are inline rules of their own, all made from 127.0.0.1: more than one
# address may make by default)
start_sluiced s1 --threads 1 --config-store "$TMP/s1.db" --snapshot "" \
    --store "redis://127.0.0.1:$RP" --store-timeout 1s --max-inline-per-address 1024 ||
    { cat "$TMP/s1.log"; exit 1; }
P1=$RESP_PORT H1=$HTTP_PORT
check_batch warm "$(batch "$P1" 100 a)" 100 redis

# timeout: paused (writes: SL.THROTTLE) until lifted, the batch is answered at its deadline
# (1 s: long enough for a healthy answer on a busy machine); lifted, Redis runs the batch and
# its late replies come and are dropped
calls=$(throttles "$RP")
redis-cli -p "$RP" CLIENT PAUSE 30000 WRITE >/dev/null
check_batch timeout-answered "$(batch "$P1" 200 b)" 200 error
check timeouts-counted test "$(metric "$H1" sluice_redis_timeouts_total)" -ge "$N"
redis-cli -p "$RP" CLIENT UNPAUSE >/dev/null
check late-replies-sent poll 10 at_least throttles "$RP" $((calls + N))
check_batch after-timeout "$(batch "$P1" 300 c)" 300 redis
check_batch after-timeout-2 "$(batch "$P1" 400 d)" 400 redis

# reconnect: Redis killed with a batch sent to it (answered one way or the other: at the
# deadline, or as the connection drops), then back
sent=$(metric "$H1" sluice_redis_decisions_total)
redis-cli -p "$RP" CLIENT PAUSE 30000 WRITE >/dev/null
batch "$P1" 500 e >"$TMP/inflight.out" &
asker=$!
check inflight-sent poll 10 metric_at_least "$H1" sluice_redis_decisions_total $((sent + N))
stop_bg redis KILL
wait $asker
check_batch inflight-answered "$(cat "$TMP/inflight.out")" 500 either
start_redis_at redis2 "$RP" --loadmodule "$MODULE" || { cat "$TMP/redis2.log"; exit 1; }
# (reconnects after a backoff of at most 1 s)
all_from_redis() { [ "$(batch "$P1" 600 "f$RANDOM" | awk '$3 != 0' | wc -l)" -eq "$N" ]; }
check reconnected poll 20 all_from_redis
check_batch after-reconnect "$(batch "$P1" 700 g)" 700 redis
stop_bg s1 TERM
check s1-exit-0 test $? -eq 0

# --- the Lua scripts: NOSCRIPT re-sends in a pipelined batch
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
LP=$REDIS_PORT
start_sluiced s2 --threads 1 --config-store "$TMP/s2.db" --snapshot "" \
    --store "redis://127.0.0.1:$LP" --store-timeout 2s || { cat "$TMP/s2.log"; exit 1; }
P2=$RESP_PORT H2=$HTTP_PORT
check lua-detected grep -q "request store redis (Lua scripts)" "$TMP/s2.log"
check_batch lua-first "$(batch "$P2" 100 a)" 100 redis
before=$(metric "$H2" sluice_redis_noscript_total)
redis-cli -p "$LP" SCRIPT FLUSH >/dev/null
check_batch lua-noscript "$(batch "$P2" 200 b)" 200 redis
check noscript-counted test "$(metric "$H2" sluice_redis_noscript_total)" -gt "${before:-0}"
check_batch lua-after "$(batch "$P2" 300 c)" 300 redis
stop_bg s2 TERM
check s2-exit-0 test $? -eq 0
finish
