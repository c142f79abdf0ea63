#!/usr/bin/env bash
# bench/holds/run.sh - what an in-flight limit costs: server instructions per acquire+release
# pair beside a gcra decision, counted by callgrind around exactly N operations of the same
# client (bench/holds/client.py: one connection, pipelined 16, 10 000 random keys), so the
# machine's noise cannot move them. Prints figures; asserts nothing.
#
#   1. sluiced (memory store, one loop): SL.ALLOW of a named gcra rule against an SL.ACQUIRE +
#      SL.RELEASE pair of a named concurrency rule (limit 100, timeout 10 s). Target: a pair
#      <= 2.5x a decision.
#   2. redis-server with sluice.so: an SL.ACQUIRE + SL.RELEASE pair against the usual recipe, a
#      sorted-set semaphore in Lua (bench/holds/semaphore.lua, then ZREM), and SL.THROTTLE gcra
#      for scale. Target: the pair at >= 3x the semaphore's rate, i.e. <= 1/3 of its
#      instructions (Redis runs one thread: its instructions per pair bound its pairs per second).
#
#   bench/holds/run.sh          builds this tree in build-bench-instr; N=20000 (after N/2 to warm)
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
N=${N:-20000}
WARM=$((N / 2))
KEYS=10000
BENCH_NAME=bench/holds/run.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
# shellcheck source=bench/instructions/lib.sh
. "$ROOT/bench/instructions/lib.sh"

need_tools redis-server valgrind callgrind_control python3 cmake
bench_build build-bench-instr sluiced sluice_module
B=$ROOT/build-bench-instr
bench_init
bench_machine
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: gcra
    limit: 100
    window: 1s
  - name: jobs
    algorithm: concurrency
    limit: 100
    window: 10s
YAML

# per_op NAME PID PORT MODE: WARM then N operations of MODE; prints and returns instructions per op
per_op() {
    local name=$1 pid=$2 port=$3 mode=$4 total
    say "\$ bench/holds/client.py PORT $WARM then $N 16 $mode $KEYS"
    "$PY" bench/holds/client.py "$port" "$WARM" 16 "$mode" "$KEYS" 1 >/dev/null
    dump_total "$pid" >/dev/null
    "$PY" bench/holds/client.py "$port" "$N" 16 "$mode" "$KEYS" 2 >/dev/null
    total=$(dump_total "$pid")
    LAST=$((total / N))
    printf '  %-52s %8d instructions per operation\n' "$name" "$LAST"
}

say ""
say "== 1. sluiced, memory store, one loop (callgrind on sluiced; N=$N after $WARM)"
rm -rf "$TMP/cg"
mkdir -p "$TMP/cg"
port=$(free_port)
start cg-sluiced valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
    "$B/src/server/sluiced" --grpc-port 0 --http-port 0 --threads 1 --port "$port" \
    --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" --log-level warn
pid=$LAST_PID
wait_port "$port"
per_op "SL.ALLOW api (gcra)" "$pid" "$port" allow
allow=$LAST
per_op "SL.ACQUIRE jobs + SL.RELEASE jobs (one pair)" "$pid" "$port" pair
pair=$LAST
kill -TERM "$pid"
wait "$pid" 2>/dev/null || true
say "  pair / decision: $(ratio "$pair" "$allow")x (target <= 2.5x)"

say ""
say "== 2. redis-server with sluice.so (callgrind on redis-server; N=$N after $WARM)"
rm -rf "$TMP/cg"
mkdir -p "$TMP/cg"
rp=$(free_port)
start cg-redis valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
    redis-server --port "$rp" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
    --loadmodule "$B/src/module/sluice.so"
rpid=$LAST_PID
wait_port "$rp"
per_op "SL.THROTTLE gcra (for scale)" "$rpid" "$rp" gcra
per_op "SL.ACQUIRE + SL.RELEASE (sluice.so, one pair)" "$rpid" "$rp" module
mod=$LAST
per_op "EVALSHA semaphore.lua + ZREM (one pair)" "$rpid" "$rp" zset
zset=$LAST
kill -TERM "$rpid"
wait "$rpid" 2>/dev/null || true
say "  semaphore / sluice.so: $(ratio "$zset" "$mod")x fewer instructions per pair (target >= 3x)"
