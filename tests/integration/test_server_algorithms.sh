#!/usr/bin/env bash
# test_server_algorithms.sh - GET /v1/algorithms against a real sluiced, compared with the table
# it is made from by what the same sluiced does: the names are the build's own list of the
# table's rows (src/store/lua_rows/names.txt, written from src/core/algorithms.c) in its order,
# and every unknown-algorithm error lists them; for each algorithm, SL.THROTTLE accepts BURST
# (at its min, not below), BUCKETS and MAX_DELAY exactly when the reply gives that parameter,
# a limit up to the reply's max and not past it; PUT /v1/rules accepts mode: leased exactly when
# the reply's modes have it (and the Lua row says the same: NO_LEASE nil); the JSON's shape
# (value order, capacity); only GET and HEAD.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need curl redis-cli python3

start_sluiced srv --config-store "$TMP/sluice.db" --snapshot "" || { cat "$TMP/srv.log"; exit 1; }
BASE=http://127.0.0.1:$HTTP_PORT

check get-200 test "$(curl -s -o "$TMP/algs.json" -w '%{http_code}' "$BASE/v1/algorithms")" = 200
check type-json test "$(curl -s -o /dev/null -w '%{content_type}' "$BASE/v1/algorithms")" = \
    application/json
check head-200 test "$(curl -s -I -o /dev/null -w '%{http_code}' "$BASE/v1/algorithms")" = 200
check post-405 test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d '{}' "$BASE/v1/algorithms")" = 405
check sub-404 test "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/v1/algorithms/gcra")" = 404

python3 - "$TMP/algs.json" "$SLUICE_BUILD_DIR/src/store/lua_rows" "$RESP_PORT" "$BASE" \
    >"$TMP/compare.txt" 2>&1 <<'EOF'
import json, subprocess, sys, urllib.request

algs_path, rows, resp_port, base = sys.argv[1:5]
algs = json.load(open(algs_path))["algorithms"]
fails = []

def check(name, ok, why=""):
    print(("ok " if ok else "FAIL ") + name + ("" if ok else ": " + why))
    if not ok:
        fails.append(name)

def resp(*args):
    out = subprocess.run(["redis-cli", "-p", resp_port, *map(str, args)], capture_output=True,
                         text=True, timeout=10).stdout.strip()
    return out

def accepted(*args):
    return not resp("SL.THROTTLE", "k", *args).startswith("ERR")

def put_rule(name, body):
    req = urllib.request.Request(base + "/v1/rules/" + name, data=json.dumps(body).encode(),
                                 method="PUT", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code

names = [a["name"] for a in algs]
table = open(rows + "/names.txt").read().split()
check("names-are-the-table", names == table, "%s vs %s" % (names, table))
check("values-increase", [a["value"] for a in algs] == sorted(a["value"] for a in algs)
      and len(set(a["value"] for a in algs)) == len(algs))
check("one-suggested", sum(a["suggested"] for a in algs) == 1)
err = resp("SL.THROTTLE", "k", "leaky", 5, 1000)
check("unknown-lists-them", err == "ERR unknown algorithm 'leaky' (%s)" % ", ".join(names), err)

for a in algs:
    n = a["name"]
    check(n + "-accepted", accepted(n, 5, 1000))
    b = a["burst"]
    # a burst other than 0 (0 is "unset" for an algorithm without one)
    check(n + "-burst", accepted(n, 5, 1000, "BURST", max(b["min"], 2) if b else 3) == (b is not None))
    if b is not None and b["min"] > 0:
        check(n + "-burst-min", not accepted(n, 5, 1000, "BURST", b["min"] - 1))
    check(n + "-buckets", accepted(n, 5, 1000, "BUCKETS", 2) == (a["buckets"] is not None))
    check(n + "-max-delay", accepted(n, 5, 1000, "MAX_DELAY", 10) == (a["max_delay"] is not None))
    top = a["limit"]["max"]
    if top is not None:
        check(n + "-limit-max", accepted(n, top, 1000) and not accepted(n, top + 1, 1000))
    capacity = {"limit": 5, "burst": 7, "burst + 1": 8}[a["capacity"]]
    extra = ["BURST", 7] if b is not None else []
    reply = resp("SL.THROTTLE", "cap-" + n, n, 5, 1000, *extra).split("\n")
    check(n + "-capacity", reply[1:2] == [str(capacity)], "%s for %s" % (reply, a["capacity"]))
    leased = put_rule("t-" + n, {"algorithm": n, "limit": 5, "window": "1s", "mode": "leased"})
    check(n + "-mode-leased", (leased == 200) == ("leased" in a["modes"]), str(leased))
    lua = open(rows + "/" + n + ".lua").read()
    check(n + "-lua-row", ("local NO_LEASE = nil" in lua) == ("leasable" in a["capabilities"]))
    check(n + "-leasable-is-mode", ("leasable" in a["capabilities"]) == ("leased" in a["modes"]))
    # an adaptive limit is accepted exactly where the table says a limit may adapt
    adapt = put_rule("a-" + n, {"algorithm": n, "limit": 5, "window": "1s", "adaptive": "aimd",
                                "min_limit": 1, "max_limit": 8})
    check(n + "-adaptive", (adapt == 200) == (a["adaptive"] is not None), str(adapt))
    if a["adaptive"] is not None:
        top = a["adaptive"]["max_limit"]["max"]
        at = put_rule("a-" + n, {"algorithm": n, "limit": 5, "window": "1s", "adaptive": "aimd",
                                 "min_limit": 1, "max_limit": top})
        past = put_rule("a-" + n, {"algorithm": n, "limit": 5, "window": "1s", "adaptive": "aimd",
                                   "min_limit": 1, "max_limit": top + 1})
        check(n + "-adaptive-max-limit", at == 200 and past == 400, "%s %s" % (at, past))
    # priorities are every algorithm's
    prio = put_rule("p-" + n, {"algorithm": n, "limit": 5, "window": "1s",
                               "priorities": ["low", "high"], "reserve": {"high": 1}})
    check(n + "-priorities", prio == 200, str(prio))

# the adaptive algorithms: each accepts the options it lists and refuses the others'
adaptive = json.load(open(algs_path))["adaptive"]
check("adaptive-names", [x["name"] for x in adaptive] == ["aimd", "vegas"], str(adaptive))
every = sorted({o for x in adaptive for o in x["options"]})
check("adaptive-options", every == ["backoff", "latency_timeout", "probe"], str(every))
sample = {"backoff": 50, "latency_timeout": "100ms", "probe": 10}
concurrency = next(a["name"] for a in algs if a["adaptive"] is not None)
for x in adaptive:
    check(x["name"] + "-summary", len(x["summary"]) > 10, x["summary"])
    for o in every:
        got = put_rule("o-" + x["name"], {"algorithm": concurrency, "limit": 2, "window": "1s",
                                          "adaptive": x["name"], "min_limit": 1, "max_limit": 4,
                                          o: sample[o]})
        check(x["name"] + "-option-" + o, (got == 200) == (o in x["options"]), str(got))

print("%d failed" % len(fails))
sys.exit(1 if fails else 0)
EOF
rc=$?
check compare test "$rc" = 0
grep FAIL "$TMP/compare.txt"
echo "$(grep -c "^ok " "$TMP/compare.txt") comparisons held"
tail -1 "$TMP/compare.txt"
finish
