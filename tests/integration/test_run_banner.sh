#!/usr/bin/env bash
# test_run_banner.sh - what `make run` prints is what a new user types: scripts/run.sh starts
# sluiced on the ports SLUICE_PORT, SLUICE_HTTP_PORT and SLUICE_GRPC_PORT name, its banner names
# those ports and the console's address, and every command the banner offers to try runs as
# printed and answers as its comment says (SL.ALLOW's reply, the login route's 204, the metrics,
# the CLI); Ctrl-C (SIGINT) stops it with status 0 and the snapshot the banner promises.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli curl

# run.sh reads examples/rules.yaml and writes run/ in its working directory: a scratch one
mkdir -p "$TMP/work"
ln -s "$SLUICE_SOURCE_DIR/examples" "$TMP/work/examples"

launch_run() { # NAME: run.sh on SERVE_PORTS, from the scratch directory
    RESP_PORT=${SERVE_PORTS[0]} HTTP_PORT=${SERVE_PORTS[1]} GRPC_PORT=${SERVE_PORTS[2]}
    (cd "$TMP/work" && SLUICE_PORT=$RESP_PORT SLUICE_HTTP_PORT=$HTTP_PORT \
        SLUICE_GRPC_PORT=$GRPC_PORT exec bash "$SLUICE_SOURCE_DIR/scripts/run.sh" \
        "$SLUICE_BUILD_DIR") >"$TMP/$1.log" 2>&1 &
    echo $! >"$TMP/$1.pid"
    LIB_PIDS+=("$!")
}
serve run 3 launch_run || { cat "$TMP/run.log"; exit 1; }
log=$TMP/run.log

check "banner: RESP port" grep -q "RESP  port $RESP_PORT   (SLUICE_PORT)" "$log"
check "banner: HTTP port" grep -q "HTTP  port $HTTP_PORT   (SLUICE_HTTP_PORT)" "$log"
check "banner: gRPC port" grep -q "gRPC  port $GRPC_PORT   (SLUICE_GRPC_PORT)" "$log"
check "banner: the console's address answers" \
    curl -sf -o /dev/null "$(grep -o "http://127.0.0.1:$HTTP_PORT/ui/" "$log" | head -1)"

# the commands the banner offers, as printed (a comment after them dropped)
grep -E '^  (redis-cli|curl|/)' "$log" | sed 's/  *#.*$//' >"$TMP/commands"
check "banner: nine commands to try" test "$(wc -l <"$TMP/commands")" -eq 9
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    (cd "$TMP/work" && bash -c "$cmd") >"$TMP/out$n" 2>&1
    check "command $n runs: $cmd" test $? -eq 0
    check "command $n: no error reply" sh -c "! grep -q '^(error)\|^ERR' '$TMP/out$n'"
done <"$TMP/commands"
# what the comments promise
check "SL.ALLOW: allowed, limit 200" test "$(head -2 "$TMP/out1" | tr '\n' ' ')" = "1 200 "
check "SL.ALLOW COST 50: allowed" test "$(head -1 "$TMP/out2")" = 1
check "SL.THROTTLE: allowed" test "$(head -1 "$TMP/out3")" = 1
check "CL.THROTTLE: redis-cell's 0 for allowed" test "$(head -1 "$TMP/out4")" = 0
check "SL.RULE LIST names api" grep -qx "api" "$TMP/out5"
check "POST /v1/allow: 200" grep -q "^HTTP/1.1 200" "$TMP/out6"
check "login route: 204 until the limit" grep -q "^HTTP/1.1 204" "$TMP/out7"
check "metrics: sluice_decisions" grep -q "^sluice_decisions" "$TMP/out8"

stop_bg run INT
check "Ctrl-C: exit 0" test $? -eq 0
check "Ctrl-C: the snapshot the banner names" test -s "$TMP/work/run/sluice.snapshot"
finish
