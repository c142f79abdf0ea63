#!/usr/bin/env bash
# bench/server/watch.sh - what the console's per-rule figures (rates, top keys) cost a decision:
# sluiced's CPU per decision with them (this tree) against without them (BASE, a commit before
# they existed), on a named rule.
#
#   RESP  redis-benchmark -c 50 -r 100000 -P 16 SL.ALLOW bench key:__rand_int__
#           against sluiced --threads 1 of this tree and of BASE, runs interleaved
#         the server's CPU per request (utime+stime of its PID around the run, divided by the
#         requests), the median over REPS repetitions, and the ratio this tree / BASE.
#
# Servers are pinned to CPU 0, the client to CPU 1; everything listens on 127.0.0.1 on free
# ports; every process started here is stopped by its PID on exit. Prints figures, asserts
# nothing.
#
#   bench/server/watch.sh                 REPS=5, N=1500000; BASE defaults to the commit before
#                                         src/core/topk.c was added
#   QUICK=1 bench/server/watch.sh         a smoke run (figures not comparable)
#   BASE=<commit> bench/server/watch.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-1} N=${N:-200000}
else
    REPS=${REPS:-5} N=${N:-1500000}
fi
BASE=${BASE:-$(git log --diff-filter=A --format=%H -- src/core/topk.c | tail -n 1)^}
CLIENTS=50
BENCH_NAME=bench/server/watch.sh
RUN_TIMEOUT_S=120
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools redis-server redis-benchmark redis-cli taskset python3 cmake git
bench_init
bench_build "$ROOT/build-bench-srv" sluiced
say "\$ git archive $BASE | tar -x -C \$TMP/base && cmake ... (the build without the figures)"
mkdir -p "$TMP/base"
git archive "$BASE" | tar -x -C "$TMP/base"
(cd "$TMP/base" && bench_build "$TMP/base/build" sluiced) >/dev/null
bench_machine
say "base: $(git log -1 --format='%h %s' "$BASE")"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: bench
    algorithm: gcra
    limit: 100
    window: 1s
YAML

serve_one() { # NAME BINARY: starts it, sets PORT and PID
    PORT=$(free_port)
    start "$1" "${SRV_PIN[@]}" "$2" --grpc-port 0 --http-port 0 --threads 1 --port "$PORT" \
        --rules "$TMP/rules.yaml" --config-store "$TMP/$1.db" --snapshot "" --log-level warn
    PID=$LAST_PID
    wait_port "$PORT"
}
serve_one base "$TMP/base/build/src/server/sluiced"
BASE_PORT=$PORT BASE_PID=$PID
serve_one watch "$ROOT/build-bench-srv/src/server/sluiced"
WATCH_PORT=$PORT WATCH_PID=$PID

for ((rep = 1; rep <= REPS; rep++)); do
    say "repetition $rep of $REPS"
    rb base "$BASE_PID" "$BASE_PORT" "$N" 16 100000 SL.ALLOW bench key:__rand_int__
    rb watch "$WATCH_PID" "$WATCH_PORT" "$N" 16 100000 SL.ALLOW bench key:__rand_int__
done

b=$(med base 5)
w=$(med watch 5)
say ""
say "sluiced CPU per decision, SL.ALLOW on a named rule at -P 16 (median of $REPS):"
say "  without rates and top keys (base)  $b us"
say "  with them (this tree)              $w us"
say "  ratio with / without               $(ratio "$w" "$b")"
say "  throughput: $(med base 2) req/s without, $(med watch 2) req/s with"
disturbed_report
