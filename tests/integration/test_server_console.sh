#!/usr/bin/env bash
# test_server_console.sh - what the console reads, where the features meet: SL.TOP and
# GET /v1/rules/{name}/top and GET /v1/stats over two loops (--threads 2), a rule changed then
# deleted, a shadow rule's shadow denials, inline rules (not shown), keys that need escaping in
# JSON, the stats event stream (its comment first, events each second, the cap on streams, a
# client that stops reading, SIGTERM), POST /v1/replay against `sluice replay --summary`, and
# all of it without the admin token but the replay, which needs it.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need curl redis-cli redis-benchmark python3

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: gcra
    limit: 5
    window: 1s
  - name: dry
    algorithm: sliding_log
    limit: 1
    window: 1h
    shadow: true
YAML
# many rules with long names: each stream event is then large, so a client that does not read
# fills its socket's buffers within seconds
python3 - "$TMP/rules.yaml" <<'PY'
import sys
with open(sys.argv[1], "a") as f:
    for i in range(3000):
        f.write("  - name: filler-%s-%04d\n    algorithm: fixed_window\n    limit: 1\n"
                "    window: 1h\n" % ("x" * 50, i))
PY

TOKEN=s3cret
start_sluiced srv --threads 2 --rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" \
    --snapshot "" --admin-token "$TOKEN" || { cat "$TMP/srv.log"; exit 1; }
BASE=http://127.0.0.1:$HTTP_PORT
RC=(redis-cli -p "$RESP_PORT")

get() { curl -s --max-time 10 "$@"; }
# json FILE EXPR: evaluates a Python expression over the parsed JSON d; fails on invalid JSON
json() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$@"; }

# --- top keys over two loops: 8 connections (spread over both loops) on one hot key
redis-benchmark -p "$RESP_PORT" -c 8 -n 2000 SL.ALLOW api hot >/dev/null
for k in a b c; do "${RC[@]}" SL.ALLOW api "$k" >/dev/null; done
"${RC[@]}" SL.TOP api >"$TMP/top.txt"
check top-resp-first test "$(head -n 1 "$TMP/top.txt")" = hot
check top-resp-count test "$(sed -n 2p "$TMP/top.txt")" = 2000
check top-resp-error test "$(sed -n 3p "$TMP/top.txt")" = 0
check top-resp-all test "$(wc -l <"$TMP/top.txt")" = 12
"${RC[@]}" SL.TOP api 1 DENIED >"$TMP/top.txt"
check top-resp-denied test "$(head -n 1 "$TMP/top.txt")" = hot
check top-resp-unknown sh -c "${RC[*]} SL.TOP nope | grep -q \"unknown rule 'nope'\""
check top-resp-n-range sh -c "${RC[*]} SL.TOP api 101 | grep -q 'from 1 to 100'"
# peeks decide nothing: SL.PEEK, COST 0 over RESP and HTTP leave the counts as they were
"${RC[@]}" SL.PEEK api hot >/dev/null
"${RC[@]}" SL.ALLOW api hot COST 0 >/dev/null
get -X POST -H 'Content-Type: application/json' -d '{"rule":"api","key":"hot","cost":0}' "$BASE/v1/allow" >/dev/null
check peeks-not-counted test "$("${RC[@]}" SL.TOP api 1 | sed -n 2p)" = 2000
get "$BASE/v1/rules/api/top?n=2" >"$TMP/top.json"
check top-http json "$TMP/top.json" 'd["rule"] == "api" and d["by"] == "decisions" and d["window_s"] == 60 and [k["key"] for k in d["keys"]][0] == "hot" and d["keys"][0]["count"] == 2000 and len(d["keys"]) == 2'
get "$BASE/v1/rules/api/top?by=denied" >"$TMP/top.json"
check top-http-denied json "$TMP/top.json" 'd["by"] == "denied" and d["keys"][0]["key"] == "hot"'
check top-http-bad-n sh -c "curl -s -o /dev/null -w '%{http_code}' '$BASE/v1/rules/api/top?n=0' | grep -q 400"
check top-http-unknown sh -c "curl -s -o /dev/null -w '%{http_code}' '$BASE/v1/rules/nope/top' | grep -q 404"

# --- per-second rates, summed over the loops: every decision is counted once the second ends
stats_sum() { # RULE FIELD: the sum of its series
    get "$BASE/v1/stats?seconds=120" | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(sum(sum(r[sys.argv[2]]) for r in d["rules"] if r["name"] == sys.argv[1]))' "$1" "$2"
}
decided() { test "$(($(stats_sum api allowed) + $(stats_sum api denied)))" = "$1"; }
check stats-sum poll 5 decided 2003
get "$BASE/v1/stats?seconds=5" >"$TMP/stats.json"
check stats-shape json "$TMP/stats.json" 'd["interval_ms"] == 1000 and d["seconds"] == 5 and d["end_ms"] % 1000 == 0 and all(len(r["allowed"]) == 5 for r in d["rules"]) and [r for r in d["rules"] if r["name"] == "api"][0]["algorithm"] == "gcra"'
check stats-bad-seconds sh -c "curl -s -o /dev/null -w '%{http_code}' '$BASE/v1/stats?seconds=901' | grep -q 400"

# --- a shadow rule counts shadow denials, and its top by denials lists the key
"${RC[@]}" SL.ALLOW dry k1 >/dev/null
"${RC[@]}" SL.ALLOW dry k1 >/dev/null
shadowed() { test "$(stats_sum dry shadow_denied)" = 1 && test "$(stats_sum dry denied)" = 0; }
check shadow-denied poll 5 shadowed
check shadow-top test "$("${RC[@]}" SL.TOP dry 1 DENIED | head -n 1)" = k1

# --- inline rules are not shown
"${RC[@]}" SL.THROTTLE ik gcra 1 1000 >/dev/null
get "$BASE/v1/stats?seconds=1" >"$TMP/stats.json"
check inline-not-in-stats json "$TMP/stats.json" 'not any(r["name"].startswith("inline") for r in d["rules"])'

# --- keys that need escaping come out as valid JSON, their bytes intact
printf 'SL.ALLOW api "<script>alert(1)</script>"\nSL.ALLOW api "q\\"uote"\nSL.ALLOW api "caf\\xc3\\xa9"\nSL.ALLOW api "raw\\xff"\n' |
    "${RC[@]}" >/dev/null
get "$BASE/v1/rules/api/top?n=100" >"$TMP/top.json"
check escape-script json "$TMP/top.json" 'any(k["key"] == "<script>alert(1)</script>" for k in d["keys"])'
check escape-quote json "$TMP/top.json" "any(k['key'] == 'q\"uote' for k in d['keys'])"
check escape-utf8 json "$TMP/top.json" 'any(k["key"] == "caf\u00e9" for k in d["keys"])'
check escape-bytes json "$TMP/top.json" 'any(k.get("key_hex") == "726177ff" for k in d["keys"])'

# --- a rule changed keeps its rates and top keys; deleted, they go
AUTH=(-H "Authorization: Bearer $TOKEN")
get "${AUTH[@]}" -X PUT "$BASE/v1/rules/api" -H 'Content-Type: application/json' -d '{"algorithm":"gcra","limit":50,"window":"1s"}' >/dev/null
check changed-top-follows test "$("${RC[@]}" SL.TOP api 1 | head -n 1)" = hot
check changed-stats-follow poll 5 decided 2007
get "$BASE/v1/stats?seconds=1" >"$TMP/stats.json"
check changed-stats-numbers json "$TMP/stats.json" '[r for r in d["rules"] if r["name"] == "api"][0]["limit"] == 50'
get "${AUTH[@]}" -X DELETE -H 'X-Sluice-Client: test' "$BASE/v1/rules/api" >/dev/null
check deleted-top-404 sh -c "curl -s -o /dev/null -w '%{http_code}' '$BASE/v1/rules/api/top' | grep -q 404"
get "$BASE/v1/stats?seconds=1" >"$TMP/stats.json"
check deleted-not-in-stats json "$TMP/stats.json" 'not any(r["name"] == "api" for r in d["rules"])'
get "${AUTH[@]}" -X PUT "$BASE/v1/rules/api" -H 'Content-Type: application/json' -d '{"algorithm":"gcra","limit":5,"window":"1s"}' >/dev/null
check recreated-top-empty test "$("${RC[@]}" SL.TOP api | wc -c)" -le 1

# --- replay: the counts of sluice replay --summary; the admin token needed
python3 - "$TMP/traffic.log" <<'PY'
import random, sys
r = random.Random(7)
t = 0
with open(sys.argv[1], "w") as f:
    for i in range(5000):
        t += r.randint(0, 4)
        f.write("%d %s %d\n" % (t, r.choice(["u1", "u2", "u3", "<b>", "q\"k"]), r.choice([1, 1, 2])))
PY
"$SLUICE" replay --algorithm gcra --limit 5 --window 1s --burst 2 --summary "$TMP/traffic.log" |
    grep '^# ' | grep -v '^# summary' | sort >"$TMP/cli.txt"
python3 -c 'import json, sys
print(json.dumps({"algorithm": "gcra", "limit": 5, "window": "1s", "burst": 2, "unit": "ms",
                  "log": open(sys.argv[1]).read()}))' "$TMP/traffic.log" >"$TMP/body.json"
check replay-needs-token sh -c "curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @'$TMP/body.json' '$BASE/v1/replay' | grep -q 401"
get "${AUTH[@]}" -X POST -H 'Content-Type: application/json' --data-binary @"$TMP/body.json" "$BASE/v1/replay" >"$TMP/replay.json"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k in d["keys"]:
    print("# %s admitted=%d rejected=%d" % (k["key"], k["admitted"], k["rejected"]))
print("# total admitted=%d rejected=%d" % (d["admitted"], d["rejected"]))' "$TMP/replay.json" |
    sort >"$TMP/server.txt"
check replay-same-counts diff "$TMP/cli.txt" "$TMP/server.txt"
check replay-series json "$TMP/replay.json" 'len(d["series"]) <= 120 and sum(s["admitted"] for s in d["series"]) == d["admitted"] and sum(s["rejected"] for s in d["series"]) == d["rejected"]'
check replay-sorted json "$TMP/replay.json" '[(k["rejected"], k["admitted"]) for k in d["keys"]] == sorted([(k["rejected"], k["admitted"]) for k in d["keys"]], reverse=True)'
get "${AUTH[@]}" -X POST -H 'Content-Type: application/json' -d '{"algorithm":"gcra","limit":5,"window":"1s","log":"1 a\n2 b\n3 c x\n"}' \
    -w '\n%{http_code}' "$BASE/v1/replay" >"$TMP/bad.txt"
check replay-bad-line-400 test "$(tail -n 1 "$TMP/bad.txt")" = 400
check replay-bad-line-named grep -q 'line 3: cost must be a non-negative integer' "$TMP/bad.txt"
get "${AUTH[@]}" -X POST -H 'Content-Type: application/json' -d '{"algorithm":"gcra","limit":0,"window":"1s","log":""}' \
    -w '\n%{http_code}' "$BASE/v1/replay" >"$TMP/bad.txt"
check replay-bad-rule-400 test "$(tail -n 1 "$TMP/bad.txt")" = 400

# --- the stats stream: its comment at once, then one event a second
curl -sN --max-time 150 "$BASE/v1/stats/stream" >"$TMP/stream.txt" &
CURL_PID=$!
check stream-comment poll 5 grep -q '^: sluice' "$TMP/stream.txt"
events() { test "$(grep -c '^event: stats' "$TMP/stream.txt")" -ge "$1"; }
check stream-events poll 5 events 2
check stream-event-json sh -c "grep '^data: ' '$TMP/stream.txt' | head -n 1 | cut -c7- | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d[\"end_ms\"] % 1000 == 0 and any(r[\"name\"] == \"dry\" for r in d[\"rules\"])'"
metric() { get "$BASE/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
check stream-counted test "$(metric sluice_stats_streams)" = 1

# a client that stops reading is closed once its replies pile up; one that reads is not
python3 - "$HTTP_PORT" "$TMP/stalled.ready" <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /v1/stats/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
open(sys.argv[2], "w").close()
time.sleep(120)  # never reads; stopped by its PID
PY
STALLED_PID=$!
check stalled-open poll 10 test -e "$TMP/stalled.ready"
two_streams() { test "$(metric sluice_stats_streams)" = 2; }
check stalled-counted poll 5 two_streams
one_stream() { test "$(metric sluice_stats_streams)" = 1; }
check stalled-closed poll 60 one_stream
check reader-still-open kill -0 "$CURL_PID"
kill "$STALLED_PID" 2>/dev/null

# at most 64 streams per server: the 65th is refused with 503
python3 - "$HTTP_PORT" <<'PY' >"$TMP/cap.txt"
import socket, sys
socks = []
for i in range(64):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    s.sendall(b"GET /v1/stats/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    socks.append(s)
codes = []
for s in socks:
    codes.append(s.recv(64).split(b" ")[1].decode())
print(" ".join(sorted(set(codes))))
PY
check stream-cap test "$(cat "$TMP/cap.txt")" = "200 503"

# SIGTERM ends the streams and the server cleanly
stop_bg srv
check sigterm-exit-0 test "$?" = 0
curl_gone() { ! kill -0 "$CURL_PID" 2>/dev/null; }
check sigterm-stream-ends poll 5 curl_gone
wait "$CURL_PID" 2>/dev/null
finish
