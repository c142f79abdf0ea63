#!/usr/bin/env bash
# test_python_middleware.sh - the Python package's middleware, installed from its wheel into a
# fresh venv: its key functions, and the middleware in each framework served for real on
# 127.0.0.1 against a real sluiced: FastAPI under uvicorn (ASGI), Flask and Django under
# werkzeug's server (WSGI). 429 with problem+json and the RateLimit fields as sluiced's own,
# shadow modes, and an in-flight rule's hold released when the response ends, when the handler
# raises and when the client disconnects mid-response; a sluiced killed by its PID under the
# app and started again. Each framework runs twice: against the memory store, then a Redis
# store (redis-server with sluice.so).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
. "$SLUICE_SOURCE_DIR/tests/python/venv.sh"
need redis-server redis-cli
python_venv || { echo "could not install the wheel"; exit 1; }

export SLUICE_KEYS_JSON=$SLUICE_SOURCE_DIR/tests/sdk/keys.json
check "the key functions: every vector of tests/sdk/keys.json, and more" py_test test_keys.py
check "by_route() in Flask, Django and a plain WSGI app: the route's pattern where they give one" \
    py_test test_routes.py

middleware_rules "$TMP/rules.yaml"
cat >>"$TMP/rules.yaml" <<'YAML'
  - name: mw-kill
    algorithm: fixed_window
    limit: 1000
    window: 1h
  - name: mw-khold
    algorithm: concurrency
    limit: 1
    hold_timeout: 1h
YAML
start_scratch_sluiced sluiced --rules "$TMP/rules.yaml"
export SLUICE_RESP_PORT=$RESP_PORT SLUICE_HTTP_PORT=$HTTP_PORT

framework() { # NAME: the middleware's tests in framework NAME
    (
        export SLUICE_TEST_FRAMEWORK=$1
        py_test test_middleware.py -k "not secured and not sluiced_is_back"
    )
}

# the frameworks are test dependencies (scripts/deps.sh test installs them): one missing fails
for fw in asgi:fastapi,uvicorn flask:flask,werkzeug django:django,werkzeug; do
    name=${fw%%:*}
    if ! "$PY" -c "import ${fw#*:}"; then
        check "$name: the venv imports ${fw#*:} (Debian's python3-*: scripts/deps.sh test)" false
        continue
    fi
    # each framework in a process of its own (Django's settings are per process)
    check "the middleware in $name" framework "$name"
done
check "the middleware with a sluiced where only admin reads rules" \
    py_test test_middleware.py -k secured
check "the middleware with sluiced down at its first request, then back" \
    py_test test_middleware.py -k sluiced_is_back

# every framework again against sluiced whose store is a redis-server with the project's
# sluice.so (the sluiced the tests kill too); a deadline far above the 5 ms default, so that a
# late reply on a loaded machine is never answered by on_store_error
start_redis redis --loadmodule "$SLUICE_BUILD_DIR/src/module/sluice.so" ||
    { cat "$TMP/redis.log"; exit 1; }
check "redis-server has sluice.so loaded" grep -qi sluice <(redis-cli -p "$REDIS_PORT" MODULE LIST)
STORE_ARGS=(--store "redis://127.0.0.1:$REDIS_PORT" --store-timeout 10s)
start_scratch_sluiced sluiced-redis --rules "$TMP/rules.yaml" "${STORE_ARGS[@]}"
against_redis() { # FRAMEWORK: its tests against sluiced-redis
    (
        export SLUICE_RESP_PORT=$RESP_PORT SLUICE_HTTP_PORT=$HTTP_PORT
        export SLUICE_TEST_STORE="${STORE_ARGS[*]}"
        framework "$1"
    )
}
for name in asgi flask django; do
    check "the middleware in $name, against the Redis store" against_redis "$name"
done
check "... whose keys are in Redis" test "$(redis-cli -p "$REDIS_PORT" DBSIZE)" -gt 0
finish
