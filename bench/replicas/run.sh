#!/usr/bin/env bash
# bench/replicas/run.sh - what a strict rule's `replicas: 1` costs: a redis-server with sluice.so
# and one replica of it on loopback, one sluiced (--threads 1), the same strict fixed_window rule
# with and without replicas, N decisions on one connection one at a time (each waits for the
# last: the latency a client sees), twice each, alternating. Prints the microseconds per decision
# and Redis's commandstats (one WAIT per decision with replicas). Asserts nothing.
#
#   bench/replicas/run.sh     (SLUICE_BUILD_DIR defaults to build-test; about 30 s)
set -u
export SLUICE_SOURCE_DIR=${SLUICE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export SLUICE_BUILD_DIR=${SLUICE_BUILD_DIR:-$SLUICE_SOURCE_DIR/build-test}
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - {name: acked, algorithm: fixed_window, limit: 100000000, window: 1h, replicas: 1, replica_wait: 100ms}
  - {name: plain, algorithm: fixed_window, limit: 100000000, window: 1h}
YAML
start_redis p --loadmodule $SLUICE_BUILD_DIR/src/module/sluice.so; pp=$REDIS_PORT
start_redis r --loadmodule $SLUICE_BUILD_DIR/src/module/sluice.so --replicaof 127.0.0.1 $pp
poll 20 bash -c "redis-cli -p $REDIS_PORT INFO replication | grep -q master_link_status:up"
start_sluiced s --threads 1 --rules "$TMP/rules.yaml" --snapshot "" --store "redis://127.0.0.1:$pp"
for rule in plain acked plain acked; do
PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - $RESP_PORT $rule <<'PY'
import sys, time
from resp_client import Conn
c = Conn(int(sys.argv[1])); n = 3000
for i in range(200): c.call("SL.ALLOW", sys.argv[2], "w")
t = time.perf_counter()
for i in range(n): c.call("SL.ALLOW", sys.argv[2], "k%d" % (i % 50))
seq = (time.perf_counter() - t) / n * 1e6
print("%s: one connection, one request at a time: %.0f us per decision" % (sys.argv[2], seq))
PY
done
redis-cli -p $pp INFO commandstats | grep -E "cmdstat_(wait|sl.throttle):"
