#!/usr/bin/env bash
# test_server_memory_cap.sh - --max-memory caps keys, never the rule set: a small cap still loads
# and serves every rule; a rule one key of which can never fit is refused when it is set or
# imported, with the reason; a store that already holds such a rule (written under a larger cap)
# never stops a start: the rule is in force and logged, and its keys decide while their state
# fits (a sliding_log key grows with its admissions). Under a
# flood of new keys the cap holds, idle keys make room, and a busy key at its limit stays so. A
# key charged a million units at once holds one entry.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: token_bucket
    limit: 100
    window: 1h
  - name: login
    algorithm: sliding_log
    limit: 10
    window: 1h
YAML
BIG='{"algorithm":"sliding_log","limit":200000,"window":"1h","on_store_error":"deny"}'

# 1. the smallest cap: every rule loads and decides
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/a.db" --snapshot "" \
    --max-memory 64k || { cat "$TMP/s1.log"; exit 1; }
check small-cap-rules matches "$(cli SL.RULE LIST)" '^api login$'
check small-cap-api matches "$(cli SL.ALLOW api k)" '^1 100 99 0 '
check small-cap-login matches "$(cli SL.ALLOW login k)" '^1 10 9 0 '
check small-cap-not-oom bash -c "! grep -q 'out of memory' '$TMP/s1.log'"
# a rule one key of which can take 3.2 MB (200,000 entries) can never be kept whole under 64k:
# refused, with why
check big-refused matches "$(cli SL.RULE SET big "$BIG")" \
    "^ERR invalid rule: one key of this rule can take up to 3200032 bytes of state, more than --max-memory \(65536 bytes"
check big-not-in matches "$(cli SL.RULE LIST)" '^api login$'
check big-override-refused matches "$(cli SL.OVERRIDE SET login vip '{"limit":200000}')" \
    '^ERR invalid override: one key of this rule can take up to 3200032 bytes'
check big-import-refused matches "$(cli SL.RULE IMPORT "$(printf 'rules:\n  - name: big\n    algorithm: sliding_log\n    limit: 200000\n    window: 1h\n')")" \
    "^ERR invalid rules: rules\[0\] 'big': one key of this rule can take up to 3200032 bytes"
stop_bg s1 TERM

# 2. a store holding such a rule (set with no cap) starts under the cap: in force, logged, its
# keys decide while they fit (one admission takes one entry), the other rules work
start_sluiced s2 --config-store "$TMP/b.db" --snapshot "" || { cat "$TMP/s2.log"; exit 1; }
check set-uncapped matches "$(cli SL.RULE SET big "$BIG")" '^OK$'
check set-api matches "$(cli SL.RULE SET api '{"algorithm":"gcra","limit":5,"window":"1h"}')" '^OK$'
stop_bg s2 TERM
start_sluiced s3 --config-store "$TMP/b.db" --snapshot "" --max-memory 1m ||
    { cat "$TMP/s3.log"; exit 1; }
check capped-start-rules matches "$(cli SL.RULE LIST)" '^api big$'
check capped-start-logged grep -q "rule 'big' is in force but one key of this rule can take up to 3200032 bytes" "$TMP/s3.log"
check capped-big-decides matches "$(cli SL.ALLOW big k)" '^1 200000 199999 0 '
check capped-api matches "$(cli SL.ALLOW api k)" '^1 6 5 0 '
stop_bg s3 TERM
check capped-exit-0 test $? -eq 0

# 3. a flood of new keys under a 1m cap: memory stays under it, idle keys make room (counted), and
# a key at its limit that keeps asking stays refused throughout (it is never idle)
start_sluiced s4 --rules "$TMP/rules.yaml" --config-store "$TMP/c.db" --snapshot "" \
    --max-memory 1m || { cat "$TMP/s4.log"; exit 1; }
cli SL.ALLOW api attacker COST 100 >/dev/null
for i in $(seq 1 40000); do
    printf 'SL.ALLOW api flood%d\r\n' "$i"
    [ $((i % 50)) -ne 0 ] || printf 'SL.ALLOW api attacker\r\n'
done >"$TMP/flood.txt"
redis-cli -p "$RESP_PORT" <"$TMP/flood.txt" | paste -d' ' - - - - - >"$TMP/flood.out"
check flood-answered test "$(wc -l <"$TMP/flood.out")" -eq 40800
check flood-attacker-blocked test "$(grep -c '^0 100 0 ' "$TMP/flood.out")" -eq 800
metrics=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics")
metric() { awk -v m="$1" '$1 == m {print $2}' <<<"$metrics"; }
check flood-evicted test "$(metric 'sluice_evicted_keys_total{rule="api"}')" -gt 1000
check flood-under-cap test "$(metric sluice_memory_bytes)" -le $((1024 * 1024))
check flood-cap-shown test "$(metric sluice_memory_max_bytes)" -eq $((1024 * 1024))
check flood-still-blocked matches "$(cli SL.ALLOW api attacker)" '^0 100 0 [1-9]'
stop_bg s4 TERM

# 4. the probe that took 153 MB for 20 keys and made a 1 GB snapshot of 120: 1,000 keys of a
# sliding_log of limit 2^20, each charged 10^6 units at once, with no --max-memory. A key keeps
# one entry per admission, whatever its cost: sluiced stays small (its resident memory is read,
# not timed), the snapshot too, and it stops cleanly. Under an address-space limit (not with the
# sanitizers' shadow memory) a regression fails to allocate instead of taking the machine.
RUN=("$SLUICED")
if command -v prlimit >/dev/null &&
    ! grep -Eq '^SLUICE_(ASAN|TSAN):BOOL=ON' "$SLUICE_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    RUN=(prlimit --as=$((1024 * 1024 * 1024)) "$SLUICED")
fi
printf '#!/bin/sh\nexec %s "$@"\n' "${RUN[*]}" >"$TMP/sluiced-limited"
chmod +x "$TMP/sluiced-limited"
SLUICED=$TMP/sluiced-limited start_sluiced s5 --config-store "$TMP/d.db" \
    --snapshot "$TMP/s5.snap" || { cat "$TMP/s5.log"; exit 1; }
for i in $(seq 1 1000); do
    printf 'SL.THROTTLE k%d sliding_log 1048576 60000 COST 1000000\r\n' "$i"
done >"$TMP/costly.txt"
redis-cli -p "$RESP_PORT" <"$TMP/costly.txt" | paste -d' ' - - - - - >"$TMP/costly.out"
check costly-all-admitted test "$(grep -c '^1 1048576 48576 ' "$TMP/costly.out")" -eq 1000
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$(cat "$TMP/s5.pid")/status")
check costly-small test "$rss_kb" -lt $((128 * 1024))
stop_bg s5 TERM
check costly-stopped-cleanly test $? -eq 0
check costly-snapshot-small test "$(stat -c %s "$TMP/s5.snap")" -lt $((1024 * 1024))
finish
