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
#
# DESCS=1,3,10 (any list of counts from 1 to 10) measures instead what a call costs the server by
# the descriptors it carries: per repetition, N_CALLS (400,000; QUICK 40,000) ShouldRateLimit
# calls of each count through h2load as above, then the RESP case, interleaved. A call of D
# descriptors carries remote_address=10.0.0.1 and d1=v1 .. d(D-1)=v(D-1), one descriptor each,
# decided by the rules edge.remote_address and edge.d1 .. edge.d9 (the same fixed_window), all
# or nothing as sluiced decides a call. The body is built once, so every key is hot, as RESP's is.
# Printed: the server's CPU (utime+stime of sluiced, /proc/PID/stat) per call and per descriptor,
# each count's CPU per call over the 1-descriptor call's and per descriptor over RESP's per
# decision (medians of the per-repetition ratios), and calls per second per CPU second of
# sluiced (1 / CPU per call; the kernel's softirq work for the sockets is in neither figure).
#
#   DESCS=1,3,10 REPS=5 bench/grpc/run.sh     about two minutes
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
DESCS=${DESCS:-}
if [ -n "$DESCS" ]; then
    N_CALLS=${N_CALLS:-$([ "$QUICK" = 1 ] && echo 40000 || echo 400000)}
    N_RESP=${N_RESP_DESCS:-$([ "$QUICK" = 1 ] && echo 200000 || echo 2000000)}
    IFS=', ' read -r -a DLIST <<<"$DESCS"
    for d in "${DLIST[@]}"; do
        case $d in [1-9] | 10) ;; *) echo "bench/grpc/run.sh: DESCS: $d is not a count from 1 to 10" >&2; exit 2 ;; esac
    done
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

{
    echo "rules:"
    for k in remote_address d1 d2 d3 d4 d5 d6 d7 d8 d9; do
        printf '  - name: edge.%s\n    algorithm: fixed_window\n    limit: 1000000000\n    window: 1s\n' "$k"
    done
} >"$TMP/rules.yaml"
# body D PATH: a gRPC message (flag 0, 4-byte length) holding a RateLimitRequest {domain: "edge",
# descriptors: [{entries: [{key: "remote_address", value: "10.0.0.1"}]}, {d1=v1}, ..]} of D
# descriptors.
body() {
    python3 - "$1" "$2" <<'PY'
import sys

def field(number, payload):  # a length-delimited protobuf field (payloads here are < 128 bytes)
    return bytes([number << 3 | 2, len(payload)]) + payload

d = int(sys.argv[1])
entries = [(b"remote_address", b"10.0.0.1")] + [(b"d%d" % i, b"v%d" % i) for i in range(1, d)]
request = field(1, b"edge") + b"".join(field(2, field(1, field(1, k) + field(2, v))) for k, v in entries)
open(sys.argv[2], "wb").write(b"\0" + len(request).to_bytes(4, "big") + request)
PY
}
body 1 "$TMP/body.bin"

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

if [ -n "$DESCS" ]; then
    # the response of one call of D descriptors, through curl: its overall code (1 = OK) and
    # how many statuses it holds (want 1 and D)
    answer() {
        curl -s --http2-prior-knowledge -H 'content-type: application/grpc' -H 'te: trailers' \
            --data-binary @"$1" "$URL" | python3 -c '
import sys
b = sys.stdin.buffer.read()[5:]
i, code, statuses = 0, None, 0
while i < len(b):
    tag = b[i]; i += 1
    if tag & 7 == 0:
        v = 0; s = 0
        while True:
            c = b[i]; i += 1; v |= (c & 127) << s; s += 7
            if c < 128: break
        if tag >> 3 == 1: code = v
    elif tag & 7 == 2:
        n = 0; s = 0
        while True:
            c = b[i]; i += 1; n |= (c & 127) << s; s += 7
            if c < 128: break
        i += n
        if tag >> 3 == 2: statuses += 1
    else:
        break
print(code, statuses)'
    }
    for d in "${DLIST[@]}"; do
        body "$d" "$TMP/body$d.bin"
        say "sanity: a call of $d descriptors: overall code and statuses $(answer "$TMP/body$d.bin") (want 1 $d)"
    done
    say "calls per case: $N_CALLS; RESP decisions: $N_RESP"
    for ((rep = 1; rep <= REPS; rep++)); do
        say ""
        say "repetition $rep/$REPS"
        for d in "${DLIST[@]}"; do
            run_case "grpc-d$d" h2 "$SL_PID" -- "${CLI_PIN[@]}" h2load -n "$N_CALLS" -c "$CLIENTS" -m 16 -t 1 \
                -d "$TMP/body$d.bin" -H 'content-type: application/grpc' --log-file="$TMP/h2.log" "$URL"
        done
        rb resp "$SL_PID" "$SL_RESP" "$N_RESP" 16 1 SL.ALLOW edge.remote_address 10.0.0.1
    done
    # Medians here are over every repetition, disturbed or not, so that a ratio of two cases and
    # their own figures come from the same runs (the disturbed ones are counted below).
    median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-";
        else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
    # amed CASE COL: the median of COL over the case's runs
    amed() { awk -v c="$1" -v k="$2" '$1 == c { print $k }' "$RESULTS" | median; }
    # rmed A COLA DIVA B COLB DIVB: the median over repetitions of (A's COLA / DIVA) / (B's COLB /
    # DIVB), the k-th run of one case paired with the k-th of the other
    rmed() {
        awk -v a="$1" -v ca="$2" -v da="$3" -v b="$4" -v cb="$5" -v db="$6" '
            $1 == a { na++; va[na] = $ca / da }
            $1 == b { nb++; vb[nb] = $cb / db }
            END { for (k = 1; k <= na && k <= nb; k++) if (vb[k] > 0) print va[k] / vb[k] }' "$RESULTS" |
            median | awk '{ if ($1 == "-") print; else printf "%.2f\n", $1 }'
    }
    say ""
    say "== medians of all $REPS repetitions; CPU: sluiced's utime+stime over the run, per call and"
    say "   per descriptor (RESP: per decision); ratios: medians of the per-repetition ratios"
    printf '%-8s %10s %12s %8s %8s %9s %9s %13s %12s %14s\n' case calls/s decisions/s p50_ms p99_ms \
        us/call us/desc "call/1-desc" "desc/RESP" "calls/CPU-s"
    for d in "${DLIST[@]}"; do
        c=grpc-d$d
        printf '%-8s %10s %12s %8s %8s %9s %9s %13s %12s %14s\n' "$c" "$(amed "$c" 2)" \
            "$(awk -v r="$(amed "$c" 2)" -v d="$d" 'BEGIN { printf "%.0f", r * d }')" \
            "$(amed "$c" 3)" "$(amed "$c" 4)" "$(awk -v u="$(amed "$c" 5)" 'BEGIN { printf "%.3f", u }')" \
            "$(awk -v u="$(amed "$c" 5)" -v d="$d" 'BEGIN { printf "%.3f", u / d }')" \
            "$(rmed "$c" 5 1 grpc-d"${DLIST[0]}" 5 1)" "$(rmed "$c" 5 "$d" resp 5 1)" \
            "$(awk -v u="$(amed "$c" 5)" 'BEGIN { if (u > 0) printf "%.0f", 1e6 / u }')"
    done
    printf '%-8s %10s %12s %8s %8s %9s %9s %13s %12s %14s\n' resp - "$(amed resp 2)" "$(amed resp 3)" \
        "$(amed resp 4)" - "$(awk -v u="$(amed resp 5)" 'BEGIN { printf "%.3f", u }')" - 1.00 \
        "$(awk -v u="$(amed resp 5)" 'BEGIN { if (u > 0) printf "%.0f", 1e6 / u }')"
    say "(call/1-desc: CPU per call over the ${DLIST[0]}-descriptor call's; desc/RESP: CPU per"
    say " descriptor over RESP's per decision; calls/CPU-s: calls per second of one CPU of sluiced)"
    say "disturbed runs (others over $OTHER_MAX_PCT % of a CPU), kept in the medians:" \
        "$(awk -v o="$OTHER_MAX_PCT" '$7 > o' "$RESULTS" | wc -l) of $(wc -l <"$RESULTS")"
    say "waited ${QUIET_WAITED_MS} ms in all for other processes to leave the CPUs"
    exit 0
fi

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
