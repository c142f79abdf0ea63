#!/usr/bin/env bash
# bench/instructions/grpc.sh - instructions per gRPC ShouldRateLimit call (one descriptor) of
# sluiced, nghttp2 included, split by layer: figures the machine's noise cannot move.
#
# sluiced runs alone under valgrind --tool=callgrind. One channel (Python grpcio, stubs generated
# from src/proto/grpc/rls.proto) sends WARM calls one after another, callgrind_control dumps (and
# zeroes) the counters, it sends N more, and a second dump holds exactly those N calls. Keys are
# random among 100 k (remote_address), the rule edge.remote_address a gcra of 100 per second.
#
#   bench/instructions/grpc.sh                 builds this tree in build-bench-instr; N=4000
#   bench/instructions/grpc.sh BUILD..         each BUILD's sluiced, side by side
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
N=${N:-4000}
WARM=$((N / 2))
BENCH_NAME=bench/instructions/grpc.sh
PY=/usr/bin/python3 # Debian's, where python3-grpcio and python3-grpc-tools install
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
# shellcheck source=bench/instructions/lib.sh
. "$ROOT/bench/instructions/lib.sh"

need_tools valgrind callgrind_control callgrind_annotate cmake
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || die "needs python3-grpcio and python3-grpc-tools"
BUILDS=("$@")
if [ ${#BUILDS[@]} -eq 0 ]; then
    bench_build build-bench-instr sluiced
    BUILDS=("$ROOT/build-bench-instr")
fi
bench_init
bench_machine
mkdir -p "$TMP/stubs"
"$PY" -m grpc_tools.protoc -I "$ROOT/src/proto/grpc" --python_out="$TMP/stubs" \
    --grpc_python_out="$TMP/stubs" rls.proto >/dev/null

# send PORT COUNT SEED: COUNT ShouldRateLimit calls on one channel; exits 1 on an error status
send() {
    "$PY" - "$TMP/stubs" "$@" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[1])
import grpc, rls_pb2, rls_pb2_grpc
port, n, seed = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
ch = grpc.insecure_channel("127.0.0.1:%d" % port)
stub = rls_pb2_grpc.RateLimitServiceStub(ch)
E = rls_pb2.RateLimitDescriptor.Entry
for _ in range(n):
    d = rls_pb2.RateLimitDescriptor(entries=[E(key="remote_address", value="a%d" % rng.randrange(100000))])
    stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="edge", descriptors=[d]), timeout=60)
PY
}
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: edge.remote_address
    algorithm: gcra
    limit: 100
    window: 1s
YAML

say ""
say "== instructions per call (callgrind; N=$N after $WARM; one channel, one descriptor, 100 k keys)"
for b in "${BUILDS[@]}"; do
    say "-- $b ($(git -C "$b/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
    rm -rf "$TMP/cg" "$TMP/s.db"
    mkdir -p "$TMP/cg"
    gp=$(free_port)
    start "cg-sluiced" valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
        "$b/src/server/sluiced" --grpc-port "$gp" --port 0 --http-port 0 --threads 1 \
        --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" --log-level warn
    pid=$LAST_PID
    wait_port "$gp"
    send "$gp" "$WARM" 1
    dump_total "$pid" >/dev/null
    send "$gp" "$N" 2
    total=$(dump_total "$pid")
    printf '  %-36s %8d instructions per call\n' "sluiced gRPC ShouldRateLimit" "$((total / N))"
    layers "$N" engine_request_start sl_table_decide grpc_answer,grpc_session_send
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
done
