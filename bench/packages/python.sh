#!/usr/bin/env bash
# bench/packages/python.sh - the Python package sluice beside the `limits` library (the storage
# and strategies under Flask-Limiter and slowapi) on this machine, side by side in one run.
# Prints figures (asserts nothing), every command before its output, medians of ROUNDS rounds and
# ratios.
#
#   1. Flask (werkzeug's threaded server, as the integration tests serve it) and FastAPI (uvicorn):
#      the latency a rate limiter adds to a request. One app process per case, GET /hello, a key
#      per request drawn from KEYS keys (x-key header): no limiter (the floor); sluice's
#      middleware over sluiced's memory store; the same over sluiced whose store is a
#      redis-server with sluice.so; limits' RedisStorage with FixedWindowRateLimiter on that
#      same redis-server, hit() before each request as Flask-Limiter and slowapi do. The load is
#      py_bench.py's own client: N requests one at a time over one keep-alive connection per
#      round; per case the medians and the median of per-round differences from the bare app's.
#   2. In-process: sluice.inproc's Table against limits' MemoryStorage, the same key stream.
#   3. Client: decisions/s over one connection: Client.allow, and Client.allow_many in
#      pipelines of BATCH, against limits' RedisStorage hit().
#
# The package is used as users get it, as tests/integration/test_python_*.sh install it: a wheel
# built offline from bindings/python, installed into a fresh venv made with
# --system-site-packages over Debian's python3-flask, -fastapi, -uvicorn, -redis and -limits
# (installed with apt-get when missing, as scripts/deps.sh does). Servers run pinned to CPU 0,
# the load and the in-process and client loops to CPU 1. Everything listens on 127.0.0.1 on free
# ports; every process started here is stopped by its PID on exit.
#
#   bench/packages/python.sh                    ROUNDS=5 N=3000 KEYS=10000
#   QUICK=1 bench/packages/python.sh            a smoke run (figures not comparable)
#   BUILD_DIR=/tmp/b bench/packages/python.sh   build (RelWithDebInfo, no sanitizer) there
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-pkg}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
if [ "${QUICK:-0}" = 1 ]; then
    ROUNDS=${ROUNDS:-1} N=${N:-300} N_INPROC=${N_INPROC:-20000} N_CLIENT=${N_CLIENT:-5000}
else
    ROUNDS=${ROUNDS:-5} N=${N:-3000} N_INPROC=${N_INPROC:-200000} N_CLIENT=${N_CLIENT:-20000}
fi
KEYS=${KEYS:-10000}
BATCH=${BATCH:-100}
BENCH_NAME=bench/packages/python.sh
SYS_PY=/usr/bin/python3
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools "$SYS_PY" redis-server redis-cli taskset flock cmake curl
missing=()
for m in flask:python3-flask fastapi:python3-fastapi uvicorn:python3-uvicorn redis:python3-redis \
    limits:python3-limits setuptools:python3-setuptools; do
    "$SYS_PY" -c "import ${m%%:*}" 2>/dev/null || missing+=("${m#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    say "\$ apt-get install ${missing[*]}"
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "could not install ${missing[*]}"
fi
bench_build "$BUILD" sluiced sluice_module sluice
SLUICED=$BUILD/src/server/sluiced
MODULE=$BUILD/src/module/sluice.so
bench_init
bench_machine
say "$("$SYS_PY" --version), limits $("$SYS_PY" -c 'import limits; print(limits.__version__)'), $(redis-server --version | cut -d' ' -f1-3)"

# ---- the package, built and installed as a user installs it ------------------------------------
say "\$ pip wheel --no-deps --no-build-isolation --no-index bindings/python && python3 -m venv --system-site-packages && pip install sluice-*.whl"
cp -r "$ROOT/bindings/python" "$TMP/pysrc"
rm -rf "$TMP/pysrc/build" "$TMP/pysrc/"*.egg-info
(cd "$TMP/pysrc" && timeout 300 "$SYS_PY" -m pip wheel --no-deps --no-build-isolation --no-index -q \
    -w "$TMP/wheel" .) >"$TMP/wheel.log" 2>&1 || die "the wheel did not build: $(tail -n 5 "$TMP/wheel.log")"
"$SYS_PY" -m venv --system-site-packages "$TMP/venv"
"$TMP/venv/bin/python" -m pip install -q --no-deps --no-index "$TMP"/wheel/sluice-*.whl >"$TMP/install.log" 2>&1 ||
    die "the wheel did not install: $(cat "$TMP/install.log")"
PY=$TMP/venv/bin/python
cp "$ROOT/bench/packages/py_bench.py" "$TMP/"
export SLUICE_LIBRARY=$BUILD/src/libsluice.so.2 PYTHONDONTWRITEBYTECODE=1
case $(cd "$TMP" && "$PY" -c 'import sluice; print(sluice.__file__)') in
"$TMP/venv/"*) ;;
*) die "sluice is not imported from the venv" ;;
esac

# ---- servers ---------------------------------------------------------------------------------------
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: bench
    algorithm: fixed_window
    limit: 1000000000
    window: 1h
YAML
RD_PORT=$(free_port)
mkdir -p "$TMP/redis"
start redis "${SRV_PIN[@]}" redis-server --port "$RD_PORT" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --dir "$TMP/redis" --loadmodule "$MODULE"
wait_port "$RD_PORT"
# --store-timeout 2s: on a busy shared core the default 5 ms would let decisions be made by
# on_store_error instead of by Redis; the end reads sluiced's counters to show none were.
start_sluiced() { # NAME STORE: sets SL_PORT, SL_HTTP
    SL_PORT=$(free_port)
    SL_HTTP=$(free_port)
    start "$1" "${SRV_PIN[@]}" "$SLUICED" --grpc-port 0 --threads 1 --port "$SL_PORT" --http-port "$SL_HTTP" \
        --store "$2" --store-timeout 2s --rules "$TMP/rules.yaml" --config-store "$TMP/$1.db" \
        --snapshot "" --log-level info
    wait_port "$SL_PORT"
}
start_sluiced sluiced-memory memory
SM_PORT=$SL_PORT SM_HTTP=$SL_HTTP
start_sluiced sluiced-redis "redis://127.0.0.1:$RD_PORT"
SR_PORT=$SL_PORT SR_HTTP=$SL_HTTP
grep -q 'request store redis (sluice.so module)' "$TMP/sluiced-redis.log" ||
    die "sluiced-redis does not use sluice.so: $(cat "$TMP/sluiced-redis.log")"

declare -A APP_PORT APP_PID
CASES=()
for fw in flask fastapi; do
    for spec in bare:bare:0 sluice-memory:sluice:"$SM_PORT" sluice-redis:sluice:"$SR_PORT" limits-redis:limits:"$RD_PORT"; do
        IFS=: read -r name kind store <<<"$spec"
        port=$(free_port)
        start "app-$fw-$name" "${SRV_PIN[@]}" sh -c "cd '$TMP' && exec '$PY' py_bench.py serve $fw $kind $port $store"
        APP_PORT[$fw-$name]=$port
        APP_PID[$fw-$name]=$LAST_PID
        wait_port "$port"
        CASES+=("$fw-$name")
    done
done

# ---- 1. Flask and FastAPI: added latency ---------------------------------------------------------
say ""
say "== 1. Flask (werkzeug) and FastAPI (uvicorn), GET /hello, $N requests per round one at a time over one keep-alive connection, $KEYS keys"
say "\$ python py_bench.py load PORT $N $KEYS SEED   (pinned to CPU 1; once per case per round, cases interleaved)"
for c in "${CASES[@]}"; do
    "${CLI_PIN[@]}" "$PY" "$TMP/py_bench.py" load "${APP_PORT[$c]}" 500 "$KEYS" 99 >/dev/null # warm-up
done
: >"$TMP/http.txt"
for ((r = 1; r <= ROUNDS; r++)); do
    for c in "${CASES[@]}"; do
        wait_quiet
        t0=$(cpu_ticks "${APP_PID[$c]}")
        read -r p50 p99 rps bad < <("${CLI_PIN[@]}" "$PY" "$TMP/py_bench.py" load "${APP_PORT[$c]}" "$N" "$KEYS" "$r")
        cpu=$(awk -v d="$(($(cpu_ticks "${APP_PID[$c]}") - t0))" -v hz="$CLK_TCK" -v n="$N" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }')
        echo "$r $c $p50 $p99 $rps $bad $cpu" >>"$TMP/http.txt"
        printf '  round %d  %-22s p50 %7s us  p99 %7s us  %6s req/s  app CPU %6s us/req  non-200 %s\n' "$r" "$c" "$p50" "$p99" "$rps" "$cpu" "$bad"
    done
done
say ""
say "medians over $ROUNDS rounds (added = the median of the per-round differences from the same framework's bare app; app CPU:"
say "the app process's CPU time per request, /proc/PID/stat, the limiter's client code included)"
printf '  %-22s %10s %10s %10s %14s %14s %12s %12s\n' case "p50 us" "p99 us" "req/s" "added p50 us" "added p99 us" "app CPU us" "added CPU us"
for c in "${CASES[@]}"; do
    awk -v c="$c" -v bare="${c%%-*}-bare" '
        function med(a, n,   i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $2 == bare { b50[$1] = $3; b99[$1] = $4; bcpu[$1] = $7 }
        $2 == c { n++; p50[n] = $3; p99[n] = $4; rps[n] = $5; r[n] = $1; cpu[n] = $7 }
        END {
            for (i = 1; i <= n; i++) { d50[i] = p50[i] - b50[r[i]]; d99[i] = p99[i] - b99[r[i]]; dcpu[i] = cpu[i] - bcpu[r[i]] }
            printf "  %-22s %10.1f %10.1f %10.0f %14.1f %14.1f %12.1f %12.1f\n", c, med(p50, n), med(p99, n), med(rps, n),
                med(d50, n), med(d99, n), med(cpu, n), med(dcpu, n)
        }' "$TMP/http.txt"
done

# ---- 2. in-process -------------------------------------------------------------------------------
say ""
say "== 2. In-process decisions, one thread"
say "\$ python py_bench.py inproc $N_INPROC $KEYS $ROUNDS   (pinned to CPU 1)"
wait_quiet
(cd "$TMP" && "${CLI_PIN[@]}" "$PY" py_bench.py inproc "$N_INPROC" "$KEYS" "$ROUNDS")

# ---- 3. client over one connection -------------------------------------------------------------
say ""
say "== 3. Client decisions over one connection"
say "\$ python py_bench.py client $N_CLIENT $KEYS $ROUNDS $BATCH ...   (pinned to CPU 1)"
wait_quiet
(cd "$TMP" && "${CLI_PIN[@]}" "$PY" py_bench.py client "$N_CLIENT" "$KEYS" "$ROUNDS" "$BATCH" "$SM_PORT" "$SR_PORT" "$RD_PORT")

# ---- what decided -----------------------------------------------------------------------------------
say ""
for name in sluiced-memory:"$SM_HTTP" sluiced-redis:"$SR_HTTP"; do
    port=${name#*:}
    m=$(curl -s "http://127.0.0.1:$port/metrics" |
        awk '$1 ~ /^sluice_redis_(timeouts|errors)_total/ { s += $2 } END { print s + 0 }')
    say "${name%%:*}: store timeouts and errors counted: $m"
done
say "redis-server error replies: $(redis-cli -h 127.0.0.1 -p "$RD_PORT" INFO stats | tr -d '\r' | sed -n 's/^total_error_replies://p')"
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
