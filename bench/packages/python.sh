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
if [ "${QUICK:-0}" = 1 ]; then
    ROUNDS=${ROUNDS:-1} N=${N:-300} N_INPROC=${N_INPROC:-20000} N_CLIENT=${N_CLIENT:-5000}
else
    ROUNDS=${ROUNDS:-5} N=${N:-3000} N_INPROC=${N_INPROC:-200000} N_CLIENT=${N_CLIENT:-20000}
fi
BATCH=${BATCH:-100}
BENCH_NAME=bench/packages/python.sh
SYS_PY=/usr/bin/python3
# shellcheck source=bench/packages/common.sh
. bench/packages/common.sh

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
pkg_init sluiced sluice_module sluice
say "$("$SYS_PY" --version), limits $("$SYS_PY" -c 'import limits; print(limits.__version__)'), $(redis-server --version | cut -d' ' -f1-3)"

# ---- the package, built and installed as a user installs it ------------------------------------
say "\$ pip wheel --no-deps --no-build-isolation --no-index bindings/python && python3 -m venv --system-site-packages && pip install sluice_ratelimit-*.whl"
cp -r "$ROOT/bindings/python" "$TMP/pysrc"
rm -rf "$TMP/pysrc/build" "$TMP/pysrc/"*.egg-info
(cd "$TMP/pysrc" && timeout 300 "$SYS_PY" -m pip wheel --no-deps --no-build-isolation --no-index -q \
    -w "$TMP/wheel" .) >"$TMP/wheel.log" 2>&1 || die "the wheel did not build: $(tail -n 5 "$TMP/wheel.log")"
"$SYS_PY" -m venv --system-site-packages "$TMP/venv"
"$TMP/venv/bin/python" -m pip install -q --no-deps --no-index "$TMP"/wheel/sluice_ratelimit-*.whl >"$TMP/install.log" 2>&1 ||
    die "the wheel did not install: $(cat "$TMP/install.log")"
PY=$TMP/venv/bin/python
cp "$ROOT/bench/packages/py_bench.py" "$TMP/"
export SLUICE_LIBRARY=$BUILD/src/libsluice.so.2 PYTHONDONTWRITEBYTECODE=1
case $(cd "$TMP" && "$PY" -c 'import sluice; print(sluice.__file__)') in
"$TMP/venv/"*) ;;
*) die "sluice is not imported from the venv" ;;
esac

# ---- servers ---------------------------------------------------------------------------------------
pkg_servers <<'YAML'
rules:
  - name: bench
    algorithm: fixed_window
    limit: 1000000000
    window: 1h
YAML

for fw in flask fastapi; do
    for spec in bare:bare:0 sluice-memory:sluice:"$SM_PORT" sluice-redis:sluice:"$SR_PORT" limits-redis:limits:"$RD_PORT"; do
        IFS=: read -r name kind store <<<"$spec"
        port=$(free_port)
        pkg_app "$fw-$name" "$port" sh -c "cd '$TMP' && exec '$PY' py_bench.py serve $fw $kind $port $store"
    done
done

# ---- 1. Flask and FastAPI: added latency ---------------------------------------------------------
pkg_load() { "${CLI_PIN[@]}" "$PY" "$TMP/py_bench.py" load "$@"; } # PORT N KEYS SEED
pkg_bare() { echo "${1%%-*}-bare"; }                                  # the same framework's bare app
say ""
say "== 1. Flask (werkzeug) and FastAPI (uvicorn), GET /hello, $N requests per round one at a time over one keep-alive connection, $KEYS keys"
say "\$ python py_bench.py load PORT $N $KEYS SEED   (pinned to CPU 1; once per case per round, cases interleaved)"
pkg_rounds 500
say ""
say "medians over $ROUNDS rounds (added = the median of the per-round differences from the same framework's bare app; app CPU:"
say "the app process's CPU time per request, /proc/PID/stat, the limiter's client code included)"
pkg_medians

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
pkg_what_decided
