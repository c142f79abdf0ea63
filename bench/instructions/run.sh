#!/usr/bin/env bash
# bench/instructions/run.sh - every instruction budget's figures in one run: instructions per
# request of sluiced over RESP (resp.sh: memory store 1 M keys and hot key, Redis store with
# sluice.so, beside redis-server INCR), HTTP /v1/auth (http.sh, beside nginx limit_req) and gRPC
# ShouldRateLimit with 1, 3 and 10 descriptors, nghttp2's own share (grpc.sh). Under each sluiced total, its split by layer:
#
#   read+parse   the rest: reading, parsing, routing, the loop's own work
#   engine       rule lookup to the store's answer (engine_request_start, and over RESP the
#                rule's lookup engine_find), without the core
#   core         sl_table_decide, sl_table_decide_reserved (the memory store's table and the algorithm)
#   reply+write  the reply's writer (write_decision, job_end, grpc_answer) and conn_flush /
#                grpc_session_send
#
# each from callgrind_annotate --inclusive=yes on the dump that holds exactly N requests.
#
#   bench/instructions/run.sh                  builds this tree in build-bench-instr
#   bench/instructions/run.sh BUILD..          each BUILD's sluiced (with its sluice_module), side
#                                              by side in each case, the peers once
# N for each script comes from RESP_N, HTTP_N, GRPC_N (defaults 40000, 4000, 4000).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BENCH_NAME=bench/instructions/run.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
BUILDS=("$@")
if [ ${#BUILDS[@]} -eq 0 ]; then
    bench_build build-bench-instr sluiced sluice_module
    BUILDS=("$ROOT/build-bench-instr")
fi
N=${RESP_N:-40000} "$ROOT/bench/instructions/resp.sh" "${BUILDS[@]}"
N=${HTTP_N:-4000} "$ROOT/bench/instructions/http.sh" "${BUILDS[@]}"
N=${GRPC_N:-4000} "$ROOT/bench/instructions/grpc.sh" "${BUILDS[@]}"
