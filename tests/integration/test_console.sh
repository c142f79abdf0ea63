#!/usr/bin/env bash
# test_console.sh - the console (/ui/) in a real browser: Debian's chromium, headless, driven
# by puppeteer-core at the version of tests/console/package-lock.json (installed with npm ci into
# tests/console/node_modules when missing). The cases are in tests/console/console.js: every
# page loads with no console error; a burst over RESP shows as denials on the live chart and in
# the data it plots; the key inspector says a used-up key would be refused; the hammered key
# heads the top keys; a key "<script>alert(1)</script>" renders as text; a malformed hash shows
# the overview; an in-flight rule's page shows the units a test holds over RESP, on its chart and
# by key, and a release; a rule created and changed in the editor is in force over RESP; a refused value
# is shown at its field; a rule with priorities and one with an adaptive limit show their fields
# in the editor, and ones made there are in force with them; a new rule of a name in use asks before replacing it; without the admin
# token a server that has one refuses a change, and the page says so; entering the token keeps
# the form as typed; the replay page gives the counts of `sluice replay --summary`, and with the
# token server needs the token (then gives them too) and says when a replay stopped early and
# after how many lines (a log whose keys outgrow the memory budget of a replay); a page of
# another site (tests/console/attack.html on another port) that tries a form POST, simple
# fetches, a beacon, preflighted requests and a settle changes nothing, every request it got
# sent refused and counted; under a rebound name (DNS rebinding) the console does not load and a
# script of that origin can neither read nor change a rule; the console's changes are logged
# with it as the client. Screenshots of the pages are left in
# $SLUICE_BUILD_DIR/console-screenshots/ (docs/console/ holds copies). Skipped (exit 77) when
# node, npm or chromium is not installed.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

NODE_DIR=$SLUICE_SOURCE_DIR/tests/console
need node npm redis-cli
# Debian's /usr/bin/chromium is a wrapper script; the browser itself is beside its libraries
CHROMIUM=${CHROMIUM:-}
for c in /usr/lib/chromium/chromium "$(command -v chromium)" "$(command -v chromium-browser)"; do
    if [ -z "$CHROMIUM" ] && [ -n "$c" ] && [ -x "$c" ]; then
        CHROMIUM=$c
    fi
done
[ -n "$CHROMIUM" ] || { echo "SKIP: needs chromium"; exit 77; }
node_packages "$NODE_DIR" || exit 1

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 1000
    window: 1h
  - name: burst
    algorithm: sliding_log
    limit: 5
    window: 1h
  - name: web
    algorithm: sliding_log
    limit: 30
    window: 1h
  - name: jobs
    algorithm: concurrency
    limit: 5
    hold_timeout: 1h
YAML
start_sluiced open --rules "$TMP/rules.yaml" --config-store "$TMP/open.db" --snapshot "" || {
    cat "$TMP/open.log"
    exit 1
}
OPEN_RESP=$RESP_PORT
OPEN_HTTP=$HTTP_PORT
TOKEN=console-it-$RANDOM$RANDOM
start_sluiced tok --rules "$TMP/rules.yaml" --config-store "$TMP/tok.db" --snapshot "" \
    --admin-token "$TOKEN" --replay-memory 64k || {
    cat "$TMP/tok.log"
    exit 1
}
TOK_HTTP=$HTTP_PORT

# A traffic log for the replay page: a seeded mix of keys, some over the rule (gcra 5 per 1s)
awk -v seed="${SLUICE_SEED:-15}" 'BEGIN {
    srand(seed); t = 1700000000000
    for (i = 0; i < 400; i++) {
        t += int(rand() * 40)
        k = rand() < 0.5 ? "user:hot" : "user:" int(rand() * 6)
        c = rand() < 0.1 ? " 2" : ""
        printf "%.0f %s%s\n", t, k, c
    }
}' >"$TMP/traffic.log"
"$SLUICE" replay --algorithm gcra --limit 5 --window 1s --summary "$TMP/traffic.log" \
    >"$TMP/traffic.out" || { echo "sluice replay failed"; exit 1; }
grep '^#' "$TMP/traffic.out" >"$TMP/traffic.summary"

# another site: a plain web server on another port serving the attacker's page
mkdir -p "$TMP/attack"
cp "$NODE_DIR/attack.html" "$TMP/attack/"
attack_launch() { start_bg "$1" python3 -m http.server --bind 127.0.0.1 --directory "$TMP/attack" "${SERVE_PORTS[0]}"; }
serve attack 1 attack_launch || { cat "$TMP/attack.log"; exit 1; }
ATTACK_HTTP=${SERVE_PORTS[0]}

SHOTS=$SLUICE_BUILD_DIR/console-screenshots
rm -rf "$SHOTS"
env CHROMIUM="$CHROMIUM" SLUICE_HTTP="$OPEN_HTTP" SLUICE_RESP="$OPEN_RESP" \
    SLUICE_T_HTTP="$TOK_HTTP" SLUICE_TOKEN="$TOKEN" SLUICE_SHOTS="$SHOTS" \
    REPLAY_LOG="$TMP/traffic.log" REPLAY_SUMMARY="$TMP/traffic.summary" HOME="$TMP" \
    ATTACK_HTTP="$ATTACK_HTTP" timeout 240 node "$NODE_DIR/console.js"
check console-cases test $? -eq 0
check "the console's changes logged with it as the client" grep -q \
    "INFO rule 'edited' set by HTTP 127.0.0.1:[0-9]*, no token, client 'console': {" "$TMP/open.log"
check "the console's delete logged" grep -q \
    "INFO rule 'edited' deleted by HTTP 127.0.0.1:[0-9]*, no token, client 'console'" "$TMP/open.log"
stop_bg attack TERM
for page in overview rule inflight rules replay replay-stopped; do
    check "screenshot-$page" test -s "$SHOTS/$page.png"
done

for name in open tok; do
    kill -0 "$(cat "$TMP/$name.pid")" 2>/dev/null
    check "$name-alive" test $? -eq 0
    stop_bg "$name" TERM
    check "$name-exit-0" test $? -eq 0
done
finish
