#!/usr/bin/env bash
# test_server_priorities.sh - priorities that shed load, through every front of one sluiced (the
# memory store; tests/integration/conformance has the priorities scenario on every store): a
# rule of 10 units whose last 2 only critical may use and the 3 before them high and above.
# RESP (SL.ALLOW, SL.PEEK and SL.ACQUIRE with PRIORITY; unknown priorities and options), HTTP
# (POST /v1/allow one check and a batch, /v1/acquire, GET /v1/auth reading the priority from a
# header; an unknown field refused and nothing charged), gRPC ShouldRateLimit (a descriptor's
# trailing `priority` entry), and a rules file's bad priorities refused with their errors.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

need curl redis-cli
need_grpc
grpc_stubs rls.proto

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: fixed_window
    limit: 10
    window: 1h
    priorities: [low, high, critical]
    reserve: {critical: 20%, high: 3}
    key: "{header:x-tenant}"
    priority: "{header:x-priority}"
  - name: pool
    algorithm: concurrency
    limit: 10
    hold_timeout: 1h
    priorities: [low, high, critical]
    reserve: {critical: 20%, high: 3}
  - name: edge
    algorithm: sliding_window
    limit: 10
    window: 1h
    domain: edge
    descriptor: "tenant"
    priorities: [low, high, critical]
    reserve: {critical: 20%, high: 3}
  - name: plain
    algorithm: fixed_window
    limit: 5
    window: 1h
YAML
start_sluiced srv --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" || {
    cat "$TMP/srv.log"
    exit 1
}
B=http://127.0.0.1:$HTTP_PORT
r() { redis-cli -p "$RESP_PORT" "$@" | tr '\n' ' ' | sed 's/ *$//'; }
allowed() { r "$@" | cut -d' ' -f1; }

# RESP: low takes 5 units and is shed; high 3 more; critical the last 2; none means low
n=0
for i in 1 2 3 4 5 6 7; do [ "$(allowed SL.ALLOW api t1 PRIORITY low)" = 1 ] && n=$((n + 1)); done
check resp-low-5 test "$n" = 5
check resp-none-is-low test "$(allowed SL.ALLOW api t1)" = 0
check resp-peek-low-nothing-left test "$(r SL.PEEK api t1 PRIORITY low | cut -d' ' -f1-3)" = "1 10 0"
check resp-peek-high-3-left test "$(r SL.PEEK api t1 PRIORITY high | cut -d' ' -f1-3)" = "1 10 3"
check resp-high-cost-3 test "$(allowed SL.ALLOW api t1 COST 3 PRIORITY high)" = 1
check resp-high-shed test "$(allowed SL.ALLOW api t1 PRIORITY high)" = 0
check resp-critical test "$(r SL.ALLOW api t1 COST 2 PRIORITY critical | cut -d' ' -f1-4)" = "1 10 0 0"
check resp-critical-full test "$(allowed SL.ALLOW api t1 PRIORITY critical)" = 0
check resp-low-never test "$(r SL.ALLOW api t2 COST 6 PRIORITY low | cut -d' ' -f1,4)" = "0 -1"
check resp-unknown test "$(r SL.ALLOW api t1 PRIORITY urgent)" = \
    "ERR unknown priority 'urgent' for rule 'api' (it has low, high, critical)"
check resp-no-priorities test "$(r SL.ALLOW plain t1 PRIORITY low)" = "ERR rule 'plain' has no priorities"
check resp-unknown-option test "$(r SL.ALLOW api t1 COTS 5)" = \
    "ERR unknown option 'COTS' (expected COST or PRIORITY or SHADOWINFO)"
check resp-twice test "$(r SL.ALLOW api t1 PRIORITY low PRIORITY high)" = "ERR option PRIORITY given twice"
check resp-allowall-low test "$(allowed SL.ALLOWALL api t3 api t4 COST 5 PRIORITY low)" = 1
check resp-allowall-low-shed test "$(allowed SL.ALLOWALL api t3 api t5 PRIORITY low)" = 0
check resp-allowall-nothing-charged test "$(r SL.PEEK api t5 PRIORITY critical | cut -d' ' -f3)" = 10
check resp-allowall-high test "$(allowed SL.ALLOWALL api t3 api t5 COST 3 PRIORITY high)" = 1
check resp-allowall-no-priorities test "$(r SL.ALLOWALL api t3 plain t3 PRIORITY high)" = \
    "ERR rule 'plain' has no priorities"
n=0
for i in 1 2 3 4 5 6; do [ "$(allowed SL.ACQUIRE pool k COST 1 PRIORITY low)" = 1 ] && n=$((n + 1)); done
check resp-acquire-low-5 test "$n" = 5
check resp-acquire-critical test "$(allowed SL.ACQUIRE pool k COST 5 PRIORITY critical)" = 1

# HTTP
post() { curl -s -X POST "$B$1" -H 'Content-Type: application/json' -d "$2"; }
code() { curl -s -o /dev/null -w '%{http_code}' -X POST "$B$1" -H 'Content-Type: application/json' -d "$2"; }
check http-cots-400 test "$(post /v1/allow '{"rule":"api","key":"h","cots":5}' |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["detail"])')" = "body: unknown field 'cots'"
check http-cots-nothing-charged test "$(r SL.PEEK api h PRIORITY critical)" = "1 10 10 0 0"
for i in 1 2 3 4 5; do post /v1/allow '{"rule":"api","key":"h","priority":"low"}' >/dev/null; done
check http-low-shed test "$(post /v1/allow '{"rule":"api","key":"h","priority":"low"}' |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["allowed"])')" = False
check http-batch test "$(post /v1/allow '{"checks":[{"rule":"api","key":"h","priority":"high"},{"rule":"plain","key":"h"}]}' |
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["allowed"], [c["remaining"] for c in d["checks"]])')" = \
    "True [2, 4]"
check http-batch-shed test "$(post /v1/allow '{"checks":[{"rule":"plain","key":"h"},{"rule":"api","key":"h","cost":3,"priority":"high"}]}' |
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["allowed"])')" = False
check http-batch-nothing-charged test "$(r SL.PEEK plain h | cut -d' ' -f3)" = 4
check http-check-unknown-field test "$(code /v1/allow '{"checks":[{"rule":"api","key":"h","prio":"high"}]}')" = 400
check http-unknown-priority test "$(post /v1/allow '{"rule":"api","key":"h","priority":"top"}' |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["detail"])')" = \
    "body: unknown priority 'top' for rule 'api' (it has low, high, critical)"
check http-acquire test "$(post /v1/acquire '{"rule":"pool","key":"h2","cost":6,"priority":"low"}' |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["allowed"])')" = False
check http-settle-unknown test "$(code /v1/settle '{"rule":"api","key":"h","reserved":1,"actual":1,"cot":1}')" = 400
auth() { curl -s -o /dev/null -w '%{http_code}' -H "x-tenant: $1" ${2:+-H "x-priority: $2"} "$B/v1/auth/api"; }
for i in 1 2 3 4 5; do auth a low >/dev/null; done
check auth-low-429 test "$(auth a low)" = 429
check auth-none-429 test "$(auth a)" = 429
check auth-high-204 test "$(auth a high)" = 204
check auth-unknown-400 test "$(auth a top)" = 400

# gRPC: a descriptor's trailing priority entry
"$PY" - "$GRPC_PORT" "$TMP/stubs" >"$TMP/grpc.txt" 2>&1 <<'PYEOF'
import sys
import grpc
sys.path.insert(0, sys.argv[2])
import rls_pb2, rls_pb2_grpc
stub = rls_pb2_grpc.RateLimitServiceStub(grpc.insecure_channel("127.0.0.1:" + sys.argv[1]))
def ask(*entries):
    d = rls_pb2.RateLimitDescriptor(entries=[rls_pb2.RateLimitDescriptor.Entry(key=k, value=v)
                                             for k, v in entries])
    r = stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="edge", descriptors=[d]), timeout=5)
    return r.overall_code == rls_pb2.RateLimitResponse.Code.OK
low = [ask(("tenant", "g"), ("priority", "low")) for _ in range(6)]
print("low", low.count(True))
print("none", ask(("tenant", "g")))
print("critical", ask(("tenant", "g"), ("priority", "critical")))
try:
    ask(("tenant", "g"), ("priority", "top"))
    print("unknown passed")
except grpc.RpcError as e:
    print("unknown", e.code().name)
PYEOF
check grpc-low-5 grep -qx "low 5" "$TMP/grpc.txt"
check grpc-none-is-low grep -qx "none False" "$TMP/grpc.txt"
check grpc-critical grep -qx "critical True" "$TMP/grpc.txt"
check grpc-unknown grep -qx "unknown INVALID_ARGUMENT" "$TMP/grpc.txt"
grep -qx "critical True" "$TMP/grpc.txt" || cat "$TMP/grpc.txt"

# every shed counted (RESP, HTTP, auth and gRPC above shed at least 10), and logged
shed=$(curl -s "$B/metrics" | awk '$1 == "sluice_priority_shed_total" { print $2 }')
check shed-counted test "${shed:-0}" -ge 10
check shed-logged grep -q "below the top priority shed" "$TMP/srv.log"

# a rules file's bad priorities: refused, each with its reason
bad() { # YAML FIELDS, the expected words
    printf 'rules:\n  - name: x\n    algorithm: fixed_window\n    limit: 10\n    window: 1s\n%s\n' "$1" \
        >"$TMP/bad.yaml"
    "$SLUICE_BUILD_DIR/src/cli/sluice" -p "$RESP_PORT" rules import "$TMP/bad.yaml" >"$TMP/bad.txt" 2>&1
    grep -qF "$2" "$TMP/bad.txt" || { cat "$TMP/bad.txt"; return 1; }
}
check bad-unknown bad $'    priorities: [low, high]\n    reserve: {top: 10%}' "'top' is not one of the priorities (low, high)"
check bad-sum bad $'    priorities: [a, b, c]\n    reserve: {b: 60%, c: 50%}' "the reserves sum to 110%, past 100% of the limit"
check bad-units bad $'    priorities: [a, b]\n    reserve: {b: 11}' "the reserves sum to 11 units, past the limit's 10"
check bad-lowest bad $'    priorities: [a, b]\n    reserve: {a: 1}' "'a' is the lowest priority"
check bad-twice bad $'    priorities: [a, a]' "'a' is named twice"
check bad-amount bad $'    priorities: [a, b]\n    reserve: {b: "5.5%"}' "must be a percent 1%..100%"
check bad-alone bad $'    reserve: {b: 1}' "only applies to a rule with priorities"
check bad-mode bad $'    priorities: [a, b]\n    mode: approximate' "only with mode: strict"
finish
