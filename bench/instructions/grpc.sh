#!/usr/bin/env bash
# bench/instructions/grpc.sh - instructions per gRPC ShouldRateLimit call of sluiced, nghttp2
# included, for calls carrying 1, 3 and 10 descriptors (Envoy sends several per request): per
# call, per descriptor decided, split by layer, and nghttp2's own instructions split into HPACK
# and the rest (frames, the session, its stream map): figures the machine's noise cannot move.
#
# sluiced runs alone under valgrind --tool=callgrind. One channel (Python grpcio, stubs generated
# from src/proto/grpc/rls.proto) sends WARM calls one after another, callgrind_control dumps (and
# zeroes) the counters, it sends N more, and a second dump holds exactly those N calls. Each
# descriptor has one entry, its own key (remote_address, d1 .. d9), a value random among 100 k;
# each key's rule is a gcra of 100 per second in the domain edge.
#
#   bench/instructions/grpc.sh                 builds this tree in build-bench-instr; N=4000
#   bench/instructions/grpc.sh BUILD..         each BUILD's sluiced, side by side
#   DESCS="1 3 10" (the default)               the descriptors per call, one run each
#   LD_LIBRARY_PATH=DIR                        a libnghttp2 of the same version built with its
#                                              symbols (Debian's is stripped, and its -dbgsym is
#                                              in an archive not always reachable): nghttp2's
#                                              share is then split by its functions
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

DESCS=${DESCS:-1 3 10}
# send PORT COUNT SEED D: COUNT ShouldRateLimit calls of D descriptors on one channel; exits 1 on
# an error status
send() {
    "$PY" - "$TMP/stubs" "$@" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[1])
import grpc, rls_pb2, rls_pb2_grpc
port, n, seed, d = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
keys = ["remote_address"] + ["d%d" % i for i in range(1, 10)]
rng = random.Random(seed)
ch = grpc.insecure_channel("127.0.0.1:%d" % port)
stub = rls_pb2_grpc.RateLimitServiceStub(ch)
E = rls_pb2.RateLimitDescriptor.Entry
for _ in range(n):
    ds = [rls_pb2.RateLimitDescriptor(entries=[E(key=k, value="a%d" % rng.randrange(100000))])
          for k in keys[:d]]
    stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="edge", descriptors=ds), timeout=60)
PY
}
{
    echo "domain: edge"
    echo "descriptors:"
    for k in remote_address d1 d2 d3 d4 d5 d6 d7 d8 d9; do
        echo "  - key: $k"
        echo "    rate_limit: {unit: second, requests_per_unit: 100, algorithm: gcra}"
    done
} >"$TMP/rules.yaml"

say ""
say "== instructions per call (callgrind; N=$N after $WARM; one channel, 100 k keys per descriptor)"
for b in "${BUILDS[@]}"; do
  say "-- $b ($(git -C "$b/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
  for d in $DESCS; do
    rm -rf "$TMP/cg" "$TMP/s.db"
    mkdir -p "$TMP/cg"
    gp=$(free_port)
    start "cg-sluiced" valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
        "$b/src/server/sluiced" --grpc-port "$gp" --port 0 --http-port 0 --threads 1 \
        --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" --log-level warn
    pid=$LAST_PID
    wait_port "$gp"
    send "$gp" "$WARM" 1 "$d"
    dump_total "$pid" >/dev/null
    send "$gp" "$N" 2 "$d"
    total=$(dump_total "$pid")
    printf '  %-36s %8d instructions per call, %d per descriptor\n' \
        "ShouldRateLimit, $d descriptor(s)" "$((total / N))" "$((total / N / d))"
    [ -n "${KEEP_DUMPS:-}" ] && cp "$(last_dump)" "$KEEP_DUMPS/grpc-$d.cg"
    layers "$N" engine_request_start sl_table_decide,sl_table_decide_reserved grpc_answer,grpc_session_send
    nghttp2_split "$N"
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
  done
done
