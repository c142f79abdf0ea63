#!/usr/bin/env bash
# `make run`: replays a recorded traffic log against a candidate rule with the sluice CLI, so a
# new user sees real decisions in a second. (sluiced, the server, will take this over.)
set -euo pipefail
build=${1:-build}
cli="$build/src/cli/sluice"
log=examples/traffic.log
rule=(--algorithm sliding_log --limit 3 --window 10s)

echo "\$ $cli replay ${rule[*]} --summary $log"
"$cli" replay "${rule[@]}" --summary "$log"
echo
echo "Columns: TIME KEY COST ALLOWED LIMIT REMAINING RETRY_AFTER RESET_AFTER (times in ms)."
echo "Try another rule on the same traffic, e.g.:"
echo "  $cli replay --algorithm gcra --limit 1 --window 1s --burst 2 --summary $log"
