#!/usr/bin/env bash
# test_store_auth.sh - the Redis store with a password: a redis-server started with requirepass
# (and an ACL user), reached with --store redis://:PASSWORD@host:port, redis://USER:PASSWORD@...
# and envoyproxy/ratelimit's REDIS_AUTH; decisions are counted in that Redis. A wrong password
# stops the start at once with an error naming AUTH (not a hang, not a later NOAUTH); a password
# Redis stops taking while sluiced runs puts the store down with "AUTH refused" and decisions
# follow on_store_error. The password is in no log line, no error, not in INFO or /metrics.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

PW='s3cret-p@ss:w/rd' # every character a URL needs encoded
PW_URL='s3cret-p%40ss%3Aw%2Frd'
start_redis auth --requirepass "$PW" || { cat "$TMP/auth.log"; exit 1; }
RP=$REDIS_PORT
rcli() { redis-cli --no-auth-warning -a "$PW" -p "$RP" "$@"; }
rcli ACL SETUSER alice on '>al1ce-pw' '~*' '&*' '+@all' >/dev/null
printf 'rules:\n  - name: api\n    algorithm: fixed_window\n    limit: 3\n    window: 1h\n    on_store_error: deny\n' >"$TMP/rules.yaml"
sc() { redis-cli -p "$1" "${@:2}" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
no_secret() { # FILE..: none holds a password
    ! grep -l -e 's3cret' -e 'al1ce-pw' "$@"
}

# 1. the right password, in the URL
start_scratch_sluiced right --rules "$TMP/rules.yaml" --store "redis://:$PW_URL@127.0.0.1:$RP" \
    --store-timeout 2s
RIGHT_PORT=$RESP_PORT
check "right password: a decision" test "$(sc "$RESP_PORT" SL.ALLOW api u1 | cut -d' ' -f1-3)" = "1 3 2"
check "right password: counted in that Redis" test "$(rcli DBSIZE)" -gt 0
sc "$RESP_PORT" INFO >"$TMP/right.info"
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" >"$TMP/right.metrics"
check "right password: in no log, INFO or /metrics" no_secret "$TMP/right.log" "$TMP/right.info" \
    "$TMP/right.metrics"

# 2. a user and a password (AUTH USER PASSWORD)
start_scratch_sluiced user --rules "$TMP/rules.yaml" --store "redis://alice:al1ce-pw@127.0.0.1:$RP" \
    --store-timeout 2s
check "user and password: a decision" test "$(sc "$RESP_PORT" SL.ALLOW api u2 | cut -d' ' -f1)" = 1
check "user and password: alice is the client" sh -c "redis-cli --no-auth-warning -a '$PW' -p $RP CLIENT LIST | grep -q 'user=alice'"
check "user: stops cleanly" stop_bg user TERM

# 3. REDIS_AUTH, as envoyproxy/ratelimit sets it: USER:PASSWORD split at the first ':' (so a
#    password holding one is given as :PASSWORD), or a PASSWORD without one
launch_env() {
    RESP_PORT=${SERVE_PORTS[0]} HTTP_PORT=${SERVE_PORTS[1]}
    start_bg "$1" env REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$RP" REDIS_AUTH="$AUTH" "$SLUICED" \
        --port "$RESP_PORT" --http-port "$HTTP_PORT" --grpc-port 0 --rules "$TMP/rules.yaml" \
        --config-store "$TMP/$1.db" --snapshot "" --store-timeout 2s
}
for AUTH in ":$PW" "alice:al1ce-pw"; do
    serve env 2 launch_env || { cat "$TMP/env.log"; exit 1; }
    check "REDIS_AUTH=${AUTH%%:*}:...: a decision" test "$(sc "$RESP_PORT" SL.ALLOW api u3 | cut -d' ' -f1)" = 1
    check "REDIS_AUTH=${AUTH%%:*}:...: in no log" no_secret "$TMP/env.log"
    check "env: stops cleanly" stop_bg env TERM
done

# 4. a wrong password: the start stops, naming AUTH (bounded by timeout: not a hang)
out=$(timeout 60 "$SLUICED" --port "$(free_port)" --http-port 0 --grpc-port 0 --rules "$TMP/rules.yaml" \
    --config-store "$TMP/wrong.db" --snapshot "" --store "redis://:wr0ng-s3cret@127.0.0.1:$RP" 2>&1)
rc=$?
echo "$out"
check "wrong password: refused" test "$rc" -ne 0 -a "$rc" -ne 124
check "wrong password: names AUTH" grep -q "AUTH refused: WRONGPASS" <<<"$out"
check "wrong password: not shown" no_secret <(echo "$out")
out=$(timeout 60 env REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$RP" REDIS_AUTH=wr0ng-s3cret \
    "$SLUICED" --port "$(free_port)" --http-port 0 --grpc-port 0 --config-store "$TMP/wrong.db" --snapshot "" 2>&1)
rc=$?
echo "$out"
check "wrong REDIS_AUTH: refused, names AUTH" sh -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'AUTH refused' <<'E'
$out
E"
check "wrong REDIS_AUTH: not shown" no_secret <(echo "$out")
out=$(timeout 60 "$SLUICED" --port 0 --store "redis://s3cret@127.0.0.1:$RP" 2>&1)
echo "$out"
check "a password without ':': refused, not shown" sh -c "grep -q \"the password goes after a ':'\" <<'E'
$out
E"
check "a password without ':': not shown" no_secret <(echo "$out")

# 5. the password changed while sluiced runs: once the connection is lost, the store stays down
#    with AUTH refused (named in the lines that say so, which are rate-limited), decisions follow
#    on_store_error (deny), and the password is not logged
rcli CONFIG SET requirepass 'n3w-pass' >/dev/null
redis-cli --no-auth-warning -a 'n3w-pass' -p "$RP" CLIENT KILL TYPE normal >/dev/null
check "password changed: on_store_error decides" poll 10 sh -c "redis-cli -p $RIGHT_PORT SL.ALLOW api u9 | head -1 | grep -qx 0"
check "password changed: a decision's error names AUTH" wait_log right "AUTH refused"
check "password changed: still in no log" no_secret "$TMP/right.log"
check "right: stops cleanly" stop_bg right TERM
finish
