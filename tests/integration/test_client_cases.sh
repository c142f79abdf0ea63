#!/usr/bin/env bash
# test_client_cases.sh - every case of tests/sdk/cases.json, the table each language package runs,
# through libsluice-client itself (prog_sdk_cases), the reference the table describes.
#
# Starts sluiced on free loopback ports with the table's rules_yaml as its --rules file, runs
# prog_sdk_cases in the background and serves its requests: for a case that stops the server
# ("stop_server") it stops sluiced, and starts it again on the same ports when the case is over.
# Passes when every case holds and sluiced stops cleanly. Needs SLUICE_BUILD_DIR and
# SLUICE_SOURCE_DIR (ctest sets both); CASES_JSON runs another table (a broken copy shows each
# expectation can fail).
set -u
. "$(dirname "$0")/lib.sh"

PROG=$SLUICE_BUILD_DIR/tests/prog_sdk_cases
CASES_JSON=${CASES_JSON:-$SLUICE_SOURCE_DIR/tests/sdk/cases.json}
for bin in "$SLUICED" "$PROG"; do
    [ -x "$bin" ] || { echo "not built: $bin"; exit 1; }
done

# fall_back(): the runner's is docs/client.md's, comment and body, word for word
fall_back() { # FILE: the function as FILE has it
    sed -n '/^\/\* rc and \*d: what a call returned/,/^}/p' "$1"
}
check "the runner's fall_back() is the document's" test -n "$(fall_back "$SLUICE_SOURCE_DIR/docs/client.md")" \
    -a "$(fall_back "$SLUICE_SOURCE_DIR/docs/client.md")" = \
    "$(fall_back "$SLUICE_SOURCE_DIR/tests/integration/prog_sdk_cases.c")"

python3 -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))["rules_yaml"])' \
    "$CASES_JSON" >"$TMP/cases.yaml"
args=(--rules "$TMP/cases.yaml" --config-store "$TMP/cases.db" --snapshot "")
start_sluiced cases "${args[@]}" || {
    cat "$TMP/cases.log"
    exit 1
}
PORTS="$RESP_PORT $HTTP_PORT"
mkdir -p "$TMP/hs"
STOPS=0
STARTS=0

# serve_requests: one pass over the program's requests ("stop", "start"), each answered by
# "<request>.done" once done
serve_requests() {
    if [ -e "$TMP/hs/stop" ]; then
        rm -f "$TMP/hs/stop"
        stop_bg cases TERM
        STOPS=$((STOPS + 1))
        touch "$TMP/hs/stop.done"
    fi
    if [ -e "$TMP/hs/start" ]; then
        rm -f "$TMP/hs/start"
        # shellcheck disable=SC2086 # two ports
        start_sluiced_at cases $PORTS "${args[@]}" && STARTS=$((STARTS + 1))
        touch "$TMP/hs/start.done"
    fi
}

start_bg prog "$PROG" "$CASES_JSON" "$RESP_PORT" "$TMP/hs"
pid=$(cat "$TMP/prog.pid")
for ((i = 0; i < 4800; i++)); do # 240 s at most
    kill -0 "$pid" 2>/dev/null || break
    serve_requests
    sleep 0.05
done
wait "$pid"
rc=$?
lib_forget "$pid"
sed 's/^/  [prog_sdk_cases] /' "$TMP/prog.log"
check "every case of cases.json holds" test "$rc" -eq 0
cases=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$CASES_JSON")
check "every case ran" test "$(grep -c '^ok ' "$TMP/prog.log")" -eq "$cases"
check "each under a name of its own" test "$(sed -n 's/^ok [0-9]* - //p' "$TMP/prog.log" | sort -u | wc -l)" -eq "$cases"
stopping=$(python3 -c 'import json, sys
print(sum(any(s["op"] == "stop_server" for s in c["steps"]) for c in json.load(open(sys.argv[1]))["cases"]))' "$CASES_JSON")
check "each case that stops sluiced stopped it" test "$STOPS" -eq "$stopping"
check "and it was started again after each" test "$STARTS" -eq "$STOPS"
check "sluiced stops cleanly on TERM" stop_bg cases TERM
if [ "$FAILS" -ne 0 ]; then
    echo "--- sluiced log"
    tail -30 "$TMP/cases.log"
fi
finish
