#!/usr/bin/env bash
# test_server_holds.sh - in-flight limits through sluiced: SL.ACQUIRE and SL.RELEASE on a rule of
# algorithm concurrency. Memory store: holds up to the limit, a refusal's retry_after (the
# earliest expiry that frees enough), a release frees at once and only once, ids that never
# release (0, another key's, a made-up one), TIMEOUT (shorter holds, bounds), a key with an
# override (its limit), a blocked key, a shadow rule (allowed, no hold), the errors of every bad
# argument (nothing changes), a hold kept by a snapshot across a restart and released after it,
# the metrics (in flight, holds expired, releases refused) and GET /v1/rules/{name}/holders (the
# same walk: its total is the metric, its keys sorted, its errors). sluice.so's own SL.ACQUIRE and
# SL.RELEASE (the key's expiry set, a release once, the errors). sluiced over Redis refuses an
# acquire with a clear error until the Redis store sends them. A release Redis did not answer in
# time is answered with an error, never OK.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: conn
    algorithm: concurrency
    limit: 3
    hold_timeout: 1h
    overrides:
      - key: big
        limit: 5
      - key: banned
        limit: 0
  - name: short
    algorithm: concurrency
    limit: 2
    hold_timeout: 300ms
  - name: quiet
    algorithm: concurrency
    limit: 1
    hold_timeout: 1h
    shadow: true
  - name: api
    algorithm: gcra
    limit: 10
    window: 1s
YAML
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
id_of() { echo "${1##* }"; } # an acquire's reply: the hold id is its last field
remaining_is() { [[ "$(sc SL.PEEK "$1" "$2")" =~ ^1\ [0-9]+\ $3\  ]]; }
lacks() { ! [[ "$1" =~ $2 ]] || { echo "  found /$2/"; return 1; }; }
nohold='^ERR no such hold: the key holds no live hold of that id'

# The example, on whichever store RESP_PORT's sluiced uses. $1 names the run in the case names.
example() {
    local m=$1 a b c
    a=$(sc SL.ACQUIRE conn u)
    check "$m-first" matches "$a" '^1 3 2 0 [0-9]+ [1-9][0-9]*$'
    b=$(sc SL.ACQUIRE conn u COST 2)
    check "$m-second" matches "$b" '^1 3 0 0 [0-9]+ [1-9][0-9]*$'
    check "$m-ids-differ" test "$(id_of "$a")" != "$(id_of "$b")"
    # full: refused, no hold, retry_after the earliest expiry that frees one unit (about 1h)
    check "$m-full" matches "$(sc SL.ACQUIRE conn u)" '^0 3 0 3[0-9]{6} [0-9]+ 0$'
    check "$m-never" matches "$(sc SL.ACQUIRE conn u COST 4)" \
        "^ERR cost 4 exceeds what rule 'conn' can ever admit \\(3 at once\\)$"
    # a release frees its units at once, once; another key's id frees nothing there
    check "$m-other-key" matches "$(sc SL.RELEASE conn v "$(id_of "$b")")" "$nohold"
    check "$m-release" matches "$(sc SL.RELEASE conn u "$(id_of "$b")")" '^OK$'
    check "$m-freed" matches "$(sc SL.PEEK conn u)" '^1 3 2 0 '
    check "$m-release-again" matches "$(sc SL.RELEASE conn u "$(id_of "$b")")" "$nohold"
    check "$m-release-zero" matches "$(sc SL.RELEASE conn u 0)" "$nohold"
    check "$m-release-made-up" matches "$(sc SL.RELEASE conn u 12345)" "$nohold"
    check "$m-release-absent" matches "$(sc SL.RELEASE conn nobody 1)" "$nohold"
    check "$m-still-one" matches "$(sc SL.PEEK conn u)" '^1 3 2 0 '
    # TIMEOUT: a shorter hold expires by itself; longer than the rule's is refused
    c=$(sc SL.ACQUIRE short t TIMEOUT 100 COST 2)
    check "$m-timeout" matches "$c" '^1 2 0 0 [0-9]+ [1-9][0-9]*$'
    check "$m-timeout-long" matches "$(sc SL.ACQUIRE short t TIMEOUT 301)" \
        "^ERR timeout must be within 1..300 ms \\(rule 'short' hold_timeout\\)$"
    check "$m-expires" poll 10 remaining_is short t 2
    check "$m-expired" matches "$(sc SL.ACQUIRE short t COST 2)" '^1 2 0 0 '
    check "$m-expired-release" matches "$(sc SL.RELEASE short t "$(id_of "$c")")" "$nohold"
    # an override's limit; a blocked key is refused with no hold
    check "$m-override" matches "$(sc SL.ACQUIRE conn big COST 5)" '^1 5 0 0 [0-9]+ [1-9]'
    check "$m-blocked" matches "$(sc SL.ACQUIRE conn banned)" '^0 0 0 -1 0 0$'
    # shadow: a refusal is allowed, with no hold (id 0: nothing to release)
    check "$m-shadow-hold" matches "$(sc SL.ACQUIRE quiet q)" '^1 1 0 0 [0-9]+ [1-9][0-9]*$'
    check "$m-shadow-over" matches "$(sc SL.ACQUIRE quiet q)" '^1 1 0 0 [0-9]+ 0$'
    # errors: specific, nothing changes
    check "$m-err-algorithm" matches "$(sc SL.ACQUIRE api u)" \
        "^ERR rule 'api' holds nothing to acquire or release: its algorithm, gcra, holds no units"
    check "$m-err-release-algorithm" matches "$(sc SL.RELEASE api u 1)" "^ERR rule 'api' holds nothing"
    check "$m-err-syntax" matches "$(sc SL.ACQUIRE conn u COST 1 COST 1)" '^ERR option COST given twice$'
    check "$m-err-word" matches "$(sc SL.ACQUIRE conn u FOO 1)" \
        "^ERR unknown option 'FOO' \\(expected COST or TIMEOUT or PRIORITY\\)$"
    check "$m-err-cost" matches "$(sc SL.ACQUIRE conn u COST -1)" '^ERR cost must be >= 0$'
    check "$m-err-timeout" matches "$(sc SL.ACQUIRE conn u TIMEOUT 0)" \
        '^ERR timeout must be a positive integer of milliseconds$'
    check "$m-err-arity" matches "$(sc SL.ACQUIRE conn u COST)" "^ERR wrong number of arguments"
    check "$m-err-release-arity" matches "$(sc SL.RELEASE conn u)" "^ERR wrong number of arguments"
    check "$m-err-id" matches "$(sc SL.RELEASE conn u x)" '^ERR hold id is not a non-negative integer$'
    check "$m-err-rule" matches "$(sc SL.ACQUIRE nope u)" "^ERR unknown rule 'nope'$"
    check "$m-unchanged" matches "$(sc SL.PEEK conn u)" '^1 3 2 0 '
    # the first hold is still live and releases
    check "$m-release-first" matches "$(sc SL.RELEASE conn u "$(id_of "$a")")" '^OK$'
    check "$m-empty" matches "$(sc SL.PEEK conn u)" '^1 3 3 0 0$'
}

# ---- memory store
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/s1.db" --snapshot "$TMP/snap" \
    --threads 2 || { cat "$TMP/s1.log"; exit 1; }
example mem
metrics=$(curl -s -m 5 "http://127.0.0.1:$HTTP_PORT/metrics")
check metric-in-flight matches "$metrics" $'sluice_in_flight\\{rule="conn"\\} 5\n'
check metric-in-flight-quiet matches "$metrics" $'sluice_in_flight\\{rule="quiet"\\} 1\n'
check metric-expired matches "$metrics" $'sluice_holds_expired_total\\{rule="short"\\} 1\n'
check metric-refused matches "$metrics" $'sluice_hold_releases_refused_total\\{rule="conn"\\} 5\n'
check metric-refused-expired matches "$metrics" \
    $'sluice_hold_releases_refused_total\\{rule="short"\\} 1\n'
check metric-refused-event matches "$metrics" 'sluice_releases_refused_total [1-9]'
check metric-no-gcra lacks "$metrics" 'sluice_in_flight\{rule="api"'
# the console's view of the same walk: GET /v1/rules/{name}/holders
H="http://127.0.0.1:$HTTP_PORT/v1/rules"
json_ok() { python3 -c 'import json,sys; v = json.loads(sys.argv[1]); sys.exit(0 if ('"$2"') else 1)' "$1" ||
    { echo "  got '$1', fails: $2"; return 1; }; }
check holders-as-metric json_ok "$(curl -s -m 5 "$H/conn/holders?n=100")" \
    'v["rule"] == "conn" and v["limit"] == 3 and v["in_flight"] == 5 and sum(k["units"] for k in v["keys"]) == 5 and [k["units"] for k in v["keys"]] == sorted([k["units"] for k in v["keys"]], reverse=True)'
check holders-n json_ok "$(curl -s -m 5 "$H/conn/holders?n=1")" \
    'len(v["keys"]) == 1 and v["keys"][0]["units"] == max(k["units"] for k in '"$(curl -s -m 5 "$H/conn/holders?n=100")"'["keys"])'
check holders-not-held matches "$(curl -s -m 5 -w ' %{http_code}' "$H/api/holders")" \
    "holds nothing: its algorithm, gcra, holds no units.* 400$"
check holders-unknown matches "$(curl -s -m 5 -w ' %{http_code}' "$H/nope/holders")" "unknown rule 'nope'.* 404$"
for n in 0 101 x; do
    check "holders-n-$n" matches "$(curl -s -m 5 -w ' %{http_code}' "$H/conn/holders?n=$n")" \
        'n: must be an integer from 1 to 100.* 400$'
done
# a hold survives a restart from the snapshot, and its id still releases it
held=$(sc SL.ACQUIRE conn kept COST 2)
stop_bg s1 TERM
start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/s1.db" --snapshot "$TMP/snap" \
    --threads 2 || { cat "$TMP/s2.log"; exit 1; }
check snapshot-kept matches "$(sc SL.PEEK conn kept)" '^1 3 1 0 '
check snapshot-release matches "$(sc SL.RELEASE conn kept "$(id_of "$held")")" '^OK$'
check snapshot-freed matches "$(sc SL.PEEK conn kept)" '^1 3 3 0 0$'
stop_bg s2 TERM

# ---- sluice.so's own SL.ACQUIRE and SL.RELEASE (the numbers inline, as the Redis store sends them)
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then
    echo "sluice.so is built with TSan, which redis-server cannot load: memory store only"
    finish
fi
start_redis rm --loadmodule "$MODULE" || { cat "$TMP/rm.log"; exit 1; }
rc() { redis-cli -p "$REDIS_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
a=$(rc SL.ACQUIRE m concurrency 3 60000)
check mod-first matches "$a" '^1 3 2 0 [0-9]+ [1-9][0-9]*$'
check mod-second matches "$(rc SL.ACQUIRE m concurrency 3 60000 COST 2)" '^1 3 0 0 [0-9]+ [1-9]'
check mod-full matches "$(rc SL.ACQUIRE m concurrency 3 60000)" '^0 3 0 [0-9]+ [0-9]+ 0$'
check mod-expiry-set matches "$(rc PTTL m)" '^[1-9][0-9]*$'
check mod-release matches "$(rc SL.RELEASE m concurrency 3 60000 ID "$(id_of "$a")")" '^OK$'
check mod-release-again matches "$(rc SL.RELEASE m concurrency 3 60000 ID "$(id_of "$a")")" "$nohold"
check mod-freed matches "$(rc SL.PEEK m concurrency 3 60000)" '^1 3 1 0 '
check mod-timeout-long matches "$(rc SL.ACQUIRE m concurrency 3 60000 TIMEOUT 60001)" \
    "^ERR timeout must be within 1..60000 ms \\(the rule's hold timeout\\)$"
check mod-no-id matches "$(rc SL.RELEASE m concurrency 3 60000 COST 1)" '^ERR SL.RELEASE takes no COST'
check mod-not-holds matches "$(rc SL.ACQUIRE g gcra 3 60000)" \
    '^ERR SL.ACQUIRE and SL.RELEASE need an algorithm that holds units$'
check mod-unchanged matches "$(rc SL.PEEK m concurrency 3 60000)" '^1 3 1 0 '
# sluiced over the Redis store (sluice.so here; the Lua scripts and Cluster answer alike:
# test_store_conformance): holds made in Redis, released once, and what a release frees
start_sluiced s3 --rules "$TMP/rules.yaml" --config-store "$TMP/s3.db" --snapshot "" --threads 2 \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/s3.log"; exit 1; }
r=$(sc SL.ACQUIRE conn u COST 2)
check redis-acquire matches "$r" '^1 3 1 0 [0-9]+ [1-9][0-9]*$'
check redis-full matches "$(sc SL.ACQUIRE conn u COST 2)" '^0 3 1 [0-9]+ [0-9]+ 0$'
check redis-release matches "$(sc SL.RELEASE conn u "$(id_of "$r")")" '^OK$'
check redis-release-again matches "$(sc SL.RELEASE conn u "$(id_of "$r")")" "$nohold"
check redis-freed matches "$(sc SL.PEEK conn u)" '^1 3 3 0 0$'
check redis-holders-unknown matches "$(curl -s -m 5 "http://127.0.0.1:$HTTP_PORT/v1/rules/conn/holders")" \
    '^\{"rule":"conn","limit":3,"in_flight":null,"keys":\[\]\}$'
stop_bg s3 TERM
# a release Redis does not answer in time (Redis frozen) is not answered as done: an error
# (RESP) and 503 (HTTP), never OK, as the hold may still be held; sent again once Redis is back,
# it frees the hold (OK, or no such hold when the first ran late)
start_sluiced s4 --rules "$TMP/rules.yaml" --config-store "$TMP/s4.db" --snapshot "" --threads 1 \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 200ms || { cat "$TMP/s4.log"; exit 1; }
r=$(sc SL.ACQUIRE conn frozen COST 3)
check frozen-acquire matches "$r" '^1 3 0 0 [0-9]+ [1-9][0-9]*$'
kill -STOP "$(cat "$TMP/rm.pid")"
unconfirmed='^ERR the request store did not confirm the release \(unreachable, or past --store-timeout\)'
check frozen-release-not-ok matches "$(sc SL.RELEASE conn frozen "$(id_of "$r")")" "$unconfirmed"
check frozen-release-http-503 matches "$(curl -s -m 10 -o /dev/null -w '%{http_code}' \
    -H 'Content-Type: application/json' -d "{\"rule\":\"conn\",\"key\":\"frozen\",\"id\":$(id_of "$r")}" \
    "http://127.0.0.1:$HTTP_PORT/v1/release")" '^503$'
kill -CONT "$(cat "$TMP/rm.pid")"
check frozen-release-again matches "$(sc SL.RELEASE conn frozen "$(id_of "$r")")" "^OK\$|$nohold"
check frozen-freed matches "$(sc SL.PEEK conn frozen)" '^1 3 3 0 0$'
stop_bg s4 TERM
finish
