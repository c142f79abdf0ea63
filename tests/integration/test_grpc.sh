#!/usr/bin/env bash
# test_grpc.sh - sluiced's gRPC port with a real client: Python's grpcio, with stubs generated
# from sluice's .proto files by grpc_tools at test time. The health check; ShouldRateLimit with
# limits, statuses and the time until reset; descriptors no rule applies to; all or nothing
# across descriptors; hits_addend as the cost; a rule's override for one list of values; a
# descriptor's own limit; shadow mode; every error status (malformed protobuf, an unknown
# method, an oversized message); HTTP/2 misuse (not HTTP/2, a broken frame, a header list over
# 16 KiB, a flood of streams, bodies held open past the connection's cap, a window overflow)
# answering or resetting the stream or closing only that connection; the calls counted in
# /metrics. Then the same decisions with the Redis request store (Lua scripts, and sluice.so),
# where every answer comes after the batch that read its call. The driver is grpc_client.py.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

need curl redis-server
need_grpc
grpc_stubs rls.proto health.proto

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: edge.remote_address
    algorithm: fixed_window
    limit: 3
    window: 1m
  - name: edge.wide
    algorithm: sliding_log
    limit: 10
    window: 1h
  - name: edge.narrow
    algorithm: sliding_log
    limit: 1
    window: 1h
  - name: edge.bulk
    algorithm: sliding_log
    limit: 10
    window: 1h
  - name: edge.authenticated.path
    algorithm: sliding_log
    limit: 3
    window: 1h
    overrides:
      - key: "false|/login"
        limit: 1
  - name: edge.dry
    algorithm: sliding_log
    limit: 1
    window: 1h
    shadow: true
YAML

start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" \
    --threads 2 --max-request-size 2k || { cat "$TMP/s1.log"; exit 1; }

client() {
    "$PY" "$SLUICE_SOURCE_DIR/tests/integration/grpc_client.py" "$GRPC_PORT" "$TMP/stubs" "$@"
}
MEM_CASES=(health limit unknown all_or_nothing hits key_override never_beside empty_value override
    shadow errors misuse h2_abuse)
out=$(client "${MEM_CASES[@]}" 2>&1)
echo "$out"
for c in "${MEM_CASES[@]}"; do
    check "$c" grep -qx "ok $c" <<<"$out"
done

# the calls are counted under their protocol
metric=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
    awk '$1 == "sluice_requests_total{protocol=\"grpc\"}" {print $2}')
check "metrics count the calls" test "${metric:-0}" -ge 20

# the server is still up and answering after all of it
check "still serving" client health
check "s1 stops cleanly" stop_bg s1 TERM # under ASan: no leak at exit

# RateLimit headers for Envoy to add to its responses, when asked for
start_sluiced hdr --rules "$TMP/rules.yaml" --config-store "$TMP/hdr.db" --snapshot "" \
    --grpc-ratelimit-headers || { cat "$TMP/hdr.log"; exit 1; }
check "ratelimit headers" client headers
check "hdr stops cleanly" stop_bg hdr TERM

# the bodies and header fields calls hold count against --max-input-buffers
start_sluiced cap --config-store "$TMP/cap.db" --snapshot "" --max-input-buffers 300k \
    --max-request-size 64k --threads 1 || { cat "$TMP/cap.log"; exit 1; }
check "held bytes under the input cap" env SLUICE_HTTP_PORT="$HTTP_PORT" "$PY" \
    "$SLUICE_SOURCE_DIR/tests/integration/grpc_client.py" "$GRPC_PORT" "$TMP/stubs" held_cap
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
check "evictions counted" test "$(metric sluice_evicted_clients_total)" -ge 2
check "cap stops cleanly" stop_bg cap TERM

# a client refused at --max-clients hears it in HTTP/2
start_sluiced full --config-store "$TMP/full.db" --snapshot "" --max-clients 1 ||
    { cat "$TMP/full.log"; exit 1; }
check "refused at max-clients" client full
check "full stops cleanly" stop_bg full TERM

# the Redis store: answers come later, from Redis's replies (the Lua scripts, then sluice.so)
ASYNC_CASES=(health limit unknown all_or_nothing hits key_override never_beside empty_value override
    shadow errors misuse)
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/store2.db" --snapshot "" \
    --threads 2 --max-request-size 2k --store "redis://127.0.0.1:$REDIS_PORT" \
    --store-timeout 2s || { cat "$TMP/s2.log"; exit 1; }
out=$(client "${ASYNC_CASES[@]}" 2>&1)
echo "$out"
for c in "${ASYNC_CASES[@]}"; do
    check "lua $c" grep -qx "ok $c" <<<"$out"
done
# calls abandoned while Redis holds their decisions (paused for a second): their answers come
# to a reset stream and a closed connection
redis-cli -p "$REDIS_PORT" CLIENT PAUSE 1000 ALL >/dev/null
check "abandon" client abandon
check "redis answers again" poll 5 redis-cli -p "$REDIS_PORT" PING
check "served after the abandoned calls" client health abandoned_charged
# stopped while a call waits on Redis: GOAWAY, then the call's answer, then the close
redis-cli -p "$REDIS_PORT" CLIENT PAUSE 1000 ALL >/dev/null
check "stopping answers what it read" env SLUICED_PID="$(cat "$TMP/s2.pid")" "$PY" \
    "$SLUICE_SOURCE_DIR/tests/integration/grpc_client.py" "$GRPC_PORT" "$TMP/stubs" stop_answers
stopped_with() { stop_bg "$1" TERM; local rc=$?; [ "$rc" -eq 0 ] || echo "  exit status $rc"; return "$rc"; }
fails_before=$FAILS
check "s2 stops cleanly" stopped_with s2
[ "$FAILS" -eq "$fails_before" ] || tail -n 20 "$TMP/s2.log" # why, when it did not

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then # redis-server cannot load a module built with TSan
    echo "sluice.so is built with TSan: its part runs in the plain and ASan builds"
    finish
fi
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }
start_sluiced s3 --rules "$TMP/rules.yaml" --config-store "$TMP/store3.db" --snapshot "" \
    --threads 2 --max-request-size 2k --store "redis://127.0.0.1:$REDIS_PORT" \
    --store-timeout 2s || { cat "$TMP/s3.log"; exit 1; }
out=$(client "${ASYNC_CASES[@]}" 2>&1)
echo "$out"
for c in "${ASYNC_CASES[@]}"; do
    check "module $c" grep -qx "ok $c" <<<"$out"
done
check "s3 stops cleanly" stop_bg s3 TERM
finish
