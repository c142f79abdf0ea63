# lib.sh - shared by the integration tests that start real servers. Source it after setting
# `set -u`. Everything listens on 127.0.0.1 on ports chosen here; every process started is
# recorded and stopped by PID on exit; every wait is bounded.
#
#   TMP                 a private temp dir, removed on exit
#   SLUICED, SLUICE     the built binaries
#   free_port           prints a free TCP port on 127.0.0.1
#   wait_port PORT [S]  waits up to S seconds (default 10) until PORT accepts connections
#   start_bg NAME CMD.. starts CMD in the background, output to $TMP/NAME.log, PID in $TMP/NAME.pid
#   stop_bg NAME [SIG]  sends SIG (default TERM) to NAME's PID, waits up to 10 s for it to exit;
#                       returns its exit code (or 137 after a KILL if it would not stop)
#   start_sluiced NAME ARGS..   starts sluiced with ARGS, sets RESP_PORT/HTTP_PORT for NAME
#                               (chosen here unless ARGS name them), waits for both ports
#   start_tight_sluiced PASS    writes $TMP/rules.yaml (one rule, "tight") and starts it as NAME
#                               "sluiced" with a store and snapshot in $TMP and password PASS;
#                               prints the log and exits 1 if sluiced does not come up
#   check NAME COND...  a test case: runs COND (a command); counts a failure with NAME if it fails
#   finish              prints the summary and exits 0/1

: "${SLUICE_BUILD_DIR:?set SLUICE_BUILD_DIR to the build tree}"
: "${SLUICE_SOURCE_DIR:?set SLUICE_SOURCE_DIR to the source tree}"
SLUICED=$SLUICE_BUILD_DIR/src/server/sluiced
SLUICE=$SLUICE_BUILD_DIR/src/cli/sluice

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-it.XXXXXX")
LIB_PIDS=()
FAILS=0
CASES=0

lib_cleanup() {
    local pid
    for pid in "${LIB_PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap lib_cleanup EXIT

LIB_FREE_PORT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/free_port.py
free_port() { python3 "$LIB_FREE_PORT"; }

wait_port() {
    local port=$1 secs=${2:-10} i
    for ((i = 0; i < secs * 20; i++)); do
        if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "port $port not open after ${secs}s"
    return 1
}

start_bg() {
    local name=$1
    shift
    "$@" >"$TMP/$name.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$TMP/$name.pid"
    LIB_PIDS+=("$pid")
}

stop_bg() {
    local name=$1 sig=${2:-TERM} pid i
    pid=$(cat "$TMP/$name.pid" 2>/dev/null) || return 1
    kill -"$sig" "$pid" 2>/dev/null
    for ((i = 0; i < 200; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            { wait "$pid"; } 2>/dev/null
            return $?
        fi
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null
    return 137
}

start_sluiced() {
    local name=$1
    shift
    RESP_PORT=$(free_port)
    HTTP_PORT=$(free_port)
    start_bg "$name" "$SLUICED" --port "$RESP_PORT" --http-port "$HTTP_PORT" "$@"
    wait_port "$RESP_PORT" && wait_port "$HTTP_PORT"
}

check() {
    local name=$1
    shift
    CASES=$((CASES + 1))
    if ! "$@"; then
        echo "FAIL [$name]: $*"
        FAILS=$((FAILS + 1))
    fi
}

finish() {
    echo "$((CASES - FAILS))/$CASES cases passed"
    [ "$FAILS" -eq 0 ]
    exit $?
}

# The rule "tight" allows 2 requests an hour on a sliding log, so the third is denied.
start_tight_sluiced() {
    local pass=$1
    cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: tight
    algorithm: sliding_log
    limit: 2
    window: 1h
YAML
    start_sluiced sluiced --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" \
        --snapshot "$TMP/snapshot" --requirepass "$pass" || {
        cat "$TMP/sluiced.log"
        exit 1
    }
}

# start_redis NAME PORT [ARGS..]: starts Debian's redis-server on 127.0.0.1:PORT (no persistence,
# its dir in $TMP/NAME), loading the built sluice.so when ARGS contain --loadmodule; an ASan
# build of the module gets the ASan runtime preloaded. Waits for the port.
start_redis() {
    local name=$1 port=$2
    shift 2
    local env=(env)
    local module=$SLUICE_BUILD_DIR/src/module/sluice.so
    if [ -f "$module" ] && ldd "$module" | grep -q libasan; then
        env=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
            ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
    fi
    mkdir -p "$TMP/$name"
    start_bg "$name" "${env[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" \
        --appendonly no --dir "$TMP/$name" "$@"
    wait_port "$port"
}

# start_cluster N_PRIMARIES NODE_TIMEOUT_MS [ARGS..]: a Redis Cluster of N primaries with one
# replica each (redis-cli --cluster create) on free loopback ports (each also needs port+10000
# free, the cluster bus), every node started with ARGS (e.g. --loadmodule sluice.so). Sets
# CLUSTER_PORTS and waits until every node reports cluster_state:ok and sees every replica, and
# every replica has synced with its primary.
# Nodes are named node1.. for stop_bg.
CLUSTER_PORTS=()
cluster_port() { python3 "$LIB_FREE_PORT" --bus; }
start_cluster() {
    local primaries=$1 timeout_ms=$2 n p i
    shift 2
    n=$((primaries * 2))
    CLUSTER_PORTS=()
    for ((i = 1; i <= n; i++)); do
        p=$(cluster_port)
        while [[ " ${CLUSTER_PORTS[*]} " == *" $p "* ]]; do p=$(cluster_port); done
        [ -n "$p" ] || { echo "no free port pair for cluster node $i" >&2; return 1; }
        CLUSTER_PORTS+=("$p")
        start_redis "node$i" "$p" --cluster-enabled yes \
            --cluster-config-file "$TMP/node$i/nodes.conf" --cluster-node-timeout "$timeout_ms" \
            "$@" || return 1
    done
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CLUSTER_PORTS[@]}") \
        --cluster-replicas 1 --cluster-yes >"$TMP/cluster-create.log" 2>&1 || {
        cat "$TMP/cluster-create.log"
        return 1
    }
    for ((i = 0; i < 300; i++)); do
        local ok=0
        for p in "${CLUSTER_PORTS[@]}"; do
            redis-cli -p "$p" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok &&
                [ "$(redis-cli -p "$p" CLUSTER NODES | awk '$3 ~ /slave/' | wc -l)" -eq "$primaries" ] &&
                # a replica must have synced once, or it cannot take over from its primary
                ! redis-cli -p "$p" INFO replication | tr -d '\r' | grep -qx master_link_status:down &&
                ok=$((ok + 1))
        done
        [ "$ok" -eq "$n" ] && return 0
        sleep 0.1
    done
    echo "cluster not ok after 30 s"
    return 1
}
