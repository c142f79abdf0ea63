#!/usr/bin/env bash
# test_server_redis.sh - sluiced with its state in a real redis-server (--store redis://):
# with the sluice.so module and with the Lua scripts (a Redis without the module), the same
# decisions as the memory store; two sluiced sharing one Redis share every key's limit; the
# over-limit cache answers without a round trip; when Redis stops or stalls, decisions follow
# each rule's on_store_error within the decision timeout, and recover when it is back.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 3
    window: 1h
    on_store_error: allow
    overrides:
      - key: gold
        limit: 5
  - name: strict
    algorithm: sliding_log
    limit: 2
    window: 1h
    on_store_error: deny
  - name: paced
    algorithm: gcra
    limit: 2
    window: 1h
    burst: 1
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
sc() { redis-cli -p "$1" "${@:2}" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
# redis_calls PORT: commands Redis has run for decisions (the module's or the scripts')
redis_calls() {
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[=,:]' '/^cmdstat_(sl\.throttle|evalsha|eval):/ {s += $3} END {print s + 0}'
}
# in_log NAME TEXT: until NAME's log has a line with TEXT (a line written after the ports open)
in_log() {
    local i
    for ((i = 0; i < 200; i++)); do
        grep -qF -- "$2" "$TMP/$1.log" && return 0
        sleep 0.05
    done
    echo "  no '$2' in $1's log"
    return 1
}
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {v = $2} END {print v + 0}'; }
export PYTHONPATH=$SLUICE_SOURCE_DIR/tests/integration # resp_client.py

# run_suite MODE REDIS_PORT SLUICED_RESP SLUICED_HTTP: the decisions every store must give
run_suite() {
    local mode=$1 rp=$2 p=$3 hp=$4
    check "$mode: allow 1" matches "$(sc "$p" SL.ALLOW api u1)" '^1 3 2 0 [0-9]+$'
    check "$mode: allow 2" matches "$(sc "$p" SL.ALLOW api u1)" '^1 3 1 0 '
    check "$mode: allow 3" matches "$(sc "$p" SL.ALLOW api u1)" '^1 3 0 0 '
    check "$mode: denied" matches "$(sc "$p" SL.ALLOW api u1)" '^0 3 0 [1-9][0-9]* '
    check "$mode: peek" matches "$(sc "$p" SL.PEEK api u2)" '^1 3 3 0 0$'
    check "$mode: override" matches "$(sc "$p" SL.ALLOW api gold)" '^1 5 4 0 '
    check "$mode: sliding_log" matches "$(sc "$p" SL.ALLOW strict s1)" '^1 2 1 0 '
    check "$mode: gcra" matches "$(sc "$p" SL.ALLOW paced g1)" '^1 2 1 0 '
    check "$mode: cost above" matches "$(sc "$p" SL.ALLOW api u3 COST 4)" \
        "^ERR cost 4 exceeds what rule 'api' can ever admit \(3 per window\)$"
    check "$mode: throttle" matches "$(sc "$p" SL.THROTTLE t1 gcra 5 1000)" '^1 6 5 0 '
    check "$mode: cl.throttle" matches "$(sc "$p" CL.THROTTLE c1 5 10 60)" '^0 6 5 -1 6$'
    check "$mode: allowall" matches "$(sc "$p" SL.ALLOWALL api a1 strict a1)" '^1 2 1 0 '
    check "$mode: allowall denied" matches "$(sc "$p" SL.ALLOWALL api a1 strict a1 COST 2)" '^0 2 1 [1-9]'
    check "$mode: allowall charged nothing" matches "$(sc "$p" SL.ALLOW api a1)" '^1 3 1 0 '
    # one client key under several rules: one cluster slot, so with the module one atomic step
    check "$mode: allowall one key" matches "$(sc "$p" SL.ALLOWALL api one strict one paced one)" '^1 2 1 0 '
    check "$mode: reset" matches "$(sc "$p" SL.RESET api u1)" '^OK$'
    check "$mode: after reset" matches "$(sc "$p" SL.ALLOW api u1)" '^1 3 2 0 '
    check "$mode: state in redis" matches "$(sc "$rp" KEYS 'sl:{u1}:api:*')" '^sl:\{u1\}:api:[0-9a-f]{8}$'
    local key
    key=$(sc "$rp" KEYS 'sl:{u1}:api:*')
    check "$mode: expires" matches "$(sc "$rp" PTTL "$key")" '^[1-9][0-9]*$'
    check "$mode: http 204" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hp/v1/auth/api?key=h1")" = 204
    # pipelined: 20 requests for one key in one write, replies in order: 3 admitted, then denied
    local out
    out=$(for i in $(seq 1 20); do printf 'SL.ALLOW api pipe\r\n'; done |
        timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$p"'; cat >&3; head -n 120 <&3' | tr -d '\r' |
        awk 'NR % 6 == 2' | paste -sd' ' -)
    check "$mode: pipelined in order" test "$out" = ":1 :1 :1 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0 :0"
    # a key known to be over its limit is answered without a round trip: refused a unit by
    # Redis with none left, it is refused 10 times more from the cache of the loop that holds
    # the connection, with no Redis call and 10 cache hits
    check "$mode: over-limit cache" over_limit_cache "$rp" "$p" "$hp"
}

# over_limit_cache REDIS_PORT RESP_PORT HTTP_PORT: one connection (one loop) decides
# "api cache COST 3" (admitted, none of 3 left), then "api cache" 11 times: refused by Redis,
# then 10 refusals that make no Redis call and count 10 cache hits.
over_limit_cache() {
    python3 - "$@" <<'PY'
import sys, urllib.request
from resp_client import Conn
rp, p, hp = (int(a) for a in sys.argv[1:])
redis, sluiced = Conn(rp), Conn(p)
def calls():
    info = redis.call("INFO", "commandstats").decode()
    return sum(int(l.split("calls=")[1].split(",")[0]) for l in info.split("\r\n")
               if l.split(":")[0] in ("cmdstat_sl.throttle", "cmdstat_evalsha", "cmdstat_eval"))
def hits():
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % hp, timeout=10).read().decode()
    return int([l for l in text.splitlines()
                if l.startswith("sluice_redis_cache_hits_total ")][0].split()[1])
first = sluiced.call("SL.ALLOW", "api", "cache", "COST", 3)[:3]
refused = sluiced.call("SL.ALLOW", "api", "cache")[:3]
calls0, hits0 = calls(), hits()
again = [sluiced.call("SL.ALLOW", "api", "cache")[:3] for _ in range(10)]
calls1, hits1 = calls(), hits()
ok = (first == [1, 3, 0] and refused == [0, 3, 0] and all(a == [0, 3, 0] for a in again)
      and calls1 == calls0 and hits1 - hits0 == 10)
if not ok:
    print("  first %r, refused %r, then %r; Redis calls %d -> %d, cache hits %d -> %d"
          % (first, refused, again, calls0, calls1, hits0, hits1))
sys.exit(0 if ok else 1)
PY
}

# --- with the module
start_redis redis --loadmodule "$MODULE" || { cat "$TMP/redis.log"; exit 1; }
RP=$REDIS_PORT
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" \
    --store "redis://127.0.0.1:$RP" --store-timeout 2s || { cat "$TMP/s1.log"; exit 1; }
P1=$RESP_PORT H1=$HTTP_PORT
check module-detected in_log s1 "request store redis (sluice.so module)"
run_suite module "$RP" "$P1" "$H1"
# with the module, every SL.ALLOWALL above was one EVAL (one server: always one step)
check module-allowall-atomic test "$(redis-cli -p "$RP" INFO commandstats | tr -d '\r' |
    awk -F'[=,:]' '/^cmdstat_eval:/ {print $3}')" -ge 3

# --- a second sluiced on the same Redis shares every key's limit
start_sluiced s2 --config-store "$TMP/s.db" --snapshot "" --store "redis://127.0.0.1:$RP" \
    --store-timeout 2s ||
    { cat "$TMP/s2.log"; exit 1; }
P2=$RESP_PORT
check shared-1 matches "$(sc "$P1" SL.ALLOW strict both)" '^1 2 1 0 '
check shared-2 matches "$(sc "$P2" SL.ALLOW strict both)" '^1 2 0 0 '
check shared-3 matches "$(sc "$P1" SL.ALLOW strict both)" '^0 2 0 [1-9]'
stop_bg s2 TERM

# --- a client that half-closes after pipelining gets every answer, those waiting on Redis too
halfclose_replies() { # PORT: sends 40 SL.THROTTLE, shuts its side, counts the replies until EOF
    python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
keys = [b"hc:%d" % i for i in range(40)]
s.sendall(b"".join(b"*5\r\n$11\r\nSL.THROTTLE\r\n$%d\r\n%s\r\n$4\r\ngcra\r\n$2\r\n10\r\n"
                   b"$4\r\n1000\r\n" % (len(k), k) for k in keys))
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.count(b"*5\r\n"))
PY
}
check halfclose-all-answered test "$(halfclose_replies "$P1")" = 40

# --- SIGTERM while a decision waits on Redis (paused until the signal has been taken): the
# answer is still Redis's, then exit 0. Stopping waits up to 3 s for Redis's answers. (CLIENT
# PAUSE WRITE holds SL.THROTTLE and EVALSHA but lets CLIENT UNPAUSE through; PAUSE ALL would
# hold the UNPAUSE too.)
start_sluiced s4 --config-store "$TMP/s.db" --snapshot "" --store "redis://127.0.0.1:$RP" \
    --store-timeout 10s || { cat "$TMP/s4.log"; exit 1; }
H4=$HTTP_PORT
redis-cli -p "$RP" CLIENT PAUSE 30000 WRITE >/dev/null
sc "$RESP_PORT" SL.ALLOW strict term >"$TMP/term.out" &
asker=$!
sent_to_redis() { [ "$(metric "$1" sluice_redis_decisions_total)" -ge "$2" ]; }
check term-sent poll 10 sent_to_redis "$H4" 1
kill -TERM "$(cat "$TMP/s4.pid")"
check term-taken poll 10 grep -q "SIGTERM: stopping" "$TMP/s4.log"
check term-while-waiting kill -0 "$asker"
redis-cli -p "$RP" CLIENT UNPAUSE >/dev/null
stop_bg s4 0
check term-exit-0 test $? -eq 0
wait $asker
check term-answered-by-redis matches "$(cat "$TMP/term.out")" '^1 2 1 0 '

# --- Redis stalls (CLIENT PAUSE until lifted): answers come at the deadline, per
# on_store_error (a sluiced with a deadline of 50 ms; the others wait long enough for any
# healthy answer on a busy machine)
start_sluiced s5 --config-store "$TMP/s.db" --snapshot "" --store "redis://127.0.0.1:$RP" \
    --store-timeout 50ms || { cat "$TMP/s5.log"; exit 1; }
redis-cli -p "$RP" CLIENT PAUSE 30000 WRITE >/dev/null
check stall-deny matches "$(sc "$RESP_PORT" SL.ALLOW strict stall)" '^0 2 0 [1-9]'
check stall-allow matches "$(sc "$RESP_PORT" SL.ALLOW api stall)" '^1 3 0 0 '
check stall-timeouts-counted test "$(metric "$HTTP_PORT" sluice_redis_timeouts_total)" -ge 2
redis-cli -p "$RP" CLIENT UNPAUSE >/dev/null
stop_bg s5 TERM
check s5-exit-0 test $? -eq 0

# --- Redis stops: on_store_error, counted, no crash; back: decisions recover
stop_bg redis KILL
check down-deny matches "$(sc "$P1" SL.ALLOW strict down)" '^0 2 0 [1-9]'
check down-allow matches "$(sc "$P1" SL.ALLOW api down)" '^1 3 0 0 '
check down-counted matches "$(curl -s "http://127.0.0.1:$H1/metrics")" 'sluice_store_errors_total\{rule="strict"\} [1-9]'
check down-alive matches "$(sc "$P1" PING)" '^PONG$'
start_redis_at redis2 "$RP" --loadmodule "$MODULE" || { cat "$TMP/redis2.log"; exit 1; }
# (each loop reconnects after a backoff of at most 1 s)
back() { [[ "$(sc "$P1" SL.ALLOW strict "back$RANDOM")" =~ ^1\ 2\ 1\ 0 ]]; }
check recovers poll 20 back
stop_bg s1 TERM
check s1-exit-0 test $? -eq 0

# --- with the Lua scripts (a Redis without the module)
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
LP=$REDIS_PORT
start_sluiced s3 --rules "$TMP/rules.yaml" --config-store "$TMP/s3.db" --snapshot "" \
    --store "redis://127.0.0.1:$LP" --store-timeout 2s || { cat "$TMP/s3.log"; exit 1; }
check lua-detected in_log s3 "request store redis (Lua scripts)"
run_suite lua "$LP" "$RESP_PORT" "$HTTP_PORT"
check lua-noscript-handled test "$(metric "$HTTP_PORT" sluice_redis_noscript_total)" -ge 1
stop_bg s3 TERM
check s3-exit-0 test $? -eq 0
finish
