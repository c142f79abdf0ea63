#!/usr/bin/env bash
# test_server_inline.sh - inline rules (SL.THROTTLE / CL.THROTTLE) under a flood: one client
# inventing 100,000 distinct parameter sets gets its own budget of new rules and then a clear
# error, while another client's inline rules (old and new) and named rules keep working, and the
# flood's rules, once idle and fresh, are taken out of force again.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 5
    window: 1h
YAML
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
info_field() { redis-cli -p "$RESP_PORT" INFO rules | tr -d '\r' | awk -F: -v f="$1" '$1 == f {print $2}'; }

start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" \
    --threads 2 --max-inline-rules 1024 --poll-interval 100ms --log-level debug ||
    { cat "$TMP/s1.log"; exit 1; }

# Before the flood, the other client has an inline rule in use.
check before matches "$(cli SL.THROTTLE polite gcra 5 3600000)" '^1 6 5 0 '

# The flood: 100,000 distinct inline rules (windows of 1 s) on one connection, pipelined.
PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$RESP_PORT" >"$TMP/flood.out" <<'PY'
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
replies = c.pipeline([("SL.THROTTLE", "f", "fixed_window", str(i), "1000") for i in range(1, 100001)],
                     chunk=5000)
ok = sum(1 for r in replies if isinstance(r, list))
errors = [r for r in replies if isinstance(r, str)]
print(ok, len(errors))
print(errors[0] if errors else "")
PY
read -r OK ERRORS <"$TMP/flood.out"
check flood-budget test "$OK" -eq 128
check flood-refused test "$ERRORS" -eq $((100000 - 128))
check flood-error matches "$(sed -n 2p "$TMP/flood.out")" \
    '^-ERR this connection made 128 distinct inline rules, the most one connection may'

# Everyone else: the inline rule in use, a new inline rule, a named rule.
check polite-old matches "$(cli SL.THROTTLE polite gcra 5 3600000)" '^1 6 4 0 '
check polite-new matches "$(cli SL.THROTTLE polite2 sliding_log 3 60000)" '^1 3 2 0 '
check cl-new matches "$(cli CL.THROTTLE cell 4 10 60)" '^0 5 4 -1 '
check named matches "$(cli SL.ALLOW api u1)" '^1 5 4 0 '
check serving matches "$(cli PING)" '^PONG$'
check inline-count test "$(info_field inline_rules)" -le 131

# /metrics stays bounded: 64 inline rules at most have series of their own, the rest share
# rule="inline:other", and every inline admission is counted in one of them exactly once
metrics() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics"; }
inline_allowed() {
    metrics | awk '/^sluice_decisions_total\{rule="inline:/ && /result="allowed"/ {n += $2} END {print n + 0}'
}
metrics >"$TMP/m1"
check metrics-small test "$(wc -c <"$TMP/m1")" -lt 65536
check metrics-own-capped test "$(grep -c '^sluice_keys{rule="inline:[a-z_]*:' "$TMP/m1")" -le 64
check metrics-other grep -q '^sluice_keys{rule="inline:other"}' "$TMP/m1"
check metrics-unique test -z "$(grep -v '^#' "$TMP/m1" | awk '{print $1}' | sort | uniq -d)"
check metrics-all-counted test "$(inline_allowed)" -eq 132
other_allowed() {
    metrics | awk '/^sluice_decisions_total\{rule="inline:other",result="allowed"\}/ {print $2}'
}
OTHER=$(other_allowed)
check metrics-other-counts test "$OTHER" -gt 0

# The flood's rules (1 s windows, used once) are taken out of force once idle (10 s) and fresh.
for i in $(seq 1 300); do
    [ "$(info_field inline_rules)" -le 3 ] && break
    sleep 0.1
done
check flood-reclaimed test "$(info_field inline_rules)" -le 3
check reclaimed-logged grep -q "idle inline rules taken out of force" "$TMP/s1.log"
check polite-kept matches "$(cli SL.THROTTLE polite gcra 5 3600000)" '^1 6 3 0 '
# the rules taken out of force keep their counts in the aggregate: it never goes down
check metrics-other-never-down test "$(other_allowed)" -ge "$OTHER"
stop_bg s1 TERM
check stop-exit-0 test $? -eq 0
finish
