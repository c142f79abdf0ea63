#!/usr/bin/env bash
# test_server_store_stats.sh - the request store's statistics, declared once by the store
# (request_store.h: store_stat_t), shown by /metrics and by INFO's Store section from that one
# list: over a Redis store with a strict, a leased and an approximate rule that have decided,
#   - every sluice_redis_* sample of /metrics has its INFO field (the sample's name without
#     "sluice_" and "_total", then its labels' values), and every INFO Store field its sample
#     (the engine's event counters, src/engine/events.h, are not the store's: left out);
#   - each with the same value (read while nothing moves: two INFO readings around the scrape
#     agree);
#   - the counters the traffic moved are not zero (so the comparison compares something);
#   - the memory store declares nothing: no Store section, no sluice_redis_* sample.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl python3

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: strict
    algorithm: gcra
    limit: 3
    window: 1h
  - name: leased
    algorithm: gcra
    limit: 1000
    window: 1h
    mode: leased
    lease_time: 10s
  - name: approx
    algorithm: sliding_window
    limit: 1000
    window: 1h
    mode: approximate
    sync_interval: 100ms
YAML
# A TSan build's sluice.so cannot load in redis-server (its runtime needs static TLS): the Lua
# scripts then, which declare the same statistics
MODULE=${SLUICE_MODULE:-$SLUICE_BUILD_DIR/src/module/sluice.so}
module_args=(--loadmodule "$MODULE")
WITH_MODULE=1
if ldd "$MODULE" | grep -q libtsan; then
    module_args=()
    WITH_MODULE=0
fi
export WITH_MODULE
start_redis r "${module_args[@]}" || { cat "$TMP/r.log"; exit 1; }
start_sluiced s --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" \
    --store "redis://127.0.0.1:$REDIS_PORT" --threads 2 || { cat "$TMP/s.log"; exit 1; }
for i in $(seq 1 20); do
    printf 'SL.ALLOW strict k\r\nSL.ALLOW leased k\r\nSL.ALLOW approx k\r\n'
done | redis-cli -p "$RESP_PORT" >/dev/null
sleep 0.5 # the approximate rule's sync is sent, its reply read

compare() { # MODE: "redis" (every sample has its field, same values) or "memory" (none)
    python3 - "$RESP_PORT" "$HTTP_PORT" "$1" "$SLUICE_SOURCE_DIR/src/engine/events.h" <<'PY'
import os, re, subprocess, sys, urllib.request
resp, http, mode, events_h = sys.argv[1:]
events = set(re.findall(r'C\(\w+, "(sluice_\w+)"', open(events_h).read()))
assert 'sluice_redis_failures_total' in events, 'events.h read'
def info():
    out = subprocess.run(["redis-cli", "-p", resp, "INFO", "store"], capture_output=True,
                         text=True, check=True).stdout
    return dict(l.split(":", 1) for l in out.replace("\r", "").splitlines() if ":" in l)
for attempt in range(20):
    before = info()
    text = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics").read().decode()
    if info() == before:
        break
else:
    sys.exit("INFO store kept moving")
samples = {}
for line in text.splitlines():
    m = re.match(r'^(sluice_redis_\w+?)(?:\{(.*)\})? (\S+)$', line)
    if not m:
        continue
    name, labels, value = m.groups()
    if name in events:
        continue
    field = re.sub(r'^sluice_', '', name)
    field = re.sub(r'_total$', '', field)
    field = re.sub(r'_total(_sum|_count)$', r'\1', field)
    for v in re.findall(r'="([^"]*)"', labels or ""):
        field += "_" + v
    samples[field] = value
if mode == "memory":
    assert not samples and not before, (samples, before)
    print("memory: no store statistics")
    sys.exit(0)
assert samples, "no sluice_redis_* sample"
missing = sorted(set(samples) - set(before)) + sorted(set(before) - set(samples))
assert not missing, f"in one reader only: {missing}"
for f, v in samples.items():
    assert float(v) == float(before[f]), f"{f}: /metrics {v}, INFO {before[f]}"
moved = ["redis_decisions", "redis_asked", "redis_cache_hits", "redis_leases_taken",
         "redis_lease_hits", "redis_approx_local", "redis_up"]
moved.append("redis_nodes_module" if os.environ["WITH_MODULE"] == "1" else "redis_nodes_lua")
for f in moved:
    assert float(before[f]) > 0, f"{f} is 0"
print(f"{len(samples)} statistics, the same in /metrics and INFO")
PY
}
check redis-same-list-same-values compare redis
stop_bg s
start_sluiced m --rules "$TMP/rules.yaml" --config-store "$TMP/m.db" --snapshot "" || {
    cat "$TMP/m.log"
    exit 1
}
check memory-declares-none compare memory
check memory-no-store-section test -z "$(redis-cli -p "$RESP_PORT" INFO store | tr -d '\r')"
finish
