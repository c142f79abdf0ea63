#!/usr/bin/env bash
# test_server_notify.sh - sluiced speaks systemd's readiness protocol (Type=notify): with
# $NOTIFY_SOCKET set it sends READY=1 only once every port is served, and STOPPING=1 when
# SIGTERM stops it; a malformed $NOTIFY_SOCKET is logged and sluiced serves all the same.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli

# notify_listener.py reads the ports from $TMP/NAME.ports when READY=1 comes: written here,
# before each start (serve may start again on other ports)
launch_noted() { # NAME ARGS..
    echo "${SERVE_PORTS[*]}" >"$TMP/$1.ports"
    lib_launch_sluiced "$@"
}

start_bg listener python3 "$SLUICE_SOURCE_DIR/tests/integration/notify_listener.py" \
    "$TMP/notify.sock" "$TMP/notify.out" "$TMP/s1.ports"
poll 10 test -S "$TMP/notify.sock" || { echo "the listener did not bind"; exit 1; }
NOTIFY_SOCKET=$TMP/notify.sock serve s1 3 launch_noted --config-store "$TMP/store.db" \
    --snapshot "" || { cat "$TMP/s1.log"; exit 1; }

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
