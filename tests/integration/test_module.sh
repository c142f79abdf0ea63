#!/usr/bin/env bash
# test_module.sh - sluice.so in a standalone redis-server (Debian's), loaded with the test clock:
# every command and every error text (side by side with sluiced, which must answer the same),
# WRONGTYPE and keys that are not sluice state, absolute expiry, redis-cell's published
# CL.THROTTLE table, equivalence with the core (`sluice replay`) on seeded random sequences for
# all six algorithms, SL.SETTLE by hand and against the core itself (libsluice through
# tests/integration/sluice_core.py: replies, stored bytes and expiries on random sequences of
# decisions and settles), SL.LEASE and SL.RETURN by hand, CLOSED_FROM (a closed start) by hand,
# and memory per key against
# redis-server's own SET k v PX t.
# Times set with SL.DEBUG SETTIME are in 2096, so keys written under the test clock never expire
# by redis-server's real clock while the test runs.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
[ -f "$MODULE" ] || { echo "no $MODULE"; exit 1; }
# (DEBUG from loopback: the memory case below waits for the key table's rehash with HTSTATS)
start_redis redis --enable-debug-command local --loadmodule "$MODULE" testclock ||
    { cat "$TMP/redis.log"; exit 1; }
PORT=$REDIS_PORT
# Python drivers calling libsluice (sluice_core.py) need the ASan runtime first in an ASan build.
CORE_ENV=()
if ldd "$SLUICE_BUILD_DIR/src/libsluice.so" | grep -q libasan; then
    CORE_ENV=(LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
start_sluiced sluiced --config-store "$TMP/sluice.db" --snapshot "" --threads 1 ||
    { cat "$TMP/sluiced.log"; exit 1; }

START_NS=4000000000000000000 # 2096-10-02, a whole second
START_MS=4000000000000

# Output of redis-cli, lines joined by spaces, blank lines dropped.
rc() { redis-cli -p "$PORT" "$@" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
# tests/integration/resp_client.py: a small pipelining RESP client for the checks redis-cli
# cannot express.
export PYTHONPATH=$SLUICE_SOURCE_DIR/tests/integration
# old_value KEY FORMAT ALGORITHM LIMIT WINDOW_MS: rewrites KEY's value as an older sluice.so
# wrote it (formats 1 to 3: a 4-byte header with the 16-bit hash of the rule's numbers; format 4
# of sliding_log: today's header but for the format), a sliding_log's packed state in the older
# form of one stamp per unit (tests/integration/sluice_core.py knows the headers and forms).
old_value() {
    env "${CORE_ENV[@]}" python3 - "$PORT" "$SLUICE_BUILD_DIR" "$@" <<'PY'
import sys
from resp_client import Conn
from sluice_core import Core, log_packed_old, module_header, params_hash
port, build, key, fmt, alg, limit, window_ms = sys.argv[1:8]
rule = Core(build).rule(alg, int(limit), int(window_ms) * 10**6)
c = Conn(int(port))
v = c.call("GET", key)
packed = v[len(module_header(rule)):] if v[1] >> 4 >= 4 else v[4:]
if alg == "sliding_log" and packed[0] & 64:
    packed = log_packed_old(rule, packed)
h = params_hash(rule)
head = bytes([0xF5, int(fmt) << 4 | rule.algorithm, h & 0xff, h >> 8])
if int(fmt) >= 4:
    head = module_header(rule, int(fmt))
c.call("SET", key, head + packed, "KEEPTTL")
PY
}

# expect NAME WANT CMD...: the module's answer must be WANT.
expect() {
    local name=$1 want=$2 got
    shift 2
    got=$(rc "$@")
    CASES=$((CASES + 1))
    if [ "$got" != "$want" ]; then
        echo "FAIL [$name]: $* -> '$got', want '$want'"
        FAILS=$((FAILS + 1))
    fi
}
# both NAME WANT CMD...: the module and sluiced must both answer WANT (fresh keys, so the answer
# does not depend on state or on the clock).
both() {
    local name=$1 want=$2 got
    shift 2
    expect "$name" "$want" "$@"
    got=$(sc "$@")
    CASES=$((CASES + 1))
    if [ "$got" != "$want" ]; then
        echo "FAIL [$name/sluiced]: $* -> '$got', want '$want'"
        FAILS=$((FAILS + 1))
    fi
}

# --- loading
check module-listed bash -c "redis-cli -p $PORT MODULE LIST | grep -qx sluice"
check flags-throttle bash -c "redis-cli -p $PORT COMMAND INFO sl.throttle | grep -qx denyoom"
check flags-cl bash -c "redis-cli -p $PORT COMMAND INFO cl.throttle | grep -qx write"
check flags-peek bash -c "redis-cli -p $PORT COMMAND INFO sl.peek | grep -qx readonly"
expect getkeys-throttle "k" COMMAND GETKEYS SL.THROTTLE k gcra 5 1000
expect getkeys-cl "k" COMMAND GETKEYS CL.THROTTLE k 1 2 3
expect getkeys-peek "k" COMMAND GETKEYS SL.PEEK k gcra 5 1000
expect getkeys-reset "k" COMMAND GETKEYS SL.RESET k

# --- the real clock (before any SETTIME): an idle key vanishes at its reset time
# (an expiry 300 ms out, so a slow machine still sees the key before it goes)
expect real-first "1 2 1 0 300" SL.THROTTLE idle gcra 1 300 BURST 1
check real-expiry bash -c "[ \$(redis-cli -p $PORT PEXPIRETIME idle) -gt \$(( \$(date +%s) * 1000 - 60000 )) ]"
gone() { [ "$(rc EXISTS idle)" = 0 ]; }
check real-vanished poll 10 gone

# --- SL.THROTTLE and SL.PEEK, same answers as sluiced on fresh keys
both gcra-1 "1 6 5 0 200" SL.THROTTLE p:g1 gcra 5 1000
both gcra-cost "1 6 3 0 600" SL.THROTTLE p:g2 gcra 5 1000 COST 3
both tb-burst "1 3 2 0 200" SL.THROTTLE p:t1 token_bucket 5 1000 BURST 3
both log-1 "1 5 4 0 1000" SL.THROTTLE p:l1 sliding_log 5 1000
both log-cost0 "1 5 5 0 0" SL.THROTTLE p:l2 sliding_log 5 1000 COST 0
both repeat-opt "1 2 1 0 500" SL.THROTTLE p:g3 gcra 2 1000 BURST 5 BURST 1
both lower-opt "1 2 1 0 500" SL.THROTTLE p:g4 gcra 2 1000 burst 1 cost 1
both delay-opt "1 2 0 0 1000" SL.THROTTLE p:g5 gcra 2 1000 BURST 1 MAX_DELAY 100 COST 2
# a window (and MAX_DELAY) with a unit, as rule files write it: the same rule as its ms
both dur-window "1 6 5 0 200" SL.THROTTLE p:d1 gcra 5 1s
# the same key under the window in ms is the same rule: its second unit taken (a unit comes back
# every 12 minutes; the times are the real clock's, so allowed, limit and remaining are compared)
both dur-window-h "1 6 5 0 720000" SL.THROTTLE p:d1h gcra 5 1h
check dur-same-rule [ "$(rc SL.THROTTLE p:d1h gcra 5 3600000 | cut -d' ' -f1-3)" = "1 6 4" ]
check dur-same-rule/sluiced [ "$(sc SL.THROTTLE p:d1h gcra 5 3600000 | cut -d' ' -f1-3)" = "1 6 4" ]
both dur-compound "1 5 4 0 90000" SL.THROTTLE p:d2 sliding_log 5 1m30s
both dur-delay "1 2 0 0 1000" SL.THROTTLE p:d3 gcra 2 1s BURST 1 MAX_DELAY 100ms COST 2
both dur-settle "1 5 5 0 0" SL.SETTLE p:d4 sliding_log 5 1s RESERVED 1 ACTUAL 0

# --- argument errors: the module's texts are sluiced's
both arity "ERR wrong number of arguments for 'sl.throttle' command" SL.THROTTLE k gcra 5
both arity-case "ERR wrong number of arguments for 'sl.throttle' command" Sl.Throttle k
both algorithm "ERR unknown algorithm 'leaky' (fixed_window, sliding_log, sliding_window, sliding_buckets, token_bucket, gcra, concurrency)" SL.THROTTLE k leaky 5 1000
both algorithm-show "ERR unknown algorithm 'a?b' (fixed_window, sliding_log, sliding_window, sliding_buckets, token_bucket, gcra, concurrency)" SL.THROTTLE k "a'b" 5 1000
both limit-int "ERR limit is not an integer or out of range" SL.THROTTLE k gcra 5x 1000
both limit-big "ERR limit is not an integer or out of range" SL.THROTTLE k gcra 9223372036854775808 1000
both window-int "ERR window_ms '1x' is not a duration: integer milliseconds (1000) or digits with a unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)" SL.THROTTLE k gcra 5 1x
both window-frac "ERR window_ms '1.5s' is not a duration: integer milliseconds (1000) or digits with a unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)" SL.THROTTLE k gcra 5 1.5s
both window-sub-ms "ERR window_ms '1500us' is not a whole number of milliseconds" SL.THROTTLE k gcra 5 1500us
both window-dur-range "ERR window_ms is out of range" SL.THROTTLE k gcra 5 9223372037s
both delay-dur "ERR max_delay 'soon' is not a duration: integer milliseconds (1000) or digits with a unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)" SL.THROTTLE k gcra 5 1000 MAX_DELAY soon
both settle-window-dur "ERR window_ms '2x' is not a duration: integer milliseconds (1000) or digits with a unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)" SL.SETTLE k gcra 5 2x RESERVED 1 ACTUAL 0
both opt-missing "ERR syntax error" SL.THROTTLE k gcra 5 1000 BURST
both opt-unknown "ERR syntax error" SL.THROTTLE k gcra 5 1000 RATE 3
both burst-int "ERR burst is not an integer or out of range" SL.THROTTLE k gcra 5 1000 BURST x
both burst-neg "ERR burst must be >= 0" SL.THROTTLE k gcra 5 1000 BURST -1
both buckets-neg "ERR buckets must be >= 0" SL.THROTTLE k sliding_buckets 5 1000 BUCKETS -2
both cost-int "ERR cost is not an integer or out of range" SL.THROTTLE k gcra 5 1000 COST 1.5
both cost-neg "ERR cost must be >= 0" SL.THROTTLE k gcra 5 1000 COST -1
both delay-neg "ERR max_delay must be >= 0" SL.THROTTLE k gcra 5 1000 MAX_DELAY -1
both delay-range "ERR max_delay is out of range" SL.THROTTLE k gcra 5 1000 MAX_DELAY 9223372036855
both limit-zero "ERR limit must be > 0" SL.THROTTLE k gcra 0 1000
both limit-neg "ERR limit must be > 0" SL.THROTTLE k gcra -3 1000
both window-zero "ERR window_ms must be > 0" SL.THROTTLE k gcra 5 0
both window-range "ERR window_ms must be > 0" SL.THROTTLE k gcra 5 9223372036855
both rule-burst "ERR invalid rule: burst must be >= 1 for token_bucket, >= 0 for gcra, and only applies to them" SL.THROTTLE k fixed_window 5 1000 BURST 3
both rule-buckets "ERR invalid rule: buckets must be between 1 and 4096, divide the window, and only applies to sliding_buckets" SL.THROTTLE k sliding_buckets 5 1000 BUCKETS 7
both rule-window "ERR invalid rule: window must be between 1ms and 366d" SL.THROTTLE k gcra 5 31708800001
both rule-log "ERR invalid rule: limit must be a positive integer (at most 1048576 for sliding_log, at most 4096 for concurrency)" SL.THROTTLE k sliding_log 1048577 1000
both never "ERR cost 9 exceeds what the inline rule gcra 4 1000 can ever admit (5 per window)" SL.THROTTLE p:n1 gcra 4 1000 COST 9
both never-opts "ERR cost 4 exceeds what the inline rule sliding_buckets 3 1000 BUCKETS 5 can ever admit (3 per window)" SL.THROTTLE p:n2 sliding_buckets 3 1000 BUCKETS 5 COST 4
# the rule as the command writes it: a duration reads as its ms, options at their defaults go
both never-dur "ERR cost 9 exceeds what the inline rule gcra 4 1000 BURST 2 MAX_DELAY 250 can ever admit (3 per window)" SL.THROTTLE p:n3 gcra 4 1s BURST 2 MAX_DELAY 250ms COST 9
both never-default "ERR cost 9 exceeds what the inline rule token_bucket 4 1000 can ever admit (4 per window)" SL.THROTTLE p:n4 token_bucket 4 1000 BURST 4 COST 9
expect never-nokey 0 EXISTS p:n1

# --- CL.THROTTLE: redis-cell's arguments and errors
both cl-readme "0 16 15 -1 2" CL.THROTTLE p:c1 15 30 60
both cl-qty "0 16 14 -1 4" CL.THROTTLE p:c2 15 30 60 2
both cl-never "1 5 5 -1 0" CL.THROTTLE p:c3 4 1 1 6
both cl-arity "ERR wrong number of arguments for 'cl.throttle' command" CL.THROTTLE k 1 2
both cl-usage "ERR Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]" CL.THROTTLE k 1 2 3 4 5
both cl-int "ERR Couldn't parse as integer: 2.5" CL.THROTTLE k 1 2.5 3
both cl-burst "ERR max_burst must be >= 0" CL.THROTTLE k -1 2 3
both cl-count "ERR count per period must be > 0" CL.THROTTLE k 1 0 3
both cl-qty-neg "ERR quantity must be >= 0" CL.THROTTLE k 1 2 3 -1
both cl-period "ERR period must be > 0" CL.THROTTLE k 1 2 0
both cl-period-big "ERR period must be > 0" CL.THROTTLE k 1 2 9223372037
both cl-rule "ERR invalid rule: window must be between 1ms and 366d" CL.THROTTLE k 1 2 31708801

# --- module-only commands and errors
expect peek-arity "ERR wrong number of arguments for 'sl.peek' command" SL.PEEK k gcra 5
expect peek-cost "ERR SL.PEEK takes no COST (it reports without consuming)" SL.PEEK k gcra 5 1000 COST 1
expect peek-bad "ERR unknown algorithm 'x' (fixed_window, sliding_log, sliding_window, sliding_buckets, token_bucket, gcra, concurrency)" SL.PEEK k x 5 1000
expect peek-fresh "1 6 6 0 0" SL.PEEK pk gcra 5 1000
expect peek-nokey 0 EXISTS pk
expect reset-arity "ERR wrong number of arguments for 'sl.reset' command" SL.RESET
expect reset-absent OK SL.RESET nothing-here
expect debug-arity "ERR wrong number of arguments for 'sl.debug' command" SL.DEBUG SETTIME
expect debug-sub "ERR unknown SL.DEBUG subcommand (SETTIME unix_ns)" SL.DEBUG NOW 1
expect debug-val "ERR unix_ns must be a non-negative integer (ns since the Unix epoch)" SL.DEBUG SETTIME -5
expect debug-val2 "ERR unix_ns must be a non-negative integer (ns since the Unix epoch)" SL.DEBUG SETTIME 12a

# --- CLOSED_FROM, a closed start (what sluiced sends after a Redis node lost its data): a key that
# does not exist, within one window of it, has taken the whole capacity then; sluiced's own
# SL.THROTTLE refuses it (its rules have a cold_start)
both closed-neg "ERR closed_from must be >= 0" SL.THROTTLE k gcra 5 1000 CLOSED_FROM -1
both closed-int "ERR closed_from is not an integer or out of range" SL.THROTTLE k gcra 5 1000 CLOSED_FROM soon
both closed-range "ERR closed_from is out of range" SL.THROTTLE k gcra 5 1000 CLOSED_FROM 9223372036855
check closed-sluiced [ "$(sc SL.THROTTLE k gcra 5 1000 CLOSED_FROM 1)" = "ERR CLOSED_FROM is sluice.so's (sluiced applies its rules' cold_start itself)" ]
check closed-sluiced-settle [ "$(sc SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL 0 CLOSED_FROM 1)" = "ERR CLOSED_FROM is sluice.so's (sluiced applies its rules' cold_start itself)" ]
# gcra 5 per s (T 200 ms, capacity 6) saturated at START: TAT START + 1200 ms. 400 ms later two
# units have come back: a peek sees 2 and writes nothing, a cost of 3 waits 200 ms (and writes
# the saturated state), a cost of 2 fits
expect settime OK SL.DEBUG SETTIME $((START_NS + 400000000))
expect cf-peek "1 6 2 0 800" SL.PEEK cf gcra 5 1000 CLOSED_FROM $START_MS
expect cf-peek-nokey 0 EXISTS cf
expect cf-refused "0 6 2 200 800" SL.THROTTLE cf gcra 5 1000 COST 3 CLOSED_FROM $START_MS
expect cf-written $((START_MS + 1200)) PEXPIRETIME cf
expect cf-admitted "1 6 0 0 1200" SL.THROTTLE cf gcra 5 1000 COST 2 CLOSED_FROM $START_MS
# a key that exists is read as it is; one window after the closed start a key is fresh
expect cf-exists-1 "1 6 5 0 200" SL.THROTTLE cf2 gcra 5 1000
expect cf-exists-2 "1 6 4 0 400" SL.THROTTLE cf2 gcra 5 1000 CLOSED_FROM $START_MS
expect cf-past "1 6 5 0 200" SL.THROTTLE cf3 gcra 5 1000 CLOSED_FROM $((START_MS - 1000))
# a refund on a sliding_log saturated at START (5 stamps) gives back one of them
expect cf-settle "1 5 1 0 600" SL.SETTLE cf4 sliding_log 5 1000 RESERVED 1 ACTUAL 0 CLOSED_FROM $START_MS

# --- the test clock: exact decisions and absolute expiry at now + reset_after, rounded up
expect settime OK SL.DEBUG SETTIME $((START_NS + 250000000))
expect fw-1 "1 5 4 0 750" SL.THROTTLE fw fixed_window 5 1000
expect fw-pxat $((START_MS + 1000)) PEXPIRETIME fw
expect settime OK SL.DEBUG SETTIME $((START_NS + 250000001))
expect gc-1 "1 6 5 0 200" SL.THROTTLE gc gcra 5 1000
expect gc-pxat $((START_MS + 451)) PEXPIRETIME gc
expect gc-2 "1 6 2 0 800" SL.THROTTLE gc gcra 5 1000 COST 3
expect gc-pxat2 $((START_MS + 1051)) PEXPIRETIME gc
bytes_gc=$(redis-cli -p "$PORT" --no-raw GET gc)
expect gc-peek "1 6 2 0 800" SL.PEEK gc gcra 5 1000
expect gc-reject "0 6 2 200 800" SL.THROTTLE gc gcra 5 1000 COST 3
expect gc-never "ERR cost 7 exceeds what the inline rule gcra 5 1000 can ever admit (6 per window)" SL.THROTTLE gc gcra 5 1000 COST 7
check gc-unchanged [ "$(redis-cli -p "$PORT" --no-raw GET gc)" = "$bytes_gc" ]
expect gc-pxat3 $((START_MS + 1051)) PEXPIRETIME gc
expect gc-len 15 STRLEN gc # the header: 7 bytes (its numbers 5 of them), the TAT 8
# CL.THROTTLE reads the same state as SL.THROTTLE gcra with the same parameters.
expect cl-shared "0 6 1 -1 1" CL.THROTTLE gc 5 5 1
# The clock steps back: gcra decides at the caller's time (the bucket has refilled less then, so
# it never grants quota), and retry and reset count from it: TAT 1250 ms, + 200 - 1200 - 0.
expect settime OK SL.DEBUG SETTIME $START_NS
expect back "0 6 0 251 1251" SL.THROTTLE gc gcra 5 1000
# An admission at a stepped-back time is decided at the key's latest time (the start of its
# window); the key still expires when that window ends, not one step-back earlier.
expect settime OK SL.DEBUG SETTIME $((START_NS + 1100000000))
expect fwb-1 "1 5 4 0 900" SL.THROTTLE fwb fixed_window 5 1000
expect settime OK SL.DEBUG SETTIME $((START_NS + 500000000))
expect fwb-back "1 5 3 0 1000" SL.THROTTLE fwb fixed_window 5 1000
expect fwb-pxat $((START_MS + 2000)) PEXPIRETIME fwb
expect settime OK SL.DEBUG SETTIME $((START_NS + 250000001))

# --- a sliding_log key holds one entry per admission (sl_state_pack): header 6 (magic, format,
# limit 100 in 1 byte, window 60000 ms in 3), e 1, count 1, then per entry its delta / 10^e
# (the first: its stamp) shifted left once, plus 1 and a count when it holds more than a unit.
# At START_NS (a whole second) e = 9: 8*10^9 is a 5-byte varint; with an entry 1 ms later e = 6:
# 8*10^12 takes 7 bytes, each 1 ms delta 1. A request of cost 10^6 under a limit of 2^20 is one
# entry: 20 bytes (the ring of one stamp per unit an older sluice.so kept held 8 MiB while the
# command ran, the value 1 MB).
expect slp-t0 OK SL.DEBUG SETTIME "$START_NS"
expect slp-1 "1 100 99 0 60000" SL.THROTTLE slp sliding_log 100 60000
expect slp-len1 13 STRLEN slp
for i in $(seq 1 11); do
    redis-cli -p "$PORT" SL.DEBUG SETTIME $((START_NS + i * 1000000)) >/dev/null
    redis-cli -p "$PORT" SL.THROTTLE slp sliding_log 100 60000 >/dev/null
done
expect slp-len12 26 STRLEN slp
expect slp-peek "1 100 88 0 60000" SL.PEEK slp sliding_log 100 60000
redis-cli -p "$PORT" SL.DEBUG SETTIME $((START_NS + 60000 * 1000000 + 5000000)) >/dev/null
expect slp-slid "1 100 93 0 60000" SL.THROTTLE slp sliding_log 100 60000 # 6 of 12 left, 1 added
expect slp-len7 23 STRLEN slp # 8 bytes, 7, five 1-ms deltas, 3 for 59994 ms
expect slp-big "1 1048576 48576 0 60000" SL.THROTTLE slpb sliding_log 1048576 60000 COST 1000000
expect slp-big-len 20 STRLEN slpb # header 8, e 1, count 1, stamp 7, 10^6 in 3
redis-cli -p "$PORT" SETRANGE slp 7 "$(printf '\145')" >/dev/null # count 101 > 100
expect slp-bad "ERR the key holds corrupt sluice state (sliding_log state out of range); SL.RESET it" SL.PEEK slp sliding_log 100 60000
expect slp-reset OK SL.RESET slp
expect settime-back OK SL.DEBUG SETTIME $((START_NS + 250000001))

# --- keys that are not this rule's state
redis-cli -p "$PORT" SET str hello >/dev/null
redis-cli -p "$PORT" RPUSH lst a >/dev/null
WT="WRONGTYPE Operation against a key holding the wrong kind of value"
NOT="ERR the key holds a string that is not sluice state (DEL it, or use another key)"
expect wrongtype "$WT" SL.THROTTLE lst gcra 5 1000
expect wrongtype-cl "$WT" CL.THROTTLE lst 1 1 1
expect wrongtype-peek "$WT" SL.PEEK lst gcra 5 1000
expect wrongtype-reset "$WT" SL.RESET lst
expect foreign "$NOT" SL.THROTTLE str gcra 5 1000
expect foreign-cl "$NOT" CL.THROTTLE str 1 1 1
expect foreign-peek "$NOT" SL.PEEK str gcra 5 1000
expect foreign-reset "$NOT" SL.RESET str
expect foreign-kept hello GET str
expect other-alg "ERR the key holds sluice state of another rule (gcra, not sliding_log); SL.RESET it or use another key" SL.THROTTLE gc sliding_log 5 1000
expect same-explicit "1 6 1 0 1000" SL.PEEK gc gcra 5 1000 BURST 5
redis-cli -p "$PORT" SET ver "$(printf '\365\126abcdefghij')" >/dev/null
expect version "ERR the key holds gcra state of format 5, this sluice.so reads formats 1 and 4 (SL.RESET it, or load a matching sluice.so)" SL.THROTTLE ver gcra 5 1000
redis-cli -p "$PORT" SET ver2 "$(printf '\365\046abcdefghij')" >/dev/null
expect version-2 "ERR the key holds gcra state of format 2, this sluice.so reads formats 1 and 4 (SL.RESET it, or load a matching sluice.so)" SL.THROTTLE ver2 gcra 5 1000
# a sliding_log key of format 1 (the whole ring of N stamps) is refused, not misread
redis-cli -p "$PORT" SET ver1 "$(printf '\365\022abcdefghij')" >/dev/null
expect version-log "ERR the key holds sliding_log state of format 1, this sluice.so reads formats 2 to 5 (SL.RESET it, or load a matching sluice.so)" SL.THROTTLE ver1 sliding_log 5 1000
# the header's format: 5 for sliding_log (one entry per admission), 4 for the others (the
# numbers the state was written under follow)
redis-cli -p "$PORT" SL.THROTTLE hdrl sliding_log 5 1000 >/dev/null
redis-cli -p "$PORT" SL.THROTTLE hdrg gcra 5 1000 >/dev/null
hdr() { redis-cli -p "$PORT" --raw GETRANGE "$1" 1 1 | head -c 1 | od -An -tu1 | tr -d ' '; }
for pair in "hdrl 82" "hdrg 70"; do # 0x52: format 5, sliding_log (2); 0x46: format 4, gcra (6)
    read -r key want <<<"$pair"
    CASES=$((CASES + 1))
    [ "$(hdr "$key")" = "$want" ] || { echo "FAIL [header $key]: byte 1 is $(hdr "$key"), want $want"; FAILS=$((FAILS + 1)); }
done
redis-cli -p "$PORT" SET alg "$(printf '\365\057abcdefghij')" >/dev/null
expect bad-alg "ERR the key holds corrupt sluice state (algorithm 15)" SL.THROTTLE alg gcra 5 1000
expect fw-2 "1 5 3 0 750" SL.THROTTLE fw fixed_window 5 1000
redis-cli -p "$PORT" APPEND fw x >/dev/null
expect bad-len "ERR the key holds corrupt sluice state (22 bytes, fixed_window needs 21); SL.RESET it" SL.THROTTLE fw fixed_window 5 1000
expect fw-reset OK SL.RESET fw
expect fw-gone 0 EXISTS fw
expect fw-3 "1 5 4 0 750" SL.THROTTLE fw fixed_window 5 1000
# fixed_window: a 5-byte header, [window index, count]; a count of 2^62 is more than any limit.
redis-cli -p "$PORT" SETRANGE fw 20 "$(printf '\100')" >/dev/null
expect bad-state "ERR the key holds corrupt sluice state (fixed_window state out of range); SL.RESET it" SL.THROTTLE fw fixed_window 5 1000
expect bad-state-peek "ERR the key holds corrupt sluice state (fixed_window state out of range); SL.RESET it" SL.PEEK fw fixed_window 5 1000

# --- redis-cell's published CL.THROTTLE table (it_rate_limits): max_burst 4, 1 per second.
# Columns: offset ms, quantity, then the reply [limited, limit, remaining, retry_s, reset_s],
# redis-cell's rounding (whole seconds, plus one for a remainder of at least 1 ms).
cell_row() {
    local i=$1 off=$2 qty=$3 want=$4
    redis-cli -p "$PORT" SL.DEBUG SETTIME $((START_NS + off * 1000000)) >/dev/null
    expect "cell-$i" "$want" CL.THROTTLE cell 4 1 1 "$qty"
}
cell_row 0 0 6 "1 5 5 -1 0"
cell_row 1 0 1 "0 5 4 -1 1"
cell_row 2 0 1 "0 5 3 -1 2"
cell_row 3 0 1 "0 5 2 -1 3"
cell_row 4 0 1 "0 5 1 -1 4"
cell_row 5 0 1 "0 5 0 -1 5"
cell_row 6 0 1 "1 5 0 1 5"
cell_row 7 3000 1 "0 5 2 -1 3"
cell_row 8 3100 1 "0 5 1 -1 4"
expect cell-pxat8 $((START_MS + 7000)) PEXPIRETIME cell
cell_row 9 4000 1 "0 5 1 -1 4"
cell_row 10 8000 1 "0 5 4 -1 1"
cell_row 11 9500 1 "0 5 4 -1 1"
cell_row 12 9500 0 "0 5 4 -1 1"
cell_row 13 9500 2 "0 5 2 -1 3"
cell_row 14 9500 5 "1 5 2 3 3"
expect cell-pxat14 $((START_MS + 12500)) PEXPIRETIME cell

# --- WATCH: a rejection or a peek does not touch the key, an admission does
watch_exec() { # WATCH key; run CMD... on another connection; MULTI; PING; EXEC
    python3 - "$PORT" "$@" <<'PY'
import sys
from resp_client import Conn
port, key, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
a, b = Conn(port), Conn(port)
a.call("WATCH", key)
b.call(*cmd)
a.call("MULTI")
a.call("PING")
print("aborted" if a.call("EXEC") is None else "executed")
PY
}
expect watch-fill "1 6 0 0 1200" SL.THROTTLE gc gcra 5 1000 COST 6
check watch-reject [ "$(watch_exec gc SL.THROTTLE gc gcra 5 1000 COST 1)" = executed ]
check watch-never [ "$(watch_exec gc SL.THROTTLE gc gcra 5 1000 COST 9)" = executed ]
check watch-peek [ "$(watch_exec gc SL.PEEK gc gcra 5 1000)" = executed ]
check watch-admit [ "$(watch_exec gc2 SL.THROTTLE gc2 gcra 5 1000 COST 1)" = aborted ]

# --- equivalence with the core: `sluice replay` and the module decide the same random
# sequences of (time, key, cost) identically, for every algorithm and for CL.THROTTLE
cat >"$TMP/equiv.py" <<'PY'
import random, subprocess, sys
from resp_client import Conn

port, sluice, tmp, seed = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
START, MS, SEC = 4 * 10**18, 10**6, 10**9
LINES = 1500

def ceil_ms(ns):
    return -1 if ns < 0 else -(-ns // MS)

def cell(ns):
    return -1 if ns < 0 else ns // SEC + (1 if ns % SEC >= MS else 0)

# name, module rule arguments, given burst/buckets (for the error's rule name), replay flags,
# capacity, CL.THROTTLE or not
CASES = [
    ("fixed_window", ["fixed_window", 5, 1000], (-1, -1), ["--limit", "5", "--window", "1000ms"], 5),
    ("sliding_log", ["sliding_log", 5, 1000], (-1, -1), ["--limit", "5", "--window", "1000ms"], 5),
    ("sliding_window", ["sliding_window", 5, 1000], (-1, -1), ["--limit", "5", "--window", "1000ms"], 5),
    ("sliding_buckets", ["sliding_buckets", 6, 1200, "BUCKETS", 4], (-1, 4),
     ["--limit", "6", "--window", "1200ms", "--buckets", "4"], 6),
    ("token_bucket", ["token_bucket", 5, 1000, "BURST", 3, "MAX_DELAY", 150], (3, -1),
     ["--limit", "5", "--window", "1000ms", "--burst", "3", "--max-delay", "150ms"], 3),
    ("gcra", ["gcra", 2, 1000, "BURST", 3, "MAX_DELAY", 300], (3, -1),
     ["--limit", "2", "--window", "1000ms", "--burst", "3", "--max-delay", "300ms"], 4),
    ("cl.throttle", None, None, ["--limit", "1", "--window", "1s", "--burst", "4"], 5),
]

conn = Conn(port)
failed = 0
for idx, (name, rule, given, flags, cap) in enumerate(CASES):
    alg = "gcra" if rule is None else rule[0]
    rng = random.Random(seed * 100 + idx)
    t = START + rng.randrange(SEC)
    lines = []
    for _ in range(LINES):
        r = rng.random()
        t += (0 if r < 0.25 else rng.randrange(1, 1000) if r < 0.35 else
              rng.randrange(1, MS) if r < 0.5 else
              rng.randrange(150 * MS) if r < 0.85 else rng.randrange(150 * MS, 1500 * MS))
        c = rng.random()
        cost = (1 if c < 0.6 else 0 if c < 0.68 else 2 if c < 0.78 else 3 if c < 0.86 else
                rng.randrange(1, cap + 1) if c < 0.97 else cap + 1)
        lines.append((t, "k%d" % rng.randrange(4), cost))
    path = "%s/equiv-%s.log" % (tmp, name)
    with open(path, "w") as f:
        f.writelines("%d %s %d\n" % l for l in lines)
    out = subprocess.run([sluice, "replay", "--algorithm", alg, "--unit", "ns", *flags, path],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("sluice replay failed: " + out.stderr)
    rows = [l.split("\t") for l in out.stdout.splitlines()]
    assert len(rows) == LINES, (name, len(rows))
    cmds, want = [], []
    for (t, key, cost), f in zip(lines, rows):
        allowed, limit, rem, retry, reset = (int(x) for x in f[3:8])
        delay = int(f[8]) if len(f) > 8 else 0
        cmds.append(["SL.DEBUG", "SETTIME", t])
        if rule is None:
            cmds.append(["CL.THROTTLE", "eq:cl:" + key, 4, 1, 1, cost])
            want.append([0 if allowed else 1, limit, rem, -1 if allowed else cell(retry),
                         cell(reset)])
            continue
        cmds.append(["SL.THROTTLE", "eq:%s:%s" % (name, key), *rule, "COST", cost])
        if not allowed and retry == -1:
            opts = "".join(" %s %d" % o for o in zip(("BURST", "BUCKETS"), given) if o[1] >= 0)
            opts += "".join(" MAX_DELAY %d" % rule[i + 1] for i, w in enumerate(rule)
                            if w == "MAX_DELAY")
            want.append("-ERR cost %d exceeds what the inline rule %s %d %d%s can ever admit "
                        "(%d per window)" % (cost, alg, rule[1], rule[2], opts, limit))
        else:
            want.append([allowed, limit, rem, ceil_ms(delay if allowed else retry),
                         ceil_ms(reset)])
    got = conn.pipeline(cmds)[1::2]
    bad = [(l, w, g) for l, w, g in zip(lines, want, got) if w != g]
    admitted = sum(1 for w in want if isinstance(w, list) and w[0] == (0 if rule is None else 1))
    never = sum(1 for w in want if isinstance(w, str))
    print("%s: %d decisions, %d admitted, %d rejected, %d never, %d differ"
          % (name, LINES, admitted, LINES - admitted - never, never, len(bad)))
    for l, w, g in bad[:5]:
        print("  at %d key %s cost %d: core %r, module %r" % (l + (w, g)))
    # both outcomes must be exercised, or the comparison proves little
    if bad or admitted < LINES // 5 or LINES - admitted - never < LINES // 10:
        failed += 1
sys.exit(1 if failed else 0)
PY
check equivalence python3 "$TMP/equiv.py" "$PORT" "$SLUICE" "$TMP" "${SLUICE_SEED:-20241}"

# --- SL.SETTLE: a reservation settled with its actual cost (sl_settle), by hand
# The worked example of docs/algorithms.md: sliding_log, 1000 per 60 s.
at() { redis-cli -p "$PORT" SL.DEBUG SETTIME $((START_NS + $1 * 1000000)) >/dev/null; }
LOG=(sliding_log 1000 60000)
at 0
expect st-reserve "1 1000 700 0 60000" SL.THROTTLE st "${LOG[@]}" COST 300
at 2000
expect st-below "1 1000 880 0 58000" SL.SETTLE st "${LOG[@]}" RESERVED 300 ACTUAL 120 AT "$START_MS"
at 5000
expect st-next "1 1000 780 0 60000" SL.THROTTLE st "${LOG[@]}" COST 100
at 7000
# the window holds 120 (at 0) + 100 (at 5 s) + 1000 (at 7 s): a peek waits for 220 to leave
# (65 s), a request of 1 for one more (67 s)
expect st-debt "0 1000 0 58000 60000" SL.SETTLE st "${LOG[@]}" RESERVED 100 ACTUAL 1100 AT $((START_MS + 5000))
expect st-debt-peek "0 1000 0 58000 60000" SL.PEEK st "${LOG[@]}"
expect st-debt-refused "0 1000 0 60000 60000" SL.THROTTLE st "${LOG[@]}"
# three entries (the count after the header's 7 bytes and the packed form's first byte: e 9, the
# stamps being whole seconds, + 64)
stbyte() { redis-cli -p "$PORT" --raw GETRANGE "$1" "$2" "$2" | head -c 1 | od -An -tu1 | tr -d ' '; }
check st-form [ "$(stbyte st 7)" = 73 ]
check st-entries [ "$(stbyte st 8)" = 3 ]
expect st-debt-pxat $((START_MS + 67000)) PEXPIRETIME st
at 65000
expect st-debt-peek-65 "1 1000 0 0 2000" SL.PEEK st "${LOG[@]}"
at 67000
expect st-paid "1 1000 999 0 60000" SL.THROTTLE st "${LOG[@]}"
check st-one-entry [ "$(stbyte st 8)" = 1 ]
# settle above, but within the limit: the difference is charged now; equal changes nothing
expect sa-1 "1 5 3 0 1000" SL.THROTTLE sa fixed_window 5 1000 COST 2
bytes_sa=$(redis-cli -p "$PORT" --no-raw GET sa)
expect sa-equal "1 5 3 0 1000" SL.SETTLE sa fixed_window 5 1000 RESERVED 2 ACTUAL 2
check sa-equal-unchanged [ "$(redis-cli -p "$PORT" --no-raw GET sa)" = "$bytes_sa" ]
expect sa-above "1 5 1 0 1000" SL.SETTLE sa fixed_window 5 1000 RESERVED 2 ACTUAL 4
# a refund (ACTUAL 0) of everything: the state is fresh, the key is deleted
expect sa-refund "1 5 5 0 0" SL.SETTLE sa fixed_window 5 1000 RESERVED 4 ACTUAL 0
expect sa-gone 0 EXISTS sa
# a refund of a fresh key gives nothing back and writes nothing; a debt on a fresh key writes
expect sf-refund "1 6 6 0 0" SL.SETTLE sf gcra 5 1000 RESERVED 3 ACTUAL 0
expect sf-none 0 EXISTS sf
expect sf-debt "0 6 0 1200 2400" SL.SETTLE sf gcra 5 1000 RESERVED 0 ACTUAL 12
expect sf-pxat $((START_MS + 67000 + 2400)) PEXPIRETIME sf
expect sf-len 15 STRLEN sf
# a debt past MAX_DEBT (default the capacity, 6: 12 units at T 200 ms owe 1200 ms, 6 units past
# an emptied bucket) is refused and writes nothing; 0 takes no debt at all. The attack of a
# client naming the largest actual, which would lock the key for centuries, changes nothing
expect sf-over "ERR settle refused: the key would owe more than max_debt (6 units past its limit); nothing was charged" SL.SETTLE sf gcra 5 1000 RESERVED 0 ACTUAL 1
expect sf-over-kept $((START_MS + 67000 + 2400)) PEXPIRETIME sf
expect sf-zero "ERR settle refused: the key would owe more than max_debt (0 units past its limit); nothing was charged" SL.SETTLE sf0 gcra 5 1000 MAX_DEBT 0 RESERVED 0 ACTUAL 7
expect sf-zero-none 0 EXISTS sf0
expect sf-zero-within "1 6 0 0 1200" SL.SETTLE sf0 gcra 5 1000 MAX_DEBT 0 RESERVED 0 ACTUAL 6
expect sf-attack "ERR settle refused: the key would owe more than max_debt (11 units past its limit); nothing was charged" SL.SETTLE victim token_bucket 11 1000 RESERVED 0 ACTUAL 9223372036854775807
expect sf-attack-none 0 EXISTS victim
expect sf-max-debt-neg "ERR max_debt must be >= 0" SL.SETTLE sf gcra 5 1000 MAX_DEBT -1 RESERVED 0 ACTUAL 1
# AT in the past names which admission is settled: with two admissions 40 s apart, refunding
# the first (AT of its millisecond) takes its stamps, not the second's. The second's 3 stamps
# are then all the window holds when the first's would have left.
at 100000
expect sp-1 "1 10 5 0 60000" SL.THROTTLE sp sliding_log 10 60000 COST 5
at 140000
expect sp-2 "1 10 2 0 60000" SL.THROTTLE sp sliding_log 10 60000 COST 3
expect sp-refund "1 10 6 0 60000" SL.SETTLE sp sliding_log 10 60000 RESERVED 5 ACTUAL 1 AT $((START_MS + 100000))
at 160000
expect sp-after "1 10 7 0 40000" SL.PEEK sp sliding_log 10 60000
# without AT the reservation is taken as admitted now: refunding the first of two admissions
# takes the newest stamps back, the second's 3 and 2 of the first's
expect sn-1 "1 10 5 0 60000" SL.THROTTLE sn sliding_log 10 60000 COST 5
at 170000
expect sn-2 "1 10 2 0 60000" SL.THROTTLE sn sliding_log 10 60000 COST 3
expect sn-refund "1 10 7 0 50000" SL.SETTLE sn sliding_log 10 60000 RESERVED 5 ACTUAL 0
# a refund that takes the newest stamps back keeps their time (the LATEST flag): a clock that
# steps back is still clamped to it
expect sl-1 "1 4 3 0 60000" SL.THROTTLE sl sliding_log 4 60000
at 175000
expect sl-2 "1 4 2 0 60000" SL.THROTTLE sl sliding_log 4 60000
expect sl-refund "1 4 3 0 55000" SL.SETTLE sl sliding_log 4 60000 RESERVED 1 ACTUAL 0
check sl-latest [ "$(stbyte sl 6)" = 105 ] # e 9 + 64 + 32
at 172000
expect sl-back "1 4 3 0 55000" SL.PEEK sl sliding_log 4 60000
at 175000
# a settle that changes nothing writes nothing (WATCH sees no change); one that does, writes
expect ws-fill "1 6 4 0 400" SL.THROTTLE ws gcra 5 1000 COST 2
check watch-settle-equal [ "$(watch_exec ws SL.SETTLE ws gcra 5 1000 RESERVED 2 ACTUAL 2)" = executed ]
check watch-settle-refilled [ "$(watch_exec ws SL.SETTLE ws gcra 5 1000 RESERVED 2 ACTUAL 0 AT 0)" = executed ]
check watch-settle-absent [ "$(watch_exec ws0 SL.SETTLE ws0 gcra 5 1000 RESERVED 2 ACTUAL 0)" = executed ]
check watch-settle-refund [ "$(watch_exec ws SL.SETTLE ws gcra 5 1000 RESERVED 2 ACTUAL 1)" = aborted ]
expect ws-after "1 6 5 0 200" SL.PEEK ws gcra 5 1000
# errors: the parser's, and those of the key
expect se-arity "ERR wrong number of arguments for 'sl.settle' command" SL.SETTLE k gcra 5
expect se-needs "ERR SL.SETTLE needs RESERVED and ACTUAL" SL.SETTLE k gcra 5 1000 ACTUAL 1
expect se-cost "ERR SL.SETTLE takes no COST (RESERVED and ACTUAL say what to settle)" SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL 0 COST 1
expect se-neg "ERR actual must be >= 0" SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL -1
expect se-at "ERR at is not an integer or out of range" SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL 0 AT now
expect se-wrongtype "$WT" SL.SETTLE lst gcra 5 1000 RESERVED 1 ACTUAL 0
expect se-foreign "$NOT" SL.SETTLE str gcra 5 1000 RESERVED 1 ACTUAL 0

# --- SL.LEASE and SL.RETURN: units of a key's quota spent elsewhere, the unused part given back.
# The worked examples of docs/algorithms.md ("Leases"), at ms times from B (a whole 10 s); a lease's
# times are in microseconds.
B=180000
LS=$((START_MS + B))
at $((B + 5000))
expect lf-lease "30 $(((LS + 5000) * 1000)) $(((LS + 10000) * 1000)) 70 5000" SL.LEASE lf fixed_window 100 10000 WANT 30 FOR 20000
at $((B + 6000))
expect lf-decide "1 100 10 0 4000" SL.THROTTLE lf fixed_window 100 10000 COST 60
at $((B + 8000))
expect lf-fewer "10 $(((LS + 8000) * 1000)) $(((LS + 9000) * 1000)) 0 2000" SL.LEASE lf fixed_window 100 10000 WANT 30 FOR 1000
at $((B + 9000))
expect lf-return "1 100 4 0 1000" SL.RETURN lf fixed_window 100 10000 GRANTED 30 UNUSED 4 AT $(((LS + 5000) * 1000)) UNTIL $(((LS + 10000) * 1000))
at $((B + 10000))
expect lf-next "1 100 0 0 10000" SL.THROTTLE lf fixed_window 100 10000 COST 100
B=200000
LS=$((START_MS + B))
at $B
expect lt-lease "4 $((LS * 1000)) $(((LS + 3000) * 1000)) 3 7000" SL.LEASE lt token_bucket 10 10000 WANT 4 FOR 3000
expect lt-refused "0 10 3 1000 7000" SL.THROTTLE lt token_bucket 10 10000 COST 4
at $((B + 2000))
expect lt-return "1 10 7 0 3000" SL.RETURN lt token_bucket 10 10000 GRANTED 4 UNUSED 1 AT $((LS * 1000)) UNTIL $(((LS + 3000) * 1000))
expect lt-decide "1 10 0 0 10000" SL.THROTTLE lt token_bucket 10 10000 COST 7
expect lt-too-long "ERR for must be at most 9000 ms for this rule (capacity - 1 intervals)" SL.LEASE lt token_bucket 10 10000 WANT 1 FOR 9001
# a lease of 0 units writes nothing; a whole lease returned at once gives the bytes back
expect lz-none "0 $(((LS + 2000) * 1000)) $(((LS + 2000) * 1000)) 0 10000" SL.LEASE lt token_bucket 10 10000 WANT 5 FOR 100
expect lx-fill "1 6 4 0 400" SL.THROTTLE lx gcra 5 1000 COST 2
bytes_lx=$(redis-cli -p "$PORT" --no-raw GET lx)
expect lx-lease "2 $(((LS + 2000) * 1000)) $(((LS + 2100) * 1000)) 1 900" SL.LEASE lx gcra 5 1000 WANT 2 FOR 100
check lx-written [ "$(redis-cli -p "$PORT" --no-raw GET lx)" != "$bytes_lx" ]
expect lx-return "1 6 4 0 400" SL.RETURN lx gcra 5 1000 GRANTED 2 UNUSED 2 AT $(((LS + 2000) * 1000)) UNTIL $(((LS + 2100) * 1000))
check lx-restored [ "$(redis-cli -p "$PORT" --no-raw GET lx)" = "$bytes_lx" ]
check watch-return-nothing [ "$(watch_exec lx SL.RETURN lx gcra 5 1000 GRANTED 2 UNUSED 0 AT $(((LS + 2000) * 1000)) UNTIL $(((LS + 2000) * 1000)))" = executed ]
# errors: the parser's, the algorithm's, and those of the key
expect le-log "ERR sliding_log cannot lease: it keeps each unit's time (sliding_buckets can)" SL.LEASE k sliding_log 10 1000 WANT 1 FOR 100
expect le-log-return "ERR sliding_log cannot lease: it keeps each unit's time (sliding_buckets can)" SL.RETURN k sliding_log 10 1000 GRANTED 1 UNUSED 1 AT 0 UNTIL 1
expect le-needs "ERR SL.LEASE needs WANT and FOR" SL.LEASE k gcra 5 1000 WANT 1
expect le-for "ERR for must be > 0" SL.LEASE k gcra 5 1000 WANT 1 FOR 0
expect le-neg "ERR want must be >= 0" SL.LEASE k gcra 5 1000 WANT -1 FOR 10
expect le-cost "ERR SL.LEASE takes no COST (WANT says how many units)" SL.LEASE k gcra 5 1000 WANT 1 FOR 10 COST 1
expect le-arity "ERR wrong number of arguments for 'sl.lease' command" SL.LEASE k gcra 5
expect lr-needs "ERR SL.RETURN needs GRANTED, UNUSED, AT and UNTIL" SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 0 AT 0
expect lr-unused "ERR unused must be <= granted" SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 2 AT 0 UNTIL 1
expect lr-until "ERR until must be >= at" SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 0 AT 5 UNTIL 1
expect lr-cost "ERR SL.RETURN takes no COST (UNUSED says what)" SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 0 AT 0 UNTIL 1 COST 1
expect le-wrongtype "$WT" SL.LEASE lst gcra 5 1000 WANT 1 FOR 10
expect le-foreign "$NOT" SL.LEASE str gcra 5 1000 WANT 1 FOR 10
expect lr-foreign "$NOT" SL.RETURN str gcra 5 1000 GRANTED 1 UNUSED 1 AT 0 UNTIL 1
at 175000 # where the cases below left the clock
expect se-other "ERR the key holds sluice state of another rule (gcra, not sliding_log); SL.RESET it or use another key" SL.SETTLE sf sliding_log 5 1000 RESERVED 1 ACTUAL 0
expect se-kept hello GET str
check flags-settle bash -c "redis-cli -p $PORT COMMAND INFO sl.settle | grep -qx denyoom"
expect getkeys-settle "k" COMMAND GETKEYS SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL 0
# values of older builds (formats 2 and 3: a 4-byte header with a hash of the numbers; format
# 4: the numbers, and the older packed form of one stamp per unit) are read under the numbers
# they name; a format 3 value whose first byte carries no flag is corrupt, as is a format 2 with
# one
old_value sl 2 sliding_log 4 60000 # flags kept
expect se-v2-flags "ERR the key holds corrupt sluice state (sliding_log state out of range); SL.RESET it" SL.PEEK sl sliding_log 4 60000
old_value sl 3 sliding_log 4 60000
expect se-v3-read "1 4 3 0 55000" SL.PEEK sl sliding_log 4 60000
old_value sp 3 sliding_log 10 60000 # no flag
expect se-v3-none "ERR the key holds corrupt sluice state (sliding_log state out of range); SL.RESET it" SL.PEEK sp sliding_log 10 60000
old_value sp 2 sliding_log 10 60000
expect se-v2-read "1 10 7 0 25000" SL.PEEK sp sliding_log 10 60000
old_value sl 4 sliding_log 4 60000
expect se-v4-read "1 4 3 0 55000" SL.PEEK sl sliding_log 4 60000
check se-v4-kept [ "$(stbyte sl 1)" = 66 ] # a peek writes nothing
expect se-v4-written "1 4 2 0 60000" SL.THROTTLE sl sliding_log 4 60000
check se-v4-rewritten [ "$(stbyte sl 1)" = 82 ] # in format 5
expect se-v6 OK SET v6 "$(printf '\365\142abcdefghij')"
expect se-v6-refused "ERR the key holds sliding_log state of format 6, this sluice.so reads formats 2 to 5 (SL.RESET it, or load a matching sluice.so)" SL.SETTLE v6 sliding_log 5 1000 RESERVED 1 ACTUAL 0

# --- a key's numbers change (an override, a rule changed, another caller's limits): the state is
# converted to the command's numbers (sl_state_convert), never less usage. The override example
# of docs/server.md: sliding_buckets 50 per minute, 6 used, held to 2: refused, and the first
# rejection writes the converted value (once: the next writes nothing); a peek under other
# numbers converts only what it reports; back at 50, 43 are left after one more.
at 200000
expect nc-use "1 50 44 0 66000" SL.THROTTLE nc sliding_buckets 50 60000 COST 6
check nc-held-writes [ "$(watch_exec nc SL.THROTTLE nc sliding_buckets 2 60000)" = aborted ]
check nc-held-limit [ "$(stbyte nc 2)" = 2 ] # the value's limit: the numbers it is written under
expect nc-held "0 2 0 66000 66000" SL.THROTTLE nc sliding_buckets 2 60000
check nc-held-once [ "$(watch_exec nc SL.THROTTLE nc sliding_buckets 2 60000)" = executed ]
expect nc-peek "1 50 44 0 66000" SL.PEEK nc sliding_buckets 50 60000
check nc-peek-nowrite [ "$(watch_exec nc SL.PEEK nc sliding_buckets 50 60000)" = executed ]
expect nc-back "1 50 43 0 66000" SL.THROTTLE nc sliding_buckets 50 60000
# gcra, 5 per s (T 200 ms), 3 taken: at 10 per s (T 100 ms) the 3 units owed are 300 ms, and
# one more makes 400; CL.THROTTLE with the same numbers reads that state as it is; with a
# smaller burst (the same T) the TAT is copied, and 500 ms owed is more than a burst of 2 holds:
# even a peek waits 200 ms
expect ng-1 "1 6 3 0 600" SL.THROTTLE ng gcra 5 1000 COST 3
expect ng-faster "1 11 7 0 400" SL.THROTTLE ng gcra 10 1000
expect ng-cl "0 11 6 -1 1" CL.THROTTLE ng 10 10 1
expect ng-burst "0 3 0 200 500" SL.PEEK ng gcra 10 1000 BURST 2
# a settle under other numbers converts first: the 5 units owed at T 100 ms are 1000 ms at
# T 200 ms, and giving 1 back (AT now) takes 200 ms off
expect ng-settle "1 6 2 0 800" SL.SETTLE ng gcra 5 1000 RESERVED 1 ACTUAL 0
# an algorithm change cannot be converted: still the error
expect ng-alg "ERR the key holds sluice state of another rule (gcra, not sliding_log); SL.RESET it or use another key" SL.THROTTLE ng sliding_log 5 1000
# a value of an older build (no numbers recorded, only their hash): read under the numbers the
# hash names, and refused under others (which numbers they were is not known)
old_value ng 1 gcra 5 1000
expect ng-old "1 6 2 0 800" SL.PEEK ng gcra 5 1000
expect ng-old-other "ERR the key holds sluice state of another rule (gcra with other parameters); SL.RESET it or use another key" SL.PEEK ng gcra 10 1000
expect ng-old-rewritten "1 6 1 0 1000" SL.THROTTLE ng gcra 5 1000
check ng-old-format [ "$(stbyte ng 1)" = 70 ] # written again in format 4

# --- SL.SETTLE and changes of a key's numbers against the core: random sequences of decisions,
# peeks, settles below, equal and above the reservation (refunds, debts, AT in the past, no AT),
# leases and returns of their unused parts (sliding_log: none) through the module and through
# libsluice (tests/integration/sluice_core.py), each key now and
# then decided under other numbers of its algorithm (converted by sl_state_convert in the core):
# every reply equal, every value the core's packed state byte for byte under the header of the
# numbers it was last written under, every expiry the first millisecond the state is fresh.
cat >"$TMP/settle_equiv.py" <<'PY'
import random, sys
from resp_client import Conn
from sluice_core import Core, Keys, Lease, debt_refused, module_header, module_value

port, build, seed = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
START, MS, SEC = 4 * 10**18, 10**6, 10**9
LINES = 1900  # a fifth of them leases and returns (sliding_log: none)
core = Core(build)

def ceil_ms(ns):
    return -1 if ns < 0 else -(-ns // MS)

def rule_of(args):
    """The core rule of the module's rule arguments."""
    alg, limit, window = args[0], args[1], args[2] * MS
    opts = dict(zip(args[3::2], args[4::2]))
    return core.rule(alg, limit, window, burst=opts.get("BURST", -1),
                     buckets=opts.get("BUCKETS", -1), max_delay_ns=opts.get("MAX_DELAY", 0) * MS)

# name, the module's rule arguments: the first the case's, the others numbers keys change to
CASES = [
    ("fixed_window", [["fixed_window", 5, 1000], ["fixed_window", 3, 1000],
                      ["fixed_window", 8, 2500], ["fixed_window", 5, 400]]),
    ("sliding_log", [["sliding_log", 5, 1000], ["sliding_log", 3, 1000],
                     ["sliding_log", 8, 700], ["sliding_log", 5, 2000]]),
    ("sliding_log-20", [["sliding_log", 20, 700], ["sliding_log", 10, 700],
                        ["sliding_log", 30, 1400]]),
    ("sliding_window", [["sliding_window", 5, 1000], ["sliding_window", 3, 1000],
                        ["sliding_window", 9, 3000], ["sliding_window", 5, 300]]),
    ("sliding_buckets", [["sliding_buckets", 6, 1200, "BUCKETS", 4],
                         ["sliding_buckets", 6, 1200, "BUCKETS", 6],
                         ["sliding_buckets", 3, 1200, "BUCKETS", 4],
                         ["sliding_buckets", 10, 2400, "BUCKETS", 8],
                         ["sliding_buckets", 6, 600, "BUCKETS", 3]]),
    ("token_bucket", [["token_bucket", 5, 1000, "BURST", 3, "MAX_DELAY", 150],
                      ["token_bucket", 5, 1000, "BURST", 5],
                      ["token_bucket", 10, 1000, "BURST", 3, "MAX_DELAY", 150],
                      ["token_bucket", 2, 1000, "BURST", 2]]),
    ("gcra", [["gcra", 2, 1000, "BURST", 3, "MAX_DELAY", 300], ["gcra", 2, 1000, "BURST", 1],
              ["gcra", 4, 1000, "BURST", 3, "MAX_DELAY", 300], ["gcra", 3, 1500, "BURST", 5]]),
]

conn = Conn(port)
failed = 0
for idx, (name, variants) in enumerate(CASES):
    rng = random.Random(seed * 100 + idx)
    rules = [rule_of(v) for v in variants]
    keys = Keys(core, rules[0])
    current = {}  # key -> index of the numbers it is decided under now
    admitted = {}  # key -> [(time, cost)] of its admissions, as the core decided them
    t = START + rng.randrange(SEC)
    cmds, wants = [], []
    stats = {"refund": 0, "debt": 0, "debt refused": 0, "refused peek": 0, "latest kept": 0,
             "deleted": 0,
             "converted": 0, "converted by a rejection": 0, "leases granted": 0, "returns": 0}
    held = {}  # key -> [(index of its numbers, lease as SL.LEASE replied it)]
    for _ in range(LINES):
        r = rng.random()
        t += (0 if r < 0.2 else rng.randrange(1, 1000) if r < 0.3 else
              rng.randrange(1, MS) if r < 0.45 else rng.randrange(150 * MS) if r < 0.85 else
              rng.randrange(150 * MS, 1500 * MS) if r < 0.97 else -rng.randrange(200 * MS))
        t = max(t, START)
        key = "k%d" % rng.randrange(3)
        rkey = "se:%s:%s" % (name, key)
        if rng.random() < 0.07:  # the key's numbers change
            current[key] = rng.randrange(len(rules))
        rule, args = rules[current.get(key, 0)], variants[current.get(key, 0)]
        cap = rule.capacity
        kind = rng.random()
        saved = keys.save(key)
        tokens = rule.algorithm in (5, 6)
        longest = (rule.tolerance_ns - rule.interval_ns) // MS if tokens else args[2]
        mine = [h for h in held.get(key, []) if h[0] == current.get(key, 0)]
        if name.startswith("sliding_log") or longest < 1:
            mine, kind = [], kind * 0.8  # no leases
        if kind >= 0.8 and (kind < 0.9 or not mine):
            want = rng.choice([0, 1, rng.randrange(1, cap + 2), cap])
            lease_ms = rng.randrange(1, longest + 1)
            cmd = ["SL.LEASE", rkey, *args, "WANT", want, "FOR", lease_ms]
            converted = keys.with_rule(key, rule, t)
            lease = keys.lease(key, want, lease_ms * MS, t)
            if converted:
                keys.keep(key, t)
                stats["converted"] += 1
            if lease.granted > 0:
                stats["leases granted"] += 1
                held.setdefault(key, []).append((current.get(key, 0), lease))
            reply = [lease.granted, lease.at_ns // 1000, lease.until_ns // 1000,
                     lease.remaining, ceil_ms(lease.reset_after_ns)]
        elif kind >= 0.8:
            i, lease = mine[rng.randrange(len(mine))]
            held[key].remove((i, lease))
            unused = rng.choice([0, lease.granted, rng.randrange(lease.granted + 1)])
            at_us, until_us = lease.at_ns // 1000, lease.until_ns // 1000
            cmd = ["SL.RETURN", rkey, *args, "GRANTED", lease.granted, "UNUSED", unused,
                   "AT", at_us, "UNTIL", until_us]
            named = Lease(granted=lease.granted, at_ns=min(at_us * 1000, t),
                          until_ns=until_us * 1000)
            keys.with_rule(key, rule, t)
            d = keys.lease_return(key, named, unused, t)
            keys.keep(key, t)  # the module writes what the return leaves (a DEL when fresh)
            stats["returns"] += 1
        elif kind < 0.5:
            cost = min(rng.choice([0, 1, 1, 1, 2, 3, cap]), cap)
            cmd = ["SL.THROTTLE", rkey, *args, "COST", cost]
            converted = keys.with_rule(key, rule, t)
            d = keys.decide(key, cost, t)
            if d.allowed and cost > 0:
                admitted.setdefault(key, []).append((t, cost))
            if cost == 0:
                keys.restore(key, saved)  # a peek writes nothing
            elif converted:  # the converted value is written whatever the decision
                keys.keep(key, t)
                stats["converted"] += 1
                stats["converted by a rejection"] += not d.allowed
        else:
            past = admitted.get(key, [])
            if past and kind < 0.85:  # one of the key's last admissions, by its millisecond
                when, reserved = rng.choice(past[-4:])
                at = when // MS
            else:  # no AT (now), or any time in the last 2 s
                reserved = rng.randrange(0, cap + 1)
                at = None if kind < 0.93 else (t - rng.randrange(2 * SEC)) // MS
            a = rng.random()
            actual = (0 if a < 0.3 else rng.randrange(0, reserved + 1) if a < 0.55 else
                      reserved if a < 0.65 else reserved + rng.randrange(1, cap + 1) if a < 0.93
                      else reserved + rng.randrange(cap, 3 * cap + 1))
            cmd = ["SL.SETTLE", rkey, *args, "RESERVED", reserved, "ACTUAL", actual]
            cmd += ["AT", at] if at is not None else []
            charged = t if at is None else min(at, t // MS) * MS
            converted = keys.with_rule(key, rule, t)
            before = keys.packed(key)
            d = keys.settle(key, reserved, actual, charged, t)
            if d is None:  # refused by max_debt (the capacity): the module writes nothing
                keys.restore(key, saved)
                stats["debt refused"] += 1
            elif converted:
                keys.keep(key, t)
                stats["converted"] += 1
            stats["refund"] += actual < reserved and keys.packed(key) != before
            stats["debt"] += actual > reserved and d is not None
            stats["refused peek"] += d is not None and not d.allowed
            stats["deleted"] += before is not None and keys.packed(key) is None
        if cmd[0] != "SL.LEASE" and d is None:
            reply = debt_refused(rule)
        elif cmd[0] != "SL.LEASE":
            f = d.fields()  # costs are within the capacity: never the "exceeds" error
            reply = [f[0], f[1], f[2], ceil_ms(f[5] if f[0] else f[3]), ceil_ms(f[4])]
        written = keys.rule_of(key)
        packed = keys.packed(key)
        value = module_value(written, packed)
        stats["latest kept"] += (written.algorithm == 2 and packed is not None and
                                 packed[0] & 32 != 0)
        cmds += [["SL.DEBUG", "SETTIME", t], cmd, ["GET", rkey], ["PEXPIRETIME", rkey]]
        wants.append((cmd, t, reply, value, keys.copy(key), written))
    got = conn.pipeline(cmds)
    bad = []
    for i, (cmd, t, reply, value, state, written) in enumerate(wants):
        g_reply, g_value, g_expire = got[4 * i + 1:4 * i + 4]
        # the expiry is the first millisecond at which the state is fresh
        expire_ok = (g_value is None and g_expire == -2) or (
            g_expire > 0 and core.fresh(written, state, g_expire * MS) and
            not core.fresh(written, state, (g_expire - 1) * MS))
        if g_reply != reply or g_value != value or not expire_ok:
            bad.append((" ".join(map(str, cmd)), t, reply, g_reply, value, g_value, g_expire))
    print("%s: %d operations, %s, %d differ" % (name, LINES, ", ".join(
        "%d %s" % (v, k) for k, v in stats.items()), len(bad)))
    for b in bad[:5]:
        print("  %s at %d: core %r, module %r; value core %r, module %r (pexpiretime %r)" % b)
    need = {"refund": 40, "debt": 50, "debt refused": 3, "refused peek": 50, "deleted": 5,
            "converted": 30, "converted by a rejection": 3}
    if not name.startswith("sliding_log"):
        need.update({"leases granted": 30, "returns": 30})
    if name.startswith("sliding_log"):
        need["latest kept"] = 5
    if bad or any(stats[k] < v for k, v in need.items()):
        failed += 1
sys.exit(1 if failed else 0)
PY
check settle-equivalence env "${CORE_ENV[@]}" python3 "$TMP/settle_equiv.py" "$PORT" \
    "$SLUICE_BUILD_DIR" "${SLUICE_SEED:-20241}"

# --- memory per key: the module's gcra keys against SET k v PX t and against SET of a value as
# long as the module's (same key names), measured as used_memory before and after 20000 keys.
# Meaningless under ASan (its allocator), so skipped.
if ldd "$MODULE" | grep -q libasan; then
    echo "memory per key: skipped (ASan build)"
else
    cat >"$TMP/mem.py" <<'PY'
import sys, time
from resp_client import Conn
port, n = int(sys.argv[1]), 20000
c = Conn(port)
def used():
    info = c.call("INFO", "memory").decode()
    return int([l for l in info.split("\r\n") if l.startswith("used_memory:")][0].split(":")[1])
def settled():
    # the writer's closed connection is gone (its buffers are not the keys' memory), and no key
    # table is half rehashed (serverCron finishes an incremental rehash)
    info = c.call("INFO", "clients").decode()
    clients = int([l for l in info.split("\r\n") if l.startswith("connected_clients:")][0][18:])
    return clients == 1 and b"rehashing target" not in c.call("DEBUG", "HTSTATS", "0")
def settle():
    for _ in range(200):
        if settled():
            return
        time.sleep(0.05)
    raise SystemExit("redis-server did not settle within 10 s")
def measure(make):
    c.call("FLUSHALL")
    settle()
    before = used()
    w = Conn(port)
    w.pipeline([make(j) for j in range(n)], chunk=1000)
    w.s.close()
    settle()
    assert c.call("DBSIZE") == n
    return (used() - before) / n
# warm-up: one-time allocations of the server and the module are not per key
measure(lambda j: ["SL.THROTTLE", "user:%d" % j, "gcra", 1, 3600000])
length = c.call("STRLEN", "user:0")
measure(lambda j: ["SET", "user:%d" % j, "v", "PX", 3600000])
set_v = measure(lambda j: ["SET", "user:%d" % j, "v", "PX", 3600000])
set_same = measure(lambda j: ["SET", "user:%d" % j, "x" * length, "PX", 3600000])
mod = measure(lambda j: ["SL.THROTTLE", "user:%d" % j, "gcra", 1, 3600000])
c.call("FLUSHALL")
print("memory per key: SET k v PX t %.1f B, SET k <%d bytes> PX t %.1f B, SL.THROTTLE gcra %.1f B"
      % (set_v, length, set_same, mod))
# A gcra key costs what a string of its length costs (1 B of noise allowed): the module keeps
# nothing beside it.
sys.exit(0 if mod <= set_same + 1 else 1)
PY
    check memory python3 "$TMP/mem.py" "$PORT"
fi

check redis-alive bash -c "redis-cli -p $PORT PING | grep -qx PONG"
stop_bg redis
stop_bg sluiced
check no-sanitizer-report bash -c "! grep -E 'AddressSanitizer|runtime error:' '$TMP/redis.log'"
finish
