#!/usr/bin/env bash
# test_client.sh - libsluice-client and plain hiredis against a real sluiced.
#
# Starts sluiced on free loopback ports with a password and a one-rule rules file, then runs
#   prog_client   the client library, blocking and on a libuv loop (allow/deny/peek/reset,
#                 the over-limit cache sparing round trips, AUTH, settles and the cache)
#   prog_client_holds  the client's in-flight calls (acquire, release, their async pair, a hold
#                 expiring, the cache never answering an acquire)
#   prog_client_options  the _ex calls: priorities on allow, peek and acquire (and the cache
#                 keeping no refusal with a priority), LATENCY and DROPPED moving an adaptive limit
#   prog_hiredis  plain hiredis: one pipeline of SL.ALLOW, SL.THROTTLE, CL.THROTTLE, PING and
#                 malformed commands, every reply checked in order
# and checks that sluiced is still up and stops cleanly. Needs SLUICE_BUILD_DIR and
# SLUICE_SOURCE_DIR (ctest sets both).
set -u
. "$(dirname "$0")/lib.sh"

PROGS=$SLUICE_BUILD_DIR/tests
for bin in "$SLUICED" "$PROGS/prog_client" "$PROGS/prog_client_holds" "$PROGS/prog_client_options" \
    "$PROGS/prog_hiredis"; do
    [ -x "$bin" ] || { echo "not built: $bin"; exit 1; }
done

start_tight_sluiced s3cret

# run_prog NAME ARGS...: runs a program, shows its output, passes when it exits 0.
run_prog() {
    local name=$1
    shift
    "$PROGS/$name" "$@" >"$TMP/$name.out" 2>&1
    local rc=$?
    sed "s/^/  [$name] /" "$TMP/$name.out"
    [ "$rc" -eq 0 ]
}

check "prog_client: the client library" run_prog prog_client "$RESP_PORT" s3cret
check "prog_client_holds: acquire and release" run_prog prog_client_holds "$RESP_PORT" s3cret
check "prog_client_options: priorities and adaptive reports" run_prog prog_client_options "$RESP_PORT" s3cret
check "prog_hiredis: plain hiredis, pipelined" run_prog prog_hiredis "$RESP_PORT" s3cret
check "sluiced is still running" kill -0 "$(cat "$TMP/sluiced.pid")"
check "sluiced stops cleanly on TERM" stop_bg sluiced
if [ "$FAILS" -ne 0 ]; then
    echo "--- sluiced log"
    tail -50 "$TMP/sluiced.log"
fi
finish
