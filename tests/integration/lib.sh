# lib.sh - shared by the integration tests that start real servers. Source it after setting
# `set -u`. Everything listens on 127.0.0.1 on ports chosen here; every process started is
# recorded and stopped by PID on exit; every wait is bounded.
#
#   TMP                 a private temp dir, removed on exit (kept when SLUICE_KEEP_TMP is set)
#   SLUICED, SLUICE     the built binaries
#   need TOOL..         skips the test (exit 77, which ctest reports as "Skipped") unless every
#                       TOOL is installed (a command name, or an absolute path to an executable)
#   free_port           prints a TCP port free on 127.0.0.1 when it looked
#   start_bg NAME CMD.. starts CMD in the background, output to $TMP/NAME.log, PID in $TMP/NAME.pid
#   stop_bg NAME [SIG]  sends SIG (default TERM) to NAME's PID, waits up to 10 s for it to exit;
#                       returns its exit code (or 137 after a KILL if it would not stop)
#   serve NAME N LAUNCH [ARGS..]
#                       starts a server on N new ports (or "bus": one port p with p + 10000 free
#                       too, a Redis Cluster node): sets SERVE_PORTS, runs LAUNCH NAME ARGS..
#                       (which starts it with start_bg NAME on those ports, and may list more
#                       logs to watch in SERVE_LOGS), and waits until the server listens on all
#                       of them. A port can be taken between free_port and the server's bind:
#                       then the server is stopped and started again on new ports (5 tries).
#   serve_at NAME "PORT.." LAUNCH [ARGS..]
#                       the same on the ports given (a server restarted where clients expect it)
#   start_sluiced NAME ARGS..   starts sluiced with ARGS (serve), sets RESP_PORT/HTTP_PORT/GRPC_PORT
#   start_sluiced_at NAME RESP HTTP ARGS..   the same on the ports given, gRPC off (GRPC_PORT 0)
#   must_start_sluiced NAME ARGS..   start_sluiced; prints the log and exits 1 if sluiced does not
#                               come up
#   start_scratch_sluiced NAME ARGS..   must_start_sluiced NAME with its config store in
#                               $TMP/NAME.db and no snapshot, then ARGS
#   sdk_cases_rules FILE        writes the rules of tests/sdk/cases.json (its rules_yaml) to FILE
#   middleware_rules FILE       writes to FILE the rules the language packages' middleware tests
#                               share (mw-fixed, mw-shadow, mw-jobs, mw-prio with priorities and
#                               a reserve, mw-adapt with an aimd limit); a test may append its own
#   start_tight_sluiced PASS    writes $TMP/rules.yaml (one rule, "tight") and starts it as NAME
#                               "sluiced" with a store and snapshot in $TMP and password PASS;
#                               prints the log and exits 1 if sluiced does not come up
#   start_redis NAME ARGS..     starts redis-server (serve), sets REDIS_PORT
#   start_redis_at NAME PORT ARGS..   the same on the port given
#   start_cluster N TIMEOUT ARGS..    a Redis Cluster of N primaries and N replicas
#   need_postgres       skips the test (exit 77) unless PostgreSQL's server programs and psql are
#                       installed; sets PG_BIN (scripts/postgres.sh; PG_BIN from the environment
#                       wins)
#   start_postgres NAME [ARGS..]  a new PostgreSQL cluster (initdb) in $TMP/NAME, run as an
#                       unprivileged user when the test runs as root, on 127.0.0.1 (serve), with a
#                       database "sluice"; sets PG_PORT and PG_URL (its libpq URL). Stop it by its
#                       PID with stop_bg NAME (the postmaster's, as start_bg recorded it)
#   start_postgres_at NAME PORT   the same cluster started again on its port (after stop_bg)
#   hold_port NAME closed|silent      a process holding a port the kernel picks: bound only
#                       (connections are refused) or listening and never answering; sets
#                       HELD_PORT
#   node_packages DIR   DIR/node_modules holds every dependency of DIR/package.json: npm ci runs
#                       there (at most 300 s) when one is missing, under a lock, so tests run at
#                       once install once and never under another's feet
#   poll S CMD..        runs CMD every 50 ms until it succeeds, for at most S seconds
#   caught_up P R       the replica on port R has processed all of its primary's (port P) stream
#   check NAME COND...  a test case: runs COND (a command); counts a failure with NAME if it fails
#   finish              prints the summary and exits 0/1

: "${SLUICE_BUILD_DIR:?set SLUICE_BUILD_DIR to the build tree}"
: "${SLUICE_SOURCE_DIR:?set SLUICE_SOURCE_DIR to the source tree}"
SLUICED=$SLUICE_BUILD_DIR/src/server/sluiced
SLUICE=$SLUICE_BUILD_DIR/src/cli/sluice

if ! command -v python3 >/dev/null; then # free_port.py below
    echo "SKIP: needs python3"
    exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-it.XXXXXX")
LIB_PIDS=()
FAILS=0
CASES=0

lib_cleanup() {
    local pid
    exec 2>/dev/null # bash would report each job killed here ("Killed") as it exits
    for pid in "${LIB_PIDS[@]}"; do
        kill -KILL "$pid"
    done
    if [ -n "${SLUICE_KEEP_TMP:-}" ]; then
        echo "kept $TMP"
    else
        rm -rf "$TMP"
    fi
}
trap lib_cleanup EXIT

LIB_FREE_PORT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/free_port.py
free_port() { python3 "$LIB_FREE_PORT"; }

start_bg() {
    local name=$1
    shift
    "$@" >"$TMP/$name.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$TMP/$name.pid"
    LIB_PIDS+=("$pid")
}

# lib_forget PID: PID is reaped; it is no longer ours to kill on exit (it may be reused)
lib_forget() {
    local p keep=()
    for p in "${LIB_PIDS[@]}"; do
        [ "$p" = "$1" ] || keep+=("$p")
    done
    LIB_PIDS=("${keep[@]}")
}

# stop_bg NAME [SIGNAL]: signals NAME's process and waits for it (60 s at most: a stop drains
# connections and the request store, which a loaded machine makes slow; then KILL); returns its
# exit status (137 when it had to be killed), 1 when NAME has no process (never started, or
# stopped already: its PID file goes when it is reaped)
stop_bg() {
    local name=$1 sig=${2:-TERM} pid i rc=137
    pid=$(cat "$TMP/$name.pid" 2>/dev/null) || return 1
    # in a block whose stderr is discarded: bash reports a killed background job ("Killed")
    # on its stderr when it reaps it, which may be during the wait loop
    {
        kill -"$sig" "$pid" 2>/dev/null
        for ((i = 0; i < 1200; i++)); do
            if ! kill -0 "$pid" 2>/dev/null; then
                { wait "$pid"; } 2>/dev/null
                rc=$?
                break
            fi
            sleep 0.05
        done
        if [ "$i" -eq 1200 ]; then
            kill -KILL "$pid" 2>/dev/null
            { wait "$pid"; } 2>/dev/null
        fi
    } 2>/dev/null
    lib_forget "$pid"
    rm -f "$TMP/$name.pid" # reaped: the PID may be another process's next; nothing signals it again
    return "$rc"
}

# ---- servers on ports of their own -------------------------------------------------------------
SERVE_PORTS=()
SERVE_LOGS=()
SERVE_TRIES=5

# lib_serve_try NAME LAUNCH [ARGS..]: one start on SERVE_PORTS (and p + 10000 for a bus port);
# 0 serving, 2 a port was taken (the server is stopped), 1 failed (the server is stopped)
lib_serve_try() {
    local name=$1 launch=$2 rc p ports=()
    shift 2
    SERVE_LOGS=()
    "$launch" "$name" "$@"
    ports=("${SERVE_PORTS[@]}")
    [ "${LIB_SERVE_BUS:-0}" = 1 ] && ports+=($((SERVE_PORTS[0] + 10000)))
    python3 "$LIB_FREE_PORT" --serving "$(cat "$TMP/$name.pid")" 10 "$TMP/$name.log" \
        "${SERVE_LOGS[@]}" -- "${ports[@]}"
    rc=$?
    [ "$rc" -eq 0 ] || stop_bg "$name" KILL >/dev/null
    return "$rc"
}

serve() {
    local name=$1 n=$2 try i p
    shift 2
    for ((try = 1; try <= SERVE_TRIES; try++)); do
        SERVE_PORTS=()
        if [ "$n" = bus ]; then
            p=$(python3 "$LIB_FREE_PORT" --bus) || { echo "$name: no free port pair"; return 1; }
            SERVE_PORTS=("$p")
        else
            while [ "${#SERVE_PORTS[@]}" -lt "$n" ]; do
                p=$(free_port)
                [[ " ${SERVE_PORTS[*]} " == *" $p "* ]] || SERVE_PORTS+=("$p")
            done
        fi
        LIB_SERVE_BUS=$([ "$n" = bus ] && echo 1 || echo 0) lib_serve_try "$name" "$@"
        case $? in
        0) return 0 ;;
        2) echo "$name: port ${SERVE_PORTS[*]} taken before the server could bind it (try $try)"
            [ ! -e "$TMP/$name.log" ] || mv "$TMP/$name.log" "$TMP/$name.try$try.log" ;;
        *) echo "$name: did not start (see its log)"
            return 1 ;;
        esac
    done
    echo "$name: no free ports in $SERVE_TRIES tries"
    return 1
}

serve_at() {
    local name=$1
    read -r -a SERVE_PORTS <<<"$2"
    shift 2
    LIB_SERVE_BUS=0 lib_serve_try "$name" "$@" && return 0
    echo "$name: not serving on port ${SERVE_PORTS[*]} (see its log)"
    return 1
}

lib_launch_sluiced() { # NAME ARGS..
    local name=$1
    shift
    RESP_PORT=${SERVE_PORTS[0]}
    HTTP_PORT=${SERVE_PORTS[1]}
    GRPC_PORT=${SERVE_PORTS[2]:-0}
    start_bg "$name" "$SLUICED" --port "$RESP_PORT" --http-port "$HTTP_PORT" \
        --grpc-port "$GRPC_PORT" "$@"
}
start_sluiced() {
    local name=$1
    shift
    serve "$name" 3 lib_launch_sluiced "$@"
}
start_sluiced_at() {
    local name=$1 at="$2 $3"
    shift 3
    serve_at "$name" "$at" lib_launch_sluiced "$@"
}
# start_noted_sluiced NAME ARGS..: sluiced started as systemd's Type=notify starts it: beside
# it notify_listener.py, the manager's side, on $TMP/notify.sock, writing what it receives to
# $TMP/notify.out (and checking, at READY=1, that the ports serve)
lib_launch_noted() { # NAME ARGS..: the listener reads the ports from $TMP/NAME.ports
    echo "${SERVE_PORTS[*]}" >"$TMP/$1.ports"
    lib_launch_sluiced "$@"
}
start_noted_sluiced() {
    local name=$1
    shift
    start_bg listener python3 "$SLUICE_SOURCE_DIR/tests/integration/notify_listener.py" \
        "$TMP/notify.sock" "$TMP/notify.out" "$TMP/$name.ports"
    poll 10 test -S "$TMP/notify.sock" || { echo "the listener did not bind"; return 1; }
    NOTIFY_SOCKET=$TMP/notify.sock serve "$name" 3 lib_launch_noted "$@"
}
must_start_sluiced() {
    local name=$1
    start_sluiced "$@" || {
        cat "$TMP/$name.log"
        exit 1
    }
}
start_scratch_sluiced() {
    local name=$1
    shift
    must_start_sluiced "$name" --config-store "$TMP/$name.db" --snapshot "" "$@"
}

sdk_cases_rules() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rules_yaml"], end="")' \
        "$SLUICE_SOURCE_DIR/tests/sdk/cases.json" >"$1"
}
middleware_rules() {
    cat >"$1" <<'YAML'
rules:
  - name: mw-fixed
    algorithm: fixed_window
    limit: 2
    window: 1h
  - name: mw-shadow
    algorithm: fixed_window
    limit: 1
    window: 1h
    shadow: true
  - name: mw-jobs
    algorithm: concurrency
    limit: 1
    hold_timeout: 1h
  - name: mw-prio
    algorithm: concurrency
    limit: 2
    hold_timeout: 1h
    priorities: [low, high]
    reserve: {high: 1}
  - name: mw-adapt
    algorithm: concurrency
    limit: 2
    hold_timeout: 1h
    adaptive: aimd
    min_limit: 1
    max_limit: 8
    backoff: 50
    latency_timeout: 10m
  - name: mw-adapt-slow
    algorithm: concurrency
    limit: 2
    hold_timeout: 1h
    adaptive: aimd
    min_limit: 1
    max_limit: 8
    backoff: 50
    latency_timeout: 100ms
YAML
}

# sanitized LIB: true when the shared library LIB was built with a sanitizer (it links ASan's or
# TSan's runtime), which only a program that loads that runtime first can load: not python3 or
# node, so their in-process bindings are tested by the plain build
sanitized() {
    ldd "$1" 2>/dev/null | grep -Eq 'lib(asan|tsan|ubsan)\.so'
}

# need TOOL..: skip (exit 77) unless every TOOL is there
need() {
    local tool missing=()
    for tool in "$@"; do
        case $tool in
        /*) [ -x "$tool" ] || missing+=("$tool") ;;
        *) command -v "$tool" >/dev/null || missing+=("$tool") ;;
        esac
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    echo "SKIP: needs ${missing[*]}"
    exit 77
}

# need_grpc: PY is Debian's python3, with python3-grpcio and python3-grpc-tools (or the test is
# skipped, 77)
need_grpc() {
    PY=/usr/bin/python3 # Debian's, where python3-grpcio and python3-grpc-tools install
    need "$PY"
    "$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || {
        echo "SKIP: needs python3-grpcio and python3-grpc-tools"
        exit 77
    }
}

# grpc_stubs PROTO..: Python stubs of these files of src/proto/grpc in $TMP/stubs (need_grpc
# first); the test ends when grpc_tools cannot compile them
grpc_stubs() {
    mkdir -p "$TMP/stubs"
    "$PY" -m grpc_tools.protoc -I "$SLUICE_SOURCE_DIR/src/proto/grpc" --python_out="$TMP/stubs" \
        --grpc_python_out="$TMP/stubs" "$@" >/dev/null || {
        echo "grpc_tools could not compile $*"
        exit 1
    }
}

node_packages() {
    local dir=$1
    (
        flock -w 360 9 || { echo "node_packages: $dir stayed locked"; exit 1; }
        if ! (cd "$dir" && node -e '
            const deps = Object.keys(require("./package.json").dependencies || {});
            for (const d of deps) require.resolve(d + "/package.json");') 2>/dev/null; then
            (cd "$dir" && timeout 300 npm ci --no-audit --no-fund) || {
                echo "npm ci failed in $dir"
                exit 1
            }
        fi
    ) 9>"$dir/.npm-ci.lock"
}

# poll SECS CMD..: CMD until it succeeds, every 50 ms, for at most SECS seconds (its status)
poll() {
    local secs=$1 i
    shift
    for ((i = 0; i < secs * 20; i++)); do
        "$@" && return 0
        sleep 0.05
    done
    "$@"
}

# wait_log NAME PATTERN [COUNT]: until NAME's log has COUNT (default 1) lines matching PATTERN (a
# grep regex), at most 10 s; says how many it found when it gives up
wait_log() {
    local i want=${3:-1}
    for ((i = 0; i < 200; i++)); do
        [ "$(grep -c -- "$2" "$TMP/$1.log")" -ge "$want" ] && return 0
        sleep 0.05
    done
    echo "  $(grep -c -- "$2" "$TMP/$1.log") lines /$2/ in $1's log, want $want"
    return 1
}

hold_port() {
    local name=$1 mode=$2
    rm -f "$TMP/$name.port"
    start_bg "$name" python3 -c '
import os, socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
if sys.argv[2] == "silent":
    s.listen(64)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)' "$TMP/$name.port" "$mode"
    poll 10 test -s "$TMP/$name.port" || { echo "$name: no port held"; return 1; }
    HELD_PORT=$(cat "$TMP/$name.port")
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
    must_start_sluiced sluiced --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" \
        --snapshot "$TMP/snapshot" --requirepass "$pass"
}

# start_redis NAME ARGS..: Debian's redis-server on 127.0.0.1:REDIS_PORT (no persistence, its dir
# $TMP/NAME unless ARGS give --dir), loading the built sluice.so when ARGS contain --loadmodule;
# an ASan build of the module gets the ASan runtime preloaded. REDIS_WRAP (an array, e.g.
# taskset -c 0) goes before the command.
REDIS_WRAP=()
lib_launch_redis() { # NAME ARGS..
    local name=$1
    shift
    local env=(env)
    local module=$SLUICE_BUILD_DIR/src/module/sluice.so
    if [ -f "$module" ] && ldd "$module" | grep -q libasan; then
        env=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
            ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
    fi
    REDIS_PORT=${SERVE_PORTS[0]}
    mkdir -p "$TMP/$name"
    start_bg "$name" "${env[@]}" "${REDIS_WRAP[@]}" redis-server --port "$REDIS_PORT" \
        --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP/$name" "$@"
}
start_redis() {
    local name=$1
    shift
    serve "$name" 1 lib_launch_redis "$@"
}
start_redis_at() {
    local name=$1 port=$2
    shift 2
    serve_at "$name" "$port" lib_launch_redis "$@"
}

# ---- PostgreSQL ------------------------------------------------------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/postgres.sh"
need_postgres() {
    pg_find_bin || { echo "SKIP: needs PostgreSQL's server (Debian's postgresql)"; exit 77; }
    need psql
}
lib_launch_postgres() { # NAME ARGS..
    local name=$1
    shift
    PG_PORT=${SERVE_PORTS[0]}
    start_bg "$name" pg_exec_server "$TMP/$name" "$PG_PORT" "$@"
}
lib_pg_ready() {
    psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U sluice -d postgres -c 'SELECT 1' >/dev/null 2>&1
}
start_postgres() {
    local name=$1
    shift
    pg_initdb "$TMP/$name" "$TMP/$name.initdb.log" || { cat "$TMP/$name.initdb.log"; return 1; }
    serve "$name" 1 lib_launch_postgres "$@" || return 1
    poll 10 lib_pg_ready || { echo "$name: does not answer"; return 1; }
    psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U sluice -d postgres -c 'CREATE DATABASE sluice' ||
        return 1
    PG_URL="postgresql://sluice@127.0.0.1:$PG_PORT/sluice"
}
start_postgres_at() {
    local name=$1
    serve_at "$name" "$2" lib_launch_postgres && poll 10 lib_pg_ready
}

# caught_up PRIMARY_PORT REPLICA_PORT: the replica has processed every byte of the primary's
# replication stream so far. (WAIT from a new connection proves nothing: it waits only for that
# connection's own writes.)
repl_field() { redis-cli -p "$1" INFO replication | tr -d '\r' | awk -F: -v f="$2" '$1 == f {print $2}'; }
caught_up() {
    local want got
    want=$(repl_field "$1" master_repl_offset)
    got=$(repl_field "$2" slave_repl_offset)
    [ -n "$want" ] && [ "$want" = "$got" ]
}

# start_cluster N_PRIMARIES NODE_TIMEOUT_MS [ARGS..]: a Redis Cluster of N primaries with one
# replica each (redis-cli --cluster create) on free loopback ports (each also needs port+10000
# free, the cluster bus), every node started with ARGS (e.g. --loadmodule sluice.so). Sets
# CLUSTER_PORTS and waits until every node reports cluster_state:ok and sees every replica, and
# every replica has synced with its primary.
# Nodes are named node1.. for stop_bg.
CLUSTER_PORTS=()
lib_launch_node() { # NAME TIMEOUT_MS ARGS..: a cluster node, its nodes.conf fresh on every try
    local name=$1 timeout_ms=$2
    shift 2
    rm -rf "${TMP:?}/$name"
    # (a replica's first sync starts at once, not after the 5 s wait for more replicas)
    lib_launch_redis "$name" --cluster-enabled yes --cluster-config-file "$TMP/$name/nodes.conf" \
        --cluster-node-timeout "$timeout_ms" --repl-diskless-sync-delay 0 "$@"
}
# lib_cluster_ok N PORT..: every node says cluster_state:ok and sees N replicas, and no replica
# waits for its first sync (it could not take over from its primary)
lib_cluster_ok() {
    local primaries=$1 p
    shift
    for p in "$@"; do
        redis-cli -p "$p" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok || return 1
        [ "$(redis-cli -p "$p" CLUSTER NODES | awk '$3 ~ /slave/' | wc -l)" -eq "$primaries" ] ||
            return 1
        ! redis-cli -p "$p" INFO replication | tr -d '\r' | grep -qx master_link_status:down ||
            return 1
    done
}
# cluster_victim SKIP_PORT PREFIX COUNT: picks a primary of the cluster start_cluster made (not
# the one on SKIP_PORT, which may be empty) to fail over, and COUNT client keys PREFIX<i> in its
# slots (sluiced's Redis key "sl:{<client key>}:..." has the client key's slot). Sets victim (its
# serve name), victim_port, victim_id, replica_port and VKEYS; fails when any is missing.
cluster_victim() {
    local skip=$1 prefix=$2 count=$3 nodes primaries ranges slots slot i r
    nodes=$(redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER NODES)
    primaries=$(echo "$nodes" | awk '$3 ~ /master/ {split($2, a, "[:@]"); print a[2]}')
    victim_port=$(echo "$primaries" | grep -v "^$skip$" | head -n 1)
    victim_id=$(echo "$nodes" | awk -v p="$victim_port" '$2 ~ ":" p "@" {print $1}')
    replica_port=$(echo "$nodes" | awk -v id="$victim_id" '$4 == id {split($2, a, "[:@]"); print a[2]}')
    victim=""
    for ((i = 1; i <= ${#CLUSTER_PORTS[@]}; i++)); do
        [ "${CLUSTER_PORTS[$((i - 1))]}" = "$victim_port" ] && victim=node$i
    done
    ranges=$(echo "$nodes" | awk -v id="$victim_id" '$1 == id {for (i = 9; i <= NF; i++) print $i}')
    VKEYS=()
    slots=$(for i in $(seq 1 200); do echo "CLUSTER KEYSLOT $prefix$i"; done |
        redis-cli -p "${CLUSTER_PORTS[0]}")
    i=0
    for slot in $slots; do
        i=$((i + 1))
        for r in $ranges; do
            if [ "$slot" -ge "${r%-*}" ] && [ "$slot" -le "${r#*-}" ]; then
                VKEYS+=("$prefix$i")
                break
            fi
        done
        [ "${#VKEYS[@]}" -lt "$count" ] || break
    done
    echo "victim $victim (port $victim_port, replica on $replica_port), keys ${VKEYS[*]}"
    [ -n "$victim" ] && [ -n "$replica_port" ] && [ "${#VKEYS[@]}" -eq "$count" ]
}
start_cluster() {
    local primaries=$1 timeout_ms=$2 n i
    shift 2
    n=$((primaries * 2))
    CLUSTER_PORTS=()
    for ((i = 1; i <= n; i++)); do
        serve "node$i" bus lib_launch_node "$timeout_ms" "$@" || return 1
        CLUSTER_PORTS+=("$REDIS_PORT")
    done
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CLUSTER_PORTS[@]}") \
        --cluster-replicas 1 --cluster-yes >"$TMP/cluster-create.log" 2>&1 || {
        cat "$TMP/cluster-create.log"
        return 1
    }
    poll 30 lib_cluster_ok "$primaries" "${CLUSTER_PORTS[@]}" && return 0
    echo "cluster not ok after 30 s"
    return 1
}
