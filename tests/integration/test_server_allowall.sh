#!/usr/bin/env bash
# test_server_allowall.sh - all or nothing across keys: SL.ALLOWALL and /v1/allow's checks charge
# every pair or none, under concurrency (no pair is ever charged alone), a pair named twice counts
# twice, and a batch is validated whole before anything is charged (a never admissible cost
# anywhere in it charges nothing); "independent": true decides each check on its own. With the
# Redis store and sluice.so, the same in one atomic script; with keys in several cluster slots
# (and with the Lua scripts) every check is charged and, when one is refused, the charged ones
# are refunded: a refused whole keeps no units even when another client takes the last units
# of a check meanwhile.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: x
    algorithm: sliding_log
    limit: 1000
    window: 1h
  - name: y
    algorithm: sliding_log
    limit: 300
    window: 1h
  - name: api
    algorithm: sliding_log
    limit: 200
    window: 1h
  - name: login
    algorithm: sliding_log
    limit: 10
    window: 1h
  - name: dry
    algorithm: sliding_log
    limit: 1
    window: 1h
    shadow: true
  - name: wide
    algorithm: sliding_log
    limit: 100000
    window: 1h
  - name: trickle
    algorithm: token_bucket
    limit: 200
    window: 1s
    burst: 1
  - name: dl
    algorithm: gcra
    limit: 1
    window: 10s
    burst: 1
    max_delay: 30s
YAML
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
post() { curl -s -X POST "http://127.0.0.1:$HTTP_PORT/v1/allow" -H 'Content-Type: application/json' -d "$1"; }

start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" \
    --threads 2 || { cat "$TMP/s1.log"; exit 1; }

# 1. four clients at once, 200 SL.ALLOWALL x k y k each, pipelined: y admits 300, and x is charged
# for exactly the ALLOWALLs admitted, never alone
CLIENTS=()
for c in 1 2 3 4; do
    PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$RESP_PORT" >"$TMP/c$c.out" <<'PY' &
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
replies = c.pipeline([("SL.ALLOWALL", "x", "k", "y", "k")] * 200, chunk=50)
print(sum(1 for r in replies if isinstance(r, list) and r[0] == 1))
PY
    CLIENTS+=($!)
done
wait "${CLIENTS[@]}"
admitted=$(cat "$TMP"/c?.out | awk '{s += $1} END {print s}')
check race-admitted test "$admitted" -eq 300
check race-x-charged-with-y matches "$(cli SL.PEEK x k)" '^1 1000 700 0 '
check race-y-full matches "$(cli SL.PEEK y k)" '^1 300 0 0 '

# 2. a pair named twice counts twice: 150 + 150 on a limit of 200 is refused and takes nothing
check twice-refused matches "$(cli SL.ALLOWALL api dd api dd COST 150)" \
    "^ERR cost 300 exceeds what rule 'api' can ever admit \(200 per window\)$"
check twice-nothing-taken matches "$(cli SL.PEEK api dd)" '^1 200 200 0 0$'
check twice-fits matches "$(cli SL.ALLOWALL api dd api dd COST 100)" '^1 200 0 0 '

# 3. a cost no rule can admit anywhere in the batch: an error, and nothing charged
check never-error matches "$(cli SL.ALLOWALL api n login n COST 11)" \
    "^ERR cost 11 exceeds what rule 'login' can ever admit \(10 per window\)$"
check never-nothing matches "$(cli SL.PEEK api n)" '^1 200 200 0 0$'
# a shadow rule's refusal blocks nothing
check shadow-passes matches "$(cli SL.ALLOWALL dry s api s)" '^1 '
check shadow-passes-again matches "$(cli SL.ALLOWALL dry s api s)" '^1 '
check shadow-charged-others matches "$(cli SL.PEEK api s)" '^1 200 198 0 '

# 4. /v1/allow checks: validated whole, then all or nothing
BODY=$(post '{"checks":[{"rule":"api","key":"h","cost":100},{"rule":"login","key":"h","cost":11}]}')
check http-never-400 matches "$BODY" '"status":400'
check http-never-detail matches "$BODY" "checks\[1\]: cost 11 exceeds what rule 'login' can ever admit"
check http-never-nothing matches "$(cli SL.PEEK api h)" '^1 200 200 0 0$'
cli SL.ALLOW login h COST 8 >/dev/null
BODY=$(post '{"checks":[{"rule":"api","key":"h","cost":100},{"rule":"login","key":"h","cost":5}]}')
check http-refused matches "$BODY" '"allowed":false\}$'
check http-refused-first-not-allowed matches "$BODY" '^\{"checks":\[\{"rule":"api","key":"h","allowed":false'
check http-refused-nothing matches "$(cli SL.PEEK api h)" '^1 200 200 0 0$'
BODY=$(post '{"checks":[{"rule":"api","key":"h","cost":100},{"rule":"login","key":"h","cost":2}]}')
check http-admitted matches "$BODY" '"allowed":true\}$'
check http-admitted-charged matches "$(cli SL.PEEK api h)" '^1 200 100 0 '
# independent: each on its own (the refused one takes nothing, the other is charged)
BODY=$(post '{"independent":true,"checks":[{"rule":"api","key":"h","cost":50},{"rule":"login","key":"h","cost":5}]}')
check http-independent matches "$BODY" '^\{"checks":\[\{"rule":"api","key":"h","allowed":true.*\{"rule":"login","key":"h","allowed":false.*"allowed":false\}$'
check http-independent-charged matches "$(cli SL.PEEK api h)" '^1 200 50 0 '
BODY=$(post '{"independent":true,"checks":[{"rule":"api","key":"i","cost":5},{"rule":"login","key":"i","cost":11}]}')
check http-independent-validated matches "$BODY" '"status":400'
check http-independent-nothing matches "$(cli SL.PEEK api i)" '^1 200 200 0 0$'
check http-independent-bad matches "$(post '{"independent":"yes","checks":[{"rule":"api","key":"i"}]}')" \
    'independent: must be true or false'
stop_bg s1 TERM

# 5. with the Redis store and sluice.so: a pair named twice is one script's check, charged whole
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
start_redis redis --loadmodule "$MODULE" || { cat "$TMP/redis.log"; exit 1; }
RP=$REDIS_PORT
start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/store2.db" --snapshot "" \
    --store "redis://127.0.0.1:$RP" --store-timeout 2s || { cat "$TMP/s2.log"; exit 1; }
check redis-twice-refused matches "$(cli SL.ALLOWALL api dd api dd COST 150)" "^ERR cost 300 exceeds"
check redis-twice-nothing matches "$(cli SL.PEEK api dd)" '^1 200 200 0 0$'
check redis-twice-fits matches "$(cli SL.ALLOWALL api dd api dd COST 100)" '^1 200 0 0 '
check redis-never matches "$(cli SL.ALLOWALL api n login n COST 11)" "^ERR cost 11 exceeds what rule 'login'"
check redis-never-nothing matches "$(cli SL.PEEK api n)" '^1 200 200 0 0$'
# /v1/allow's checks refused in the script (one cost): every check answered, the refusal and
# the others' peeks, nothing charged; twice
cli SL.ALLOW login hc3 COST 10 >/dev/null
for i in 1 2; do
    out=$(post '{"checks":[{"rule":"api","key":"hc"},{"rule":"dry","key":"hc"},{"rule":"login","key":"hc3"}]}')
done
check redis-http-refused matches "$out" '^\{"checks":\[\{"rule":"api","key":"hc","allowed":false,"limit":200,"remaining":200,'
check redis-http-refusal matches "$out" '"rule":"login","key":"hc3","allowed":false,"limit":10,"remaining":0,.*"allowed":false\}$'
check redis-http-serving matches "$(cli PING)" '^PONG$'
# ... and step by step (costs differ): the charged checks are answered as refunded
cli SL.ALLOW login hd COST 10 >/dev/null
out=$(post '{"checks":[{"rule":"api","key":"hd","cost":2},{"rule":"login","key":"hd"}]}')
check redis-http-steps-refunded matches "$out" '^\{"checks":\[\{"rule":"api","key":"hd","allowed":false,"limit":200,"remaining":200,'
check redis-http-steps-nothing matches "$(cli SL.PEEK api hd)" '^1 200 200 0 '
# a pair the script admits with a delay (a max_delay rule) is given back when a later one refuses
cli SL.ALLOW dl z >/dev/null
cli SL.ALLOW dl z >/dev/null # its burst used: the next one waits
cli SL.ALLOW login z COST 10 >/dev/null
before=$(cli SL.PEEK dl z | cut -d' ' -f5) # reset_after: when its charges are all gone
check redis-delayed-refused matches "$(cli SL.ALLOWALL dl z login z)" '^0 10 0 '
after=$(cli SL.PEEK dl z | cut -d' ' -f5)
check redis-delayed-given-back test "$after" -le "$before"

# Keys in different slots: charged, then refunded when one check is refused. A second client
# keeps taking "trickle"'s one token as it refills, so checks race it all the time; every
# SL.ALLOWALL refused must leave "wide" as it found it.
race() { # $1: a name for the case
    PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$RESP_PORT" "$1" <<'PY'
import sys, threading, time
from resp_client import Conn
port, name = int(sys.argv[1]), sys.argv[2]
stop = time.monotonic() + 20
taken = [0]
def thief():
    c = Conn(port)
    while time.monotonic() < stop and not done.is_set():
        r = c.call("SL.ALLOW", "trickle", "t-" + name)
        taken[0] += r[0]
done = threading.Event()
t = threading.Thread(target=thief)
t.start()
c = Conn(port)
admitted = refused = 0
for i in range(400):
    if time.monotonic() > stop:
        break
    r = c.call("SL.ALLOWALL", "wide", "w-" + name, "trickle", "t-" + name)
    if isinstance(r, str):
        print("error reply: " + r)
        sys.exit(1)
    if r[0] == 1:
        admitted += 1
    else:
        refused += 1
done.set()
t.join()
used = 100000 - c.call("SL.PEEK", "wide", "w-" + name)[2]
print("admitted %d refused %d taken by the other client %d; wide used %d" % (admitted, refused, taken[0], used))
sys.exit(0 if used == admitted and refused > 0 else 1)
PY
}
check redis-slots-refund race module
stop_bg s2 TERM
start_redis lua || { cat "$TMP/lua.log"; exit 1; }
start_sluiced s3 --rules "$TMP/rules.yaml" --config-store "$TMP/store3.db" --snapshot "" \
    --store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 2s || { cat "$TMP/s3.log"; exit 1; }
check lua-refund matches "$(cli SL.ALLOWALL api lk login lk COST 11)" "^ERR cost 11 exceeds"
check lua-charge matches "$(cli SL.ALLOWALL api lk login lk COST 8)" '^1 10 2 0 '
check lua-refused matches "$(cli SL.ALLOWALL api lk login lk COST 5)" '^0 10 2 '
check lua-refunded matches "$(cli SL.PEEK api lk)" '^1 200 192 0 '
check lua-race-refund race lua
stop_bg s3 TERM
finish
