#!/usr/bin/env bash
# test_server_settle.sh - SL.SETTLE and POST /v1/settle: reserve an estimate, settle the real cost.
# Memory store: the worked example (700, 880, then debt and a refusal) over RESP and HTTP, the
# module's inline form, errors, a key with an override (settled in its override's numbers), a
# blocked key, a shadow rule, AT, a debt surviving a restart from a snapshot. Redis store (sluice.so
# and the Lua scripts): the same example, a refusal cached by the over-limit cache and then given
# room back by a settle (the next request goes to Redis, on every loop), a debt refused, a script
# cache flushed under it (NOSCRIPT). Redis Cluster (sluice.so): the same example. On every store: a settle that would leave a key owing more
# than its rule's max_debt is refused with the same error over RESP and HTTP (422) and charges
# nothing, the largest actual a client can name included (which would have locked the key for
# about 235 years); max_debt 0 takes no debt at all.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: tok
    algorithm: sliding_log
    limit: 1000
    window: 1h
    overrides:
      - key: big
        limit: 5000
      - key: banned
        limit: 0
  - name: quiet
    algorithm: token_bucket
    limit: 10
    window: 1h
    shadow: true
  - name: api
    algorithm: token_bucket
    limit: 10
    window: 1s
  - name: nodebt
    algorithm: gcra
    limit: 10
    window: 1s
    max_debt: 0
YAML
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
post() { curl -s -m 5 -X POST "http://127.0.0.1:$HTTP_PORT$1" -H 'Content-Type: application/json' -d "$2" -w ' %{http_code}'; }

# The worked example and the store's cache, on whichever store RESP_PORT's sluiced uses. $1 names
# the run in the case names.
example() {
    local m=$1
    check "$m-reserve" matches "$(sc SL.ALLOW tok u COST 300)" '^1 1000 700 0 '
    check "$m-refund" matches "$(sc SL.SETTLE tok u 300 120)" '^1 1000 880 0 '
    check "$m-debt" matches "$(sc SL.SETTLE tok u 100 1100)" '^0 1000 0 [1-9][0-9]* '
    check "$m-debt-refused" matches "$(sc SL.ALLOW tok u)" '^0 1000 0 [1-9][0-9]* '
    check "$m-debt-peek-refused" matches "$(sc SL.PEEK tok u)" '^0 1000 0 '
    # a refusal (cached by the Redis store's over-limit cache on some loop), then a settle that
    # gives room back: the next requests are admitted on every loop
    check "$m-fill" matches "$(sc SL.ALLOW tok w COST 1000)" '^1 1000 0 0 '
    local i
    for i in 1 2 3 4; do sc SL.ALLOW tok w >/dev/null; done
    check "$m-full" matches "$(sc SL.ALLOW tok w)" '^0 1000 0 '
    check "$m-give-back" matches "$(sc SL.SETTLE tok w 1000 990)" '^1 1000 10 0 '
    for i in 1 2 3 4 5 6; do
        check "$m-after-give-back-$i" matches "$(sc SL.ALLOW tok w)" "^1 1000 $((10 - i)) 0 "
    done
    # HTTP: the same numbers
    check "$m-http-reserve" matches "$(post /v1/allow '{"rule":"tok","key":"h","cost":300}')" \
        '"allowed":true,"limit":1000,"remaining":700,.* 200$'
    check "$m-http-settle" matches \
        "$(post /v1/settle '{"rule":"tok","key":"h","reserved":300,"actual":120}')" \
        '^\{"rule":"tok","key":"h","allowed":true,"limit":1000,"remaining":880,.* 200$'
    check "$m-http-debt" matches \
        "$(post /v1/settle '{"rule":"tok","key":"h","reserved":100,"actual":1100}')" \
        '"allowed":false,"limit":1000,"remaining":0,.* 200$'
    # an override's numbers apply; a blocked key settles nothing
    check "$m-ov-reserve" matches "$(sc SL.ALLOW tok big COST 3000)" '^1 5000 2000 0 '
    check "$m-ov-settle" matches "$(sc SL.SETTLE tok big 3000 1000)" '^1 5000 4000 0 '
    check "$m-blocked" matches "$(sc SL.SETTLE tok banned 0 5)" '^0 0 0 -1 '
    # max_debt (default the capacity): the attack, over HTTP and RESP, charges nothing
    local refused='settle refused: the key would owe more than max_debt'
    check "$m-attack-http" matches \
        "$(post /v1/settle '{"rule":"api","key":"victim","reserved":0,"actual":9223372036854775807}')" \
        "\"detail\":\"$refused of rule 'api' \\(10 units past its limit\\); nothing was charged\".* 422$"
    check "$m-attack-resp" matches "$(sc SL.SETTLE api victim 0 9223372036854775807)" \
        "^ERR $refused \\(10 units past its limit\\); nothing was charged$"
    check "$m-attack-nothing" matches "$(sc SL.ALLOW api victim)" '^1 10 9 0 '
    # a key's override has a max_debt of its own (its capacity here), which the refusal names
    check "$m-attack-override" matches "$(sc SL.SETTLE tok big 0 9223372036854775807)" \
        "^ERR $refused \\(5000 units past its limit\\); nothing was charged$"
    check "$m-attack-override-http" matches \
        "$(post /v1/settle '{"rule":"tok","key":"big","reserved":0,"actual":9223372036854775807}')" \
        "\"detail\":\"$refused of rule 'tok' \\(5000 units past its limit\\); nothing was charged\".* 422$"
    check "$m-debt-within" matches "$(sc SL.SETTLE api victim 1 16)" '^0 10 0 [1-9][0-9]* '
    check "$m-debt-past" matches "$(sc SL.SETTLE api victim 0 10)" "^ERR $refused "
    check "$m-nodebt-within" matches "$(sc SL.SETTLE nodebt k 0 11)" '^1 11 0 0 '
    check "$m-nodebt-past" matches "$(sc SL.SETTLE nodebt k 0 1)" \
        "^ERR $refused \\(0 units past its limit\\); nothing was charged$"
    check "$m-nodebt-refund" matches "$(sc SL.SETTLE nodebt k 11 0)" '^1 11 11 0 '
}

# ---- memory store
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/s1.db" --snapshot "$TMP/snap" \
    --threads 2 || { cat "$TMP/s1.log"; exit 1; }
example mem
# the module's inline form, on an inline rule
check inline-reserve matches "$(sc SL.THROTTLE k gcra 10 1000 COST 5)" '^1 11 6 0 '
check inline-settle matches "$(sc SL.SETTLE k gcra 10 1000 RESERVED 5 ACTUAL 1)" '^1 11 10 0 '
# shadow: settled and counted, always allowed; a debt past max_debt is refused all the same
check shadow-debt matches "$(sc SL.SETTLE quiet s 0 15)" '^1 10 0 0 '
check shadow-still-allows matches "$(sc SL.ALLOW quiet s)" '^1 10 0 0 '
check shadow-debt-past matches "$(sc SL.SETTLE quiet s 0 50)" '^ERR settle refused: '
check refusals-counted matches "$(curl -s -m 5 "http://127.0.0.1:$HTTP_PORT/metrics")" \
    'sluice_settle_refused_total\{reason="max_debt"\} [1-9]'
# AT names when the reservation was admitted, or any time before (taken before it was sent):
# it is given back; a time so old its units would have left the window finds nothing to give
t0=$(date +%s%3N)
check at-reserve matches "$(sc SL.ALLOW tok a COST 10)" '^1 1000 990 0 '
check at-settle matches "$(sc SL.SETTLE tok a 10 0 AT "$t0")" '^1 1000 1000 0 '
check at-reserve-again matches "$(sc SL.ALLOW tok a COST 10)" '^1 1000 990 0 '
check at-outside-window matches "$(sc SL.SETTLE tok a 10 0 AT $((t0 - 7200000)))" '^1 1000 990 0 '
# errors: specific, and nothing changes
check err-arity matches "$(sc SL.SETTLE tok u 1)" "^ERR wrong number of arguments for 'sl.settle'"
check err-integer matches "$(sc SL.SETTLE tok u 1 x)" '^ERR actual is not an integer or out of range$'
check err-negative matches "$(sc SL.SETTLE tok u -1 5)" '^ERR reserved must be >= 0$'
check err-syntax matches "$(sc SL.SETTLE tok u 1 2 FOO 3)" '^ERR syntax error$'
check err-rule matches "$(sc SL.SETTLE nope u 1 2)" "^ERR unknown rule 'nope'$"
check err-cost matches "$(sc SL.SETTLE k gcra 10 1000 RESERVED 5 ACTUAL 1 COST 2)" \
    '^ERR SL.SETTLE takes no COST'
check err-http-missing matches "$(post /v1/settle '{"rule":"tok","key":"h","reserved":3}')" \
    'actual must be an integer >= 0.* 400$'
check err-http-cost matches "$(post /v1/settle '{"rule":"tok","key":"h","cost":3,"reserved":3,"actual":1}')" \
    'a settle takes no cost.* 400$'
check err-http-rule matches "$(post /v1/settle '{"rule":"nope","key":"h","reserved":3,"actual":1}')" \
    "unknown rule 'nope'.* 404$"
check err-http-get matches "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/v1/settle")" '^405$'
check unchanged matches "$(sc SL.PEEK tok h)" '^0 1000 0 '
# a debt survives a restart from the snapshot
stop_bg s1 TERM
start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/s1.db" --snapshot "$TMP/snap" \
    --threads 2 || { cat "$TMP/s2.log"; exit 1; }
check debt-restored matches "$(sc SL.ALLOW tok u)" '^0 1000 0 [1-9][0-9]* '
stop_bg s2 TERM

# ---- Redis store: sluice.so, then the Lua scripts
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then
    echo "sluice.so is built with TSan, which redis-server cannot load: memory store only"
    finish
fi
start_redis rm --loadmodule "$MODULE" || { cat "$TMP/rm.log"; exit 1; }
start_sluiced s3 --rules "$TMP/rules.yaml" --config-store "$TMP/s3.db" --snapshot "" --threads 2 \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/s3.log"; exit 1; }
example module
stop_bg s3 TERM
start_redis rl || { cat "$TMP/rl.log"; exit 1; }
start_sluiced s4 --rules "$TMP/rules.yaml" --config-store "$TMP/s4.db" --snapshot "" --threads 2 \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/s4.log"; exit 1; }
example lua
redis-cli -p "$REDIS_PORT" SCRIPT FLUSH >/dev/null
check lua-noscript matches "$(sc SL.SETTLE tok big 0 0)" '^1 5000 4000 0 '
stop_bg s4 TERM

# ---- Redis Cluster, sluice.so in every node: the same example, the same refusals
start_cluster 3 2000 --loadmodule "$MODULE" || { cat "$TMP"/node*.log; exit 1; }
start_sluiced s5 --rules "$TMP/rules.yaml" --config-store "$TMP/s5.db" --snapshot "" --threads 2 \
    --store "redis-cluster://127.0.0.1:${CLUSTER_PORTS[0]}" --store-timeout 2s ||
    { cat "$TMP/s5.log"; exit 1; }
example cluster
finish
