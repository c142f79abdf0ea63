#!/usr/bin/env bash
# bench/core_instructions.sh - instructions per sl_table_decide() and per sl_decide() call, for
# each algorithm, counted by callgrind: a figure the machine's noise cannot move. bench/core_calls.c
# is compiled against BUILD's libsluice.a (and SRC's public header: both may be an older tree's),
# run under valgrind --tool=callgrind with N and with 2N decisions, and the difference of the
# totals divided by N is printed: one call plus the driver's loop (a few instructions). When SRC's
# libsluice has in-flight rules, bench/hold_calls.c likewise counts an acquire+release pair of a
# concurrency rule, and the pair's ratio to a gcra decision is printed.
#
#   bench/core_instructions.sh BUILD [SRC]      SRC defaults to this tree; N=100000 by default
set -euo pipefail
BUILD=${1:?usage: bench/core_instructions.sh BUILD [SRC]}
SRC=${2:-$(cd "$(dirname "$0")/.." && pwd)}
N=${N:-100000}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -I"$SRC/include" -I"$BUILD/include" "$HERE/core_calls.c" "$BUILD/src/libsluice.a" \
    -lpthread -o "$TMP/core_calls"
total() { # PROGRAM ARGS..: the program's instructions
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$TMP/$@" >/dev/null 2>&1
    awk '/^(summary|totals):/ { print $2; exit }' "$TMP/cg.out"
}
printf '%-16s %16s %10s\n' algorithm sl_table_decide sl_decide
for alg in fixed_window sliding_log sliding_window sliding_buckets token_bucket gcra; do
    per=()
    for mode in t d; do
        a=$(total core_calls "$alg" "$N" "$mode")
        b=$(total core_calls "$alg" $((2 * N)) "$mode")
        per+=("$(awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')")
    done
    printf '%-16s %16s %10s\n' "$alg" "${per[0]}" "${per[1]}"
    [ "$alg" != gcra ] || gcra=("${per[@]}")
done
grep -q sl_table_acquire "$SRC/include/sluice/sluice.h" || exit 0
cc -O2 -I"$SRC/include" -I"$BUILD/include" "$HERE/hold_calls.c" "$BUILD/src/libsluice.a" \
    -lpthread -o "$TMP/hold_calls"
per=()
for mode in t d; do
    a=$(total hold_calls "$N" "$mode")
    b=$(total hold_calls $((2 * N)) "$mode")
    per+=("$(awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')")
done
printf '%-16s %16s %10s   (sl_table_acquire+release / sl_acquire+release: one pair)\n' \
    "concurrency" "${per[0]}" "${per[1]}"
awk -v p="${per[0]}" -v g="${gcra[0]}" 'BEGIN { printf "pair / gcra table decision: %.2fx (target <= 3x)\n", p / g }'

