#!/usr/bin/env bash
# test_server_acquireall.sh - several holds all or none: SL.ACQUIREALL and POST /v1/acquire's
# {"checks":[..]}, and POST /v1/release's {"releases":[..]}, on every request store (memory,
# Redis through the Lua scripts, Redis with sluice.so, Redis Cluster), each run answering as the
# others (the same patterns). Cases: a hold on every pair with the decision of the pair with least
# left; a refused whole keeps no hold on any pair (peeks show nothing taken) and reports no id; a
# pair named twice is one hold of the summed cost, its id in both places, released once; TIMEOUT
# (shorter holds expire by themselves; past a rule's hold_timeout an error naming it, nothing
# held); a rule that holds nothing, a cost no pair can ever take, an unknown priority: errors with
# nothing held; an override's limit and a blocked key; a shadow rule (let through, no hold on its
# pair); priorities (a reserve keeps the last units for the higher one); clients racing for the
# same two keys never leave a partial hold (what is held on each key is what was admitted, and
# the keys then admit exactly what is left); the HTTP forms (validated whole before anything is
# held, unknown fields named, each release answered on its own).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl python3

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
  - name: gpu
    algorithm: concurrency
    limit: 2
    hold_timeout: 30m # no hold here expires but by its TIMEOUT, however slow the machine
  - name: quiet
    algorithm: concurrency
    limit: 1
    hold_timeout: 1h
    shadow: true
  - name: pri
    algorithm: concurrency
    limit: 4
    hold_timeout: 1h
    priorities: [low, high]
    reserve: {high: 2}
  - name: api
    algorithm: gcra
    limit: 10
    window: 1s
YAML
sc() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | sed '/^$/d' | paste -sd' ' -; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
field() { echo "$1" | cut -d' ' -f"$2"; } # a reply's n-th field
remaining_is() { [[ "$(sc SL.PEEK "$1" "$2")" =~ ^1\ [0-9]+\ $3\  ]]; }
post() { # post PATH JSON: "STATUS BODY"
    curl -s -m 10 -H 'Content-Type: application/json' -w ' %{http_code}' -d "$2" \
        "http://127.0.0.1:$HTTP_PORT$1"
}
json_ok() { # json_ok "BODY STATUS" PYTHON-EXPR (v: the body, s: the status)
    python3 -c 'import json,sys; b, s = sys.argv[1].rsplit(" ", 1); v = json.loads(b); s = int(s)
sys.exit(0 if ('"$2"') else 1)' "$1" || { echo "  got '$1', fails: $2"; return 1; }
}
ID='[1-9][0-9]*'

cases() { # $1: the run's name, in every case's name and key
    local m=$1 a b r id
    # every pair held: the decision of the pair with least left (gpu), then each pair's id
    a=$(sc SL.ACQUIREALL conn "$m:a" gpu "$m:a")
    check "$m both" matches "$a" "^1 2 1 0 [0-9]+ $ID $ID\$"
    check "$m ids differ" test "$(field "$a" 6)" != "$(field "$a" 7)"
    b=$(sc SL.ACQUIREALL conn "$m:a" gpu "$m:a")
    check "$m both again" matches "$b" "^1 2 0 0 [0-9]+ $ID $ID\$"
    # gpu full: refused whole, no id, and conn keeps only the two holds made before
    check "$m refused" matches "$(sc SL.ACQUIREALL conn "$m:a" gpu "$m:a")" '^0 2 0 [0-9]+ [0-9]+ 0 0$'
    check "$m refused holds nothing" remaining_is conn "$m:a" 1
    check "$m release conn" matches "$(sc SL.RELEASE conn "$m:a" "$(field "$a" 6)")" '^OK$'
    check "$m release gpu" matches "$(sc SL.RELEASE gpu "$m:a" "$(field "$a" 7)")" '^OK$'
    check "$m admitted after release" matches "$(sc SL.ACQUIREALL gpu "$m:a" conn "$m:a")" \
        "^1 2 0 0 [0-9]+ $ID $ID\$"
    # a pair named twice: one hold of both costs, one id, released once
    r=$(sc SL.ACQUIREALL conn "$m:b" conn "$m:b")
    check "$m twice" matches "$r" "^1 3 1 0 [0-9]+ $ID $ID\$"
    check "$m twice one id" test "$(field "$r" 6)" = "$(field "$r" 7)"
    check "$m twice release" matches "$(sc SL.RELEASE conn "$m:b" "$(field "$r" 6)")" '^OK$'
    check "$m twice freed" remaining_is conn "$m:b" 3
    check "$m twice once" matches "$(sc SL.RELEASE conn "$m:b" "$(field "$r" 6)")" '^ERR no such hold'
    # TIMEOUT: shorter holds expire by themselves; past a rule's hold_timeout, an error
    check "$m timeout" matches "$(sc SL.ACQUIREALL gpu "$m:t" conn "$m:t" COST 2 TIMEOUT 150)" \
        "^1 [23] [01] 0 [0-9]+ $ID $ID\$"
    check "$m timeout expires gpu" poll 10 remaining_is gpu "$m:t" 2
    check "$m timeout expires conn" poll 10 remaining_is conn "$m:t" 3
    check "$m timeout long" matches "$(sc SL.ACQUIREALL conn "$m:t" gpu "$m:t" TIMEOUT 1800001)" \
        "^ERR timeout must be within 1..1800000 ms \\(rule 'gpu' hold_timeout\\)$"
    # errors hold nothing
    check "$m not holding" matches "$(sc SL.ACQUIREALL conn "$m:e" api "$m:e")" \
        "^ERR rule 'api' holds nothing to acquire or release"
    check "$m never" matches "$(sc SL.ACQUIREALL conn "$m:e" gpu "$m:e" COST 3)" \
        "^ERR cost 3 exceeds what rule 'gpu' can ever admit \\(2 at once\\)$"
    check "$m unknown priority" matches "$(sc SL.ACQUIREALL pri "$m:e" pri "$m:f" PRIORITY top)" \
        "^ERR .*top"
    check "$m errors hold nothing" remaining_is conn "$m:e" 3
    check "$m errors hold nothing gpu" remaining_is gpu "$m:e" 2
    # an override's limit; a blocked key refuses the whole
    check "$m override" matches "$(sc SL.ACQUIREALL conn big gpu "$m:o" COST 2)" \
        "^1 2 0 0 [0-9]+ $ID $ID\$"
    check "$m override limit" remaining_is conn big 3
    check "$m blocked" matches "$(sc SL.ACQUIREALL gpu "$m:x" conn banned)" '^0 0 0 -1 0 0 0$'
    check "$m blocked holds nothing" remaining_is gpu "$m:x" 2
    # shadow: let through, but no hold on its pair once it is over
    check "$m shadow first" matches "$(sc SL.ACQUIREALL quiet "$m:s" conn "$m:s")" \
        "^1 1 0 0 [0-9]+ $ID $ID\$"
    check "$m shadow over" matches "$(sc SL.ACQUIREALL quiet "$m:s" conn "$m:s")" \
        "^1 1 0 0 [0-9]+ 0 $ID\$"
    # priorities: the lowest must leave high's 2 units
    check "$m low" matches "$(sc SL.ACQUIREALL pri "$m:p" pri "$m:q" COST 2)" "^1 4 [0-9] 0 [0-9]+ $ID $ID\$"
    check "$m low shed" matches "$(sc SL.ACQUIREALL pri "$m:p" pri "$m:q" COST 1)" '^0 4 0 [0-9]+ [0-9]+ 0 0$'
    check "$m low shed holds nothing" matches "$(sc SL.PEEK pri "$m:q" PRIORITY high)" '^1 4 2 0 '
    check "$m high" matches "$(sc SL.ACQUIREALL pri "$m:p" pri "$m:q" COST 2 PRIORITY high)" \
        "^1 4 0 0 [0-9]+ $ID $ID\$"

    # racing clients: 12 at once on the same two keys (limits 3 and 2)
    local i admitted pids=()
    for ((i = 0; i < 12; i++)); do
        sc SL.ACQUIREALL conn "$m:r" gpu "$m:r" >"$TMP/race.$m.$i" &
        pids+=($!)
    done
    wait "${pids[@]}"
    admitted=$(cat "$TMP"/race."$m".* | grep -c '^1 ')
    check "$m race at most the limit" test "$admitted" -le 2
    check "$m race conn holds what was admitted" remaining_is conn "$m:r" $((3 - admitted))
    check "$m race gpu holds what was admitted" remaining_is gpu "$m:r" $((2 - admitted))
    for ((i = admitted; i < 2; i++)); do
        check "$m race room left $i" matches "$(sc SL.ACQUIREALL conn "$m:r" gpu "$m:r")" '^1 '
    done
    check "$m race then full" matches "$(sc SL.ACQUIREALL conn "$m:r" gpu "$m:r")" '^0 '

    # HTTP: every hold or none, validated whole, releases each on its own
    r=$(post /v1/acquire '{"checks":[{"rule":"conn","key":"'"$m"':h","cost":2},{"rule":"gpu","key":"'"$m"':h","timeout_ms":600000}]}')
    check "$m http acquire" json_ok "$r" 's == 200 and v["allowed"] and all(c["allowed"] and c["hold_id"] > 0 for c in v["checks"]) and [c["remaining"] for c in v["checks"]] == [1, 1]'
    local ids
    ids=$(python3 -c 'import json,sys; print(" ".join(str(c["hold_id"]) for c in json.loads(sys.argv[1].rsplit(" ", 1)[0])["checks"]))' "$r")
    check "$m http refused" json_ok "$(post /v1/acquire '{"checks":[{"rule":"conn","key":"'"$m"':h","cost":2},{"rule":"gpu","key":"'"$m"':h"}]}')" \
        's == 200 and not v["allowed"] and all(not c["allowed"] and c["hold_id"] == 0 for c in v["checks"]) and v["checks"][0]["retry_after_ms"] > 0'
    check "$m http refused holds nothing" remaining_is gpu "$m:h" 1
    check "$m http independent" json_ok "$(post /v1/acquire '{"independent":true,"checks":[{"rule":"conn","key":"'"$m"':h","cost":2},{"rule":"gpu","key":"'"$m"':h"}]}')" \
        's == 200 and not v["allowed"] and [c["allowed"] for c in v["checks"]] == [False, True] and v["checks"][0]["hold_id"] == 0 and v["checks"][1]["hold_id"] > 0'
    check "$m http timeout" json_ok "$(post /v1/acquire '{"checks":[{"rule":"conn","key":"'"$m"':v"},{"rule":"gpu","key":"'"$m"':v","timeout_ms":1800001}]}')" \
        's == 400 and v["detail"] == "checks[1]: timeout_ms must be within 1..1800000 (rule \x27gpu\x27 hold_timeout)"'
    check "$m http unknown field" json_ok "$(post /v1/acquire '{"checks":[{"rule":"conn","key":"'"$m"':v","cots":2}]}')" \
        's == 400 and v["detail"] == "checks[0]: unknown field \x27cots\x27"'
    check "$m http not holding" json_ok "$(post /v1/acquire '{"checks":[{"rule":"conn","key":"'"$m"':v"},{"rule":"api","key":"'"$m"':v"}]}')" \
        's == 400 and v["detail"] == "checks[1]: rule \x27api\x27 holds nothing to acquire or release"'
    check "$m http invalid holds nothing" remaining_is conn "$m:v" 3
    check "$m http never" json_ok "$(post /v1/acquire '{"checks":[{"rule":"conn","key":"'"$m"':v"},{"rule":"gpu","key":"'"$m"':v","cost":3}]}')" \
        's == 400 and "cost 3 exceeds what rule \x27gpu\x27 can ever admit" in v["detail"]'
    set -- $ids
    check "$m http releases" json_ok "$(post /v1/release '{"releases":[{"rule":"conn","key":"'"$m"':h","id":'"$1"'},{"rule":"gpu","key":"'"$m"':h","id":'"$2"',"latency_ms":12.5},{"rule":"gpu","key":"'"$m"':h","id":'"$2"'}]}')" \
        's == 200 and not v["released"] and [r["released"] for r in v["releases"]] == [True, True, False] and v["releases"][2]["error"].startswith("no such hold")'
    check "$m http released" remaining_is conn "$m:h" 3
    check "$m http release bad" json_ok "$(post /v1/release '{"releases":[{"rule":"conn","key":"k","id":1},{"rule":"conn","key":"k"}]}')" \
        's == 400 and v["detail"] == "releases[1]: id must be an integer >= 0"'
    check "$m http release empty" json_ok "$(post /v1/release '{"releases":[]}')" \
        's == 400 and v["detail"] == "releases: must be an array of 1 to 64 items"'
}

run_on() { # run_on NAME [sluiced ARGS..]: the cases against a fresh sluiced
    local name=$1
    shift
    start_sluiced "$name" --rules "$TMP/rules.yaml" --config-store "$TMP/$name.db" --snapshot "" \
        --threads 2 "$@" || { cat "$TMP/$name.log"; return 1; }
    cases "$name"
    check "$name stops cleanly" stop_bg "$name" TERM
}

run_on memory
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
run_on lua --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 5s
stop_bg lua TERM

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
if ldd "$MODULE" | grep -q libtsan; then # redis-server cannot load a module built with TSan
    echo "sluice.so is built with TSan: its part runs in the plain and ASan builds"
    finish
fi
start_redis module --loadmodule "$MODULE" || { cat "$TMP/module.log"; exit 1; }
run_on module --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 5s
stop_bg module TERM
start_cluster 3 2000 --loadmodule "$MODULE" || { cat "$TMP"/node*.log; exit 1; }
run_on cluster --store "redis-cluster://127.0.0.1:${CLUSTER_PORTS[0]}" --store-timeout 5s
finish
