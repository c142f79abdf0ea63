#!/usr/bin/env bash
# `make run`: starts sluiced on 127.0.0.1 with examples/rules.yaml imported into a SQLite config
# store and the memory request store, snapshots on, in the foreground. Ctrl-C stops it cleanly
# (it writes a snapshot first). State lives in ./run/ (sluice.db, sluice.snapshot). The ports are
# SLUICE_PORT (RESP, 6390), SLUICE_HTTP_PORT (8390) and SLUICE_GRPC_PORT (8391); the banner
# names them and the console's address.
set -euo pipefail
build=${1:-build}
sluiced="$build/src/server/sluiced"
resp_port=${SLUICE_PORT:-6390}
http_port=${SLUICE_HTTP_PORT:-8390}
grpc_port=${SLUICE_GRPC_PORT:-8391}
mkdir -p run

cat <<HELP
sluiced on 127.0.0.1, rules from examples/rules.yaml:
  RESP  port $resp_port   (SLUICE_PORT)       any Redis client
  HTTP  port $http_port   (SLUICE_HTTP_PORT)  JSON API, /metrics, the console: http://127.0.0.1:$http_port/ui/
  gRPC  port $grpc_port   (SLUICE_GRPC_PORT)  Envoy's rate limit service
Other ports: SLUICE_PORT=7000 SLUICE_HTTP_PORT=7001 SLUICE_GRPC_PORT=7002 make run
Try it from another terminal:

  redis-cli -p $resp_port SL.ALLOW api tenant:42            # [allowed, limit, remaining, retry_ms, reset_ms]
  redis-cli -p $resp_port SL.ALLOW api tenant:42 COST 50
  redis-cli -p $resp_port SL.THROTTLE user:7 gcra 10 1000   # an inline rule, no config needed
  redis-cli -p $resp_port CL.THROTTLE user:7 15 30 60       # redis-cell's command and reply
  redis-cli -p $resp_port SL.RULE LIST
  curl -i -X POST localhost:$http_port/v1/allow -H 'Content-Type: application/json' -d '{"rule":"api","key":"tenant:42"}'
  curl -i localhost:$http_port/v1/auth/login                 # 204 until the limit, then 429
  curl -s localhost:$http_port/metrics | grep sluice_decisions
  $build/src/cli/sluice -p $resp_port check login 10.0.0.1

Ctrl-C stops it (a snapshot is written to run/sluice.snapshot and loaded next time).

HELP
exec "$sluiced" --port "$resp_port" --http-port "$http_port" --grpc-port "$grpc_port" --rules examples/rules.yaml \
  --config-store run/sluice.db --snapshot run/sluice.snapshot
