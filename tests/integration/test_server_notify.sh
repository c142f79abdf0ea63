#!/usr/bin/env bash
# test_server_notify.sh - sluiced speaks systemd's readiness protocol (Type=notify): with
# $NOTIFY_SOCKET set it sends READY=1 only once every port is served, and STOPPING=1 when
# SIGTERM stops it; a malformed $NOTIFY_SOCKET is logged and sluiced serves all the same.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli

start_noted_sluiced s1 --config-store "$TMP/store.db" --snapshot "" || { cat "$TMP/s1.log"; exit 1; }

# READY=1 came when PING was answered and both other ports (HTTP, gRPC) accepted connections
check ready-sent poll 10 grep -q "^READY=1" "$TMP/notify.out"
check ready-when-serving grep -qx "READY=1 PONG 2" "$TMP/notify.out"
check ready-once test "$(grep -c "^READY=1" "$TMP/notify.out")" -eq 1
stop_bg s1 TERM
check stop-exit-0 test $? -eq 0
check stopping-sent grep -qx "STOPPING=1" "$TMP/notify.out"

# a NOTIFY_SOCKET sluiced cannot use: a warning, and it serves
NOTIFY_SOCKET=relative/path start_sluiced s2 --config-store "$TMP/store.db" --snapshot "" ||
    { cat "$TMP/s2.log"; exit 1; }
check bad-socket-serves test "$(redis-cli -p "$RESP_PORT" PING 2>&1)" = PONG
check bad-socket-logged grep -q "could not tell the service manager READY=1: NOTIFY_SOCKET 'relative/path' is neither an absolute path nor @name" "$TMP/s2.log"
stop_bg s2 TERM
check bad-socket-stop-exit-0 test $? -eq 0
finish
