#!/usr/bin/env bash
# test_node.sh - sluiced under the Node.js Redis clients, ioredis and node-redis, at the exact
# versions of tests/node/package-lock.json: connecting (ioredis's ready check sends INFO),
# SL.ALLOW / SL.THROTTLE / CL.THROTTLE, pipelines of 100, errors with their exact text, AUTH
# against a sluiced with --requirepass, and reconnecting after the server restarts. The cases
# are in tests/node/clients.js; this script installs the packages (npm ci, into
# tests/node/node_modules, when that is missing) and runs the servers.
# Skipped (exit 77, "Skipped" in ctest) when node or npm is not installed.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

NODE_DIR=$SLUICE_SOURCE_DIR/tests/node
need node npm redis-cli
node_packages "$NODE_DIR" || exit 1

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 3
    window: 1h
  - name: pipe
    algorithm: sliding_log
    limit: 50
    window: 1h
YAML

common=(--rules "$TMP/rules.yaml" --snapshot "" --threads 2)
start_sluiced main "${common[@]}" --config-store "$TMP/main.db" || {
    cat "$TMP/main.log"
    exit 1
}
MAIN_PORT=$RESP_PORT
PASSWORD=node-it-$RANDOM$RANDOM
start_sluiced auth "${common[@]}" --config-store "$TMP/auth.db" --requirepass "$PASSWORD" || {
    cat "$TMP/auth.log"
    exit 1
}
AUTH_PORT=$RESP_PORT

# The server clients.js asks to have restarted, on the same ports so the clients find it again.
start_sluiced restart "${common[@]}" --config-store "$TMP/restart.db" || {
    cat "$TMP/restart.log"
    exit 1
}
RESTART_PORT=$RESP_PORT
RESTART_HTTP=$HTTP_PORT
start_restartable() {
    start_sluiced_at restart "$RESTART_PORT" "$RESTART_HTTP" "${common[@]}" \
        --config-store "$TMP/restart.db"
}

mkdir -p "$TMP/handshake"
start_bg node env SLUICE_PORT="$MAIN_PORT" SLUICE_AUTH_PORT="$AUTH_PORT" \
    SLUICE_PASSWORD="$PASSWORD" SLUICE_RESTART_PORT="$RESTART_PORT" \
    SLUICE_RESTART_DIR="$TMP/handshake" timeout 240 node "$NODE_DIR/clients.js"
NODE_PID=$(cat "$TMP/node.pid")

# Serve the one restart request, then wait for node to finish; both bounded (240 s in all).
restarted=0
for ((i = 0; i < 4800; i++)); do
    if ! kill -0 "$NODE_PID" 2>/dev/null; then
        break
    fi
    if [ "$restarted" -eq 0 ] && [ -e "$TMP/handshake/restart.request" ]; then
        stop_bg restart TERM
        check restart-exit-0 test $? -eq 0
        start_restartable
        check restart-up test $? -eq 0
        touch "$TMP/handshake/restart.done"
        restarted=1
    fi
    sleep 0.05
done
wait "$NODE_PID"
node_rc=$?
cat "$TMP/node.log"
check node-cases test "$node_rc" -eq 0
check restart-requested test "$restarted" -eq 1

for name in main auth restart; do
    kill -0 "$(cat "$TMP/$name.pid")" 2>/dev/null
    check "$name-alive" test $? -eq 0
    stop_bg "$name" TERM
    check "$name-exit-0" test $? -eq 0
done
finish
