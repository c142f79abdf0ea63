#!/usr/bin/env bash
# scripts/stress.sh CMD [ARGS..] - runs CMD with a CPU hog on every core beside it (`STRESS=1
# make test`): one busy loop per online CPU at normal priority, started before CMD and stopped
# by PID after it (also when CMD fails or this script is interrupted). Exits with CMD's status.
# Tests must pass like this: they count events, never time.
set -u
hogs=()
stop_hogs() {
    local pid
    for pid in "${hogs[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in "${hogs[@]}"; do
        wait "$pid" 2>/dev/null
    done
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
n=$(nproc)
for ((i = 0; i < n; i++)); do
    # a bounded hog: at most 6 hours even if nothing stops it
    timeout 21600 sh -c 'while :; do :; done' &
    hogs+=("$!")
done
echo "scripts/stress.sh: $n CPU hogs (PIDs ${hogs[*]}) beside: $*"
"$@"
rc=$?
stop_hogs
echo "scripts/stress.sh: hogs stopped; exit $rc"
exit "$rc"
