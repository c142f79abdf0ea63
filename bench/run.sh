#!/bin/sh
# bench/run.sh - builds the benchmarks as shipped and prints every figure of docs/performance.md.
#
# Builds in build-bench/ with the default build type, RelWithDebInfo (-O2 -g -DNDEBUG; CMake's
# "Release" would be -O3), refuses -O3 / -march=native, prints the source state it measured and
# then each command before its output. About two minutes on a 2-core VM, ~1.1 GiB of memory.
#
#   bench/run.sh                 everything, 5 repetitions per figure
#   REPS=7 bench/run.sh          more repetitions
#   QUICK=1 bench/run.sh         a smoke run: 1 M keys, fewer decisions (figures not comparable)
#   BUILD_DIR=/tmp/b bench/run.sh
set -eu

cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build-bench}
REPS=${REPS:-5}
if [ "${QUICK:-0}" = 1 ]; then
    KEYS=1000000 OPS=500000 ITERS=2000000 SLOG_KEYS=10000
else
    KEYS=10000000 OPS=4000000 ITERS=10000000 SLOG_KEYS=100000
fi

run() {
    printf '\n$ %s\n' "$*"
    "$@"
}

run cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_BENCH=ON -DSLUICE_TESTS=OFF \
    -DSLUICE_ASAN=OFF -DSLUICE_TSAN=OFF >/dev/null
run cmake --build "$BUILD" --target bench_core bench_proto -j "$(nproc)"

if grep -E -e '-O3|-Ofast|-march=native|-fsanitize' "$BUILD/compile_commands.json" >/dev/null; then
    echo "bench/run.sh: $BUILD compiles with -O3, -march=native or a sanitizer; not the shipped" \
         "build, refusing to report figures" >&2
    exit 1
fi
echo
echo "compile flags: $(grep -o -e '-O[0-9s]* -g -DNDEBUG' "$BUILD/compile_commands.json" | sort -u | tr '\n' ' ')"
if git rev-parse --git-dir >/dev/null 2>&1; then
    echo "source: git $(git rev-parse --short HEAD)," \
         "src+include sha256 $(find src include -type f \( -name '*.c' -o -name '*.h' -o -name '*.in' \) \
                               | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)," \
         "uncommitted: $(git status --porcelain -- src include | awk '{print $2}' | tr '\n' ' ')"
fi

B=$BUILD/bench/bench_core
run "$B" hot --reps "$REPS" --iters "$ITERS"
run "$B" random --reps "$REPS" --keys "$KEYS" --ops "$OPS"
run "$B" threads --reps "$REPS" --keys "$KEYS" --ops "$OPS"
run "$B" memory --alg gcra --keys "$KEYS"
run "$B" memory --alg fixed_window --keys "$KEYS"
run "$B" memory --alg sliding_window --keys "$KEYS"
run "$B" memory --alg gcra --keys "$KEYS" --presize
run "$B" slog --keys "$SLOG_KEYS" --limit 100 --limit2 200
run "$BUILD/bench/bench_proto" --reps "$REPS"
