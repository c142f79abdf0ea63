#!/usr/bin/env bash
# bench/server/run.sh - sluiced against its peers on this machine, as docs/performance.md's targets state
# them. Prints figures (asserts nothing) and one table of medians with ratios sluiced / peer.
#
#   RESP  redis-benchmark -c 50 -r 100000|1000000 -P 1|16 against
#           sluiced --threads 1   SL.THROTTLE key:__rand_int__ gcra 100 1000
#           redis-server 7        INCR (the floor of a Redis write)
#           redis-server 7        EVALSHA of bench/server/gcra.lua (GCRA in Lua, same reply)
#         requests/s, p50/p99 latency (redis-benchmark's), and the server's CPU per request
#         (utime+stime of its PID from /proc/PID/stat around the run, divided by the requests).
#   HTTP  wrk -t1 -c50 -d10s (keep-alive) with a random ?key= per request (wrk_rand_key.lua)
#           sluiced --threads 1   GET /v1/auth/bench?key=K           (gcra 100/s, 204 when allowed)
#           nginx (1 worker)      limit_req on $arg_key, 100r/s burst=100 nodelay, then 204
#   Rule propagation: two sluiced sharing one SQLite store; SL.RULE SET through one, SL.PEEK on
#         the other until the new limit applies there (each wait bounded).
#
# Servers are pinned to CPU 0 (taskset -c 0), clients to CPU 1; everything listens on
# 127.0.0.1 on free ports; every process started here is stopped by its PID on exit.
#
#   bench/server/run.sh              REPS=3 repetitions, median reported; about 4-5 minutes
#   QUICK=1 bench/server/run.sh      a smoke run: 1 repetition, small counts (figures not comparable)
#   REPS=5 bench/server/run.sh       more repetitions
#   BUILD_DIR=/tmp/b bench/server/run.sh   build (RelWithDebInfo, no sanitizer) there
#   POLL_INTERVAL=2s CHANGES=20 bench/server/run.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-srv}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
QUICK=${QUICK:-0}
POLL_INTERVAL=${POLL_INTERVAL:-1s}
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-1}
    N_P1=20000 N_P16=200000 N_LUA_P1=20000 N_LUA_P16=50000 WRK_SECS=2 CHANGES=${CHANGES:-3}
else
    REPS=${REPS:-3}
    N_P1=200000 N_P16=1500000 N_LUA_P1=150000 N_LUA_P16=400000 WRK_SECS=10 CHANGES=${CHANGES:-10}
fi

CLIENTS=50
BENCH_NAME=bench/server/run.sh
RUN_TIMEOUT_S=$((WRK_SECS + 120))
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# ---- tools, build ------------------------------------------------------------------------------
NGINX=${NGINX:-/usr/sbin/nginx}
need_tools redis-server redis-benchmark redis-cli wrk taskset curl python3 cmake "$NGINX"
bench_build "$BUILD" sluiced
SLUICED=$BUILD/src/server/sluiced
bench_init

# ---- machine state -------------------------------------------------------------------------------
bench_machine
say "versions: $("$SLUICED" --version 2>&1 | head -n1); $(redis-server --version | cut -d' ' -f1-3);" \
    "$("$NGINX" -v 2>&1); $(wrk -v 2>&1 | head -n1 | cut -d' ' -f1-2)"
say "pinning: servers ${SRV_PIN[*]:-(none)}, clients ${CLI_PIN[*]:-(none)}; repetitions: $REPS (median)"

# ---- servers ---------------------------------------------------------------------------------------
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: bench
    algorithm: gcra
    limit: 100
    window: 1s
  - name: prop
    algorithm: fixed_window
    limit: 1000
    window: 1h
YAML

SL_RESP=$(free_port)
SL_HTTP=$(free_port)
start sluiced "${SRV_PIN[@]}" "$SLUICED" --grpc-port 0 --threads 1 --port "$SL_RESP" --http-port "$SL_HTTP" \
    --rules "$TMP/rules.yaml" --config-store "$TMP/bench.db" --snapshot "" --log-level warn
SL_PID=$LAST_PID
wait_port "$SL_RESP"
wait_port "$SL_HTTP"

RD_PORT=$(free_port)
start redis "${SRV_PIN[@]}" redis-server --port "$RD_PORT" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --dir "$TMP"
RD_PID=$LAST_PID
wait_port "$RD_PORT"
SHA=$(redis-cli -p "$RD_PORT" SCRIPT LOAD "$(cat "$ROOT/bench/server/gcra.lua")")

# Same algorithm, same numbers, same reply: a fresh key's first decision on both.
sl_first=$(redis-cli -p "$SL_RESP" SL.THROTTLE check:1 gcra 100 1000 | tr '\n' ' ')
lua_first=$(redis-cli -p "$RD_PORT" EVALSHA "$SHA" 1 check:1 100 1000 | tr '\n' ' ')
say "first decision on a fresh key: SL.THROTTLE -> $sl_first; gcra.lua -> $lua_first"
[ "$sl_first" = "$lua_first" ] || say "warning: the two GCRA replies differ"

NG_PORT=$(free_port)
nginx_limit_req_conf "$TMP" "$NG_PORT" on
start nginx "${SRV_PIN[@]}" "$NGINX" -p "$TMP/nginx/" -e "$TMP/nginx/error.log" -c "$TMP/nginx.conf"
NG_PID=$LAST_PID
wait_port "$NG_PORT"
NG_WORKERS=""
for ((i = 0; i < 100; i++)); do # the master listens before it forks the worker
    NG_WORKERS=$(cat "/proc/$NG_PID/task/$NG_PID/children")
    [ -z "$NG_WORKERS" ] || break
    sleep 0.05
done
[ -n "$NG_WORKERS" ] || die "nginx started no worker (see $TMP/nginx/error.log)"
c1=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$NG_PORT/check?key=a")
c2=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$NG_PORT/check?key=a")
s1=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$SL_HTTP/v1/auth/bench?key=a")
say "sanity: nginx limit_req 1r/m: $c1 then $c2 (want 204 then 429); sluiced /v1/auth/bench: $s1 (want 204)"

# ---- RESP: redis-benchmark -----------------------------------------------------------------------
resp_phase() {
    local r=$1 rep p n nl tag
    tag=$([ "$r" -ge 1000000 ] && echo 1M || echo 100k)
    redis-cli -p "$RD_PORT" FLUSHALL >/dev/null
    for ((rep = 1; rep <= REPS; rep++)); do
        say "RESP, -r $r, repetition $rep/$REPS"
        for p in 1 16; do
            n=$([ "$p" = 1 ] && echo "$N_P1" || echo "$N_P16")
            nl=$([ "$p" = 1 ] && echo "$N_LUA_P1" || echo "$N_LUA_P16")
            rb "sl:P$p:$tag" "$SL_PID" "$SL_RESP" "$n" "$p" "$r" SL.THROTTLE 'key:__rand_int__' gcra 100 1000
            rb "incr:P$p:$tag" "$RD_PID" "$RD_PORT" "$n" "$p" "$r" INCR 'inc:__rand_int__'
            rb "lua:P$p:$tag" "$RD_PID" "$RD_PORT" "$nl" "$p" "$r" EVALSHA "$SHA" 1 'lua:__rand_int__' 100 1000
        done
    done
}

say ""
say "== RESP (redis-benchmark -c $CLIENTS; -n: $N_P1 at -P 1, $N_P16 at -P 16; Lua $N_LUA_P1 / $N_LUA_P16)"
resp_phase 100000
resp_phase 1000000
say "keys held after the runs: redis $(redis-cli -p "$RD_PORT" DBSIZE) (INCR keys never expire," \
    "gcra.lua's after ~10 ms, as sluiced's state)"

# ---- HTTP: wrk ---------------------------------------------------------------------------------
wk() { # CASE URL PID..
    local case=$1 url=$2
    shift 2
    run_case "$case" wrk "$@" -- "${CLI_PIN[@]}" wrk -t1 -c"$CLIENTS" -d"${WRK_SECS}s" --latency \
        -s "$ROOT/bench/server/wrk_rand_key.lua" "$url" -- 100000
}

say ""
say "== HTTP (wrk -t1 -c$CLIENTS -d${WRK_SECS}s, keep-alive, 100 k random keys)"
for ((rep = 1; rep <= REPS; rep++)); do
    say "HTTP, repetition $rep/$REPS"
    wk http:sluiced "http://127.0.0.1:$SL_HTTP/v1/auth/bench" "$SL_PID"
    # shellcheck disable=SC2086 # the worker PIDs, one word each
    wk http:nginx "http://127.0.0.1:$NG_PORT/v1/auth/bench" "$NG_PID" $NG_WORKERS
done

# ---- rule propagation -------------------------------------------------------------------------
say ""
say "== rule propagation (two sluiced, one SQLite store, --poll-interval $POLL_INTERVAL; $CHANGES changes)"
PA_RESP=$(free_port)
PB_RESP=$(free_port)
start prop-a "$SLUICED" --grpc-port 0 --threads 1 --port "$PA_RESP" --http-port 0 --rules "$TMP/rules.yaml" \
    --config-store "$TMP/prop.db" --snapshot "" --poll-interval "$POLL_INTERVAL" --log-level warn
wait_port "$PA_RESP"
start prop-b "$SLUICED" --grpc-port 0 --threads 1 --port "$PB_RESP" --http-port 0 \
    --config-store "$TMP/prop.db" --snapshot "" --poll-interval "$POLL_INTERVAL" --log-level warn
wait_port "$PB_RESP"
say "  each change: SL.RULE SET prop {\"algorithm\":\"fixed_window\",\"limit\":<new>,\"window\":\"1h\"} on A," \
    "then SL.PEEK prop k on B every 2 ms until its limit is <new>"

# One connection to each, raw RESP over bash's /dev/tcp: no process per poll.
exec 7<>"/dev/tcp/127.0.0.1/$PA_RESP"
exec 8<>"/dev/tcp/127.0.0.1/$PB_RESP"
mkfifo "$TMP/tick"
exec 9<>"$TMP/tick" # read -t on a FIFO nobody writes: a sleep without a fork
resp_send() { # FD ARG..
    local fd=$1 a
    shift
    local out="*$#"$'\r\n'
    for a in "$@"; do
        out+="\$${#a}"$'\r\n'"$a"$'\r\n'
    done
    printf '%s' "$out" >&"$fd"
}
# The limit field of an SL.PEEK reply read from FD (or the error line).
resp_peek_limit() {
    local fd=$1 line i limit=""
    IFS= read -r -t 5 -u "$fd" line || die "no reply from sluiced on fd $fd"
    line=${line%$'\r'}
    if [ "${line:0:1}" != "*" ]; then
        echo "$line"
        return
    fi
    for ((i = 1; i <= 5; i++)); do
        IFS= read -r -t 5 -u "$fd" line || die "short reply from sluiced on fd $fd"
        [ "$i" = 2 ] && limit=${line#:} && limit=${limit%$'\r'}
    done
    echo "$limit"
}
poll_s=$(awk -v d="$POLL_INTERVAL" 'BEGIN { v = d + 0; if (d ~ /ms$/) v /= 1000; else if (d ~ /m$/) v *= 60; print v }')
bound_us=$(awk -v p="$poll_s" 'BEGIN { printf "%d", (p * 5 + 2) * 1e6 }')
: >"$TMP/prop.txt"
for ((i = 1; i <= CHANGES; i++)); do
    # Land the changes at random points of B's poll period.
    read -r -t "$(awk -v s="$RANDOM" -v p="$poll_s" 'BEGIN { srand(s); printf "%.3f", rand() * p }')" -u 9 || true
    limit=$((2000 + i))
    resp_send 7 SL.RULE SET prop "{\"algorithm\":\"fixed_window\",\"limit\":$limit,\"window\":\"1h\"}"
    IFS= read -r -t 5 -u 7 ok || die "no reply to SL.RULE SET"
    [ "${ok%$'\r'}" = "+OK" ] || die "SL.RULE SET replied: $ok"
    t0=${EPOCHREALTIME/./}
    resp_send 7 SL.PEEK prop k
    on_a=$(resp_peek_limit 7)
    seen=""
    polls=0
    while :; do
        resp_send 8 SL.PEEK prop k
        got=$(resp_peek_limit 8)
        polls=$((polls + 1))
        now=${EPOCHREALTIME/./}
        if [ "$got" = "$limit" ]; then
            seen=$(((now - t0) / 1000))
            break
        fi
        if [ $((now - t0)) -gt "$bound_us" ]; then
            break
        fi
        read -r -t 0.002 -u 9 || true
    done
    if [ -z "$seen" ]; then
        say "  change $i: limit $limit NOT applied on B after $((bound_us / 1000000)) s (B still says $got)"
        echo "prop:b -1 $on_a" >>"$TMP/prop.txt"
    else
        say "  change $i: limit $limit on A at once: $([ "$on_a" = "$limit" ] && echo yes || echo "no ($on_a)"); on B after $seen ms ($polls polls)"
        echo "prop:b $seen $on_a" >>"$TMP/prop.txt"
    fi
done
exec 7>&- 8>&-

# ---- the table ------------------------------------------------------------------------------------
row() { printf '%-34s %14s %14s %8s %14s %8s\n' "$@"; }

say ""
say "== summary: medians of $REPS; ratio = sluiced / peer (req/s: higher is better for sluiced;"
say "   latency and CPU/req: lower is better for sluiced)"
row "RESP (redis-benchmark -c $CLIENTS)" "sluiced" "redis INCR" "ratio" "redis Lua GCRA" "ratio"
for tag in 100k 1M; do
    for p in 1 16; do
        for spec in "2:req/s:%.0f" "3:p50 ms:%.3f" "4:p99 ms:%.3f" "5:CPU us/req:%.2f" "6:server busy %:%.0f"; do
            col=${spec%%:*}
            rest=${spec#*:}
            label=${rest%%:*}
            fmt=${rest#*:}
            s=$(med "sl:P$p:$tag" "$col")
            a=$(med "incr:P$p:$tag" "$col")
            l=$(med "lua:P$p:$tag" "$col")
            if [ "$col" = 6 ]; then
                ra="" rl=""
            else
                ra=$(ratio "$s" "$a")
                rl=$(ratio "$s" "$l")
            fi
            row "  -P $p, $tag keys, $label" "$(printf "$fmt" "$s")" "$(printf "$fmt" "$a")" "$ra" \
                "$(printf "$fmt" "$l")" "$rl"
        done
    done
done
say "  (server busy % well under 100: the one-core client was the limit, not the server; its"
say "   req/s ratio is then a lower bound and CPU us/req is the figure to compare)"
say ""
row "HTTP (wrk -t1 -c$CLIENTS -d${WRK_SECS}s)" "sluiced" "nginx limit_req" "ratio" "" ""
for spec in "2:req/s:%.0f" "3:p50 ms:%.3f" "4:p99 ms:%.3f" "5:CPU us/req:%.2f" "6:server busy %:%.0f" "8:non-2xx responses:%.0f"; do
    col=${spec%%:*}
    rest=${spec#*:}
    label=${rest%%:*}
    fmt=${rest#*:}
    s=$(med http:sluiced "$col")
    g=$(med http:nginx "$col")
    r=""
    [ "$col" -ge 6 ] || r=$(ratio "$s" "$g")
    row "  $label" "$(printf "$fmt" "$s")" "$(printf "$fmt" "$g")" "$r" "" ""
done
say ""
lost=$(awk '$2 < 0' "$TMP/prop.txt" | wc -l)
awk '$2 >= 0 { print $2 }' "$TMP/prop.txt" | sort -n >"$TMP/prop.sorted"
awk -v p="$POLL_INTERVAL" -v ps="$poll_s" -v n="$CHANGES" -v lost="$lost" '
    { v[NR] = $1 }
    END {
        k = NR
        med = k == 0 ? "-" : (k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2)
        printf "rule propagation over %d changes: median %s ms, max %s ms on the other node " \
               "(poll interval %s = %d ms; max / interval = %.2f)%s\n", n, med, k ? v[k] : "-", p,
               ps * 1000, k ? v[k] / (ps * 1000) : 0, lost ? sprintf("; %d NOT applied", lost) : ""
    }' "$TMP/prop.sorted"
disturbed_report
