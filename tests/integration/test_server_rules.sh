#!/usr/bin/env bash
# test_server_rules.sh - rules in the SQLite config store: import at start, SIGHUP re-import,
# invalid YAML refused with its position while the rules in force stay, two servers sharing one
# store (the retriever applies a change within a poll interval), reloads under load with no
# wrong decision, and AUTH with requirepass.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli

write_rules() { # write_rules LIMIT
    cat >"$TMP/rules.yaml" <<YAML
rules:
  - name: steady
    algorithm: sliding_log
    limit: 500
    window: 1h
  - name: churn
    algorithm: gcra
    limit: $1
    window: 1s
YAML
}
cli() { redis-cli -p "${PORT:-$RESP_PORT}" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }

# --- an invalid rules file stops start-up with line and column (on a port held bound by another
# process: were the file accepted, sluiced would stop at the port instead of serving)
hold_port closed closed || exit 1
printf 'rules:\n  - name: x\n    algorithm: gcra\n    limit: [1\n' >"$TMP/bad.yaml"
"$SLUICED" --grpc-port 0 --port "$HELD_PORT" --http-port 0 --rules "$TMP/bad.yaml" --config-store "$TMP/bad.db" \
    --snapshot "" >"$TMP/bad.out" 2>&1
check bad-start-exit test $? -eq 1
check bad-start-position grep -q "bad.yaml: line [0-9]*, column [0-9]*" "$TMP/bad.out"
printf 'rules:\n  - name: x\n    algorithm: gcra\n    limit: 0\n    window: 1s\n' >"$TMP/bad2.yaml"
"$SLUICED" --grpc-port 0 --port "$HELD_PORT" --http-port 0 --rules "$TMP/bad2.yaml" --config-store "$TMP/bad.db" \
    --snapshot "" >"$TMP/bad2.out" 2>&1
check bad-limit-exit test $? -eq 1
check bad-limit-field grep -q "limit" "$TMP/bad2.out"
stop_bg closed

# --- import, SIGHUP re-import, invalid re-import keeps the rules in force
write_rules 10
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" --snapshot "" \
    --poll-interval 200ms || { cat "$TMP/s1.log"; exit 1; }
P1=$RESP_PORT
check import-list matches "$(cli SL.RULE LIST)" '^churn steady$'
check import-limit matches "$(cli SL.ALLOW churn a)" '^1 11 10 0 '
write_rules 20
kill -HUP "$(cat "$TMP/s1.pid")"
ok=0
for i in $(seq 1 50); do
    [[ "$(cli SL.PEEK churn new$i)" =~ ^1\ 21\  ]] && { ok=1; break; }
    sleep 0.1
done
check sighup-applied test $ok -eq 1
printf 'rules:\n  - name: churn\n    algorithm: gcra\n    limit: 5\n   window: 1s\n' >"$TMP/rules.yaml"
kill -HUP "$(cat "$TMP/s1.pid")"
check sighup-bad-logged poll 10 grep -q "SIGHUP: rules not reloaded.*line [0-9]*, column [0-9]*" "$TMP/s1.log"
check sighup-bad-kept matches "$(cli SL.PEEK churn zz)" '^1 21 '
check sighup-bad-alive matches "$(cli PING)" '^PONG$'

# --- a second server on the same store: changes made through one apply on the other
start_sluiced s2 --config-store "$TMP/sluice.db" --snapshot "" --poll-interval 200ms ||
    { cat "$TMP/s2.log"; exit 1; }
P2=$RESP_PORT
check shared-rules matches "$(PORT=$P2 cli SL.RULE LIST)" '^churn steady$'
PORT=$P1 cli SL.RULE SET shared '{"algorithm":"fixed_window","limit":7,"window":"1h"}' >/dev/null
ok=0
for i in $(seq 1 50); do
    [[ "$(PORT=$P2 cli SL.PEEK shared k)" =~ ^1\ 7\  ]] && { ok=1; break; }
    sleep 0.1
done
check retriever-applies test $ok -eq 1
PORT=$P1 cli SL.RULE SET debtor '{"algorithm":"sliding_log","limit":4,"window":"1h","max_debt":2}' >/dev/null
ok=0
for i in $(seq 1 50); do
    [[ "$(PORT=$P2 cli SL.PEEK debtor k)" =~ ^1\ 4\  ]] && { ok=1; break; }
    sleep 0.1
done
check max-debt-applies test $ok -eq 1
check max-debt-through-the-store matches "$(PORT=$P2 cli SL.RULE GET debtor)" '"max_debt":2'
check max-debt-in-force matches "$(PORT=$P2 cli SL.SETTLE debtor k 0 7)" 'max_debt \(2 units'
PORT=$P2 cli SL.OVERRIDE SET shared vip '{"limit":9}' >/dev/null
ok=0
for i in $(seq 1 50); do
    [[ "$(PORT=$P1 cli SL.PEEK shared vip)" =~ ^1\ 9\  ]] && { ok=1; break; }
    sleep 0.1
done
check override-applies-across test $ok -eq 1

# --- reloads under load: 600 requests for one key of a 500-per-hour rule while the rule set is
# replaced 30 times (other rules change; steady keeps its parameters): exactly 500 admitted.
(
    for i in $(seq 1 30); do
        PORT=$P2 cli SL.RULE SET churn "{\"algorithm\":\"gcra\",\"limit\":$((30 + i)),\"window\":\"1s\"}" >/dev/null
        PORT=$P1 cli SL.OVERRIDE SET churn "k$i" '{"limit":3}' >/dev/null
        sleep 0.05
    done
) &
changer=$!
half=$(redis-cli -p "$P1" -r 300 -i 0.005 SL.ALLOW steady hot | awk 'NR % 5 == 1' | grep -c '^1$')
half2=$(redis-cli -p "$P2" -r 300 -i 0.005 SL.ALLOW steady hot2 | awk 'NR % 5 == 1' | grep -c '^1$')
wait $changer
rest=$(redis-cli -p "$P1" -r 300 SL.ALLOW steady hot | awk 'NR % 5 == 1' | grep -c '^1$')
check under-load-exact test "$((half + rest))" -eq 500
check under-load-second test "$half2" -eq 300
check reloads-counted matches "$(cli INFO rules)" 'reloads:[0-9]{2,}'
stop_bg s1 TERM
check s1-exit-0 test $? -eq 0
stop_bg s2 TERM

# --- requirepass
start_sluiced s3 --config-store "$TMP/auth.db" --snapshot "" --requirepass 'pw 1' ||
    { cat "$TMP/s3.log"; exit 1; }
check noauth matches "$(cli SL.THROTTLE k gcra 1 1000)" '^NOAUTH Authentication required\.$'
check noauth-ping matches "$(cli PING)" '^NOAUTH'
check wrongpass matches "$(cli AUTH nope)" '^WRONGPASS invalid username-password pair'
check auth-ok matches "$(redis-cli -p "$RESP_PORT" -a 'pw 1' --no-auth-warning PING)" '^PONG$'
check hello-auth matches "$(cli HELLO 2 AUTH default 'pw 1')" '^server sluice '
check auth-user-wrong matches "$(cli AUTH admin 'pw 1')" '^WRONGPASS'
stop_bg s3 TERM
finish
