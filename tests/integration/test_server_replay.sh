#!/usr/bin/env bash
# test_server_replay.sh - POST /v1/replay is bounded and off the event loop: the admin token
# (401 without it); the probe that held a loop for a minute (a 512 KB body of "i k 1048576"
# lines against a sliding_log of limit 1048576 and window 1ms) is replayed whole now (a
# sliding_log key holds a request's cost in one entry), and when its lines are made slow it
# answers at the deadline with "stopped":"deadline"; while a replay runs, a PING on another RESP
# connection and /healthz are answered on the same and only loop, and the replay has not
# answered yet (order, not time: the replay has a deadline of a minute and, paced by the tests'
# SLUICE_TEST_REPLAY_PAUSE, work for longer); a second replay over --replay-concurrency refused
# with 503 and Retry-After; the replay stopped by SIGTERM says so; 200 keys of cost 2^20 replayed
# whole in a few KB, and 30,000 new keys stopped by a --replay-memory of 1m, with sluiced under an
# address-space limit (prlimit --as) so that a replay without a budget fails rather than takes
# the machine's memory; a client that resets its connection while its replay runs (the answer
# dropped, counted) or half-closes (the answer still written); replies on one connection in
# order around a replay. Every stop and refusal is counted in /metrics.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need curl redis-cli python3

TOKEN=replay-it-$RANDOM
AUTH=(-H "Authorization: Bearer $TOKEN")
json() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$@"; }
metric() { curl -s --max-time 10 "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
metric_is() { test "$(metric "$1" "$2")" = "$3"; }
code_of() { tail -n 1 "$1"; }

# The probe: sliding_log, limit 1048576, window 1ms, lines "i k 1048576" up to 512 KB of body.
python3 - "$TMP/probe.json" <<'PY'
import json, sys
head = {"algorithm": "sliding_log", "limit": 1048576, "window": "1ms", "log": ""}
size, lines, i = len(json.dumps(head)), [], 0
while True:
    line = "%d k 1048576\n" % i
    if size + len(line) + 1 > 512 * 1024:
        break
    lines.append(line)
    size += len(line) + 1  # "\n" is two bytes in JSON
    i += 1
head["log"] = "".join(lines)
with open(sys.argv[1], "w") as f:
    json.dump(head, f)
PY
check probe-is-512k test "$(wc -c <"$TMP/probe.json")" -le $((512 * 1024))
PROBE_LINES=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["log"].count("\n"))' "$TMP/probe.json")
# 200 keys, each charged 2^20 units of a sliding_log of limit 2^20 (once 8 MB of stamps a key)
python3 -c 'import json
print(json.dumps({"algorithm": "sliding_log", "limit": 1048576, "window": "1h",
                  "log": "".join("%d k%d 1048576\n" % (i, i) for i in range(200))}))' >"$TMP/keys.json"
# 30,000 keys, each new: more than a --replay-memory of 1m holds
python3 -c 'import json
print(json.dumps({"algorithm": "gcra", "limit": 5, "window": "1h",
                  "log": "".join("%d u%d\n" % (i, i) for i in range(30000))}))' >"$TMP/many.json"
SMALL='{"algorithm":"fixed_window","limit":2,"window":"2s","unit":"s","log":"0 u1\n0 u1\n0 u1\n1 u1\n2 u2\n"}'

# ---- one loop, a deadline of a minute: what the loop answers while a replay runs -------------
SLUICE_TEST_REPLAY_PAUSE=1ms start_sluiced long --threads 1 --config-store "$TMP/long.db" \
    --snapshot "" --admin-token "$TOKEN" --replay-timeout 60s --replay-concurrency 1 || {
    cat "$TMP/long.log"
    exit 1
}
LONG_HTTP=$HTTP_PORT
LONG_RESP=$RESP_PORT

curl -s --max-time 10 -X POST -H "Content-Type: application/json" -d "$SMALL" -D "$TMP/h401" -w '\n%{http_code}' \
    "http://127.0.0.1:$LONG_HTTP/v1/replay" >"$TMP/r401"
check no-token-401 test "$(code_of "$TMP/r401")" = 401
check no-token-says-why grep -q 'needs Authorization: Bearer' "$TMP/r401"
check no-token-www-authenticate grep -qi '^WWW-Authenticate: Bearer' "$TMP/h401"
curl -s --max-time 10 -X POST -H "Content-Type: application/json" -d "$SMALL" -H "Authorization: Bearer wrong" -w '\n%{http_code}' \
    "http://127.0.0.1:$LONG_HTTP/v1/replay" >"$TMP/r401"
check wrong-token-401 test "$(code_of "$TMP/r401")" = 401
curl -s --max-time 10 -X POST -H "Content-Type: application/json" -d "$SMALL" "${AUTH[@]}" -w '\n%{http_code}' \
    "http://127.0.0.1:$LONG_HTTP/v1/replay" >"$TMP/r200"
check token-200 test "$(code_of "$TMP/r200")" = 200
head -n 1 "$TMP/r200" >"$TMP/small.json"
check token-answer json "$TMP/small.json" 'd["complete"] and d["lines_replayed"] == 5 and d["admitted"] == 3 and d["rejected"] == 2'

# the probe with a deadline of a minute: it is still running when the checks below are done
curl -s --max-time 120 -X POST -H "Content-Type: application/json" --data-binary @"$TMP/probe.json" "${AUTH[@]}" \
    -o "$TMP/long.json" "http://127.0.0.1:$LONG_HTTP/v1/replay" &
LONG_CURL=$!
check long-running poll 20 metric_is "$LONG_HTTP" sluice_replays_running 1
check ping-while-replaying test "$(redis-cli -p "$LONG_RESP" PING)" = PONG
check healthz-while-replaying test "$(curl -s --max-time 10 "http://127.0.0.1:$LONG_HTTP/healthz")" = ok
check replay-not-answered-yet test ! -s "$TMP/long.json"
check replay-still-running kill -0 "$LONG_CURL"
check still-running-gauge metric_is "$LONG_HTTP" sluice_replays_running 1

# over --replay-concurrency: refused at once, with when to try again (the deadline, in seconds)
curl -s --max-time 10 -X POST -H "Content-Type: application/json" -d "$SMALL" "${AUTH[@]}" -D "$TMP/h503" -w '\n%{http_code}' \
    "http://127.0.0.1:$LONG_HTTP/v1/replay" >"$TMP/r503"
check busy-503 test "$(code_of "$TMP/r503")" = 503
check busy-retry-after grep -qi '^Retry-After: 60' "$TMP/h503"
check busy-says-why grep -q 'too many replays at once: 1 running' "$TMP/r503"
check busy-counted metric_is "$LONG_HTTP" 'sluice_replay_refused_total{reason="busy"}' 1
check busy-logged wait_log long 'refused: too many replays at once'

# SIGTERM: the replay stops before its next line and answers; sluiced exits 0
stop_bg long TERM
check long-exit-0 test $? -eq 0
wait "$LONG_CURL"
# (a loaded machine may not have replayed a line yet: it may still be reading the body)
check shutdown-answered json "$TMP/long.json" 'd["complete"] is False and d["stopped"] == "shutdown" and 0 <= d["lines_replayed"] < '"$PROBE_LINES"
check shutdown-logged grep -q 'stopped (shutdown)' "$TMP/long.log"

# ---- the deadline and the memory budget, under an address-space limit -----------------------
# prlimit --as keeps a replay that ignored its budget (1.6 GB for 200 keys) from taking the
# machine's memory: it would fail to allocate instead, and the counts below would differ. An
# ASan or TSan build maps terabytes of shadow memory, so it runs without the limit.
RUN=("$SLUICED")
if command -v prlimit >/dev/null &&
    ! grep -Eq '^SLUICE_(ASAN|TSAN):BOOL=ON' "$SLUICE_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    RUN=(prlimit --as=$((768 * 1024 * 1024)) "$SLUICED")
fi
printf '#!/bin/sh\nexec %s "$@"\n' "${RUN[*]}" >"$TMP/sluiced-limited"
chmod +x "$TMP/sluiced-limited"
# the deadline: the probe's lines paced (1 ms each) so that it cannot end within 1 s
SLUICE_TEST_REPLAY_PAUSE=1ms start_sluiced paced --threads 1 --config-store "$TMP/p.db" \
    --snapshot "" --admin-token "$TOKEN" --replay-timeout 1s || {
    cat "$TMP/paced.log"
    exit 1
}
curl -s --max-time 60 -X POST -H "Content-Type: application/json" --data-binary @"$TMP/probe.json" "${AUTH[@]}" -w '\n%{http_code}' \
    "http://127.0.0.1:$HTTP_PORT/v1/replay" >"$TMP/paced.out"
check paced-200 test "$(code_of "$TMP/paced.out")" = 200
head -n 1 "$TMP/paced.out" >"$TMP/paced.answer"
check paced-stopped-at-deadline json "$TMP/paced.answer" 'd["complete"] is False and d["stopped"] == "deadline" and d["lines_replayed"] < '"$PROBE_LINES"' and d["admitted"] + d["rejected"] == d["lines_replayed"] and [k["key"] for k in d["keys"]] == ["k"]'
check paced-counted metric_is "$HTTP_PORT" 'sluice_replay_stopped_total{reason="deadline"}' 1
check paced-logged wait_log paced 'stopped (deadline) after'
stop_bg paced TERM

SLUICED=$TMP/sluiced-limited start_sluiced bounded --threads 2 --config-store "$TMP/b.db" \
    --snapshot "" --admin-token "$TOKEN" --replay-timeout 30s --replay-memory 1m || {
    cat "$TMP/bounded.log"
    exit 1
}
B_HTTP=$HTTP_PORT
B_RESP=$RESP_PORT
B=http://127.0.0.1:$B_HTTP

# the probe itself, unpaced: each line's cost is one entry of the key's log, so it is replayed
# whole (within a deadline of 30 s, which it would take an hour's work to need)
curl -s --max-time 60 -X POST -H "Content-Type: application/json" --data-binary @"$TMP/probe.json" "${AUTH[@]}" -w '\n%{http_code}' \
    "$B/v1/replay" >"$TMP/probe.out"
check probe-200 test "$(code_of "$TMP/probe.out")" = 200
head -n 1 "$TMP/probe.out" >"$TMP/probe.answer"
check probe-whole json "$TMP/probe.answer" 'd["complete"] is True and d["lines_replayed"] == '"$PROBE_LINES"' and [k["key"] for k in d["keys"]] == ["k"]'

curl -s --max-time 60 -X POST -H "Content-Type: application/json" --data-binary @"$TMP/keys.json" "${AUTH[@]}" -w '\n%{http_code}' \
    "$B/v1/replay" >"$TMP/keys.out"
check costly-200 test "$(code_of "$TMP/keys.out")" = 200
head -n 1 "$TMP/keys.out" >"$TMP/keys.answer"
check costly-whole json "$TMP/keys.answer" 'd["complete"] is True and d["lines_replayed"] == 200 and d["admitted"] == 200 and len(d["keys"]) == 200'
curl -s --max-time 60 -X POST -H "Content-Type: application/json" --data-binary @"$TMP/many.json" "${AUTH[@]}" -w '\n%{http_code}' \
    "$B/v1/replay" >"$TMP/many.out"
check memory-200 test "$(code_of "$TMP/many.out")" = 200
head -n 1 "$TMP/many.out" >"$TMP/many.answer"
check memory-stopped json "$TMP/many.answer" 'd["complete"] is False and d["stopped"] == "memory" and 0 < d["lines_replayed"] < 30000 and d["admitted"] == d["lines_replayed"]'
check memory-counted metric_is "$B_HTTP" 'sluice_replay_stopped_total{reason="memory"}' 1
check memory-alive test "$(redis-cli -p "$B_RESP" PING)" = PONG

# replies on one connection stay in order around a replay: replay, then healthz, sent at once
python3 - "$B_HTTP" "$TOKEN" "$SMALL" >"$TMP/pipelined.txt" <<'PY'
import socket, sys
port, token, body = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(b"POST /v1/replay HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer " + token.encode() +
          b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body +
          b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode())
PY
order() {
    python3 - "$TMP/pipelined.txt" <<'PY'
import sys
t = open(sys.argv[1], newline="").read()
replay, health = t.find('"complete":true'), t.find("\r\n\r\nok\n")
sys.exit(0 if 0 <= replay < health and t.count("HTTP/1.1 200") == 2 else 1)
PY
}
check pipelined-in-order order

# a client that leaves while its replay runs, once /metrics shows the replay running. With a
# FIN (its side closed, as a client that sent its requests may) the answer is still written when
# it comes; with a reset the connection goes at once, and the answer is dropped and counted. The
# probe is paced (1 ms a line) and stopped by a 3 s deadline, so that it is seen running however
# fast or slow the machine, and ends.
stop_bg bounded TERM
check bounded-exit-0 test $? -eq 0
SLUICE_TEST_REPLAY_PAUSE=1ms start_sluiced leaving --threads 2 --config-store "$TMP/l.db" \
    --snapshot "" --admin-token "$TOKEN" --replay-timeout 3s || {
    cat "$TMP/leaving.log"
    exit 1
}
B_HTTP=$HTTP_PORT
B_RESP=$RESP_PORT
B=http://127.0.0.1:$B_HTTP
leave_early() { # fin|rst
    python3 - "$B_HTTP" "$TOKEN" "$TMP/probe.json" "$1" <<'PY'
import socket, struct, sys, time, urllib.request
port, token, body, how = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read(), sys.argv[4]
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(b"POST /v1/replay HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer " + token.encode() +
          b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
for _ in range(400):  # at most 20 s
    m = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    if "\nsluice_replays_running 1\n" in m:
        if how == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
}
check fin-while-running leave_early fin
check fin-gauge-back poll 15 metric_is "$B_HTTP" sluice_replays_running 0
check fin-answer-written metric_is "$B_HTTP" sluice_replay_abandoned_total 0
check fin-alive test "$(redis-cli -p "$B_RESP" PING)" = PONG
check rst-while-running leave_early rst
check rst-counted poll 15 metric_is "$B_HTTP" sluice_replay_abandoned_total 1
check rst-logged wait_log leaving 'replay answer dropped'
check rst-gauge-back poll 5 metric_is "$B_HTTP" sluice_replays_running 0
check rst-alive test "$(redis-cli -p "$B_RESP" PING)" = PONG
curl -s --max-time 10 -X POST -H "Content-Type: application/json" -d "$SMALL" "${AUTH[@]}" "$B/v1/replay" >"$TMP/after.json"
check rst-then-replay json "$TMP/after.json" 'd["complete"] and d["admitted"] == 3'

stop_bg leaving TERM
check leaving-exit-0 test $? -eq 0
finish
