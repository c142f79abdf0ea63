#!/usr/bin/env bash
# test_server_redis_replicas.sh - a strict rule with `replicas` against a real Redis primary and
# its replica, with the sluice.so module and with the Lua scripts: an admission is answered once
# the replica acknowledged it (a WAIT follows each decision: counted in Redis's commandstats);
# with fewer replicas than the rule asks (a rule asking for 2; the replica paused) the admission
# is decided by on_store_error (deny: refused) and given back (Redis's count of the key is
# unchanged), counted in sluice_store_unreplicated_total; a rule without replicas sends no WAIT
# and admits while the replica is paused. A refusal is answered without waiting for acks.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server redis-cli curl

MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: acked
    algorithm: fixed_window
    limit: 3
    window: 1h
    on_store_error: deny
    replicas: 1
    replica_wait: 200ms
  - name: two
    algorithm: fixed_window
    limit: 3
    window: 1h
    on_store_error: deny
    replicas: 2
    replica_wait: 50ms
  - name: plain
    algorithm: fixed_window
    limit: 3
    window: 1h
    on_store_error: deny
YAML
ask() { PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 -c '
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
for cmd in sys.argv[2:]:
    r = c.call(*cmd.split())
    print(" ".join(str(x) for x in r) if isinstance(r, list) else r)' "$@"; }
matches() { [[ "$1" =~ $2 ]] || { echo "  got '$1', want /$2/"; return 1; }; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2 + 0; f = 1} END {if (!f) print 0}'; }
waits() { redis-cli -p "$1" INFO commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_wait:/ {print $3; f = 1} END {if (!f) print 0}'; }
peek_left() { [ "$(ask "$1" "SL.PEEK $2" | cut -d' ' -f3)" = "$3" ]; }
linked() { [ "$(repl_field "$1" master_link_status)" = up ]; }

run_suite() { # MODE ARGS-for-redis..
    local mode=$1 pp rp p hp out w u
    shift
    start_redis "primary-$mode" "$@" || return 1
    pp=$REDIS_PORT
    start_redis "replica-$mode" "$@" --replicaof 127.0.0.1 "$pp" || return 1
    rp=$REDIS_PORT
    check "$mode: replica linked" poll 20 linked "$rp"
    start_sluiced "s-$mode" --threads 1 --rules "$TMP/rules.yaml" --snapshot "" \
        --store "redis://127.0.0.1:$pp" --store-timeout 2s || return 1
    p=$RESP_PORT hp=$HTTP_PORT

    # acknowledged: admitted, one WAIT each; the refusal after the limit too
    w=$(waits "$pp")
    out=$(ask "$p" "SL.ALLOW acked k" "SL.ALLOW acked k" "SL.ALLOW acked k" "SL.ALLOW acked k")
    check "$mode: acked admissions" matches "$(paste -sd'|' <<<"$out")" \
        '^1 3 2 0 [0-9]+\|1 3 1 0 [0-9]+\|1 3 0 0 [0-9]+\|0 3 0 [1-9]'
    # (with the scripts, the first EVALSHA is answered NOSCRIPT: sent again with a WAIT of its own)
    check "$mode: a WAIT per decision" test "$(waits "$pp")" -ge $((w + 4))
    check "$mode: none unreplicated" test "$(metric "$hp" sluice_store_unreplicated_total)" -eq 0

    # no rule with replicas: no WAIT
    w=$(waits "$pp")
    check "$mode: plain admitted" matches "$(ask "$p" "SL.ALLOW plain k")" '^1 3 2 0 '
    check "$mode: plain sends no WAIT" test "$(waits "$pp")" -eq "$w"

    # two replicas asked, one there: refused (on_store_error deny), given back, counted
    out=$(ask "$p" "SL.ALLOW two k" "SL.ALLOW two k")
    check "$mode: too few replicas refuses" matches "$(paste -sd'|' <<<"$out")" '^0 3 .*\|0 3 '
    check "$mode: too few replicas given back" poll 5 peek_left "$p" "two k" 3
    check "$mode: unreplicated counted" test "$(metric "$hp" sluice_store_unreplicated_total)" -eq 2

    # the replica paused: acked refuses and gives back, plain admits
    local rpid
    rpid=$(cat "$TMP/replica-$mode.pid")
    kill -STOP "$rpid"
    out=$(ask "$p" "SL.ALLOW acked q" "SL.ALLOW plain q")
    kill -CONT "$rpid"
    check "$mode: replica paused: acked refused" matches "$(sed -n 1p <<<"$out")" '^0 3 '
    check "$mode: replica paused: plain admitted" matches "$(sed -n 2p <<<"$out")" '^1 3 2 0 '
    check "$mode: replica paused: given back" poll 5 peek_left "$p" "acked q" 3
    check "$mode: back: acked admits" poll 5 matches "$(ask "$p" "SL.ALLOW acked q")" '^1 3 2 0 '
    u=$(metric "$hp" sluice_store_unreplicated_total)
    check "$mode: paused counted" test "$u" -eq 3
    stop_bg "s-$mode"
    stop_bg "replica-$mode"
    stop_bg "primary-$mode"
}

run_suite module --loadmodule "$MODULE"
run_suite lua
finish
