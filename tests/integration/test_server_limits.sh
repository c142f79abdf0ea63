#!/usr/bin/env bash
# test_server_limits.sh - SPEC §6 at the edges: oversized requests and argument counts, the
# connection cap, idle and slow clients timing out, and a store failure (a key table at its
# memory cap) deciding by each rule's on_store_error, counted in metrics, never a crash.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-cli curl

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: open
    algorithm: token_bucket
    limit: 5
    window: 1h
    on_store_error: allow
  - name: shut
    algorithm: token_bucket
    limit: 5
    window: 1h
    on_store_error: deny
YAML
# (token buckets of 5 an hour: 8 bytes a key, and no whole token refilled while the test runs,
# so counts are exact)
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
# raw PORT BYTES...: sends the bytes on one connection, prints what comes back until it closes
raw() {
    local port=$1
    shift
    timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$port"'; printf "$@" >&3; cat <&3' _ "$@"
}

# a cap too small for any table is refused at start, with the reason (on a port held bound by
# another process: were the cap accepted, sluiced would stop at the port instead of serving)
hold_port closed closed || exit 1
"$SLUICED" --grpc-port 0 --port "$HELD_PORT" --http-port 0 --config-store "$TMP/s0.db" --snapshot "" \
    --max-memory 1k >"$TMP/s0.out" 2>&1
check small-cap-exit test $? -eq 1
check small-cap-reason grep -q "max-memory must be 0 (no cap) or at least 64k" "$TMP/s0.out"
stop_bg closed

# a port another program holds stops start-up with the reason (no silent SO_REUSEPORT sharing)
hold_port holder silent || exit 1
held=$HELD_PORT
"$SLUICED" --grpc-port 0 --port "$held" --http-port 0 --config-store "$TMP/s0.db" --snapshot "" >"$TMP/held.out" 2>&1
check port-in-use-exit test $? -eq 1
check port-in-use-reason grep -q "cannot listen on 127.0.0.1 port $held: Address already in use" "$TMP/held.out"
stop_bg holder

# (--poll-interval 1h: the config thread's poll, which also frees idle keys near the cap, does
# not run while the test fills the cap, so that which keys are idle is the test's doing)
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" \
    --max-request-size 4k --idle-timeout 1s --max-memory 64k --poll-interval 1h ||
    { cat "$TMP/s1.log"; exit 1; }
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }

# --- request size and argument count
big=$(head -c 5000 /dev/zero | tr '\0' x)
check bulk-too-big matches "$(raw "$RESP_PORT" '*2\r\n$4\r\nECHO\r\n$5000\r\n%s\r\n' "$big" | tr -d '\r')" \
    '^-ERR Protocol error: '
check args-too-many matches "$(raw "$RESP_PORT" '*5000\r\n' | tr -d '\r')" '^-ERR Protocol error: '
check inline-too-long matches "$(raw "$RESP_PORT" '%s' "$(head -c 70000 /dev/zero | tr '\0' y)" | tr -d '\r')" \
    '^-ERR Protocol error: '
head -c 5000 /dev/zero | tr '\0' ' ' >"$TMP/big.json"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$HTTP_PORT/v1/allow" \
    --data-binary "@$TMP/big.json")
check http-body-too-big test "$code" = 413
check still-serving matches "$(cli PING)" '^PONG$'

# --- the memory cap (64 KiB for both rules' keys: a few hundred): the first new key with every
# key in use (all just stored) gets its rule's on_store_error, counted and logged; after it new
# keys take the place of idle ones, and a key in use keeps its usage
for i in $(seq 1 3000); do
    printf 'SL.ALLOW open f%d\r\nSL.ALLOW shut f%d\r\nSL.ALLOW shut busy\r\n' "$i" "$i"
done >"$TMP/fill.txt"
redis-cli -p "$RESP_PORT" <"$TMP/fill.txt" | tr '\n' ' ' | grep -o '[01] 5 [0-9]* [0-9]* [0-9]*' >"$TMP/fill.out"
check cap-deny grep -q '^0 5 0 1000 0$' "$TMP/fill.out"
check cap-allow matches "$(cli SL.ALLOW open newkey)" '^1 5 4 0 '
check cap-evicts matches "$(cli SL.ALLOW shut newkey)" '^1 5 4 0 '
check cap-busy-kept matches "$(cli SL.ALLOW shut busy)" '^0 5 0 [1-9]'
metrics=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics")
check cap-counted matches "$metrics" 'sluice_store_errors_total\{rule="shut"\} [1-9]'
check cap-full-counted matches "$metrics" 'sluice_memory_full_total [1-9]'
check cap-evicted matches "$metrics" 'sluice_evicted_keys_total\{rule="shut"\} [1-9]'
check cap-logged grep -q "rule '[a-z]*': no room for a new key under --max-memory" "$TMP/s1.log"
used=$(awk '$1 == "sluice_memory_bytes" {print $2}' <<<"$metrics")
check cap-held test "$used" -le $((64 * 1024))

# --- idle clients are closed after --idle-timeout (1 s; the check runs every second)
out=$(timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; cat <&3; echo closed')
check idle-closed test "$out" = closed
# a slow client that never finishes its request is closed the same way
out=$(timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$RESP_PORT"'; printf "*3\r\n\$4\r\nPI" >&3; cat <&3; echo closed')
check slow-closed test "$out" = closed

kill -0 "$(cat "$TMP/s1.pid")"
check alive test $? -eq 0
stop_bg s1 TERM
check exit-0 test $? -eq 0

# --- the connection cap (a sluiced of its own, whose held connections never go idle): with 3
# held open, the 4th is refused with Redis's error. sluiced sees a client's close when its loop
# reads it, so connections closed before may still count for a while: the first held connection
# asks (INFO, on itself) until it is the only one; then each held one is answered, so all three
# count (two loops accept on their own).
start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/s2.db" --snapshot "" \
    --max-clients 3 || { cat "$TMP/s2.log"; exit 1; }
exec 4<>/dev/tcp/127.0.0.1/"$RESP_PORT"
clients_on_4() { # connected_clients, as INFO answers on connection 4
    local LC_ALL=C len body
    printf 'INFO clients\r\n' >&4
    read -r -t 5 len <&4 || return 1
    len=${len%$'\r'}
    read -r -t 5 -N $((${len#\$} + 2)) body <&4 || return 1
    tr -d '\r' <<<"$body" | awk -F: '$1 == "connected_clients" {print $2}'
}
alone_on_4() { [ "$(clients_on_4)" = 1 ]; }
check clients-gone poll 10 alone_on_4
exec 5<>/dev/tcp/127.0.0.1/"$RESP_PORT" 6<>/dev/tcp/127.0.0.1/"$RESP_PORT"
for fd in 4 5 6; do
    printf 'PING\r\n' >&"$fd"
    pong=""
    read -r -t 5 pong <&"$fd"
    check "held-works-$fd" test "${pong%$'\r'}" = "+PONG"
done
check maxclients matches "$(raw "$RESP_PORT" 'PING\r\n' | tr -d '\r')" '^-ERR max number of clients reached'
exec 4>&- 5>&- 6>&-
ok=0
for i in $(seq 1 50); do
    [ "$(cli PING)" = PONG ] && { ok=1; break; }
    sleep 0.1
done
check maxclients-recovers test $ok -eq 1
stop_bg s2 TERM
check s2-exit-0 test $? -eq 0
finish
