#!/usr/bin/env bash
# bench/leased/run.sh - leased and approximate rules against strict ones and against the memory
# store: three
# sluiced over one redis-server with sluice.so, one hot key hammered through all three at full
# speed (redis-benchmark -P 16, one per sluiced). Prints figures; asserts nothing.
#
#   1. Redis commands per decision (INFO commandstats: every command the three sent, over the
#      decisions the clients got answered), sluiced CPU per decision and p99, for a leased rule,
#      an approximate one, a strict one, and the same three sluiced each with its memory store
#      (the floor);
#   2. at saturation: three rules whose limit is far below the offered load, leased, approximate
#      and strict, hammered at once (so that all see the same windows) for $SAT_S seconds; what
#      each admitted (sluice_decisions_total, summed over the three) over that time.
#
#   bench/leased/run.sh                 REPS=3, SAT_S=60 (about 4 minutes)
#   REPS=1 SAT_S=20 bench/leased/run.sh
#   BUILD_DIR=/tmp/b bench/leased/run.sh
#
# Every process started here listens on 127.0.0.1 on free ports and is stopped by its PID. The
# servers (redis-server and the three sluiced, --threads 1 each) run on CPU 0, the clients on CPU 1.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-bench-leased}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
REPS=${REPS:-3}
SAT_S=${SAT_S:-60}
N=${N:-300000} # requests per client per run
BENCH_NAME=bench/leased/run.sh
RUN_TIMEOUT_S=600
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_tools redis-server redis-cli redis-benchmark curl taskset python3 cmake
bench_build "$BUILD" sluiced sluice_module
SLUICED=$BUILD/src/server/sluiced
MODULE=$BUILD/src/module/sluice.so
bench_init
bench_machine

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: hot_leased       # far above what the clients send: every decision is admitted
    algorithm: gcra
    limit: 100000000
    window: 60s
    mode: leased
    lease_time: 1s
  - name: hot_approx
    algorithm: gcra
    limit: 100000000
    window: 60s
    mode: approximate
    sync_interval: 100ms
  - name: hot_strict
    algorithm: gcra
    limit: 100000000
    window: 60s
  - name: sat_leased       # far below what the clients send: 5,000 per 10 s
    algorithm: fixed_window
    limit: 5000
    window: 10s
    mode: leased
    lease_time: 1s
  - name: sat_approx
    algorithm: fixed_window
    limit: 5000
    window: 10s
    mode: approximate
    sync_interval: 100ms
  - name: sat_strict
    algorithm: fixed_window
    limit: 5000
    window: 10s
YAML

RPORT=$(free_port)
start redis "${SRV_PIN[@]}" redis-server --port "$RPORT" --bind 127.0.0.1 --save '' \
    --appendonly no --loadmodule "$MODULE"
REDIS_PID=$LAST_PID
wait_port "$RPORT"

# three sluiced over Redis, and three over their memory stores
declare -a RP HP SPIDS MRP MHP MPIDS
for i in 0 1 2; do
    RP[i]=$(free_port)
    HP[i]=$(free_port)
    start "sluiced$i" "${SRV_PIN[@]}" "$SLUICED" --threads 1 --port "${RP[i]}" \
        --http-port "${HP[i]}" --grpc-port 0 --rules "$TMP/rules.yaml" --config-store "$TMP/r$i.db" \
        --snapshot "" --store "redis://127.0.0.1:$RPORT" --store-timeout 50ms --log-level warn
    SPIDS[i]=$LAST_PID
    MRP[i]=$(free_port)
    MHP[i]=$(free_port)
    start "memory$i" "${SRV_PIN[@]}" "$SLUICED" --threads 1 --port "${MRP[i]}" \
        --http-port "${MHP[i]}" --grpc-port 0 --rules "$TMP/rules.yaml" --config-store "$TMP/m$i.db" \
        --snapshot "" --log-level error
    MPIDS[i]=$LAST_PID
done
for i in 0 1 2; do
    wait_port "${RP[i]}"
    wait_port "${MRP[i]}"
done

redis_calls() { # every command Redis ran but INFO's own
    redis-cli -p "$RPORT" INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' '/^cmdstat_/ && $1 != "cmdstat_info" { n += $3 } END { print n + 0 }'
}
metric_sum() { # NAME LABELS: summed over the three sluiced over Redis
    local i n=0 v
    for i in 0 1 2; do
        v=$(curl -s "http://127.0.0.1:${HP[i]}/metrics" | awk -v m="$1" -v l="$2" \
            'index($0, m "{" l "}") == 1 || ($1 == m && l == "") { print $2 }')
        n=$((n + ${v:-0}))
    done
    echo "$n"
}

# hammer PORTS.. -- CMD..: one redis-benchmark per port, at once, on CPU 1; waits for all.
# Sets H_P99 (the largest p99 of the three, ms) and H_N (requests answered in all).
hammer() {
    local ports=() i pids=()
    while [ "$1" != "--" ]; do
        ports+=("$1")
        shift
    done
    shift
    for i in "${!ports[@]}"; do
        "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "${ports[i]}" -c 10 -n "$N" -P 16 --csv \
            "$@" >"$TMP/h$i.csv" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do wait "${pids[i]}" || die "redis-benchmark failed: $(tail -n 2 "$TMP/h$i.csv")"; done
    H_P99=$(for i in "${!ports[@]}"; do grep -v '^"test"' "$TMP/h$i.csv" | grep '^"' | tail -n 1 | tr -d '"' | cut -d, -f7; done | sort -g | tail -n 1)
    H_N=$((N * ${#ports[@]}))
}

RESULTS=$TMP/results.txt
: >"$RESULTS"
say ""
say "== 1. one hot key through three sluiced, $N requests per client, -P 16; medians of $REPS"
say "\$ redis-benchmark -c 10 -n $N -P 16 SL.ALLOW <rule> hot   (three at once, one per sluiced)"
for ((rep = 1; rep <= REPS; rep++)); do
    for c in hot_leased hot_approx hot_strict memory; do
        wait_quiet
        if [ "$c" = memory ]; then ports=("${MRP[@]}") pids=("${MPIDS[@]}") rule=hot_strict
        else ports=("${RP[@]}") pids=("${SPIDS[@]}" "$REDIS_PID") rule=$c; fi
        calls0=$(redis_calls)
        t0=0
        for p in "${pids[@]:0:3}"; do t0=$((t0 + $(cpu_ticks "$p"))); done
        r0=$(cpu_ticks "$REDIS_PID")
        hammer "${ports[@]}" -- SL.ALLOW "$rule" hot
        t1=0
        for p in "${pids[@]:0:3}"; do t1=$((t1 + $(cpu_ticks "$p"))); done
        r1=$(cpu_ticks "$REDIS_PID")
        calls=$(($(redis_calls) - calls0))
        [ "$c" = memory ] && calls=0
        line=$(awk -v c="$c" -v n="$H_N" -v calls="$calls" -v ts="$((t1 - t0))" -v tr="$((r1 - r0))" \
            -v hz="$CLK_TCK" -v p99="$H_P99" 'BEGIN {
                printf "%s %.5f %.3f %.3f %s\n", c, calls / n, ts / hz * 1e6 / n, tr / hz * 1e6 / n, p99 }')
        echo "$line" >>"$RESULTS"
        set -- $line
        printf '  %-11s Redis commands/decision %s  sluiced CPU %s us/decision  Redis CPU %s us/decision  p99 %s ms\n' "$1" "$2" "$3" "$4" "$5"
    done
done
medc() { awk -v c="$1" -v k="$2" '$1 == c { print $k }' "$RESULTS" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

say ""
say "== 2. at saturation: fixed_window 5,000 per 10 s, a leased, an approximate and a strict rule"
say "   hammered at once (the same windows) for $SAT_S s, each through the three sluiced"
declare -A ADMITTED A0 D0
wait_quiet
for rule in sat_leased sat_approx sat_strict; do
    A0[$rule]=$(metric_sum sluice_decisions_total "rule=\"$rule\",result=\"allowed\"")
    D0[$rule]=$(metric_sum sluice_decisions_total "rule=\"$rule\",result=\"denied\"")
done
pids=()
for rule in sat_leased sat_approx sat_strict; do
    for i in 0 1 2; do
        timeout "$SAT_S" "${CLI_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "${RP[i]}" -c 4 \
            -n 100000000 -P 16 -q SL.ALLOW "$rule" sat >/dev/null 2>&1 &
        pids+=($!)
    done
done
for p in "${pids[@]}"; do wait "$p" || true; done
for rule in sat_leased sat_approx sat_strict; do
    a=$(($(metric_sum sluice_decisions_total "rule=\"$rule\",result=\"allowed\"") - A0[$rule]))
    d=$(($(metric_sum sluice_decisions_total "rule=\"$rule\",result=\"denied\"") - D0[$rule]))
    ADMITTED[$rule]=$a
    say "  $rule: admitted $a, refused $d in $SAT_S s"
done

say ""
say "== summary (medians of $REPS; targets: commands/decision <= 0.02 leased, <= 0.01 approximate; CPU <= 1.2x"
say "   and p99 <= 1.5x the memory store's; leased admits >= 0.95x strict's at saturation)"
lc=$(medc hot_leased 2) ac=$(medc hot_approx 2) sc=$(medc hot_strict 2)
lcpu=$(medc hot_leased 3) acpu=$(medc hot_approx 3) scpu=$(medc hot_strict 3) mcpu=$(medc memory 3)
lp=$(medc hot_leased 5) ap=$(medc hot_approx 5) sp=$(medc hot_strict 5) mp=$(medc memory 5)
say "  Redis commands per decision: leased $lc, approximate $ac, strict $sc"
say "  sluiced CPU per decision: leased $lcpu us, approximate $acpu us, strict $scpu us, memory store $mcpu us;"
say "    leased / memory $(ratio "$lcpu" "$mcpu"), approximate / memory $(ratio "$acpu" "$mcpu")"
say "  p99: leased $lp ms, approximate $ap ms, strict $sp ms, memory store $mp ms;"
say "    leased / memory $(ratio "$lp" "$mp"), approximate / memory $(ratio "$ap" "$mp")"
say "  admitted at saturation: leased ${ADMITTED[sat_leased]}, approximate ${ADMITTED[sat_approx]}, strict ${ADMITTED[sat_strict]};"
say "    leased / strict $(ratio "${ADMITTED[sat_leased]}" "${ADMITTED[sat_strict]}"), approximate / strict $(ratio "${ADMITTED[sat_approx]}" "${ADMITTED[sat_strict]}")"
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
