#!/usr/bin/env bash
# test_server_resp.sh - sluiced's RESP interface driven by redis-cli, as users would: every
# command of SPEC §5, the connection commands clients send on connect, and every error text.
# Nothing here depends on timing: counting rules are sliding logs (no window boundary to cross)
# or buckets that refill nothing while the test runs (windows of an hour).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 3
    window: 1h
  - name: tb
    algorithm: token_bucket
    limit: 1
    window: 1h
    burst: 2
  - name: dry
    algorithm: sliding_log
    limit: 1
    window: 1h
    shadow: true
  - name: vip
    algorithm: sliding_log
    limit: 2
    window: 1h
    overrides:
      - key: gold
        limit: 5
      - key: banned
        limit: 0
YAML

start_sluiced srv --rules "$TMP/rules.yaml" --config-store "$TMP/sluice.db" --snapshot "" --threads 2 ||
    { cat "$TMP/srv.log"; exit 1; }

cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1; }
# expect NAME EXPECTED CMD...: the redis-cli output (lines joined by spaces) must equal EXPECTED.
expect() {
    local name=$1 want=$2 got
    shift 2
    got=$(cli "$@" | tr '\n' ' ' | sed 's/ *$//')
    CASES=$((CASES + 1))
    if [ "$got" != "$want" ]; then
        echo "FAIL [$name]: $* -> '$got', want '$want'"
        FAILS=$((FAILS + 1))
    fi
}
# expect_match NAME REGEX CMD...
expect_match() {
    local name=$1 want=$2 got
    shift 2
    got=$(cli "$@" | tr '\n' ' ' | sed 's/ *$//')
    CASES=$((CASES + 1))
    if ! [[ "$got" =~ $want ]]; then
        echo "FAIL [$name]: $* -> '$got', want /$want/"
        FAILS=$((FAILS + 1))
    fi
}

# --- connection commands
expect ping PONG PING
expect ping-msg hello PING hello
expect echo "a b" ECHO "a b"
expect select0 OK SELECT 0
expect select1 "ERR DB index is out of range" SELECT 1
expect setname OK CLIENT SETNAME me
expect_match client-id '^[0-9]+$' CLIENT ID
expect_match client-info '^id=[0-9]+ addr=127\.0\.0\.1:[0-9]+ name= ' CLIENT INFO
expect setname-bad "ERR Client names cannot contain spaces, newlines or special characters." CLIENT SETNAME "a b"
expect hello3 "NOPROTO unsupported protocol version" HELLO 3
expect_match hello2 '^server sluice version [0-9.]+ proto 2 id [0-9]+ mode standalone role master modules' HELLO 2
expect_match command-count '^[0-9]+$' COMMAND COUNT
expect_match command-info '^sl\.allow -3 write' COMMAND INFO sl.allow
expect_match info '# Server.*sluice_version:.*# Rules.*rules:4' INFO
expect auth-nopass "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?" AUTH x
expect_match unknown "^ERR unknown command 'NOPE', with args beginning with: 'a'" NOPE a
expect arity "ERR wrong number of arguments for 'sl.allow' command" SL.ALLOW api

# --- SL.ALLOW / SL.PEEK / SL.RESET on a sliding log of 3 per hour
expect_match allow1 '^1 3 2 0 [0-9]+$' SL.ALLOW api k1
expect_match allow2 '^1 3 1 0 [0-9]+$' SL.ALLOW api k1
expect_match peek '^1 3 1 0 [0-9]+$' SL.PEEK api k1
expect_match allow3 '^1 3 0 0 [0-9]+$' SL.ALLOW api k1
expect_match denied '^0 3 0 [1-9][0-9]* [0-9]+$' SL.ALLOW api k1
expect_match other-key '^1 3 2 0 ' SL.ALLOW api k2
expect reset OK SL.RESET api k1
expect_match after-reset '^1 3 2 0 ' SL.ALLOW api k1
expect_match cost2 '^1 3 0 0 ' SL.ALLOW api k1 COST 2
expect_match cost0 '^1 3 0 0 ' SL.ALLOW api k1 COST 0
expect cost-neg "ERR cost must be >= 0" SL.ALLOW api k1 COST -1
expect cost-nan "ERR cost is not an integer or out of range" SL.ALLOW api k1 COST x
expect cost-big "ERR cost 4 exceeds what rule 'api' can ever admit (3 per window)" SL.ALLOW api k3 COST 4
expect cost-syntax "ERR unknown option 'PRICE' (expected COST or PRIORITY or SHADOWINFO)" SL.ALLOW api k1 PRICE 2
expect unknown-rule "ERR unknown rule 'nope'" SL.ALLOW nope k
expect unknown-rule-peek "ERR unknown rule 'nope'" SL.PEEK nope k
long_key=$(head -c 1100 /dev/zero | tr '\0' a)
expect key-long "ERR key is longer than 1024 bytes" SL.ALLOW api "$long_key"

# --- token bucket: burst 2
expect_match tb1 '^1 2 1 0 ' SL.ALLOW tb u
expect_match tb2 '^1 2 0 0 ' SL.ALLOW tb u
expect_match tb3 '^0 2 0 [1-9]' SL.ALLOW tb u

# --- shadow mode: denied by the rule, allowed anyway
expect_match dry1 '^1 1 0 0 ' SL.ALLOW dry s
expect_match dry2 '^1 1 0 0 ' SL.ALLOW dry s

# --- overrides from the rules file
expect_match vip-base '^1 2 1 0 ' SL.ALLOW vip plain
expect_match vip-gold '^1 5 4 0 ' SL.ALLOW vip gold
expect banned "0 0 0 -1 0" SL.ALLOW vip banned
expect ov-get-none "" SL.OVERRIDE GET vip nobody
expect_match ov-get '"limit": ?5' SL.OVERRIDE GET vip gold
expect ov-set OK SL.OVERRIDE SET vip silver '{"limit":3}'
expect_match ov-silver '^1 3 2 0 ' SL.ALLOW vip silver
expect_match ov-bad '^ERR invalid override: .*limit' SL.OVERRIDE SET vip x '{"limit":-2}'
expect ov-del 1 SL.OVERRIDE DEL vip silver
expect ov-del-again 0 SL.OVERRIDE DEL vip silver
expect_match ov-after-del '^[01] 2 ' SL.ALLOW vip silver

# --- SL.ALLOWALL: all or nothing
# the reply is the pair with the least left: tb (burst 2)
expect_match all-ok '^1 2 1 0 ' SL.ALLOWALL api a1 tb a1
expect_match all-ok2 '^1 2 0 0 ' SL.ALLOWALL api a1 tb a1
expect_match all-deny '^0 2 0 [1-9]' SL.ALLOWALL api a1 tb a1
# the api key was not charged by the denied call: one unit left of 3
expect_match all-nocharge '^1 3 0 0 ' SL.ALLOW api a1
expect all-arity "ERR wrong number of arguments for 'sl.allowall' command" SL.ALLOWALL api
expect all-unknown "ERR unknown rule 'zz'" SL.ALLOWALL api a zz b

# --- SL.THROTTLE: inline rules
expect_match thr1 '^1 2 1 0 ' SL.THROTTLE t1 sliding_log 2 3600000
expect_match thr2 '^1 2 0 0 ' SL.THROTTLE t1 sliding_log 2 3600000
expect_match thr3 '^0 2 0 [1-9]' SL.THROTTLE t1 sliding_log 2 3600000
expect_match thr-gcra '^1 6 5 0 ' SL.THROTTLE g1 gcra 10 3600000 BURST 5
expect_match thr-cost '^1 6 2 0 ' SL.THROTTLE g1 gcra 10 3600000 BURST 5 COST 3
expect_match thr-buckets '^1 10 9 0 ' SL.THROTTLE b1 sliding_buckets 10 1000 BUCKETS 5
expect thr-algo "ERR unknown algorithm 'leaky' (fixed_window, sliding_log, sliding_window, sliding_buckets, token_bucket, gcra, concurrency)" SL.THROTTLE k leaky 1 1000
expect thr-limit "ERR limit must be > 0" SL.THROTTLE k gcra 0 1000
expect thr-limit-nan "ERR limit is not an integer or out of range" SL.THROTTLE k gcra ten 1000
expect thr-window "ERR window_ms must be > 0" SL.THROTTLE k gcra 1 0
expect thr-syntax "ERR syntax error" SL.THROTTLE k gcra 1 1000 BURST
expect_match thr-buckets-bad '^ERR invalid rule: ' SL.THROTTLE k sliding_buckets 10 1000 BUCKETS 3
expect thr-cost-big "ERR cost 11 exceeds what the inline rule fixed_window 10 1000 can ever admit (10 per window)" SL.THROTTLE k fixed_window 10 1000 COST 11

# --- CL.THROTTLE: redis-cell's reply (limited, limit, remaining, retry_s, reset_s). A fresh
# key's reset is exactly one emission interval; later ones are 2 intervals less the time gone
# by since the first (whole seconds, rounded up), so they are checked within a minute of it,
# with 30 per hour (120 s intervals) refilling nothing meanwhile.
expect cl-fresh "0 16 15 -1 2" CL.THROTTLE c0 15 30 60
expect cl1 "0 16 15 -1 120" CL.THROTTLE c1 15 30 3600
expect_match cl2 '^0 16 14 -1 (18[1-9]|19[0-9]|2[0-3][0-9]|240)$' CL.THROTTLE c1 15 30 3600
expect_match cl-big '^1 16 14 -1 (18[1-9]|19[0-9]|2[0-3][0-9]|240)$' CL.THROTTLE c1 15 30 3600 17
expect_match cl-peek '^0 16 14 -1 (18[1-9]|19[0-9]|2[0-3][0-9]|240)$' CL.THROTTLE c1 15 30 3600 0
expect cl-usage "ERR Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]" CL.THROTTLE c1 15 30 60 1 2
expect cl-int "ERR Couldn't parse as integer: x" CL.THROTTLE c1 x 30 60

# --- SL.RULE
expect_match rule-list '^api dry tb vip$' SL.RULE LIST
expect_match rule-get '"algorithm": ?"sliding_log"' SL.RULE GET api
expect rule-set OK SL.RULE SET newr '{"algorithm":"gcra","limit":5,"window":"1s"}'
expect_match rule-new-used '^1 6 5 0 ' SL.ALLOW newr x
expect_match rule-bad '^ERR invalid rule: .*window' SL.RULE SET bad '{"algorithm":"gcra","limit":5,"window":"5 s"}'
expect_match rule-bad-json '^ERR invalid rule: line 1, column [0-9]+' SL.RULE SET bad '{"algorithm":'
expect_match rule-bad-name '^ERR invalid rule name' SL.RULE SET 'a b' '{}'
expect rule-del 1 SL.RULE DEL newr
expect rule-del-again 0 SL.RULE DEL newr
expect rule-gone "ERR unknown rule 'newr'" SL.ALLOW newr x
expect_match rule-export '^rules: ' SL.RULE EXPORT
expect_match rule-sub '^ERR unknown subcommand' SL.RULE FROB

# --- protocol errors close only that connection, with Redis's wording
got=$(timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; printf "*1\r\n\$abc\r\n" >&3; cat <&3')
check protocol-error-reply test "$got" = $'-ERR Protocol error: invalid bulk length\r'
expect still-serving PONG PING

# --- pipelining: 1000 commands in one write, 1000 replies in order
for i in $(seq 1 1000); do printf '*5\r\n$11\r\nSL.THROTTLE\r\n$4\r\npipe\r\n$4\r\ngcra\r\n$6\r\n100000\r\n$4\r\n1000\r\n'; done >"$TMP/pipe.txt"
timeout 20 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; cat "$0" >&3; head -n 6000 <&3' "$TMP/pipe.txt" >"$TMP/pipe.out"
n=$(grep -c '^\*5' "$TMP/pipe.out")
allowed=$(awk 'NR % 6 == 2' "$TMP/pipe.out" | grep -c '^:1')
check pipeline-replies test "$n" -eq 1000
check pipeline-all-allowed test "$allowed" -eq 1000

# --- one connection, names that differ by case, by a byte, or not at all, in one write: each is
# looked up as itself (the dispatcher keeps the last name it found)
printf 'PING\r\nping\r\nPINGX\r\nPiNg\r\nPING\r\nECHO a\r\nECHOX a\r\nPING\r\n' >"$TMP/names.txt"
timeout 20 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; cat "$0" >&3; head -n 9 <&3' "$TMP/names.txt" >"$TMP/names.out"
got=$(tr -d '\r' <"$TMP/names.out" | cut -c1-24 | tr '\n' '|')
check pipeline-names test "$got" = "+PONG|+PONG|-ERR unknown command 'PI|+PONG|+PONG|\$1|a|-ERR unknown command 'EC|+PONG|"

kill -0 "$(cat "$TMP/srv.pid")"
check still-alive test $? -eq 0
stop_bg srv TERM
check exit-0 test $? -eq 0
finish
