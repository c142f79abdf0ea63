#!/usr/bin/env bash
# bench/stall/run.sh - does deciding stall while sluiced writes a snapshot of 10 M keys, or while
# override lookups hit the SQLite store? Prints figures (asserts nothing): the latency of
# decisions on other keys at a fixed rate, in three phases run interleaved and repeated, and each
# phase's p99 over the idle p99 (the target is <= 2).
#
#   1. starts sluiced --threads 1 (pinned to CPU 0) with two rules: "snap" (gcra 1000 per hour)
#      and "ov" (gcra 100 per second, one override stored, so every new key of it is looked up
#      in the store), --snapshot in $TMP and --snapshot-interval $SNAP_INTERVAL;
#   2. fills "snap" with $KEYS keys over RESP (pipelined SL.ALLOW ... COST 500: each key's state
#      stays non-fresh for 30 minutes, so all of them are in every snapshot), and 10 k probe keys;
#   3. runs bench_stall (pinned to CPU 1): SL.ALLOW snap probe:<random> at $RATE/s, open loop,
#      measured in windows: while a periodic snapshot is being written (the window is the time
#      its .tmp file exists), idle, and while SL.ALLOW ov miss:<unique> runs at $MISS_RATE/s.
#
#   bench/stall/run.sh                     10 M keys, 5 repetitions; about 3 minutes
#   QUICK=1 bench/stall/run.sh             1 M keys, 2 repetitions (figures not comparable)
#   REPS=9 KEYS=5000000 RATE=20000 bench/stall/run.sh
#   SLUICED=/path/to/sluiced bench/stall/run.sh   measure another build (e.g. an older commit)
#   SLOW_LOG=/tmp/slow.txt bench/stall/run.sh     also list every probe slower than 0.3 ms
#   BUILD_DIR=/tmp/b bench/stall/run.sh           build (RelWithDebInfo, no sanitizer) there
#
# Every process started here listens on 127.0.0.1 on free ports and is stopped by its PID.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-stall}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
if [ "${QUICK:-0}" = 1 ]; then
    KEYS=${KEYS:-1000000} REPS=${REPS:-2} WINDOW_MS=${WINDOW_MS:-1000}
else
    KEYS=${KEYS:-10000000} REPS=${REPS:-5} WINDOW_MS=${WINDOW_MS:-3000}
fi
RATE=${RATE:-10000}
MISS_RATE=${MISS_RATE:-1000}
PROBE_KEYS=${PROBE_KEYS:-10000}
# Each repetition measures one snapshot, then an idle and an override window before the next:
# the interval must exceed a snapshot's duration + 2 windows (a window a snapshot starts into is
# cut short, and says so).
SNAP_INTERVAL=${SNAP_INTERVAL:-$((WINDOW_MS * 2 / 1000 + 8))s}

BENCH_NAME=bench/stall/run.sh
RUN_TIMEOUT_S=1800
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools redis-cli curl taskset python3 cmake
if [ -n "${SLUICED:-}" ]; then
    bench_build "$BUILD" bench_stall
else
    bench_build "$BUILD" sluiced bench_stall
    SLUICED=$BUILD/src/server/sluiced
fi
need_tools "$SLUICED"
STALL=$BUILD/bench/bench_stall
[ -x "$STALL" ] || die "$STALL was not built (hiredis missing?)"
bench_init
bench_machine
say "sluiced: $SLUICED ($("$SLUICED" --version 2>&1 | head -n1))"
say "pinning: sluiced ${SRV_PIN[*]:-(none)} (all its threads), the load client ${CLI_PIN[*]:-(none)}"

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: snap
    algorithm: gcra
    limit: 1000
    window: 1h
  - name: ov
    algorithm: gcra
    limit: 100
    window: 1s
YAML

PORT=$(free_port)
HTTP=$(free_port)
SNAP=$TMP/sluice.snapshot
start sluiced "${SRV_PIN[@]}" "$SLUICED" --grpc-port 0 --threads 1 --port "$PORT" --http-port "$HTTP" \
    --rules "$TMP/rules.yaml" --config-store "$TMP/bench.db" --snapshot "$SNAP" \
    --snapshot-interval "$SNAP_INTERVAL" --log-level warn
SL_PID=$LAST_PID
wait_port "$PORT"
ov=$(redis-cli -p "$PORT" SL.OVERRIDE SET ov vip '{"limit":1000}')
[ "$ov" = OK ] || die "SL.OVERRIDE SET replied: $ov"
say "override stored for ov/vip: every other key of ov is a store lookup (a miss) when first seen"

say ""
say "== fill: $KEYS keys (plus $PROBE_KEYS probe keys) in rule snap"
cmd=("${CLI_PIN[@]}" "$STALL" fill --port "$PORT" --rule snap --keys "$KEYS" --cost 500
    --probe-keys "$PROBE_KEYS")
say "\$ ${cmd[*]}"
timeout 900 "${cmd[@]}" || die "fill failed"
metric() { curl -s "http://127.0.0.1:$HTTP/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
say "sluiced: RSS $(awk '/VmRSS/ { printf "%.0f MB", $2 / 1024 }' "/proc/$SL_PID/status"), snapshots so far $(metric sluice_snapshots_total)"

say ""
say "== run: $REPS repetitions of (snapshot, idle, override) windows; snapshot every $SNAP_INTERVAL"
wait_quiet
# minor page faults: memory sluiced touches afresh (field 10 of /proc/PID/stat; the name has no
# space here)
minflt() { awk '{ print $10 }' "/proc/$SL_PID/stat"; }
FAULTS0=$(minflt)
SNAPS0=$(metric sluice_snapshots_total)
cmd=("${CLI_PIN[@]}" "$STALL" run --port "$PORT" --rule snap --snapshot "$SNAP"
    --server-pid "$SL_PID" --rate "$RATE" --probe-keys "$PROBE_KEYS" --conns 4 --miss-rule ov
    --miss-rate "$MISS_RATE" --window-ms "$WINDOW_MS" --reps "$REPS"
    ${SLOW_LOG:+--slow-log "$SLOW_LOG"})
say "\$ ${cmd[*]}"
timeout "$RUN_TIMEOUT_S" "${cmd[@]}" || die "the run failed"
say ""
say "snapshot file: $(stat -c %s "$SNAP" | awk '{ printf "%.0f MB", $1 / 1e6 }');" \
    "sluiced: snapshots $(metric sluice_snapshots_total), snapshot errors $(metric sluice_snapshot_errors_total)," \
    "RSS $(awk '/VmRSS/ { printf "%.0f MB", $2 / 1024 }' "/proc/$SL_PID/status")"
SNAPS=$(($(metric sluice_snapshots_total) - SNAPS0))
say "sluiced's minor page faults during the run: $(($(minflt) - FAULTS0)) ($SNAPS snapshots;" \
    "$((($(minflt) - FAULTS0) / (SNAPS > 0 ? SNAPS : 1))) per snapshot taken)"
if grep -q . "$TMP/sluiced.log"; then
    say "sluiced's log (warnings and errors):"
    sed 's/^/  /' "$TMP/sluiced.log" | grep -v "admin commands are open" | tail -n 20
fi
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
