#!/usr/bin/env bash
# test_server_shadowinfo.sh - SL.ALLOW's SHADOWINFO option makes a shadow refusal visible over
# RESP, on every request store (memory; Redis with sluice.so; Redis through the Lua scripts; a
# Redis Cluster with sluice.so), with the same answers: without the option the reply is the five
# elements every client decodes, a shadow refusal looking like an admission; with it, a sixth
# element is 1 exactly when the rule refused and shadow mode let the request through, 0 for a
# true admission, 0 for an enforced refusal. COST and SHADOWINFO in either order; each option at
# most once, an unknown or repeated one named in the error; SL.ALLOW rule key x still an arity
# error; COMMAND DOCS names the option. No timing: sliding logs of an hour (no window edge
# to cross).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: dry
    algorithm: sliding_log
    limit: 2
    window: 1h
    shadow: true
  - name: real
    algorithm: sliding_log
    limit: 1
    window: 1h
YAML
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }

# The same cases on whichever store RESP_PORT's sluiced uses; $1 names the run, $2 a key prefix
# (fresh keys for each run).
cases() {
    local m=$1 k=$2
    # a shadow rule under its limit: admitted, shadowed 0
    check "$m-under" matches "$(cli SL.ALLOW dry "$k:a" SHADOWINFO)" '^1 2 1 0 [0-9]+ 0$'
    check "$m-cost-first" matches "$(cli SL.ALLOW dry "$k:a" COST 1 SHADOWINFO)" '^1 2 0 0 [0-9]+ 0$'
    # over it: without the option, five elements that look like an admission ...
    check "$m-five" matches "$(cli SL.ALLOW dry "$k:a")" '^1 2 0 0 [0-9]+$'
    # ... with it, the sixth says shadow mode let a refusal through, in either order
    check "$m-shadowed" matches "$(cli SL.ALLOW dry "$k:a" SHADOWINFO)" '^1 2 0 0 [0-9]+ 1$'
    check "$m-shadowed-order" matches "$(cli SL.ALLOW dry "$k:a" SHADOWINFO COST 2)" \
        '^1 2 0 0 [0-9]+ 1$'
    check "$m-lower" matches "$(cli SL.ALLOW dry "$k:a" shadowinfo)" '^1 2 0 0 [0-9]+ 1$'
    # an enforced rule: admitted 0, refused 0 (allowed is 0: no shadow involved)
    check "$m-real-ok" matches "$(cli SL.ALLOW real "$k:b" SHADOWINFO)" '^1 1 0 0 [0-9]+ 0$'
    check "$m-real-no" matches "$(cli SL.ALLOW real "$k:b" SHADOWINFO)" '^0 1 0 [0-9]+ [0-9]+ 0$'
    check "$m-real-five" matches "$(cli SL.ALLOW real "$k:b")" '^0 1 0 [0-9]+ [0-9]+$'
    # bad options change nothing
    check "$m-twice" matches "$(cli SL.ALLOW real "$k:c" SHADOWINFO SHADOWINFO)" \
        '^ERR option SHADOWINFO given twice$'
    check "$m-cost-twice" matches "$(cli SL.ALLOW real "$k:c" COST 1 COST)" '^ERR option COST given twice$'
    check "$m-unknown" matches "$(cli SL.ALLOW real "$k:c" SHADOWINFO VERBOSE)" \
        "^ERR unknown option 'VERBOSE' \\(expected COST or PRIORITY or SHADOWINFO\\)$"
    check "$m-cost-bad" matches "$(cli SL.ALLOW real "$k:c" SHADOWINFO COST x)" \
        '^ERR cost is not an integer or out of range$'
    check "$m-cost-missing" matches "$(cli SL.ALLOW real "$k:c" SHADOWINFO COST)" '^ERR option COST takes a value$'
    check "$m-arity" matches "$(cli SL.ALLOW real "$k:c" x)" \
        "^ERR wrong number of arguments for 'sl.allow' command$"
    check "$m-unknown-long" matches "$(cli SL.ALLOW real "$k:c" COST 1 SHADOWINFO x y)" \
        "^ERR unknown option 'x' \\(expected COST or PRIORITY or SHADOWINFO\\)$"
    check "$m-unchanged" matches "$(cli SL.PEEK real "$k:c")" '^1 1 1 0 0$'
}

start_sluiced mem --rules "$TMP/rules.yaml" --config-store "$TMP/mem.db" --snapshot "" ||
    { cat "$TMP/mem.log"; exit 1; }
cases mem m
check docs matches "$(cli COMMAND DOCS sl.allow)" 'shadowinfo'
stop_bg mem TERM

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
start_redis rmod --loadmodule "$MODULE" || { cat "$TMP/rmod.log"; exit 1; }
start_sluiced smod --rules "$TMP/rules.yaml" --config-store "$TMP/smod.db" --snapshot "" \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/smod.log"; exit 1; }
cases module d
stop_bg smod TERM
stop_bg rmod TERM

start_redis rlua || { cat "$TMP/rlua.log"; exit 1; }
start_sluiced slua --rules "$TMP/rules.yaml" --config-store "$TMP/slua.db" --snapshot "" \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/slua.log"; exit 1; }
cases lua l
stop_bg slua TERM
stop_bg rlua TERM

start_cluster 3 2000 --loadmodule "$MODULE" || exit 1
start_sluiced scl --rules "$TMP/rules.yaml" --config-store "$TMP/scl.db" --snapshot "" \
    --store "redis-cluster://127.0.0.1:${CLUSTER_PORTS[0]}" --store-timeout 2s ||
    { cat "$TMP/scl.log"; exit 1; }
cases cluster c
finish
