#!/usr/bin/env bash
# test_module_replication.sh - sluice.so replicates the effect of a decision, not the command:
#   - a replica WITHOUT the module follows a primary running a mixed workload (every algorithm,
#     CL.THROTTLE, peeks, rejections, resets, settles: refunds, debts, AT in the past; keys
#     decided now and then under other numbers, which converts their values) and ends with
#     byte-identical values (DUMP) and identical absolute expiries (PEXPIRETIME); it only ever
#     executed SET and DEL, one SET per admission, per settle that changed a value and per
#     command that converted one, one DEL per reset of an existing key and per settle or
#     conversion that left a key fresh;
#   - holds (SL.ACQUIRE, SL.RELEASE): a SET per acquire that makes a hold and per release that
#     leaves holds, a DEL per release that leaves the key fresh, nothing for a refused acquire or a
#     release of no live hold, nor for a bad id after a good one; the replica's bytes and expiry
#     are the primary's;
#   - an AOF primary (with a rewrite in the middle of the workload) restarted WITHOUT the module
#     loads the same bytes and expiries.
# Windows are one hour, so no key expires while the test runs.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
[ -f "$MODULE" ] || { echo "no $MODULE"; exit 1; }
# redis_up NAME ARGS..: start_redis, or its log and exit 1
redis_up() { start_redis "$@" || { cat "$TMP/$1.log"; exit 1; }; }
# wait_info PORT FIELD:VALUE: polls INFO (up to 20 s) until the line appears.
wait_info() {
    local i
    for ((i = 0; i < 400; i++)); do
        if redis-cli -p "$1" INFO | tr -d '\r' | grep -qx "$2"; then
            return 0
        fi
        sleep 0.05
    done
    echo "INFO of port $1 never showed $2"
    return 1
}
# workload SEED FILE: writes commands (one per line) to FILE and, per line, what it may write to
# FILE.kind: "exists" (followed by a reset: a DEL when it answered 1), "before" and then "after"
# (GETs around a settle: a SET when the value changed, a DEL when it went), "tafter" (likewise
# around a decision under the key's usual numbers: it writes when it admits, or when the key's
# value was converted to other numbers before) or "oafter" (around a decision under other
# numbers than the key's), "none". A decision that admits a cost writes a value that differs:
# its time or its counts change.
workload() {
    python3 - "$1" "$2" <<'PY'
import random, sys
rng = random.Random(int(sys.argv[1]))
H = 3600000
rules = {
    "fixed_window": ["fixed_window", 3, H],
    "sliding_log": ["sliding_log", 4, H],
    "sliding_window": ["sliding_window", 3, H],
    "sliding_buckets": ["sliding_buckets", 5, H, "BUCKETS", 10],
    "token_bucket": ["token_bucket", 5, H, "BURST", 3],
    "gcra": ["gcra", 4, H, "BURST", 2],
}
# other numbers of each algorithm: a key decided under them is converted
others = {
    "fixed_window": [["fixed_window", 2, H], ["fixed_window", 5, 2 * H]],
    "sliding_log": [["sliding_log", 2, H], ["sliding_log", 6, 2 * H]],
    "sliding_window": [["sliding_window", 5, H], ["sliding_window", 3, 2 * H]],
    "sliding_buckets": [["sliding_buckets", 2, H, "BUCKETS", 10],
                        ["sliding_buckets", 5, 2 * H, "BUCKETS", 4]],
    "token_bucket": [["token_bucket", 5, H, "BURST", 1], ["token_bucket", 10, H, "BURST", 3]],
    "gcra": [["gcra", 4, H, "BURST", 5], ["gcra", 2, H, "BURST", 2]],
}
with open(sys.argv[2], "w") as cmds, open(sys.argv[2] + ".kind", "w") as kinds:
    def emit(cmd, kind):
        cmds.write(" ".join(str(a) for a in cmd) + "\n")
        kinds.write(kind + "\n")
    for _ in range(2500):
        r = rng.random()
        alg = rng.choice(sorted(rules))
        key = "w:%s:%d" % (alg, rng.randrange(30))
        other = rng.random() < 0.2  # under other numbers than the key's: converts it
        args = rng.choice(others[alg]) if other else rules[alg]
        if r < 0.05:
            emit(["SL.PEEK", key, *args], "none")
        elif r < 0.15:
            q = rng.choice([0, 1, 1, 2, 5])
            ckey = "w:cl:%d" % rng.randrange(20)
            emit(["GET", ckey], "before")
            emit(["CL.THROTTLE", ckey, *([5, 20] if other else [3, 10]), 3600, q], "cl")
            emit(["GET", ckey], "oafter" if other else "tafter")
        elif r < 0.18:
            emit(["EXISTS", key], "exists")
            emit(["SL.RESET", key], "none")
        elif r < 0.33:  # a settle: a refund, less, the same, more (debt); now, or AT long ago
            reserved = rng.choice([0, 1, 2, 3])
            actual = rng.choice([0, 0, max(0, reserved - 1), reserved, reserved + 1,
                                 reserved + 9])
            at = ["AT", rng.choice([0, 1700000000000])] if rng.random() < 0.2 else []
            emit(["GET", key], "before")
            emit(["SL.SETTLE", key, *args, "RESERVED", reserved, "ACTUAL", actual, *at],
                 "none")
            emit(["GET", key], "after")
        else:  # under other numbers: converts the key, even when refused
            c = rng.choice([0, 1, 1, 1, 2, 3, 7])
            emit(["GET", key], "before")
            emit(["SL.THROTTLE", key, *args, "COST", c], "sl")
            emit(["GET", key], "oafter" if other else "tafter")
PY
}
# expected_writes FILE OUT: "SETS DELS SETTLE_SETS SETTLE_DELS CONVERT_SETS REFUSAL_WRITES" the
# replies in OUT (redis-cli --csv) imply: every write, those of them the settles made, the SETs
# of decisions under other numbers, and the writes of those that refused (a conversion alone).
expected_writes() {
    python3 - "$1.kind" "$2" <<'PY'
import sys
sets = dels = settle_sets = settle_dels = convert_sets = refusal_writes = 0
command = decided = None
before = None
with open(sys.argv[1]) as kinds, open(sys.argv[2]) as out:
    for kind, reply in zip(kinds, out):
        kind, reply = kind.split(), reply.rstrip("\n")
        if kind[0] in ("tafter", "oafter") and reply != before:
            sets += reply != "NULL"
            dels += reply == "NULL"
            convert_sets += kind[0] == "oafter" and reply != "NULL"
            refused = decided.startswith("1," if command == "cl" else "0,")
            refusal_writes += kind[0] == "oafter" and refused
        elif kind[0] in ("sl", "cl"):
            command, decided = kind[0], reply
        elif kind[0] == "exists" and reply == "1":
            dels += 1
        elif kind[0] == "before":
            before = reply
        elif kind[0] == "after" and reply != before:
            settle_dels += reply == "NULL"
            settle_sets += reply != "NULL"
print(sets + settle_sets, dels + settle_dels, settle_sets, settle_dels, convert_sets,
      refusal_writes)
PY
}
# snapshot PORT OUT: every key with its DUMP and PEXPIRETIME, in key order.
snapshot() {
    redis-cli -p "$1" --scan | sort >"$2.keys"
    sed 's/^/DUMP /; p; s/^DUMP /PEXPIRETIME /' "$2.keys" | redis-cli -p "$1" --no-raw >"$2"
}

# --- a primary with the module, a replica without it
redis_up primary --repl-diskless-sync-delay 0 --loadmodule "$MODULE"
PP=$REDIS_PORT
redis_up replica --replicaof 127.0.0.1 "$PP"
RP=$REDIS_PORT
check link-up wait_info "$RP" master_link_status:up

check debug-disabled [ "$(redis-cli -p "$PP" SL.DEBUG SETTIME 1)" = \
    "ERR SL.DEBUG is disabled: load sluice.so with the argument 'testclock'" ]
check replica-has-no-module bash -c "redis-cli -p $RP SL.PEEK k gcra 1 1000 | grep -q 'unknown command'"

workload 7 "$TMP/work1"
redis-cli -p "$PP" --csv <"$TMP/work1" >"$TMP/out1"
check replies-all [ "$(wc -l <"$TMP/out1")" -eq "$(wc -l <"$TMP/work1")" ]
read -r sets dels settle_sets settle_dels convert_sets refusal_writes < <(expected_writes \
    "$TMP/work1" "$TMP/out1")
echo "workload: $(wc -l <"$TMP/work1") commands, $sets SETs ($settle_sets by settles," \
    "$convert_sets by decisions under other numbers), $dels DELs ($settle_dels by settles);" \
    "$refusal_writes writes by refusals under other numbers"
check workload-writes [ "$sets" -gt 300 ]
check workload-settle-writes [ "$settle_sets" -gt 50 ]
check workload-settle-dels [ "$settle_dels" -gt 5 ]
check workload-convert-writes [ "$convert_sets" -gt 50 ]
check workload-refusal-writes [ "$refusal_writes" -gt 10 ]
check workload-settle-debts [ "$(grep -c '^SL.SETTLE' "$TMP/work1")" -gt 200 ]
check workload-rejects [ "$(grep -c '^0,' "$TMP/out1")" -gt 100 ]
check workload-dels [ "$dels" -gt 10 ]
check replica-caught-up poll 20 caught_up "$PP" "$RP"
snapshot "$PP" "$TMP/snap-primary"
snapshot "$RP" "$TMP/snap-replica"
check keys-present [ "$(wc -l <"$TMP/snap-primary.keys")" -gt 100 ]
check replica-keys cmp -s "$TMP/snap-primary.keys" "$TMP/snap-replica.keys"
check replica-bytes-ttl cmp -s "$TMP/snap-primary" "$TMP/snap-replica"
check ttl-absolute bash -c "! grep -qx -- '-1' '$TMP/snap-primary'"
stats=$(redis-cli -p "$RP" INFO commandstats | tr -d '\r')
check replica-set-count grep -qx "cmdstat_set:calls=$sets,.*" <<<"$stats"
check replica-del-count grep -qx "cmdstat_del:calls=$dels,.*" <<<"$stats"
# Besides SET and DEL, only what the replication link and this script send.
others=$(grep -v -E '^(#|$|cmdstat_(set|del|ping|select|replconf|info|scan|dump|pexpiretime|command\|docs):)' \
    <<<"$stats")
check replica-only-set-del [ -z "$others" ]
[ -z "$others" ] || echo "$others"

# --- holds: an acquire that makes a hold and a release write the key's value (SET, or DEL when
# the release leaves it fresh); a refused acquire and a release of no live hold write nothing
stat_calls() { # PORT COMMAND: its calls in INFO commandstats (0 when never called)
    redis-cli -p "$1" INFO commandstats | tr -d '\r' | sed -n "s/^cmdstat_$2:calls=\([0-9]*\),.*/\1/p" |
        grep . || echo 0
}
hold_args=(concurrency 2 3600000)
check holds-caught-up poll 20 caught_up "$PP" "$RP"
sets0=$(stat_calls "$RP" set)
dels0=$(stat_calls "$RP" del)
h1=$(redis-cli -p "$PP" --raw SL.ACQUIRE hold:k "${hold_args[@]}" | tail -n 1)
h2=$(redis-cli -p "$PP" --raw SL.ACQUIRE hold:k "${hold_args[@]}" TIMEOUT 60000 | tail -n 1)
check holds-made [ "$h1" -gt 0 -a "$h2" -gt 0 -a "$h1" != "$h2" ]
refused=$(redis-cli -p "$PP" --csv SL.ACQUIRE hold:k "${hold_args[@]}")
check hold-refused [ "${refused%%,*}" = 0 ]
check release-of-no-hold bash -c "redis-cli -p $PP SL.RELEASE hold:k ${hold_args[*]} ID 12345 |
    grep -q 'no such hold'"
# the rule's parse is kept for the next release (only the id differs): a bad id after it is the
# parser's error all the same, and writes nothing
check release-bad-id bash -c "redis-cli -p $PP SL.RELEASE hold:k ${hold_args[*]} ID 1x |
    grep -q 'id is not an integer'"
check release-negative-id bash -c "redis-cli -p $PP SL.RELEASE hold:k ${hold_args[*]} ID -1 |
    grep -q 'id must be >= 0'"
check release-h1 [ "$(redis-cli -p "$PP" SL.RELEASE hold:k "${hold_args[@]}" ID "$h1")" = OK ]
check holds-caught-up2 poll 20 caught_up "$PP" "$RP"
hold_value() { printf 'DUMP hold:k\nPEXPIRETIME hold:k\n' | redis-cli -p "$1" --no-raw; }
check hold-kept [ "$(redis-cli -p "$PP" EXISTS hold:k)" = 1 ]
check hold-bytes-ttl [ "$(hold_value "$PP")" = "$(hold_value "$RP")" ]
check release-h2 [ "$(redis-cli -p "$PP" SL.RELEASE hold:k "${hold_args[@]}" ID "$h2")" = OK ]
check holds-caught-up3 poll 20 caught_up "$PP" "$RP"
check hold-gone-on-replica [ "$(redis-cli -p "$RP" EXISTS hold:k)" = 0 ]
check hold-sets [ "$(stat_calls "$RP" set)" -eq $((sets0 + 3)) ]
check hold-dels [ "$(stat_calls "$RP" del)" -eq $((dels0 + 1)) ]

# --- AOF: written with the module, loaded without it
redis_up aof --appendonly yes --loadmodule "$MODULE"
AP=$REDIS_PORT
workload 8 "$TMP/work2"
redis-cli -p "$AP" --csv <"$TMP/work2" >"$TMP/out2"
check aof-rewrite bash -c "redis-cli -p $AP BGREWRITEAOF | grep -q 'rewriting started'"
check aof-rewritten wait_info "$AP" aof_rewrite_in_progress:0
check aof-rewritten2 wait_info "$AP" aof_rewrite_scheduled:0
workload 9 "$TMP/work3"
redis-cli -p "$AP" --csv <"$TMP/work3" >"$TMP/out3"
snapshot "$AP" "$TMP/snap-before"
check aof-stop stop_bg aof
start_redis_at aof2 "$AP" --dir "$TMP/aof" --appendonly yes || { cat "$TMP/aof2.log"; exit 1; }
check aof-loaded wait_info "$AP" loading:0
snapshot "$AP" "$TMP/snap-after"
check aof-keys-present [ "$(wc -l <"$TMP/snap-before.keys")" -gt 100 ]
check aof-keys cmp -s "$TMP/snap-before.keys" "$TMP/snap-after.keys"
check aof-bytes-ttl cmp -s "$TMP/snap-before" "$TMP/snap-after"

stop_bg aof2
stop_bg replica
stop_bg primary
check no-sanitizer-report bash -c "! cat '$TMP'/*.log | grep -E 'AddressSanitizer|runtime error:'"
finish
