#!/usr/bin/env bash
# bench/core_instructions.sh - instructions per sl_table_decide() and per sl_decide() call, for
# each algorithm, counted by callgrind: a figure the machine's noise cannot move. bench/core_calls.c
# is compiled against BUILD's libsluice.a (and SRC's public header: both may be an older tree's),
# run under valgrind --tool=callgrind with N and with 2N decisions, and the difference of the
# totals divided by N is printed: one call plus the driver's loop (a few instructions).
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
total() { # ALGORITHM N MODE: the program's instructions
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$TMP/core_calls" "$@" \
        >/dev/null 2>&1
    awk '/^(summary|totals):/ { print $2; exit }' "$TMP/cg.out"
}
printf '%-16s %16s %10s\n' algorithm sl_table_decide sl_decide
for alg in fixed_window sliding_log sliding_window sliding_buckets token_bucket gcra; do
    per=()
    for mode in t d; do
        a=$(total "$alg" "$N" "$mode")
        b=$(total "$alg" $((2 * N)) "$mode")
        per+=("$(awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')")
    done
    printf '%-16s %16s %10s\n' "$alg" "${per[0]}" "${per[1]}"
done
