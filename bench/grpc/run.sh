#!/usr/bin/env bash
# bench/grpc/run.sh - sluiced's gRPC port (Envoy's ShouldRateLimit) beside its RESP port, on the
# same rule and key, in the same run. Prints figures (asserts nothing) and a table of medians
# with the ratio gRPC / RESP.
#
#   gRPC  h2load -c 50 -m 16 -t 1 with a prebuilt ShouldRateLimit body (domain edge, one
#         descriptor remote_address=10.0.0.1), decided by the rule edge.remote_address
#   RESP  redis-benchmark -c 50 -P 16: SL.ALLOW edge.remote_address 10.0.0.1
#   (the rule admits every request: fixed_window, 10^9 a second, so both answer allowed)
#
# decisions/s, p50/p99 latency (redis-benchmark's; h2load's per-request log), and the server's
# CPU per decision (utime+stime of its PID around the run, divided by the decisions). sluiced
# runs with --threads 1 pinned to CPU 0, the clients on CPU 1; everything listens on 127.0.0.1
# on free ports; every process started here is stopped by its PID on exit.
#
#   bench/grpc/run.sh            REPS=3 repetitions, median reported; about a minute
#   QUICK=1 bench/grpc/run.sh    a smoke run (figures not comparable)
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-srv}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-1} N_GRPC=50000 N_RESP=200000
else
    REPS=${REPS:-3} N_GRPC=1000000 N_RESP=3000000
fi
CLIENTS=50
BENCH_NAME=bench/grpc/run.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools h2load redis-benchmark redis-cli taskset python3 cmake
bench_build "$BUILD" sluiced
SLUICED=$BUILD/src/server/sluiced
bench_init
bench_machine
say "versions: $("$SLUICED" --version 2>&1 | head -n1); $(h2load --version | head -n1);" \
    "$(redis-benchmark --version 2>/dev/null | head -n1 || echo redis-benchmark)"
say "pinning: server ${SRV_PIN[*]:-(none)}, clients ${CLI_PIN[*]:-(none)}; repetitions: $REPS (median)"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: edge.remote_address
    algorithm: fixed_window
    limit: 1000000000
    window: 1s
YAML
# The request body: a gRPC message (flag 0, 4-byte length) holding a RateLimitRequest
# {domain: "edge", descriptors: [{entries: [{key: "remote_address", value: "10.0.0.1"}]}]}.
python3 - "$TMP/body.bin" <<'PY'
import sys

def field(number, payload):  # a length-delimited protobuf field (payloads here are < 128 bytes)
    return bytes([number << 3 | 2, len(payload)]) + payload

entry = field(1, b"remote_address") + field(2, b"10.0.0.1")
request = field(1, b"edge") + field(2, field(1, entry))
open(sys.argv[1], "wb").write(b"\0" + len(request).to_bytes(4, "big") + request)
PY

SL_RESP=$(free_port)
SL_GRPC=$(free_port)
start sluiced "${SRV_PIN[@]}" "$SLUICED" --threads 1 --port "$SL_RESP" --http-port 0 \
    --grpc-port "$SL_GRPC" --rules "$TMP/rules.yaml" --config-store "$TMP/bench.db" --snapshot "" \
    --log-level warn
SL_PID=$LAST_PID
wait_port "$SL_RESP"
wait_port "$SL_GRPC"
URL="http://127.0.0.1:$SL_GRPC/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
check=$("${CLI_PIN[@]}" h2load -n 1 -c 1 -d "$TMP/body.bin" -H 'content-type: application/grpc' "$URL" |
    awk '/^status codes:/ { print $3 }')
say "sanity: one ShouldRateLimit through h2load: $check 2xx (want 1); RESP:" \
    "$(redis-cli -p "$SL_RESP" SL.ALLOW edge.remote_address 10.0.0.1 | head -n1) (want 1)"

for ((rep = 1; rep <= REPS; rep++)); do
    say ""
    say "repetition $rep/$REPS"
    run_case grpc h2 "$SL_PID" -- "${CLI_PIN[@]}" h2load -n "$N_GRPC" -c "$CLIENTS" -m 16 -t 1 \
        -d "$TMP/body.bin" -H 'content-type: application/grpc' --log-file="$TMP/h2.log" "$URL"
    rb resp "$SL_PID" "$SL_RESP" "$N_RESP" 16 1 SL.ALLOW edge.remote_address 10.0.0.1
done

say ""
say "== medians ($REPS repetitions)"
printf '%-6s %12s %9s %9s %12s\n' case decisions/s p50_ms p99_ms cpu_us/dec
for c in grpc resp; do
    printf '%-6s %12s %9s %9s %12s\n' "$c" "$(med "$c" 2)" "$(med "$c" 3)" "$(med "$c" 4)" "$(med "$c" 5)"
done
say "gRPC / RESP: decisions/s $(ratio "$(med grpc 2)" "$(med resp 2)"), CPU per decision" \
    "$(ratio "$(med grpc 5)" "$(med resp 5)")"
disturbed_report
