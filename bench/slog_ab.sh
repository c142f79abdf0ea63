#!/bin/sh
# bench/slog_ab.sh REV [PAIRS] - sliding_log decisions of this tree against revision REV.
#
# Builds REV's libsluice (static, RelWithDebInfo, as bench/run.sh builds) in a temporary
# directory and this tree's in build-bench/, links bench/bench_slog.c (the public API only, so
# it builds against either) to each, then runs the two in turns PAIRS times (default 15), one
# repetition each, so that what disturbs one run of a pair likely disturbs the other. Prints per
# case the median (min-max) of each side and the median (min-max) of the per-pair ratios
# new/old. Needs git, cmake, cc and python3; about a minute of building.
#
#   bench/slog_ab.sh 7509bb9          the release before sliding_log kept entries
set -eu

cd "$(dirname "$0")/.."
REV=${1:?usage: bench/slog_ab.sh REV [PAIRS]}
PAIRS=${2:-15}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

build() { # build SRC_DIR BUILD_DIR: libsluice.a of SRC_DIR in BUILD_DIR
    cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF -DSLUICE_ASAN=OFF \
        -DSLUICE_TSAN=OFF >/dev/null
    cmake --build "$2" --target sluice_static -j "$(nproc)" >/dev/null
}

mkdir "$TMP/old"
git archive "$REV" | tar -x -C "$TMP/old"
build "$TMP/old" "$TMP/old/build"
build . build-bench
# each against its own headers: sl_rule_t is not the same struct in both
cc -O2 -g -DNDEBUG -std=gnu11 -I"$TMP/old/include" -I"$TMP/old/build/include" bench/bench_slog.c \
    "$TMP/old/build/src/libsluice.a" -lpthread -o "$TMP/bench_slog_old"
cc -O2 -g -DNDEBUG -std=gnu11 -Iinclude -Ibuild-bench/include bench/bench_slog.c \
    build-bench/src/libsluice.a -lpthread -o "$TMP/bench_slog_new"

echo "source: old $(git rev-parse --short "$REV"), new $(git rev-parse --short HEAD)" \
    "(uncommitted: $(git status --porcelain -- src include | awk '{print $2}' | tr '\n' ' '))"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq 1 "$PAIRS"); do
    "$TMP/bench_slog_old" --reps 1 --iters 2000000 | sed -n '2,$p' | sed 's/^/old /'
    "$TMP/bench_slog_new" --reps 1 --iters 2000000 | sed -n '2,$p' | sed 's/^/new /'
done >"$TMP/runs"
python3 - "$TMP/runs" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, rest = line.split(' ', 1)
    m = re.match(r'\s*(.*?)\s{2,}([0-9.]+) \(', rest)
    if m:
        rows.setdefault(m.group(1), {}).setdefault(side, []).append(float(m.group(2)))
for case, d in rows.items():
    o, n = d['old'], d['new']
    r = [b / a for a, b in zip(o, n)]
    print("%s\n  old %.1f ns (%.1f-%.1f), new %.1f ns (%.1f-%.1f), new/old %.3g (%.3g-%.3g), "
          "%d pairs" % (case, statistics.median(o), min(o), max(o), statistics.median(n), min(n),
                        max(n), statistics.median(r), min(r), max(r), len(r)))
PY
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
