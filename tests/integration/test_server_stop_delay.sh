#!/usr/bin/env bash
# test_server_stop_delay.sh - --stop-delay: after the first SIGTERM (or SIGINT) sluiced tells the
# service manager STOPPING=1 and its health checks fail (/readyz 503, /healthcheck 500, gRPC
# health NOT_SERVING) while it goes on serving decisions on new connections and old ones, with
# /healthz still 200; a second signal stops it at once (exit 0, snapshot written), and with no
# second signal it stops by itself when the delay ends. The delay in the first round is an hour,
# so the failing health checks are looked at inside a window the test controls, not a race.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

need curl redis-cli
need_grpc
grpc_stubs health.proto

# grpc_health: the gRPC health check's status name, on a new channel each time
grpc_health() {
    "$PY" - "$GRPC_PORT" "$TMP/stubs" <<'PY'
import sys
import grpc
sys.path.insert(0, sys.argv[2])
import health_pb2, health_pb2_grpc
with grpc.insecure_channel("127.0.0.1:%s" % sys.argv[1]) as ch:
    r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
    print(health_pb2.HealthCheckResponse.ServingStatus.Name(r.status))
PY
}
# http_answer PATH: "CODE BODY" (the body's first line)
http_answer() {
    local body code
    body=$(curl -s -o - -w '\n%{http_code}' "http://127.0.0.1:$HTTP_PORT$1")
    code=${body##*$'\n'}
    body=${body%$'\n'*}
    echo "$code ${body%%$'\n'*}"
}
# decision: a new RESP connection's SL.THROTTLE reply's first field (1 allowed, 0 refused)
decision() { redis-cli -p "$RESP_PORT" SL.THROTTLE "$1" gcra 100 1s | head -1; }

# ---- round 1: an hour's delay, ended by a second signal -----------------------------------------
start_noted_sluiced s1 --config-store "$TMP/s1.db" --snapshot "$TMP/s1.snapshot" --stop-delay 1h ||
    { cat "$TMP/s1.log"; exit 1; }
check ready-sent poll 10 grep -q "^READY=1" "$TMP/notify.out"
check "before: readyz 200" test "$(http_answer /readyz)" = "200 ready"
check "before: healthcheck 200" test "$(http_answer /healthcheck)" = "200 OK"
check "before: gRPC SERVING" test "$(grpc_health)" = SERVING

# a connection opened before the signal, used after it
exec 3<>"/dev/tcp/127.0.0.1/$RESP_PORT"
printf 'SL.THROTTLE old gcra 100 1s\r\n' >&3
read -r -t 10 first <&3
check "old connection served before" test "${first%$'\r'}" = "*5"

pid=$(cat "$TMP/s1.pid")
kill -TERM "$pid"
check "delay logged" wait_log s1 "SIGTERM: health checks failing, stopping in 1h (another signal stops at once)"
check "STOPPING=1 at the first signal" poll 10 grep -qx "STOPPING=1" "$TMP/notify.out"
check "during: readyz 503" test "$(http_answer /readyz)" = "503 stopping"
check "during: healthcheck 500" test "$(http_answer /healthcheck)" = "500 "
check "during: healthz 200" test "$(http_answer /healthz)" = "200 ok"
check "during: gRPC NOT_SERVING" test "$(grpc_health)" = NOT_SERVING
check "during: a new connection decides" test "$(decision new)" = 1
for ((i = 0; i < 5; i++)); do read -r -t 10 _ <&3; done # the first reply's five fields
printf 'SL.THROTTLE old gcra 100 1s\r\n' >&3
read -r -t 10 again <&3
check "during: the old connection decides" test "${again%$'\r'}" = "*5"
exec 3>&-
check "during: still running" kill -0 "$pid"
check "during: no stop begun" test "$(grep -c "stop delay over\|stopping now\|stopped" "$TMP/s1.log")" -eq 0

stop_bg s1 INT # stop_bg waits 60 s, then kills: an hour's delay not cut short would fail here
rc=$?
check "second signal: exit 0 (not killed)" test "$rc" -eq 0
check "second signal logged" grep -q "SIGINT again: stopping now" "$TMP/s1.log"
check "second signal: snapshot written" test -s "$TMP/s1.snapshot"

# ---- round 2: a short delay that runs out ----------------------------------------------------------
must_start_sluiced s2 --config-store "$TMP/s2.db" --snapshot "$TMP/s2.snapshot" --stop-delay 1s
check "round 2: decides" test "$(decision k)" = 1
stop_bg s2 INT # one signal, then a wait of at most 60 s (then a kill: 137) for the 1 s delay
rc=$?
check "round 2: stopped by itself, exit 0" test "$rc" -eq 0
check "round 2: the delay logged" grep -q "SIGINT: health checks failing, stopping in 1s" "$TMP/s2.log"
check "round 2: stopped when the delay ended" sh -c "grep -A100 'stop delay over: stopping' '$TMP/s2.log' | grep -q 'stopped'"
check "round 2: snapshot written" test -s "$TMP/s2.snapshot"
finish
