# shellcheck shell=bash
# scripts/postgres.sh - a throwaway PostgreSQL for the tests and benchmarks that need one
# (tests/integration/lib.sh, bench/config_propagation/run.sh). Source it with bash.
#
#   pg_find_bin               sets PG_BIN to the newest /usr/lib/postgresql/*/bin with a server
#                             (PG_BIN from the environment wins); returns 1 when there is none
#   pg_initdb DIR LOG         a new cluster in DIR (which must not exist yet): user "sluice",
#                             trust authentication, UTF-8, C locale; initdb's output to LOG
#   pg_exec_server DIR PORT [ARGS..]   replaces the calling shell with the server on 127.0.0.1:PORT
#                             (its socket in DIR, no fsync: nothing here needs to survive a
#                             crash), so that `pg_exec_server ... &` leaves the postmaster's PID
#                             in $!
#
# PostgreSQL refuses to run as root: as root, its programs run as nobody (setpriv), DIR is made
# nobody's, and DIR's parent is made enterable (mode 711) by others.

pg_find_bin() {
    local d
    if [ -z "${PG_BIN:-}" ]; then
        for d in /usr/lib/postgresql/*/bin; do
            [ -x "$d/postgres" ] && PG_BIN=$d
        done
    fi
    [ -n "${PG_BIN:-}" ] && [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/postgres" ]
}

pg_as_exec() {
    if [ "$(id -u)" -eq 0 ]; then
        exec setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
    fi
    exec "$@"
}

pg_initdb() {
    local dir=$1 log=$2
    mkdir "$dir" || return 1
    if [ "$(id -u)" -eq 0 ]; then
        chmod 711 "$(dirname "$dir")"
        chown nobody:nogroup "$dir"
    fi
    (pg_as_exec "$PG_BIN/initdb" -D "$dir" -U sluice --auth=trust -E UTF8 --locale=C -N) \
        >"$log" 2>&1
}

pg_exec_server() {
    local dir=$1 port=$2
    shift 2
    pg_as_exec "$PG_BIN/postgres" -D "$dir" -p "$port" -c listen_addresses=127.0.0.1 \
        -c unix_socket_directories="$dir" -c fsync=off -c full_page_writes=off \
        -c synchronous_commit=off "$@"
}
