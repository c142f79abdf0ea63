#!/usr/bin/env bash
# bench/server/run.sh - sluiced against its peers on this machine, as the issue's targets state
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
CLIENTS=50
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-1}
    N_P1=20000 N_P16=200000 N_LUA_P1=20000 N_LUA_P16=50000 WRK_SECS=2 CHANGES=${CHANGES:-3}
else
    REPS=${REPS:-3}
    N_P1=200000 N_P16=1500000 N_LUA_P1=150000 N_LUA_P16=400000 WRK_SECS=10 CHANGES=${CHANGES:-10}
fi

say() { printf '%s\n' "$*"; }
die() {
    say "bench/server/run.sh: $*" >&2
    exit 1
}

# ---- tools, build ------------------------------------------------------------------------------
missing=""
for tool in redis-server redis-benchmark redis-cli wrk taskset curl python3 cmake; do
    command -v "$tool" >/dev/null || missing="$missing $tool"
done
NGINX=${NGINX:-/usr/sbin/nginx}
[ -x "$NGINX" ] || missing="$missing $NGINX"
[ -z "$missing" ] || die "missing:$missing (Debian: redis-server redis-tools wrk nginx-light util-linux)"

say "\$ cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF ..."
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF -DSLUICE_ASAN=OFF \
    -DSLUICE_TSAN=OFF -DSLUICE_FUZZ=OFF >/dev/null
cmake --build "$BUILD" --target sluiced -j 2 >/dev/null
if grep -E -e '-O3|-Ofast|-march=native|-fsanitize' "$BUILD/compile_commands.json" >/dev/null; then
    die "$BUILD compiles with -O3, -march=native or a sanitizer; not the shipped build"
fi
SLUICED=$BUILD/src/server/sluiced

if [ "$(nproc)" -ge 2 ]; then
    SRV_PIN=(taskset -c 0)
    CLI_PIN=(taskset -c 1)
else
    SRV_PIN=()
    CLI_PIN=()
    say "note: one CPU: servers and clients share it (no pinning)"
fi
CLK_TCK=$(getconf CLK_TCK)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")
PIDS=()
cleanup() {
    local pid i
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for ((i = 0; i < 100; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
wait_port() {
    local i
    for ((i = 0; i < 200; i++)); do
        (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
        sleep 0.05
    done
    die "nothing listens on port $1 after 10 s (see $TMP/*.log)"
}
# start NAME CMD..: CMD in the background, output to $TMP/NAME.log; its PID in $LAST_PID.
start() {
    local name=$1
    shift
    say "\$ $(printf '%q ' "$@")"
    "$@" >"$TMP/$name.log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}
# The CPU time (utime + stime, clock ticks) of the processes given, from /proc/PID/stat.
cpu_ticks() {
    local pid total=0 rest
    for pid in "$@"; do
        rest=$(cat "/proc/$pid/stat") || die "process $pid is gone (see $TMP/*.log)"
        rest=${rest##*) } # after the command name, which may hold spaces
        # shellcheck disable=SC2086 # split into the stat fields
        set -- $rest
        # fields 3.. of the stat line are $1..; utime and stime are fields 14 and 15
        total=$((total + ${12} + ${13}))
    done
    echo "$total"
}
now_ns() { date +%s%N; }

# ---- machine state -------------------------------------------------------------------------------
say ""
say "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs," \
    "kernel $(uname -r)"
say "load average: $(cut -d' ' -f1-3 /proc/loadavg), runnable tasks now: $(($(cut -d' ' -f4 /proc/loadavg | cut -d/ -f1) - 1))"
if awk '{exit !($1 > 0.5)}' /proc/loadavg; then
    say "warning: the machine is busy (load > 0.5); figures will be noisy"
fi
say "versions: $("$SLUICED" --version 2>&1 | head -n1); $(redis-server --version | cut -d' ' -f1-3);" \
    "$("$NGINX" -v 2>&1); $(wrk -v 2>&1 | head -n1 | cut -d' ' -f1-2)"
if git rev-parse --git-dir >/dev/null 2>&1; then
    say "source: git $(git rev-parse --short HEAD), src sha256 $(find src include -type f \
        \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)," \
        "uncommitted under src/: $(git status --porcelain -- src include | wc -l) files"
fi
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
start sluiced "${SRV_PIN[@]}" "$SLUICED" --threads 1 --port "$SL_RESP" --http-port "$SL_HTTP" \
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
mkdir -p "$TMP/nginx" "$TMP/www"
nginx_user=""
[ "$(id -u)" -ne 0 ] || nginx_user="user root;" # workers would be "nobody", who cannot read $TMP
cat >"$TMP/nginx.conf" <<NGINX
$nginx_user
daemon off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log crit;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    keepalive_requests 100000000;
    # The peer of sluiced's rule "bench" (gcra 100/s, burst 100): limit_req is the same GCRA.
    limit_req_zone \$arg_key zone=bench:64m rate=100r/s;
    limit_req_zone \$arg_key zone=check:1m rate=1r/m;
    limit_req_status 429;
    server {
        listen 127.0.0.1:$NG_PORT;
        root $TMP/www;
        # "return 204" here would answer in the rewrite phase, before limit_req (preaccess)
        # ever runs; try_files runs after it, and its fallback answers.
        location = /v1/auth/bench {
            limit_req zone=bench burst=100 nodelay;
            try_files /.none @allowed;
        }
        location @allowed {
            return 204;
        }
        # A zone that admits one request a minute: proves limit_req applies to this shape.
        location = /check {
            limit_req zone=check;
            try_files /.none @allowed;
        }
    }
}
NGINX
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

# ---- measuring -----------------------------------------------------------------------------------
RESULTS=$TMP/results.txt
: >"$RESULTS"
declare -A SHOWN
RERUNS=0
RERUNS_MAX=${RERUNS_MAX:-6} # in all; each run is re-run at most twice
DISTURBED=0
OTHER_MAX_PCT=10
QUIET_BUDGET_S=${QUIET_BUDGET_S:-45} # in all, waiting for other processes to leave the CPUs
QUIET_WAITED_MS=0

# Clock ticks all CPUs together spent in processes (user nice system) or lost to the hypervisor
# (steal), from /proc/stat. Not irq and softirq: the kernel's network work for the benchmark's
# own traffic lands there, in neither process's utime+stime.
sys_busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $9; exit }' /proc/stat; }

# Waits (up to 10 s at a time, QUIET_BUDGET_S in all) until other processes take less than
# OTHER_MAX_PCT % of a CPU over 300 ms; the servers are idle meanwhile, so all of it is others'.
wait_quiet() {
    local i b0 b1 pct
    for ((i = 0; i < 33 && QUIET_WAITED_MS < QUIET_BUDGET_S * 1000; i++)); do
        b0=$(sys_busy)
        sleep 0.3
        b1=$(sys_busy)
        QUIET_WAITED_MS=$((QUIET_WAITED_MS + 300))
        pct=$(((b1 - b0) * 100 * 100 / CLK_TCK / 30))
        [ "$pct" -gt "$OTHER_MAX_PCT" ] || return 0
    done
    return 0
}

# measure OUT TIMEOUT_S PIDS -- CMD..: runs CMD (stdout and stderr to OUT) and sets
#   M_SRV_S    CPU seconds the server processes PIDS used meanwhile
#   M_WALL_S   wall seconds
#   M_OTHER    % of one CPU that anything else took meanwhile: all CPUs' process and steal time,
#              less the server's and the client's own; near 0 on a quiet machine
measure() {
    local out=$1 secs=$2 pids=() t0 t1 b0 b1 w0 w1 cli
    shift 2
    while [ "$1" != "--" ]; do
        pids+=("$1")
        shift
    done
    shift
    t0=$(cpu_ticks "${pids[@]}")
    b0=$(sys_busy)
    w0=$(now_ns)
    local TIMEFORMAT='%3U %3S'
    { time timeout "$secs" "$@" >"$out" 2>&1; } 2>"$TMP/time.txt" || die "failed: $* ($(tail -n 3 "$out"))"
    w1=$(now_ns)
    b1=$(sys_busy)
    t1=$(cpu_ticks "${pids[@]}")
    cli=$(awk '{ print $1 + $2 }' "$TMP/time.txt")
    read -r M_SRV_S M_WALL_S M_OTHER < <(awk -v dt="$((t1 - t0))" -v db="$((b1 - b0))" \
        -v hz="$CLK_TCK" -v wall="$((w1 - w0))" -v cli="$cli" 'BEGIN {
            w = wall / 1e9; o = (db / hz - dt / hz - cli) / w * 100; if (o < 0) o = 0
            printf "%.3f %.3f %.0f\n", dt / hz, w, o }')
}

# run_case CASE KIND PIDS -- CMD..: one measured run of a case, re-run (bounded) while something
# else took more than OTHER_MAX_PCT % of a CPU; KIND rb (redis-benchmark --csv) or wrk. Appends
# "CASE rps p50_ms p99_ms cpu_us_per_req server_busy_pct other_pct non2xx" to $RESULTS.
run_case() {
    local case=$1 kind=$2 try line rps p50 p99 n bad args=("${@:3}") cmd=() seen_dash=0 a
    for a in "${args[@]}"; do
        if [ "$seen_dash" = 1 ]; then
            cmd+=("$a")
        elif [ "$a" = "--" ]; then
            seen_dash=1
        fi
    done
    if [ -z "${SHOWN[$case]:-}" ]; then
        say "\$ $(printf '%q ' "${cmd[@]}")"
        SHOWN[$case]=1
    fi
    for ((try = 0; ; try++)); do
        wait_quiet
        measure "$TMP/run.out" $((WRK_SECS + 120)) "${args[@]}"
        if [ "$kind" = rb ]; then
            line=$(grep -v '^"test"' "$TMP/run.out" | grep '^"' | tail -n 1 | tr -d '"')
            # test,rps,avg,min,p50,p95,p99,max; the test name holds no comma
            IFS=, read -r _ rps _ _ p50 _ p99 _ <<<"$line"
            n=$(awk '{ for (i = 1; i < NF; i++) if ($i == "-n") print $(i + 1) }' <<<"${cmd[*]}")
            bad=0
        else
            read -r rps p50 p99 n bad < <(awk '
                function ms(v) {
                    if (v ~ /us$/) return v / 1000
                    if (v ~ /ms$/) return v + 0
                    if (v ~ /s$/) return v * 1000
                    return v
                }
                $1 == "50%" { p50 = ms($2) }
                $1 == "99%" { p99 = ms($2) }
                $2 == "requests" && $3 == "in" { n = $1 }
                /^Requests\/sec:/ { rps = $2 }
                /Non-2xx or 3xx responses:/ { bad = $NF }
                END { printf "%s %s %s %s %d\n", rps, p50, p99, n, bad }' "$TMP/run.out")
        fi
        [ -n "${p99:-}" ] && [ "${n:-0}" -gt 0 ] || die "unexpected output of ${cmd[*]}: $(cat "$TMP/run.out")"
        line=$(awk -v c="$case" -v rps="$rps" -v p50="$p50" -v p99="$p99" -v srv="$M_SRV_S" \
            -v n="$n" -v wall="$M_WALL_S" -v o="$M_OTHER" -v bad="$bad" 'BEGIN {
                printf "%s %.0f %.3f %.3f %.3f %.0f %.0f %d\n", c, rps, p50, p99, srv * 1e6 / n,
                       100 * srv / wall, o, bad }')
        # shellcheck disable=SC2086 # the fields of the result line
        set -- $line
        printf '  %-14s %8s req/s  p50 %6s ms  p99 %6s ms  %6s us CPU/req  server busy %3s%%  others %3s%%%s\n' \
            "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$([ "$kind" = wrk ] && echo "  non-2xx $8")"
        if [ "$M_OTHER" -le "$OTHER_MAX_PCT" ]; then
            break
        fi
        if [ "$try" -ge 2 ] || [ "$RERUNS" -ge "$RERUNS_MAX" ]; then
            say "  (disturbed: kept; $RERUNS of $RERUNS_MAX re-runs used)"
            DISTURBED=$((DISTURBED + 1))
            break
        fi
        RERUNS=$((RERUNS + 1))
        say "  (disturbed: other processes took $M_OTHER% of a CPU; re-running)"
    done
    echo "$line" >>"$RESULTS"
}

rb() { # CASE PID PORT N P R CMD..
    local case=$1 pid=$2 port=$3 n=$4 p=$5 r=$6
    shift 6
    run_case "$case" rb "$pid" -- "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$port" \
        -c "$CLIENTS" -n "$n" -r "$r" -P "$p" --csv "$@"
}

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
start prop-a "$SLUICED" --threads 1 --port "$PA_RESP" --http-port 0 --rules "$TMP/rules.yaml" \
    --config-store "$TMP/prop.db" --snapshot "" --poll-interval "$POLL_INTERVAL" --log-level warn
wait_port "$PA_RESP"
start prop-b "$SLUICED" --threads 1 --port "$PB_RESP" --http-port 0 \
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
# med CASE COLUMN: the median of COLUMN (2 = rps .. 6 = busy%) over the case's undisturbed
# repetitions, or over all of them if every one was disturbed.
med() {
    local clean
    clean=$(awk -v c="$1" -v o="$OTHER_MAX_PCT" '$1 == c && $7 <= o' "$RESULTS" | wc -l)
    awk -v c="$1" -v k="$2" -v o="$OTHER_MAX_PCT" -v all="$([ "$clean" -gt 0 ] && echo 0 || echo 1)" \
        '$1 == c && (all || $7 <= o) { print $k }' "$RESULTS" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
                                  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
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
say "waited ${QUIET_WAITED_MS} ms in all for other processes to leave the CPUs"
if [ "$DISTURBED" -gt 0 ]; then
    say "WARNING: $DISTURBED runs were disturbed by other processes even after re-runs ($RERUNS" \
        "re-runs); medians leave them out where a case has undisturbed runs:"
    awk -v o="$OTHER_MAX_PCT" '{ n[$1]++; if ($7 <= o) k[$1]++ }
        END { for (c in n) if (k[c] < n[c]) printf "    %s: %d of %d runs undisturbed\n", c, k[c], n[c] }' \
        "$RESULTS" | sort
fi
