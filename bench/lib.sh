# shellcheck shell=bash disable=SC2034 # SRV_PIN, RESULTS..: used by the scripts that source this
# bench/lib.sh - shared by the benchmark scripts that start real servers (bench/server/run.sh,
# bench/redis/run.sh). Source it with bash after `set -euo pipefail`, from the repository root,
# with BENCH_NAME set (it prefixes error messages). Prints figures; asserts nothing.
#
#   say TEXT.., die TEXT..        print a line; print an error and exit 1
#   need_tools TOOL..             exit with the list of the tools that are missing
#   bench_build DIR TARGET..      configure DIR (RelWithDebInfo, no sanitizer), build TARGETs, and
#                                 refuse a build compiled with -O3, -march=native or a sanitizer
#   bench_init                    TMP (removed on exit), the PID list stopped on exit, CLK_TCK, and
#                                 SRV_PIN / CLI_PIN: taskset -c 0 for servers, -c 1 for clients
#   bench_machine                 prints the CPU, kernel, load average and git commit
#   free_port, wait_port PORT     a free 127.0.0.1 port; wait (10 s at most) until PORT accepts
#   start NAME CMD..              CMD in the background (printed first), output to $TMP/NAME.log,
#                                 its PID in LAST_PID and in the list stopped on exit
#   cpu_ticks PID..               utime + stime of the PIDs (all threads), clock ticks
#   wait_quiet                    waits (bounded) for other processes to leave the CPUs
#   measure OUT SECS PID.. -- CMD..   runs CMD; sets M_SRV_S, M_SRV_EACH, M_WALL_S, M_OTHER
#   run_case CASE KIND PID.. -- CMD.. one measured run (KIND rb, wrk or h2), re-run (bounded) when disturbed; appends
#                                 its result line to $RESULTS
#   rb CASE PID PORT N P R CMD..  run_case of redis-benchmark -c $CLIENTS -n N -P P -r R --csv
#   med CASE COL [LAST]           median over a case's undisturbed runs of COL (or of the sum of
#                                 columns COL..LAST per run)
#   ratio A B                     A / B to 2 decimals ("-" when B is 0 or missing)
#   disturbed_report              the closing lines about waits and disturbed runs
#
# A result line in $RESULTS is
#   CASE rps p50_ms p99_ms cpu_us_per_req server_busy_pct other_pct non2xx cpu_us_per_req_of_PID..
# where the last columns (9 on) split column 5 by the PIDs given to run_case, in their order.

say() { printf '%s\n' "$*"; }
die() {
    say "${BENCH_NAME:-bench}: $*" >&2
    exit 1
}

need_tools() {
    local tool missing=""
    for tool in "$@"; do
        case $tool in
        /*) [ -x "$tool" ] || missing="$missing $tool" ;;
        *) command -v "$tool" >/dev/null || missing="$missing $tool" ;;
        esac
    done
    [ -z "$missing" ] || die "missing:$missing"
}

bench_build() {
    local dir=$1
    shift
    say "\$ cmake -S . -B $dir -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF ... && cmake --build $dir --target $*"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF -DSLUICE_ASAN=OFF \
        -DSLUICE_TSAN=OFF -DSLUICE_FUZZ=OFF >/dev/null
    cmake --build "$dir" --target "$@" -j 2 >/dev/null
    if grep -E -e '-O3|-Ofast|-march=native|-fsanitize' "$dir/compile_commands.json" >/dev/null; then
        die "$dir compiles with -O3, -march=native or a sanitizer; not the shipped build"
    fi
}

# ---- processes --------------------------------------------------------------------------------
PIDS=()
bench_cleanup() {
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
    [ -z "${TMP:-}" ] || rm -rf "$TMP"
}

bench_init() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    CLK_TCK=$(getconf CLK_TCK)
    if [ "$(nproc)" -ge 2 ]; then
        SRV_PIN=(taskset -c 0)
        CLI_PIN=(taskset -c 1)
    else
        SRV_PIN=()
        CLI_PIN=()
        say "note: one CPU: servers and clients share it (no pinning)"
    fi
    RESULTS=$TMP/results.txt
    : >"$RESULTS"
}

BENCH_FREE_PORT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../scripts" && pwd)/free_port.py
free_port() { python3 "$BENCH_FREE_PORT"; }
# cluster_port: a free port whose cluster bus port (+10000) is free too; empty when none is
cluster_port() { python3 "$BENCH_FREE_PORT" --bus || true; }
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

# ---- machine state ------------------------------------------------------------------------------
bench_machine() {
    say ""
    say "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs," \
        "kernel $(uname -r)"
    say "load average: $(cut -d' ' -f1-3 /proc/loadavg), runnable tasks now: $(($(cut -d' ' -f4 /proc/loadavg | cut -d/ -f1) - 1))"
    if awk '{exit !($1 > 0.5)}' /proc/loadavg; then
        say "warning: the machine is busy (load > 0.5); figures will be noisy"
    fi
    if git rev-parse --git-dir >/dev/null 2>&1; then
        say "source: git $(git rev-parse --short HEAD), src sha256 $(find src include -type f \
            \( -name '*.c' -o -name '*.h' -o -name '*.lua' \) | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)," \
            "uncommitted under src/: $(git status --porcelain -- src include | wc -l) files"
    fi
}

# ---- measuring ------------------------------------------------------------------------------------
declare -A SHOWN
RERUNS=0
RERUNS_MAX=${RERUNS_MAX:-6} # in all; each run is re-run at most twice
DISTURBED=0
OTHER_MAX_PCT=10
QUIET_BUDGET_S=${QUIET_BUDGET_S:-45} # in all, waiting for other processes to leave the CPUs
QUIET_WAITED_MS=0
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-130} # one client run

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
#   M_SRV_EACH the same for each PID, in order, space-separated
#   M_WALL_S   wall seconds
#   M_OTHER    % of one CPU that anything else took meanwhile: all CPUs' process and steal time,
#              less the server's and the client's own; near 0 on a quiet machine
measure() {
    local out=$1 secs=$2 pids=() cpu0=() cpu1=() b0 b1 w0 w1 cli i dt=0 each=""
    shift 2
    while [ "$1" != "--" ]; do
        pids+=("$1")
        shift
    done
    shift
    for i in "${!pids[@]}"; do cpu0[i]=$(cpu_ticks "${pids[i]}"); done
    b0=$(sys_busy)
    w0=$(now_ns)
    local TIMEFORMAT='%3U %3S'
    { time timeout "$secs" "$@" >"$out" 2>&1; } 2>"$TMP/time.txt" || die "failed: $* ($(tail -n 3 "$out"))"
    w1=$(now_ns)
    b1=$(sys_busy)
    for i in "${!pids[@]}"; do
        cpu1[i]=$(cpu_ticks "${pids[i]}")
        dt=$((dt + cpu1[i] - cpu0[i]))
        each="$each $(awk -v d="$((cpu1[i] - cpu0[i]))" -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", d / hz }')"
    done
    M_SRV_EACH=${each# }
    cli=$(awk '{ print $1 + $2 }' "$TMP/time.txt")
    read -r M_SRV_S M_WALL_S M_OTHER < <(awk -v dt="$dt" -v db="$((b1 - b0))" \
        -v hz="$CLK_TCK" -v wall="$((w1 - w0))" -v cli="$cli" 'BEGIN {
            w = wall / 1e9; o = (db / hz - dt / hz - cli) / w * 100; if (o < 0) o = 0
            printf "%.3f %.3f %.0f\n", dt / hz, w, o }')
}

# run_case CASE KIND PIDS -- CMD..: one measured run of a case, re-run (bounded) while something
# else took more than OTHER_MAX_PCT % of a CPU; KIND rb (redis-benchmark --csv), wrk, or h2
# (h2load with --log-file=PATH, from which p50 and p99 are computed). Appends
# "CASE rps p50_ms p99_ms cpu_us_per_req server_busy_pct other_pct non2xx cpu_us_per_req_of_PID.."
# to $RESULTS.
run_case() {
    local case=$1 kind=$2 try line rps p50 p99 n bad args=("${@:3}") cmd=() seen_dash=0 a npids=0
    for a in "${args[@]}"; do
        if [ "$seen_dash" = 1 ]; then
            cmd+=("$a")
        elif [ "$a" = "--" ]; then
            seen_dash=1
        else
            npids=$((npids + 1))
        fi
    done
    if [ -z "${SHOWN[$case]:-}" ]; then
        say "\$ $(printf '%q ' "${cmd[@]}")"
        SHOWN[$case]=1
    fi
    for ((try = 0; ; try++)); do
        wait_quiet
        measure "$TMP/run.out" "$RUN_TIMEOUT_S" "${args[@]}"
        if [ "$kind" = h2 ]; then
            # h2load: its summary, and p50/p99 from its --log-file (third column: us per request)
            local log
            log=$(printf '%s\n' "${cmd[@]}" | sed -n 's/^--log-file=//p')
            rps=$(awk '/^finished in/ { print $4 }' "$TMP/run.out")
            n=$(awk '/^requests:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^succeeded/) print $i }' "$TMP/run.out")
            bad=$(awk '/^requests:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^(failed|errored|timeout)/) b += $i; print b + 0 }' "$TMP/run.out")
            read -r p50 p99 < <(cut -f3 "$log" | sort -n | awk '{ v[NR] = $1 } END {
                if (NR) printf "%.3f %.3f\n", v[int(NR * 0.50) + 1] / 1000, v[int(NR * 0.99) + 1] / 1000 }')
        elif [ "$kind" = rb ]; then
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
            -v n="$n" -v wall="$M_WALL_S" -v o="$M_OTHER" -v bad="$bad" -v each="$M_SRV_EACH" 'BEGIN {
                printf "%s %.0f %.3f %.3f %.3f %.0f %.0f %d", c, rps, p50, p99, srv * 1e6 / n,
                       100 * srv / wall, o, bad
                k = split(each, e, " ")
                for (i = 1; i <= k; i++) printf " %.3f", e[i] * 1e6 / n
                printf "\n" }')
        # shellcheck disable=SC2086 # the fields of the result line
        set -- $line
        printf '  %-14s %8s req/s  p50 %6s ms  p99 %6s ms  %6s us CPU/req  server busy %3s%%  others %3s%%%s%s\n' \
            "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$(case $kind in wrk) echo "  non-2xx $8" ;; h2) echo "  failed $8" ;; esac)" \
            "$([ "$npids" -gt 1 ] && a="${*:9}" && echo "  (per process: ${a// / + } us)")"
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

CLIENTS=${CLIENTS:-50}
rb() { # CASE PID PORT N P R CMD..
    local case=$1 pid=$2 port=$3 n=$4 p=$5 r=$6
    shift 6
    run_case "$case" rb "$pid" -- "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$port" \
        -c "$CLIENTS" -n "$n" -r "$r" -P "$p" --csv "$@"
}

# ---- the table ------------------------------------------------------------------------------------
# med CASE COLUMN [LAST]: the median of COLUMN (2 = rps .. 6 = busy%, 9.. per process), or of the
# sum of COLUMN..LAST, over the case's undisturbed repetitions, or over all of them if every one
# was disturbed; "-" when the case has no run.
med() {
    local clean last=${3:-$2}
    clean=$(awk -v c="$1" -v o="$OTHER_MAX_PCT" '$1 == c && $7 <= o' "$RESULTS" | wc -l)
    awk -v c="$1" -v k="$2" -v l="$last" -v o="$OTHER_MAX_PCT" \
        -v all="$([ "$clean" -gt 0 ] && echo 0 || echo 1)" '
        $1 == c && (all || $7 <= o) { s = 0; for (i = k; i <= l; i++) s += $i; print s }' "$RESULTS" |
        sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
                                  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "-" || a == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }

disturbed_report() {
    say "waited ${QUIET_WAITED_MS} ms in all for other processes to leave the CPUs"
    if [ "$DISTURBED" -gt 0 ]; then
        say "WARNING: $DISTURBED runs were disturbed by other processes even after re-runs ($RERUNS" \
            "re-runs); medians leave them out where a case has undisturbed runs:"
        awk -v o="$OTHER_MAX_PCT" '{ n[$1]++; if ($7 <= o) k[$1]++ }
            END { for (c in n) if (k[c] < n[c]) printf "    %s: %d of %d runs undisturbed\n", c, k[c], n[c] }' \
            "$RESULTS" | sort
    fi
}

# nginx_limit_req_conf DIR PORT MASTER: writes DIR/nginx.conf for the peer of sluiced's rule
# "bench" (gcra 100/s, burst 100): nginx's limit_req, the same GCRA, keyed on ?key=, on
# 127.0.0.1:PORT, one worker, MASTER "on" or "off" (off: one process, as under callgrind);
# /v1/auth/bench answers 204 or 429, /check admits one request a minute (proves limit_req
# applies to this shape). Its temporary files and pid go under DIR/nginx, pages under DIR/www.
nginx_limit_req_conf() {
    local dir=$1 port=$2 master=$3 user=""
    mkdir -p "$dir/nginx" "$dir/www"
    [ "$(id -u)" -ne 0 ] || user="user root;" # workers would be "nobody", who cannot read $dir
    cat >"$dir/nginx.conf" <<NGINX
$user
daemon off;
master_process $master;
worker_processes 1;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log crit;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/nginx/body;
    proxy_temp_path $dir/nginx/proxy;
    fastcgi_temp_path $dir/nginx/fastcgi;
    uwsgi_temp_path $dir/nginx/uwsgi;
    scgi_temp_path $dir/nginx/scgi;
    keepalive_requests 100000000;
    limit_req_zone \$arg_key zone=bench:64m rate=100r/s;
    limit_req_zone \$arg_key zone=check:1m rate=1r/m;
    limit_req_status 429;
    server {
        listen 127.0.0.1:$port;
        root $dir/www;
        # "return 204" here would answer in the rewrite phase, before limit_req (preaccess)
        # ever runs; try_files runs after it, and its fallback answers.
        location = /v1/auth/bench {
            limit_req zone=bench burst=100 nodelay;
            try_files /.none @allowed;
        }
        location @allowed {
            return 204;
        }
        location = /check {
            limit_req zone=check;
            try_files /.none @allowed;
        }
    }
}
NGINX
}
