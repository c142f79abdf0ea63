#!/usr/bin/env bash
# bench/scaling/run.sh - the capacity plan's simulations (docs/scaling.md): each way of sharing a
# rule's state (strict, leased, approximate, routed) at 1,000 sluiced nodes and 50 M requests/s
# from 100 M users whose rates follow a Zipf law, simulated with the library's own algorithms
# (bench/scaling/sim.c says how). Prints figures; asserts nothing. Needs no server: the costs per
# operation are options of the simulator, taken from bench/redis/run.sh's and
# bench/redis/instructions.sh's figures in docs/scaling.md.
#
#   bench/scaling/run.sh              three cases, about 3 minutes on one core
#   QUICK=1 bench/scaling/run.sh      100 nodes, 1 M requests/s, 100 k users: seconds
#   BUILD_DIR=/tmp/b bench/scaling/run.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-scaling}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BENCH_NAME=bench/scaling/run.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools cmake
bench_build "$BUILD" bench_scaling_sim
SIM=$BUILD/bench/bench_scaling_sim
bench_init
bench_machine

if [ "${QUICK:-0}" = 1 ]; then
    SCALE=(--nodes 100 --users 100000 --rate 1000000)
else
    SCALE=(--nodes 1000 --users 100000000 --rate 50000000)
fi
# The costs, microseconds of CPU per operation (docs/scaling.md, "Inputs"): SL.THROTTLE sent
# alone, SL.LEASE (its instructions over SL.THROTTLE's, times SL.THROTTLE's cost), a pipelined
# command, and sluiced's side of each.
COSTS=(--redis-decide-us "${REDIS_DECIDE_US:-11.70}" --redis-lease-us "${REDIS_LEASE_US:-13.10}"
    --redis-batched-us 3.80 --sluiced-remote-us 10.20 --sluiced-batched-us 2.38
    --sluiced-local-us 0.99)

sim() {
    say ""
    say "\$ bench_scaling_sim $*"
    "$SIM" "$@"
}
say ""
say "== 1. the plan's rule: at most 100 in any rolling 60 s (sliding_log), Zipf 0.8"
sim "${SCALE[@]}" "${COSTS[@]}" --zipf 0.8 --algorithm sliding_log --limit 100 --window 60s
say ""
say "== 2. the same users under gcra, 100 per 60 s (capacity 101): the rule leases can serve"
sim "${SCALE[@]}" "${COSTS[@]}" --zipf 0.8 --algorithm gcra --limit 100 --window 60s
say ""
say "== 3. one hot key under its limit, 300 k/s from 3 nodes (where leases pay)"
sim --nodes 3 --users 1 --rate 300000 "${COSTS[@]}" --algorithm gcra --limit 100000000 \
    --window 60s --seconds 20
