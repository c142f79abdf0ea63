# shellcheck shell=bash disable=SC2034 # KEYS, RD_PORT, SM_*, SR_*, APP_*: used by the scripts that source this
# bench/packages/common.sh - what node.sh, go.sh and python.sh share: the build, sluiced and
# redis-server started the same way, the latency rounds of their part 1 and the closing "what
# decided" lines. Source it with bash after `set -euo pipefail`, from the repository root, with
# BENCH_NAME set; it sources bench/lib.sh and sets ROOT, BUILD (BUILD_DIR, default
# build-bench-pkg) and KEYS (default 10000). Prints figures; asserts nothing.
#
#   pkg_init TARGET..             bench_build of TARGETs in BUILD (SLUICED and MODULE set),
#                                 bench_init, bench_machine
#   pkg_servers < RULES.yaml      redis-server with sluice.so (RD_PORT), and two sluiced on the
#                                 rules read from stdin: one on the memory store (SM_PORT,
#                                 SM_HTTP), one whose store is that redis-server (SR_PORT, SR_HTTP)
#   pkg_app CASE PORT CMD..       CMD (an app serving on PORT) started pinned to CPU 0; the case
#                                 appended to CASES, its port and PID in APP_PORT and APP_PID
#   pkg_rounds WARMUP             per round (ROUNDS), each case once, interleaved: `pkg_load PORT N
#                                 KEYS SEED` (the script's, pinned to CPU 1, printing "p50 p99 rps
#                                 non-200") and the app's CPU time meanwhile; warm-up: WARMUP
#                                 requests per case first
#   pkg_medians                   per case, the medians of pkg_rounds' figures and of the
#                                 per-round differences from the case `pkg_bare CASE` names
#                                 ("bare" unless the script defines its own)
#   pkg_what_decided              sluiced's store timeouts and errors, redis-server's error replies

ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-pkg}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
KEYS=${KEYS:-10000}
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

pkg_init() {
    bench_build "$BUILD" "$@"
    SLUICED=$BUILD/src/server/sluiced
    MODULE=$BUILD/src/module/sluice.so
    bench_init
    bench_machine
}

pkg_servers() {
    cat >"$TMP/rules.yaml"
    RD_PORT=$(free_port)
    mkdir -p "$TMP/redis"
    start redis "${SRV_PIN[@]}" redis-server --port "$RD_PORT" --bind 127.0.0.1 --save "" \
        --appendonly no --daemonize no --dir "$TMP/redis" --loadmodule "$MODULE"
    wait_port "$RD_PORT"
    pkg_sluiced sluiced-memory memory
    SM_PORT=$SL_PORT SM_HTTP=$SL_HTTP
    pkg_sluiced sluiced-redis "redis://127.0.0.1:$RD_PORT"
    SR_PORT=$SL_PORT SR_HTTP=$SL_HTTP
    grep -q 'request store redis (sluice.so module)' "$TMP/sluiced-redis.log" ||
        die "sluiced-redis does not use sluice.so: $(cat "$TMP/sluiced-redis.log")"
}

# --store-timeout 2s: on a busy shared core the default 5 ms would let decisions be made by
# on_store_error instead of by Redis; pkg_what_decided reads sluiced's counters to show none were.
pkg_sluiced() { # NAME STORE: sets SL_PORT, SL_HTTP
    SL_PORT=$(free_port)
    SL_HTTP=$(free_port)
    start "$1" "${SRV_PIN[@]}" "$SLUICED" --grpc-port 0 --threads 1 --port "$SL_PORT" --http-port "$SL_HTTP" \
        --store "$2" --store-timeout 2s --rules "$TMP/rules.yaml" --config-store "$TMP/$1.db" \
        --snapshot "" --log-level info
    wait_port "$SL_PORT"
}

declare -A APP_PORT APP_PID
CASES=()
pkg_app() {
    local name=$1 port=$2
    shift 2
    start "app-$name" "${SRV_PIN[@]}" "$@"
    APP_PORT[$name]=$port
    APP_PID[$name]=$LAST_PID
    wait_port "$port"
    CASES+=("$name")
}

# The width of the case column: the longest case's name and a space.
pkg_width() {
    local c w=0
    for c in "${CASES[@]}"; do [ "${#c}" -lt "$w" ] || w=${#c}; done
    echo $((w + 1))
}

pkg_bare() { echo bare; }

pkg_rounds() {
    local warmup=$1 r c t0 p50 p99 rps bad cpu w
    w=$(pkg_width)
    for c in "${CASES[@]}"; do
        pkg_load "${APP_PORT[$c]}" "$warmup" "$KEYS" 99 >/dev/null
    done
    : >"$TMP/latency.txt"
    for ((r = 1; r <= ROUNDS; r++)); do
        for c in "${CASES[@]}"; do
            wait_quiet
            t0=$(cpu_ticks "${APP_PID[$c]}")
            read -r p50 p99 rps bad < <(pkg_load "${APP_PORT[$c]}" "$N" "$KEYS" "$r")
            cpu=$(awk -v d="$(($(cpu_ticks "${APP_PID[$c]}") - t0))" -v hz="$CLK_TCK" -v n="$N" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }')
            echo "$r $c $p50 $p99 $rps $bad $cpu" >>"$TMP/latency.txt"
            printf "  round %d  %-${w}s p50 %7s us  p99 %7s us  %6s req/s  app CPU %6s us/req  non-200 %s\n" "$r" "$c" "$p50" "$p99" "$rps" "$cpu" "$bad"
        done
    done
}

pkg_medians() {
    local c w
    w=$(pkg_width)
    printf "  %-${w}s %10s %10s %10s %14s %14s %12s %12s\n" case "p50 us" "p99 us" "req/s" "added p50 us" "added p99 us" "app CPU us" "added CPU us"
    for c in "${CASES[@]}"; do
        awk -v c="$c" -v bare="$(pkg_bare "$c")" -v w="$w" '
            function med(a, n,   i, j, t) {
                for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            $2 == bare { b50[$1] = $3; b99[$1] = $4; bcpu[$1] = $7 }
            $2 == c { n++; p50[n] = $3; p99[n] = $4; rps[n] = $5; r[n] = $1; cpu[n] = $7 }
            END {
                for (i = 1; i <= n; i++) { d50[i] = p50[i] - b50[r[i]]; d99[i] = p99[i] - b99[r[i]]; dcpu[i] = cpu[i] - bcpu[r[i]] }
                printf "  %-*s %10.1f %10.1f %10.0f %14.1f %14.1f %12.1f %12.1f\n", w, c, med(p50, n), med(p99, n), med(rps, n),
                    med(d50, n), med(d99, n), med(cpu, n), med(dcpu, n)
            }' "$TMP/latency.txt"
    done
}

pkg_what_decided() {
    local name port m
    say ""
    for name in sluiced-memory:"$SM_HTTP" sluiced-redis:"$SR_HTTP"; do
        port=${name#*:}
        m=$(curl -s "http://127.0.0.1:$port/metrics" |
            awk '$1 ~ /^sluice_redis_(timeouts|errors)_total/ { s += $2 } END { print s + 0 }')
        say "${name%%:*}: store timeouts and errors counted: $m"
    done
    say "redis-server error replies: $(redis-cli -h 127.0.0.1 -p "$RD_PORT" INFO stats | tr -d '\r' | sed -n 's/^total_error_replies://p')"
    say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
}
