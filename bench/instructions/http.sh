#!/usr/bin/env bash
# bench/instructions/http.sh - instructions per /v1/auth request of sluiced beside nginx
# limit_req's per request, on the same client load: figures the machine's noise cannot move.
#
# Each server runs alone under valgrind --tool=callgrind (nginx as one process: master_process
# off). One keep-alive connection sends WARM requests, callgrind_control dumps (and zeroes) the
# counters, it sends N more, and a second dump holds exactly those N requests: instructions / N.
# Keys are random among 100 k (the query's key), the rule a gcra of 100 per second with a burst
# of 100 (nginx: limit_req rate=100r/s burst=100 nodelay, then 204).
#
#   bench/instructions/http.sh                 builds this tree in build-bench-instr; N=4000
#   bench/instructions/http.sh BUILD..         each BUILD's sluiced, side by side
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
N=${N:-4000}
WARM=$((N / 2))
BENCH_NAME=bench/instructions/http.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
# shellcheck source=bench/instructions/lib.sh
. "$ROOT/bench/instructions/lib.sh"

need_tools callgrind_annotate valgrind callgrind_control python3 cmake /usr/sbin/nginx
BUILDS=("$@")
if [ ${#BUILDS[@]} -eq 0 ]; then
    bench_build build-bench-instr sluiced
    BUILDS=("$ROOT/build-bench-instr")
fi
bench_init
bench_machine

# send PORT PATH COUNT: COUNT keep-alive GETs of PATH?key=k<random>; exits 1 unless each answer
# is a 204 or a 429
send() {
    python3 - "$@" <<'PY'
import http.client, random, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rng = random.Random(n)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    c.request("GET", "%s?key=k%d" % (path, rng.randrange(100000)))
    r = c.getresponse()
    r.read()
    if r.status not in (204, 429):
        sys.exit("answer %d" % r.status)
PY
}
# measure NAME PID PORT PATH
measure() {
    local total
    send "$3" "$4" "$WARM"
    dump_total "$2" >/dev/null
    send "$3" "$4" "$N"
    total=$(dump_total "$2")
    printf '  %-36s %8d instructions per request\n' "$1" "$((total / N))"
    case $1 in
    sluiced*) layers "$N" engine_request_start sl_table_decide,sl_table_decide_reserved job_end,conn_flush ;;
    esac
}
cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: bench
    algorithm: gcra
    limit: 100
    window: 1s
    burst: 100
YAML

say ""
say "== instructions per request (callgrind; N=$N after $WARM; one keep-alive connection, 100 k keys)"
ng=$(free_port)
mkdir -p "$TMP/cg"
nginx_limit_req_conf "$TMP" "$ng" off
start cg-nginx valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
    /usr/sbin/nginx -p "$TMP/nginx/" -e "$TMP/nginx/error.log" -c "$TMP/nginx.conf"
pid=$LAST_PID
wait_port "$ng"
measure "nginx limit_req" "$pid" "$ng" /v1/auth/bench
kill -TERM "$pid"
wait "$pid" 2>/dev/null || true

for b in "${BUILDS[@]}"; do
    say "-- $b ($(git -C "$b/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
    rm -rf "$TMP/cg" "$TMP/s.db"
    mkdir -p "$TMP/cg"
    hp=$(free_port)
    start "cg-sluiced" valgrind --tool=callgrind --callgrind-out-file="$TMP/cg/cg.out" \
        "$b/src/server/sluiced" --grpc-port 0 --port 0 --http-port "$hp" --threads 1 \
        --rules "$TMP/rules.yaml" --config-store "$TMP/s.db" --snapshot "" --log-level warn
    pid=$LAST_PID
    wait_port "$hp"
    measure "sluiced /v1/auth" "$pid" "$hp" /v1/auth/bench
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
done
