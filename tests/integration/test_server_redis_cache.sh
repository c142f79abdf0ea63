#!/usr/bin/env bash
# test_server_redis_cache.sh - the Redis store's over-limit cache against a real redis-server,
# with the sluice.so module and with the Lua scripts: a refusal of one unit with nothing left
# answers that cost again without a round trip (counted as a cache hit), with the numbers Redis
# gave; a larger cost, a smaller one (which may be admitted), a refusal that left units (the key
# gains some as it refills and loses some to smaller admissions) and a peek ask Redis; a reset drops what was cached, and a refusal cached under a rule's
# numbers never answers under others (the key's usage carried over to them); a denial that
# on_store_error gave is never cached; a shadow rule's refusals are cached like any other.
#
# sluiced runs one loop (--threads 1): the cache is per loop, and every connection shares it.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: tb
    algorithm: token_bucket
    limit: 10
    window: 10s
  - name: slow
    algorithm: token_bucket
    limit: 10
    window: 1000s
  - name: fw
    algorithm: sliding_log
    limit: 3
    window: 1h
    on_store_error: deny
  - name: sh
    algorithm: sliding_log
    limit: 1
    window: 1h
    shadow: true
YAML
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
# conn PORT 'CMD ARGS' ...: the commands on one connection, each reply on a line of its own (an
# array's elements joined by spaces); a command '@PORT2 CMD ARGS' goes to a connection to PORT2
conn() {
    PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$@" <<'PY'
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
for cmd in sys.argv[2:]:
    args = cmd.split()
    if args[0].startswith("@"):
        r = Conn(int(args[0][1:])).call(*args[1:])
    else:
        r = c.call(*args)
    if isinstance(r, list):
        r = " ".join(x.decode() if isinstance(x, bytes) else str(x) for x in r)
    elif isinstance(r, bytes):
        r = r.decode()
    print(r)
PY
}
# peek_is PORT 'RULE KEY' RE: SL.PEEK RULE KEY's reply on PORT matches RE
peek_is() { [[ "$(conn "$1" "SL.PEEK $2")" =~ $3 ]]; }
# in_log NAME TEXT: until NAME's log has a line with TEXT (a line written after the ports open)
in_log() {
    local i
    for ((i = 0; i < 200; i++)); do
        grep -qF -- "$2" "$TMP/$1.log" && return 0
        sleep 0.05
    done
    echo "  no '$2' in $1's log"
    return 1
}
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
# redis_calls PORT: commands Redis has run for decisions (the module's or the scripts')
redis_calls() {
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[=,:]' '/^cmdstat_(sl\.throttle|sl\.peek|evalsha|eval):/ {s += $3} END {print s + 0}'
}
line() { sed -n "$1p" <<<"$2"; }

# run_suite MODE REDIS_PORT SLUICED_RESP SLUICED_HTTP
run_suite() {
    local mode=$1 rp=$2 p=$3 hp=$4 out
    # The defect: 5 of 10 taken, a cost of 8 refused; a cost of 1 still fits (5 are left).
    out=$(conn "$p" "SL.ALLOW tb k COST 5" "SL.ALLOW tb k COST 8" "SL.ALLOW tb k COST 1" \
        "SL.ALLOW tb k COST 0" "SL.PEEK tb k")
    check "$mode: cost 5 admitted" matches "$(line 1 "$out")" '^1 10 5 0 [0-9]+$'
    check "$mode: cost 8 refused" matches "$(line 2 "$out")" '^0 10 5 [1-9][0-9]* [0-9]+$'
    check "$mode: cost 1 after a refused 8 asks redis" matches "$(line 3 "$out")" '^1 10 4 0 '
    check "$mode: cost 0 asks redis" matches "$(line 4 "$out")" '^1 10 4 0 '
    check "$mode: peek asks redis" matches "$(line 5 "$out")" '^1 10 4 0 '

    # A refused unit with nothing left, asked again, is answered from the cache: no round trip,
    # counted, with the numbers Redis gave (remaining 0 until the unit fits).
    local calls hits
    conn "$p" "SL.ALLOW slow c COST 10" "SL.ALLOW slow c" >/dev/null # none left, 1 refused
    calls=$(redis_calls "$rp")
    hits=$(metric "$hp" sluice_redis_cache_hits_total)
    out=$(conn "$p" "SL.ALLOW slow c" "SL.ALLOW slow c")
    check "$mode: same cost from the cache" matches "$(line 1 "$out")" '^0 10 0 [1-9][0-9]* [0-9]+$'
    check "$mode: and again" matches "$(line 2 "$out")" '^0 10 0 [1-9][0-9]* '
    check "$mode: no round trip" test "$(redis_calls "$rp")" -eq "$calls"
    check "$mode: cache hits counted" test "$(metric "$hp" sluice_redis_cache_hits_total)" -eq $((hits + 2))
    # a larger cost is refused too, but until later: Redis says when, not the cache
    local retry1 retry3
    retry1=$(cut -d' ' -f4 <<<"$(line 2 "$out")")
    retry3=$(conn "$p" "SL.ALLOW slow c COST 3" | cut -d' ' -f4)
    check "$mode: larger cost asks redis" test "$(redis_calls "$rp")" -eq $((calls + 1))
    check "$mode: larger cost, later retry" test "$retry3" -gt "$retry1"
    # a refusal that left units is not kept: asked again, Redis answers
    conn "$p" "SL.ALLOW slow u COST 6" "SL.ALLOW slow u COST 5" >/dev/null # 4 left, 5 refused
    calls=$(redis_calls "$rp")
    check "$mode: refusal leaving units asked again" matches "$(conn "$p" "SL.ALLOW slow u COST 5")" \
        '^0 10 4 [1-9]'
    check "$mode: refusal leaving units not cached" test "$(redis_calls "$rp")" -eq $((calls + 1))
    calls=$(redis_calls "$rp")
    # a smaller cost still asks Redis, and is admitted
    check "$mode: smaller cost admitted" matches "$(conn "$p" "SL.ALLOW slow u COST 4")" '^1 10 0 0 '
    check "$mode: smaller cost was a round trip" test "$(redis_calls "$rp")" -gt "$calls"

    # SL.RESET drops the cached refusal at once
    out=$(conn "$p" "SL.ALLOW slow r COST 10" "SL.ALLOW slow r" "SL.RESET slow r" \
        "SL.ALLOW slow r")
    check "$mode: refused before the reset" matches "$(line 2 "$out")" '^0 10 0 '
    check "$mode: admitted after the reset" matches "$(line 4 "$out")" '^1 10 9 0 '

    # a rule whose numbers change keeps the key and its usage (converted: the 10 units owed at
    # T = 100 s are 500 s at T = 50 s, so 10 of 20 are left), and a refusal cached under the old
    # numbers does not answer under the new ones: the unit goes to Redis, and is admitted
    out=$(conn "$p" "SL.ALLOW slow n COST 10" "SL.ALLOW slow n" \
        'SL.RULE SET slow {"algorithm":"token_bucket","limit":20,"window":"1000s"}' \
        "SL.ALLOW slow n" \
        'SL.RULE SET slow {"algorithm":"token_bucket","limit":10,"window":"1000s"}')
    check "$mode: refused before the rule change" matches "$(line 2 "$out")" '^0 10 0 '
    check "$mode: admitted under the new rule" matches "$(line 4 "$out")" '^1 20 9 0 '

    # a shadow rule: the refusal is cached like any other, and still answered as allowed
    check "$mode: shadow admitted" matches "$(conn "$p" "SL.ALLOW sh s")" '^1 1 0 0 '
    calls=$(redis_calls "$rp")
    out=$(conn "$p" "SL.ALLOW sh s" "SL.ALLOW sh s")
    check "$mode: shadow refusals allowed" test "$(cut -c1 <<<"$out" | paste -sd' ' -)" = "1 1"
    check "$mode: shadow refusal cached" test "$(redis_calls "$rp")" -eq $((calls + 1))

    # a denial on_store_error gave is not cached: Redis's writes paused, the decision times out
    # and is denied; unpaused, the same key is admitted at once. The timed-out command ran too,
    # and admitted: its unit is given back (before or after the next decision), so the key ends
    # charged for the one admission only
    out=$(conn "$p" "@$rp CLIENT PAUSE 20000 WRITE" "SL.ALLOW fw e" "@$rp CLIENT UNPAUSE" \
        "SL.ALLOW fw e")
    check "$mode: store error denies" matches "$(line 2 "$out")" '^0 3 0 [1-9]'
    check "$mode: store error denial not cached" matches "$(line 4 "$out")" '^1 3 [12] 0 '
    check "$mode: the late admission given back" poll 10 peek_is "$p" "fw e" '^1 3 2 '
    check "$mode: the refund logged" in_log s1 "admitted when it ran later"
}

# --- with the module
start_redis redis --loadmodule "$MODULE" || { cat "$TMP/redis.log"; exit 1; }
RP=$REDIS_PORT
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/s1.db" --snapshot "" \
    --store "redis://127.0.0.1:$RP" --store-timeout 100ms --threads 1 || { cat "$TMP/s1.log"; exit 1; }
check module-detected in_log s1 "request store redis (sluice.so module)"
run_suite module "$RP" "$RESP_PORT" "$HTTP_PORT"
stop_bg s1 TERM
check s1-exit-0 test $? -eq 0

# --- with the Lua scripts (a Redis without the module)
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
LP=$REDIS_PORT
start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/s2.db" --snapshot "" \
    --store "redis://127.0.0.1:$LP" --store-timeout 100ms --threads 1 || { cat "$TMP/s2.log"; exit 1; }
check lua-detected in_log s2 "request store redis (Lua scripts)"
run_suite lua "$LP" "$RESP_PORT" "$HTTP_PORT"
stop_bg s2 TERM
check s2-exit-0 test $? -eq 0
finish
