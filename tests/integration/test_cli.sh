#!/usr/bin/env bash
# test_cli.sh - `sluice check | settle | acquire | release | rules | overrides | info` against a
# real sluiced: outputs
# (text and --json), exit codes (docs/cli.md: 0 ok/allowed, 1 denied/absent/unreadable FILE,
# 2 usage, 3 server error, 4 cannot connect or timed out), server errors printed as sent, the
# connection options before and after the command, $SLUICE_PASSWORD.
#
# Needs SLUICE_BUILD_DIR and SLUICE_SOURCE_DIR (ctest sets both).
set -u
. "$(dirname "$0")/lib.sh"

for bin in "$SLUICED" "$SLUICE"; do
    [ -x "$bin" ] || { echo "not built: $bin"; exit 1; }
done
unset SLUICE_PASSWORD

start_tight_sluiced s3cret
P=(-p "$RESP_PORT" -a s3cret)

RC=0
# run ARGS...: runs sluice with ARGS; stdout in $OUT, stderr in $ERR, exit code in $RC.
run() {
    "$SLUICE" "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

# expect RC [STDOUT_REGEX [STDERR_REGEX]]: the last run's exit code and (extended) regexes,
# anchored, matched against all of stdout / stderr ("" = must be empty; omitted = any).
expect() {
    local ok=0
    [ "$RC" -eq "$1" ] || { echo "  exit code $RC, want $1"; ok=1; }
    if [ $# -ge 2 ] && ! [[ "$OUT" =~ ^$2$ ]]; then
        echo "  stdout: '$OUT'"
        echo "  want:   '$2'"
        ok=1
    fi
    if [ $# -ge 3 ] && ! [[ "$ERR" =~ ^$3$ ]]; then
        echo "  stderr: '$ERR'"
        echo "  want:   '$3'"
        ok=1
    fi
    return $ok
}

# json_is PYTHON_EXPR: the last stdout is one JSON value v for which the expression is true.
json_is() {
    python3 -c 'import json,sys; v = json.loads(sys.stdin.read()); sys.exit(0 if ('"$1"') else 1)' \
        <"$TMP/out" || { echo "  stdout: '$OUT' fails: $1"; return 1; }
}

N='[0-9]+'

# ---- check ---------------------------------------------------------------------------------

run -p "$RESP_PORT" check tight u1
check "no password: the server's NOAUTH, exit 3" expect 3 "" "sluice: NOAUTH.*"

SLUICE_REQUIREPASS=s3cret run -p "$RESP_PORT" check --peek tight u0
check "password from \$SLUICE_REQUIREPASS, the server's variable" expect 0 "allowed .*" ""
SLUICE_PASSWORD=s3cret SLUICE_REQUIREPASS=wrong run -p "$RESP_PORT" check --peek tight u0
check "\$SLUICE_PASSWORD wins over \$SLUICE_REQUIREPASS" expect 0 "allowed .*" ""

run "${P[@]}" check tight u1
check "check: allowed" expect 0 "allowed limit=2 remaining=1 retry_after_ms=0 reset_after_ms=$N" ""

SLUICE_PASSWORD=s3cret run -p "$RESP_PORT" check --json tight u1
check "check --json, password from \$SLUICE_PASSWORD" expect 0 \
    '\{"allowed":true,"limit":2,"remaining":0,"retry_after_ms":0,"reset_after_ms":[0-9]+\}' ""

run "${P[@]}" check tight u1
check "check: denied, exit 1" expect 1 "denied limit=2 remaining=0 retry_after_ms=$N reset_after_ms=$N" ""
[[ "$OUT" =~ retry_after_ms=0 ]] && check "denied with a retry time" false

run check tight u1 --json -p "$RESP_PORT" -a s3cret
check "options after the command; --json denied" expect 1 '\{"allowed":false,.*\}' ""
check "denied JSON fields" json_is 'v["allowed"] is False and v["remaining"] == 0 and v["retry_after_ms"] > 0 and list(v) == ["allowed","limit","remaining","retry_after_ms","reset_after_ms"]'

run "${P[@]}" check --peek tight u2
run "${P[@]}" check --peek tight u2
check "--peek consumes nothing" expect 0 "allowed limit=2 remaining=2 retry_after_ms=0 reset_after_ms=$N" ""

run "${P[@]}" check tight u3 --cost 2
check "--cost 2" expect 0 "allowed limit=2 remaining=0 .*" ""
run "${P[@]}" check tight u4 --cost 3
check "a cost above the limit: the server's error, exit 3" expect 3 "" "sluice: ERR cost 3 exceeds what rule 'tight' can ever admit \(2 per window\)"

run "${P[@]}" check -- tight -dash
check "-- lets a key start with '-'" expect 0 "allowed limit=2 remaining=1 .*" ""

run "${P[@]}" check nope u1
check "unknown rule: the server's error as sent, exit 3" expect 3 "" "sluice: ERR unknown rule 'nope'"

run -h 127.0.0.1 "${P[@]}" --timeout 2000 check tight u5
check "-h and --timeout before the command" expect 0 "allowed .*" ""

# ---- connection failures -------------------------------------------------------------------

hold_port dead closed || exit 1
DEAD=$HELD_PORT
run -p "$DEAD" check tight u1
check "nothing listening: exit 4" expect 4 "" "sluice: cannot connect to 127.0.0.1:$DEAD: Connection refused"

hold_port silent silent || exit 1
SILENT=$HELD_PORT
run -p "$SILENT" --timeout 300 check tight u1
check "a server that never answers: timed out, exit 4" expect 4 "" \
    "sluice: 127.0.0.1:$SILENT: SL.ALLOW: timed out after 300 ms"
stop_bg silent KILL 2>/dev/null
stop_bg dead KILL 2>/dev/null

# ---- usage errors --------------------------------------------------------------------------

run "${P[@]}" check tight
check "check with one argument" expect 2 "" "sluice: check: expected RULE KEY
Try 'sluice check --help' for more information."
run "${P[@]}" check tight u1 extra
check "check with three arguments" expect 2 "" "sluice: check: expected RULE KEY, got more.*"
run "${P[@]}" check tight u1 --cost -1
check "negative --cost" expect 2 "" "sluice: --cost: must be a non-negative integer, got '-1'.*"
run "${P[@]}" check tight u1 --cost
check "--cost without a value" expect 2 "" "sluice: option '--cost' needs a value.*"
run "${P[@]}" check tight u1 --frob
check "unknown option" expect 2 "" "sluice: unknown option '--frob'.*"
run -p 0 check tight u1
check "-p 0" expect 2 "" "sluice: -p: port must be an integer in 1..65535, got '0'.*"
run --timeout soon check tight u1
check "--timeout not a number" expect 2 "" "sluice: --timeout: .*got 'soon'.*"
run "${P[@]}" rules
check "rules without a subcommand" expect 2 "" "sluice: rules: missing subcommand.*"
run "${P[@]}" rules frob
check "rules frob" expect 2 "" "sluice: rules: unknown subcommand 'frob'.*"
run "${P[@]}" rules get
check "rules get without NAME" expect 2 "" "sluice: rules get: expected 1 argument, got 0.*"
run "${P[@]}" overrides set tight k
check "overrides set without JSON" expect 2 "" "sluice: overrides set: expected 3 arguments, got 2.*"
run --bogus check tight u1
check "an unknown option before the command: the error and a hint, not the help" expect 2 "" \
    "sluice: unknown option '--bogus'
Try 'sluice --help' for more information."
run frobnicate
check "an unknown command: the error and a hint" expect 2 "" "sluice: unknown command 'frobnicate'
Try 'sluice --help' for more information."
run "${P[@]}" info a b
check "info with two sections" expect 2 "" "sluice: info: expected at most one SECTION, got 'b'.*"

# ---- help ----------------------------------------------------------------------------------

run --help
check "--help lists the commands" expect 0 "usage: sluice .*
  check .*
  settle .*
  acquire .*
  release .*
  rules .*
  overrides .*
  info .*" ""
run -h
check "-h alone is still help" expect 0 "usage: sluice .*" ""
for cmd in check settle acquire release rules overrides info; do
    run help "$cmd"
    check "help $cmd" expect 0 "usage: sluice \[OPTIONS\] $cmd.*Exit status.*" ""
done

# ---- rules ---------------------------------------------------------------------------------

run "${P[@]}" rules list
check "rules list" expect 0 "tight" ""
run "${P[@]}" --json rules list
check "rules list --json" expect 0 '\["tight"\]' ""

API='{"name":"api","algorithm":"token_bucket","limit":100,"window":"1s","burst":200}'
run "${P[@]}" rules set api "$API"
check "rules set" expect 0 "OK" ""
run "${P[@]}" rules get api
check "rules get: JSON text" expect 0 '\{.*"token_bucket".*\}' ""
run "${P[@]}" --json rules get api
check "rules get --json: one JSON object" json_is 'v["name"] == "api" and v["algorithm"] == "token_bucket" and v["limit"] == 100'
run "${P[@]}" check api k
check "the new rule decides" expect 0 "allowed limit=200 remaining=199 .*" ""
run "${P[@]}" rules set bad '{"name":"bad","algorithm":"leaky"'
check "rules set with broken JSON: the server's error" expect 3 "" "sluice: ERR .*"
run "${P[@]}" rules set bad '{"name":"bad","algorithm":"leaky","limit":1,"window":"1s"}'
check "rules set with an unknown algorithm" expect 3 "" "sluice: ERR .*"
run "${P[@]}" rules get bad
check "rules get of an absent rule: a negative answer, exit 1" expect 1 "" "sluice: no rule 'bad'"
run "${P[@]}" --json rules get bad
check "rules get --json of an absent rule: null, exit 1" expect 1 "null" ""
run "${P[@]}" rules del api
check "rules del" expect 0 "deleted" ""
run "${P[@]}" rules del api
check "rules del again: exit 1" expect 1 "" "sluice: no rule 'api'"
run "${P[@]}" --json rules del api
check "rules del --json" expect 1 '\{"deleted":false\}' ""

run "${P[@]}" rules export
check "rules export: YAML" expect 0 ".*name: \"?tight\"?.*" ""
cp "$TMP/out" "$TMP/exported.yaml"
cat >"$TMP/new.yaml" <<'YAML'
rules:
  - name: alpha
    algorithm: fixed_window
    limit: 5
    window: 1m
  - name: beta
    algorithm: gcra
    limit: 10
    window: 1s
    burst: 4
YAML
run "${P[@]}" rules import "$TMP/new.yaml"
check "rules import FILE" expect 0 "OK" ""
run "${P[@]}" rules list
check "the import added its rules and kept the others" expect 0 "alpha
beta
tight" ""
run "${P[@]}" rules import --replace "$TMP/new.yaml"
check "rules import --replace FILE" expect 0 "OK" ""
run "${P[@]}" rules list
check "the import replaced every rule" expect 0 "alpha
beta" ""
run "${P[@]}" rules list --replace
check "--replace is for import only" expect 2 "" ".*--replace is for import only.*"
run "${P[@]}" --json rules export
check "rules export --json" json_is '"alpha" in v["yaml"] and "tight" not in v["yaml"]'

printf 'rules:\n  - name: x\n    algorithm: [\n' >"$TMP/broken.yaml"
run "${P[@]}" rules import "$TMP/broken.yaml"
check "broken YAML: the server names the line" expect 3 "" "sluice: ERR .*line.*"
run "${P[@]}" rules list
check "a failed import changes nothing" expect 0 "alpha
beta" ""
run "${P[@]}" rules import "$TMP/no-such-file.yaml"
check "rules import of a missing file: exit 1" expect 1 "" "sluice: $TMP/no-such-file.yaml: No such file or directory"

"$SLUICE" "${P[@]}" rules import --replace - <"$TMP/exported.yaml" >"$TMP/out" 2>"$TMP/err"
RC=$?
OUT=$(cat "$TMP/out")
ERR=$(cat "$TMP/err")
check "rules import - (stdin): the exported rules back" expect 0 "OK" ""
run "${P[@]}" rules list
check "round trip through export and import" expect 0 "tight" ""

# ---- overrides -----------------------------------------------------------------------------

run "${P[@]}" overrides get tight vip
check "overrides get of none: exit 1" expect 1 "" "sluice: no override for key 'vip' of rule 'tight'"
run "${P[@]}" --json overrides get tight vip
check "overrides get --json of none: null" expect 1 "null" ""
run "${P[@]}" overrides set tight vip '{"limit":5}'
check "overrides set" expect 0 "OK" ""
run "${P[@]}" --json overrides get tight vip
check "overrides get --json" json_is 'v["limit"] == 5'
run "${P[@]}" check tight vip
check "the override decides" expect 0 "allowed limit=5 remaining=4 .*" ""
run "${P[@]}" overrides set nope vip '{"limit":5}'
check "override of an unknown rule" expect 3 "" "sluice: ERR .*"
run "${P[@]}" overrides del tight vip
check "overrides del" expect 0 "deleted" ""
run "${P[@]}" overrides del tight vip
check "overrides del again: exit 1" expect 1 "" "sluice: no override for key 'vip' of rule 'tight'"

# ---- settle --------------------------------------------------------------------------------

# tokens: 1000 an hour, exact; reserve an estimate, then settle with the actual cost
run "${P[@]}" rules set tokens '{"algorithm":"sliding_log","limit":1000,"window":"1h"}'
check "rules set tokens" expect 0 "OK" ""
run "${P[@]}" check tokens u42 --cost 300
check "reserve 300: 700 left" expect 0 "allowed limit=1000 remaining=700 retry_after_ms=0 reset_after_ms=$N" ""
run "${P[@]}" settle tokens u42 300 120
check "settle 300 -> 120: 180 back, 880 left" expect 0 \
    "allowed limit=1000 remaining=880 retry_after_ms=0 reset_after_ms=$N" ""
run "${P[@]}" settle tokens u42 100 1100
check "settle 100 -> 1100: in debt, denied, exit 1" expect 1 \
    "denied limit=1000 remaining=0 retry_after_ms=$N reset_after_ms=$N" ""
[[ "$OUT" =~ retry_after_ms=0 ]] && check "in debt with a retry time" false
run "${P[@]}" check tokens u42 --peek
check "the key stays in debt: a peek is denied" expect 1 "denied limit=1000 remaining=0 .*" ""
run "${P[@]}" settle tokens u42 0 9223372036854775807
check "settle past max_debt: refused, the server's error, exit 3" expect 3 "" \
    "sluice: ERR .*max_debt.*"
run "${P[@]}" settle tokens u42 0 0 --json
check "settle --json of a key in debt: exit 1" expect 1 '\{"allowed":false,.*\}' ""
check "settle JSON fields" json_is 'v["allowed"] is False and v["remaining"] == 0 and v["retry_after_ms"] > 0 and list(v) == ["allowed","limit","remaining","retry_after_ms","reset_after_ms"]'
run "${P[@]}" check tokens u43 --cost 500
AT_MS=$(python3 -c 'import time; print(int(time.time() * 1000))')
run settle tokens u43 500 0 --at "$AT_MS" "${P[@]}"
check "settle --at, options after the arguments: everything back" expect 0 \
    "allowed limit=1000 remaining=1000 retry_after_ms=0 .*" ""
run "${P[@]}" settle nope u1 1 1
check "settle of an unknown rule: the server's error, exit 3" expect 3 "" "sluice: ERR unknown rule 'nope'"
run "${P[@]}" check tokens u44 --cost 10
check "reserve 10 of u44" expect 0 "allowed limit=1000 remaining=990 .*" ""
run "${P[@]}" settle tokens u44 10 1 -- extra
check "settle with five arguments" expect 2 "" "sluice: too many arguments, starting at 'extra'.*"
run "${P[@]}" settle tokens u44 10
check "settle with three arguments" expect 2 "" "sluice: settle: expected RULE KEY RESERVED ACTUAL, got 3 arguments
Try 'sluice settle --help' for more information."
run "${P[@]}" settle tokens u44 -10 1
check "settle: a negative RESERVED" expect 2 "" "sluice: settle: RESERVED must be a non-negative integer, got '-10'.*"
run "${P[@]}" settle tokens u44 10 1.5
check "settle: ACTUAL not an integer" expect 2 "" "sluice: settle: ACTUAL must be a non-negative integer, got '1.5'.*"
run "${P[@]}" settle tokens u44 10 1 --at yesterday
check "settle: --at not a number" expect 2 "" "sluice: --at: must be a non-negative integer \(ms since the Unix epoch\), got 'yesterday'.*"
run "${P[@]}" settle tokens u44 10 1 --at
check "settle: --at without a value" expect 2 "" "sluice: option '--at' needs a value.*"
run "${P[@]}" check tokens u44 --peek
check "usage errors send nothing: u44 still has 990" expect 0 "allowed limit=1000 remaining=990 .*" ""
run "${P[@]}" rules del tokens
check "rules del tokens" expect 0 "deleted" ""

# ---- acquire, release ----------------------------------------------------------------------

# jobs: two units held at once per key
run "${P[@]}" rules set jobs '{"algorithm":"concurrency","limit":2,"hold_timeout":"1h"}'
check "rules set jobs" expect 0 "OK" ""
run "${P[@]}" acquire jobs w1
check "acquire 1: held, a hold id" expect 0 \
    "allowed limit=2 remaining=1 retry_after_ms=0 reset_after_ms=$N hold_id=[1-9][0-9]*" ""
H1=${OUT##*hold_id=}
run acquire jobs w1 --json "${P[@]}"
check "acquire 2 --json, options after the arguments: held" expect 0 '\{"allowed":true,.*\}' ""
check "acquire JSON fields" json_is 'v["remaining"] == 0 and v["hold_id"] > 0 and list(v) == ["allowed","limit","remaining","retry_after_ms","reset_after_ms","hold_id"]'
H2=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["hold_id"])' <"$TMP/out")
check "two different hold ids" test "$H1" != "$H2"
run "${P[@]}" acquire jobs w1
check "acquire 3: refused, no hold, exit 1" expect 1 \
    "denied limit=2 remaining=0 retry_after_ms=$N reset_after_ms=$N hold_id=0" ""
run "${P[@]}" release jobs w1 "$H1"
check "release hold 1" expect 0 "released" ""
run "${P[@]}" check jobs w1 --peek
check "the release freed exactly one unit" expect 0 "allowed limit=2 remaining=1 .*" ""
run "${P[@]}" release jobs w1 "$H1"
check "release hold 1 again: no such hold, exit 1" expect 1 "" \
    "sluice: ERR no such hold: the key holds no live hold of that id \(expired, released before, or never made\); nothing changed"
run "${P[@]}" --json release jobs w1 "$H1"
check "release --json of no such hold: exit 1" expect 1 '\{"released":false\}' ""
run "${P[@]}" check jobs w1 --peek
check "... which freed nothing" expect 0 "allowed limit=2 remaining=1 .*" ""
run "${P[@]}" --json release jobs w1 "$H2"
check "release --json" expect 0 '\{"released":true\}' ""
run "${P[@]}" acquire jobs w2 --cost 2 --hold-timeout 100ms
check "acquire 2 units for 100ms" expect 0 "allowed limit=2 remaining=0 .* hold_id=[1-9][0-9]*" ""
H3=${OUT##*hold_id=}
# the hold expires: poll the key (bounded by poll's seconds), assert nothing about how soon
check "the short hold expires and frees its units" poll 20 \
    bash -c '"$0" "$@" check jobs w2 --peek | grep -q "remaining=2 "' "$SLUICE" "${P[@]}"
run "${P[@]}" release jobs w2 "$H3"
check "release of the expired hold: no such hold, exit 1" expect 1 "" "sluice: ERR no such hold: .*"
run "${P[@]}" acquire jobs w3 --cost 3
check "acquire above the limit: the server's error, exit 3" expect 3 "" "sluice: ERR .*"
run "${P[@]}" acquire jobs w3 --hold-timeout 2h
check "acquire past hold_timeout: the server's error, exit 3" expect 3 "" \
    "sluice: ERR timeout must be within 1..3600000 ms \(rule 'jobs' hold_timeout\)"
run "${P[@]}" acquire tight w3
check "acquire on a rule that holds nothing: exit 3" expect 3 "" "sluice: ERR rule 'tight' holds nothing .*"
run "${P[@]}" release tight w3 1
check "release on a rule that holds nothing: exit 3, not 1" expect 3 "" "sluice: ERR rule 'tight' holds nothing .*"
run "${P[@]}" acquire jobs w3 --hold-timeout 30
check "acquire: --hold-timeout without a unit" expect 2 "" \
    "sluice: --hold-timeout: must be a duration of whole milliseconds, at least 1ms \(250ms, 30s, 1m30s\), got '30'.*"
run "${P[@]}" release jobs w3 -4
check "release: a negative ID" expect 2 "" "sluice: release: ID must be a non-negative integer, got '-4'.*"
run "${P[@]}" release jobs w3
check "release without an ID" expect 2 "" "sluice: release: expected RULE KEY ID, got 2 arguments.*"
run "${P[@]}" acquire jobs
check "acquire without a KEY" expect 2 "" "sluice: acquire: expected RULE KEY.*"
run "${P[@]}" check jobs w3 --peek
check "usage and server errors held nothing on w3" expect 0 "allowed limit=2 remaining=2 .*" ""

# ---- priorities, adaptive reports ----------------------------------------------------------

# tiers: 10 an hour, the last 3 units for high
run "${P[@]}" rules set tiers '{"algorithm":"fixed_window","limit":10,"window":"1h","priorities":["low","high"],"reserve":{"high":3}}'
check "rules set tiers" expect 0 "OK" ""
run "${P[@]}" check tiers k --cost 7 --priority low
check "check --priority low: 7 of 10, low's view" expect 0 "allowed limit=10 remaining=0 .*" ""
run "${P[@]}" check tiers k --priority low
check "check --priority low: shed, exit 1" expect 1 "denied limit=10 remaining=0 retry_after_ms=[1-9][0-9]* .*" ""
run "${P[@]}" check tiers k
check "check without a priority is the lowest: shed too" expect 1 "denied .*" ""
run "${P[@]}" check tiers k --peek --priority high
check "check --peek --priority high: high's view, 3 remaining" expect 0 "allowed limit=10 remaining=3 .*" ""
run "${P[@]}" --json check tiers k --priority high --cost 2
check "check --priority high --json: admitted" expect 0 '\{"allowed":true,"limit":10,"remaining":1,.*\}' ""
run "${P[@]}" check tiers k --priority urgent
check "an unknown priority: the server's error, exit 3" expect 3 "" \
    "sluice: ERR unknown priority 'urgent' for rule 'tiers' \(it has low, high\)"
run "${P[@]}" check tiers k --priority
check "--priority without a value: exit 2" expect 2 "" "sluice: option '--priority' needs a value.*"
run "${P[@]}" rules set pjobs '{"algorithm":"concurrency","limit":2,"hold_timeout":"1h","priorities":["low","high"],"reserve":{"high":1}}'
check "rules set pjobs" expect 0 "OK" ""
run "${P[@]}" acquire pjobs k --priority low
check "acquire --priority low: held" expect 0 "allowed limit=2 remaining=0 .* hold_id=[1-9][0-9]*" ""
run "${P[@]}" acquire pjobs k --priority low
check "acquire --priority low again: shed, exit 1" expect 1 "denied .* hold_id=0" ""
run "${P[@]}" acquire pjobs k --priority high
check "acquire --priority high: holds the reserve" expect 0 "allowed limit=2 remaining=0 .* hold_id=[1-9][0-9]*" ""

# adapt: aimd from 2, halved on a drop; a window is as many reported releases as the limit
run "${P[@]}" rules set adapt '{"algorithm":"concurrency","limit":2,"hold_timeout":"1h","adaptive":"aimd","min_limit":1,"max_limit":8,"backoff":50,"latency_timeout":"100ms"}'
check "rules set adapt" expect 0 "OK" ""
acquire_id() { "$SLUICE" "${P[@]}" acquire adapt k | sed -n 's/.*hold_id=//p'; }
A1=$(acquire_id); A2=$(acquire_id)
run "${P[@]}" release adapt k "$A1"
check "release without a report" expect 0 "released" ""
run "${P[@]}" release adapt k "$A2"
run "${P[@]}" check adapt k --peek
check "unreported releases leave the limit at 2" expect 0 "allowed limit=2 .*" ""
A1=$(acquire_id); A2=$(acquire_id)
run "${P[@]}" release adapt k "$A1" --latency 12ms
check "release --latency 12ms" expect 0 "released" ""
run "${P[@]}" release adapt k "$A2" --latency 1500us
run "${P[@]}" check adapt k --peek
check "a busy window of reported latencies grows the limit to 3" expect 0 "allowed limit=3 .*" ""
A1=$(acquire_id); A2=$(acquire_id); A3=$(acquire_id)
run "${P[@]}" --json release adapt k "$A1" --dropped
check "release --dropped --json" expect 0 '\{"released":true\}' ""
run "${P[@]}" release adapt k "$A2" --latency 1ms
run "${P[@]}" release adapt k "$A3" --latency 1ms
run "${P[@]}" check adapt k --peek
check "a window with a drop halves the limit: 1" expect 0 "allowed limit=1 .*" ""
run "${P[@]}" release adapt k 1 --latency 12
check "release --latency without a unit: exit 2" expect 2 "" \
    "sluice: --latency: must be a duration of whole microseconds, at most 1h \(12ms, 1500us, 2s\), got '12'.*"
run "${P[@]}" release adapt k 1 --latency 2h
check "release --latency past 1h: exit 2" expect 2 "" "sluice: --latency: must be .*got '2h'.*"
run "${P[@]}" acquire adapt k --dropped
check "acquire takes no --dropped: exit 2" expect 2 "" "sluice: unknown option '--dropped'.*"
run -p "$DEAD" -a s3cret acquire jobs w3
check "acquire: cannot connect, exit 4" expect 4 "" "sluice: cannot connect to 127.0.0.1:$DEAD: Connection refused"
run "${P[@]}" rules del jobs
check "rules del jobs" expect 0 "deleted" ""

# ---- info ----------------------------------------------------------------------------------

run "${P[@]}" info
check "info: text" expect 0 "# Server
.*sluice_version:.*total_commands_processed:.*" ""
[[ "$OUT" == *$'\r'* ]] && check "info text has no CR" false
run "${P[@]}" --json info
check "info --json: sections" json_is 'isinstance(v["server"]["sluice_version"], str) and isinstance(v["stats"]["total_commands_processed"], int) and v["server"]["tcp_port"] == '"$RESP_PORT"
run "${P[@]}" --json info server
check "info SECTION" json_is 'list(v) == ["server"]'

check "sluiced is still running" kill -0 "$(cat "$TMP/sluiced.pid")"
check "sluiced stops cleanly on TERM" stop_bg sluiced
finish
