#!/usr/bin/env bash
# bench/config_propagation/run.sh - a rule change made through one sluiced: how soon is it in
# force on a second sluiced sharing the config store? Prints figures (asserts nothing): p50, p99,
# max and mean of N changes (propagate.py), for the SQLite store (both on one file: the second
# finds out at its next poll) and the PostgreSQL store (pushed: LISTEN/NOTIFY), both with the
# same --poll-interval (default 1s). The PostgreSQL is a throwaway one started here
# (scripts/postgres.sh: initdb in a temporary directory, 127.0.0.1, a free port).
#
#   bench/config_propagation/run.sh                 N=100, poll 1 s; about two minutes
#   N=300 POLL_MS=250 bench/config_propagation/run.sh
#   SLUICED=/path/to/sluiced bench/config_propagation/run.sh   measure another build
#   BUILD_DIR=/tmp/b bench/config_propagation/run.sh            build (RelWithDebInfo) there
#
# Every process started here listens on 127.0.0.1 on free ports and is stopped by its PID.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N:-100}
POLL_MS=${POLL_MS:-1000}
POLL=${POLL_MS}ms
SEED=${SEED:-1}
BENCH_NAME=config_propagation
# shellcheck source=bench/lib.sh
. bench/lib.sh
# shellcheck source=scripts/postgres.sh
. scripts/postgres.sh

need_tools python3 psql
pg_find_bin || die "needs PostgreSQL's server (Debian's postgresql)"
if [ -z "${SLUICED:-}" ]; then
    bench_build "$BUILD" sluiced
    SLUICED=$BUILD/src/server/sluiced
fi
bench_init
bench_machine

# sluiced NAME STORE: starts one on free ports; its RESP port in PORT
sluiced_on() {
    PORT=$(free_port)
    start "$1" "$SLUICED" --port "$PORT" --http-port 0 --grpc-port 0 --snapshot "" \
        --threads 1 --poll-interval "$POLL" --config-store "$2" --log-level warn
    wait_port "$PORT"
}

# measure LABEL STORE: two sluiced on STORE, the rule made and seen by both, then N changes
measure() {
    local label=$1 store=$2 a b pa pb line
    sluiced_on "$label-a" "$store"
    a=$PORT
    pa=$LAST_PID
    sluiced_on "$label-b" "$store"
    b=$PORT
    pb=$LAST_PID
    line=$(python3 bench/config_propagation/propagate.py "$a" "$b" "$N" "$SEED" "$POLL_MS")
    kill -TERM "$pa" "$pb"
    wait "$pa" "$pb" 2>/dev/null || true
    # shellcheck disable=SC2086 # the figures, split
    set -- $line
    printf '%-12s %6s %9s %9s %9s %9s %9s\n' "$label" "$1" "$2" "$3" "$4" "$5" "$6"
}

PG_DIR=$TMP/pg
pg_initdb "$PG_DIR" "$TMP/initdb.log" || die "initdb failed: $(cat "$TMP/initdb.log")"
PG_PORT=$(free_port)
start pg pg_exec_server "$PG_DIR" "$PG_PORT"
for ((i = 0; i < 200; i++)); do
    psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U sluice -d postgres -c 'SELECT 1' >/dev/null 2>&1 &&
        break
    sleep 0.05
done
psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U sluice -d postgres -c 'CREATE DATABASE sluice'

say ""
say "propagation of $N rule changes to a second sluiced, --poll-interval $POLL (ms)"
printf '%-12s %6s %9s %9s %9s %9s %9s\n' store changes p50 p99 max mean timeouts
measure sqlite "$TMP/store.db"
measure postgresql "postgresql://sluice@127.0.0.1:$PG_PORT/sluice"
