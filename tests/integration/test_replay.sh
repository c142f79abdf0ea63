#!/usr/bin/env bash
# test_replay.sh - `sluice replay` end to end: real files in a temp dir, exact outputs.
#
# Expected outputs in tests/integration/replay/*.out were derived by hand from
# docs/algorithms.md (each .log file says which rule it is run with). Every case checks the
# exit code, stdout byte for byte and stderr (exactly, or a prefix for messages whose tail is
# the library's sl_strerror() text).
#
# Needs SLUICE_BUILD_DIR (the binary is $SLUICE_BUILD_DIR/src/cli/sluice) and
# SLUICE_SOURCE_DIR; ctest sets both.
set -u

: "${SLUICE_BUILD_DIR:?set SLUICE_BUILD_DIR to the build tree}"
: "${SLUICE_SOURCE_DIR:?set SLUICE_SOURCE_DIR to the source tree}"
SLUICE=$SLUICE_BUILD_DIR/src/cli/sluice
DATA=$SLUICE_SOURCE_DIR/tests/integration/replay
[ -x "$SLUICE" ] || { echo "no binary at $SLUICE"; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sluice-replay.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cp "$DATA"/* "$TMP"/
cp "$SLUICE_SOURCE_DIR/examples/traffic.log" "$TMP"/
cd "$TMP" || exit 1

FAILS=0
CASES=0
RC=0

# run CMD...: runs the command, stdout to ./stdout, stderr to ./stderr, exit code to $RC.
run() {
    "$@" >stdout 2>stderr
    RC=$?
}

fail() {
    echo "FAIL [$CASE]: $*"
    FAILS=$((FAILS + 1))
}

# check NAME RC STDOUT_FILE STDERR [prefix]: compares the last run().
# STDOUT_FILE may be /dev/null; STDERR is the exact text (without the final newline), or with
# "prefix" only its start.
check() {
    CASE=$1
    CASES=$((CASES + 1))
    [ "$RC" -eq "$2" ] || fail "exit code $RC, expected $2"
    if ! cmp -s stdout "$3"; then
        fail "stdout differs from $3:"
        diff "$3" stdout | head -20
    fi
    if [ "${5:-}" = prefix ]; then
        case "$(cat stderr)" in
        "$4"*) ;;
        *) fail "stderr does not start with '$4': $(cat stderr)" ;;
        esac
    elif [ "$(cat stderr)" != "$4" ]; then
        fail "stderr is '$(cat stderr)', expected '$4'"
    fi
}

SLOG=(--algorithm sliding_log --limit 3 --window 10s)

# ---- well-formed input -------------------------------------------------------------------

run "$SLUICE" replay "${SLOG[@]}" seed003.log
check "seed 003 sliding_log" 0 seed003.out ""

run "$SLUICE" replay "${SLOG[@]}" --summary seed003.log
check "--summary" 0 seed003.summary.out ""

run "$SLUICE" replay --summary seed003.log "${SLOG[@]}"
check "flags after FILE" 0 seed003.summary.out ""

run "$SLUICE" replay "${SLOG[@]}" - <seed003.log
check "stdin with -" 0 seed003.out ""

run "$SLUICE" replay "${SLOG[@]}" <seed003.log
check "stdin without FILE" 0 seed003.out ""

cat seed003.log | run "$SLUICE" replay "${SLOG[@]}" -
check "stdin from a pipe" 0 seed003.out ""

sed 's/$/\r/' seed003.log >crlf.log
run "$SLUICE" replay "${SLOG[@]}" crlf.log
check "CRLF line endings" 0 seed003.out ""

# tabs, runs of blanks, trailing blanks, no newline at the end of the file
printf '0\tuser1\n1000  user1 \n\t1000 user2\t2\t\n2000 user1\n3000\t user1\n  # c\n3000 user2 2\n11000 user1\n12000 user3 4\n20000 edge 3\n29999 edge\n30000 edge 3' >blanks.log
run "$SLUICE" replay "${SLOG[@]}" blanks.log
check "tabs and trailing blanks" 0 seed003.out ""

run "$SLUICE" replay --algorithm gcra --limit 1 --window 1s --burst 4 gcra.log
check "gcra: redis-cell's table" 0 gcra.out ""

run "$SLUICE" replay --algorithm token_bucket --limit 2 --window 1s --burst 2 \
    --max-delay 500ms token_bucket_delay.log
check "token_bucket --max-delay: DELAY column" 0 token_bucket_delay.out ""

run "$SLUICE" replay --algorithm sliding_log --limit 1 --window 1500ms --unit s unit_s.log
check "--unit s rounds up" 0 unit_s.out ""

run "$SLUICE" replay --algorithm fixed_window --limit 2 --window 1ms --unit us unit_us.log
check "--unit us" 0 unit_us.out ""

run "$SLUICE" replay --algorithm sliding_log --limit 5 --window 1m --summary traffic.log
check "examples/traffic.log (docs/cli.md)" 0 traffic.summary.out ""

: >empty.log
run "$SLUICE" replay "${SLOG[@]}" --summary empty.log
printf '# summary\n# total admitted=0 rejected=0\n' >empty.out
check "empty input" 0 empty.out ""

# a key of exactly 1024 bytes on a line of 100 000 bytes is fine
KEY1024=$(head -c 1024 /dev/zero | tr '\0' k)
{
    printf '5 %s 1' "$KEY1024"
    head -c 100000 /dev/zero | tr '\0' ' '
    printf '\n'
} >longline.log
printf '5\t%s\t1\t1\t3\t2\t0\t10000\n' "$KEY1024" >longline.out
run "$SLUICE" replay "${SLOG[@]}" longline.log
check "1024-byte key on a long line" 0 longline.out ""

# ---- malformed input: exit 1, the line named, nothing printed for it or after it ---------
# Each bad_*.log starts with the same two good requests (bad_prefix.out).

run "$SLUICE" replay "${SLOG[@]}" bad_missing_key.log
check "missing key" 1 bad_prefix.out \
    "sluice: bad_missing_key.log:4: missing key (expected TIME KEY [COST])"

run "$SLUICE" replay "${SLOG[@]}" bad_time.log
check "non-integer time" 1 bad_prefix.out \
    "sluice: bad_time.log:5: time must be a non-negative integer or an RFC 3339 timestamp, got '12:00:03'"

run "$SLUICE" replay "${SLOG[@]}" --summary bad_cost.log
check "negative cost (no summary after an error)" 1 bad_prefix.out \
    "sluice: bad_cost.log:4: cost must be a non-negative integer, got '-1'"

run "$SLUICE" replay "${SLOG[@]}" bad_overflow.log
check "time overflowing ns" 1 bad_prefix.out \
    "sluice: bad_overflow.log:3: time 9223372036855 ms overflows 64-bit nanoseconds (max 9223372036854 ms)"

run "$SLUICE" replay "${SLOG[@]}" bad_fields.log
check "too many fields" 1 bad_prefix.out \
    "sluice: bad_fields.log:6: too many fields (expected TIME KEY [COST]), got 'login'"

printf '0 alice\n1000 bob\n99999999999999999999 alice\n' >bad_huge_time.log
run "$SLUICE" replay "${SLOG[@]}" bad_huge_time.log
check "time beyond int64" 1 bad_prefix.out \
    "sluice: bad_huge_time.log:3: time out of range, got '99999999999999999999'"

printf '0 alice\n1000 bob\n2000 %sk\n3000 alice\n' "$KEY1024" >bad_long_key.log
run "$SLUICE" replay "${SLOG[@]}" bad_long_key.log
check "key over 1024 bytes" 1 bad_prefix.out \
    "sluice: bad_long_key.log:3: key is 1025 bytes, longer than the 1024-byte maximum"

run "$SLUICE" replay "${SLOG[@]}" - <bad_cost.log
check "malformed stdin" 1 bad_prefix.out \
    "sluice: <stdin>:4: cost must be a non-negative integer, got '-1'"

sed 's/$/\r/' bad_fields.log >bad_fields_crlf.log
run "$SLUICE" replay "${SLOG[@]}" bad_fields_crlf.log
check "malformed CRLF line" 1 bad_prefix.out \
    "sluice: bad_fields_crlf.log:6: too many fields (expected TIME KEY [COST]), got 'login'"

run "$SLUICE" replay "${SLOG[@]}" no-such-file.log
check "missing file" 1 /dev/null "sluice: no-such-file.log: No such file or directory"

run "$SLUICE" replay "${SLOG[@]}" .
check "a directory" 1 /dev/null "sluice: .: read error after line 0: Is a directory"

if [ -w /dev/full ]; then
    "$SLUICE" replay "${SLOG[@]}" seed003.log >/dev/full 2>stderr
    RC=$?
    : >stdout
    check "write error" 1 /dev/null "sluice: write error: No space left on device"
fi

# ---- usage errors: exit 2, a specific message, nothing on stdout --------------------------

run "$SLUICE" replay --algorithm sliding_log --window 10s seed003.log
check "missing --limit" 2 /dev/null \
    "sluice: --limit is required
Try 'sluice replay --help' for more information."

run "$SLUICE" replay --algorithm sliding_log --limit 3 seed003.log
check "missing --window" 2 /dev/null "sluice: --window is required" prefix

run "$SLUICE" replay --algorithm sliding_log --limit 3 --window 10x seed003.log
check "bad --window" 2 /dev/null "sluice: --window: " prefix
grep -q "got '10x'" stderr || fail "the bad window is not quoted: $(cat stderr)"

run "$SLUICE" replay --algorithm sliding_log --limit 3 --window 0s seed003.log
check "zero --window" 2 /dev/null "sluice: --window: " prefix
grep -q "got '0s'" stderr || fail "the zero window is not quoted: $(cat stderr)"

run "$SLUICE" replay --algorithm leaky_bucket --limit 3 --window 10s seed003.log
check "unknown algorithm" 2 /dev/null "sluice: --algorithm: " prefix
grep -q "got 'leaky_bucket'" stderr || fail "the algorithm is not quoted: $(cat stderr)"

run "$SLUICE" replay --algorithm sliding_log --limit three --window 10s seed003.log
check "non-integer --limit" 2 /dev/null "sluice: --limit: must be an integer, got 'three'" prefix

run "$SLUICE" replay --algorithm sliding_log --limit 3 --window 10s --burst 5 seed003.log
check "--burst on sliding_log" 2 /dev/null "sluice: --burst: " prefix

run "$SLUICE" replay --algorithm gcra --limit 3 --window 10s --unit min seed003.log
check "bad --unit" 2 /dev/null "sluice: --unit: must be one of ms, us, ns, s, got 'min'" prefix

run "$SLUICE" replay "${SLOG[@]}" a.log b.log
check "two files" 2 /dev/null "sluice: replay: expected at most one FILE, got 'a.log' and 'b.log'" prefix

run "$SLUICE" replay "${SLOG[@]}" --frobnicate seed003.log
check "unknown flag prints usage" 2 /dev/null "sluice: replay: unknown option '--frobnicate'" prefix
grep -q '^usage: sluice replay' stderr || fail "no usage after an unknown flag"

run "$SLUICE" replay "${SLOG[@]}" --limit
check "flag without a value" 2 /dev/null "sluice: replay: option '--limit' needs a value" prefix

run "$SLUICE" replay --help
head -1 stdout | grep -q '^usage: sluice replay' || fail "--help prints no usage"
: >stdout
check "--help" 0 /dev/null ""

run "$SLUICE" help replay
head -1 stdout | grep -q '^usage: sluice replay' || fail "'sluice help replay' prints no usage"
: >stdout
check "help replay" 0 /dev/null ""

# ---- the command dispatcher -------------------------------------------------------------

run "$SLUICE"
check "no command" 2 /dev/null "usage: sluice COMMAND" prefix

run "$SLUICE" frobnicate
check "unknown command" 2 /dev/null "sluice: unknown command 'frobnicate'" prefix

run "$SLUICE" --help
grep -q '^  replay ' stdout || fail "--help does not list replay"
: >stdout
check "sluice --help" 0 /dev/null ""

echo "$CASES cases, $FAILS failed"
[ "$FAILS" -eq 0 ]
