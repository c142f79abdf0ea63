#!/usr/bin/env bash
# test_python_middleware.sh - the Python package's middleware, installed from its wheel into a
# fresh venv: its key functions, and the middleware in each framework served for real on
# 127.0.0.1 against a real sluiced: FastAPI under uvicorn (ASGI), Flask and Django under
# werkzeug's server (WSGI). 429 with problem+json and the RateLimit fields as sluiced's own,
# shadow modes, and an in-flight rule's hold released when the response ends, when the handler
# raises and when the client disconnects mid-response.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
. "$SLUICE_SOURCE_DIR/tests/python/venv.sh"
python_venv || { echo "could not install the wheel"; exit 1; }

check "the key functions: every vector of tests/sdk/keys.json, and more" \
    "$PY" "$SLUICE_SOURCE_DIR/tests/python/keys.py" "$SLUICE_SOURCE_DIR/tests/sdk/keys.json"

middleware_rules "$TMP/rules.yaml"
start_scratch_sluiced sluiced --rules "$TMP/rules.yaml"
export SLUICE_RESP_PORT=$RESP_PORT SLUICE_HTTP_PORT=$HTTP_PORT

# the frameworks are test dependencies (scripts/deps.sh test installs them): one missing fails
for fw in asgi:fastapi,uvicorn flask:flask,werkzeug django:django,werkzeug; do
    name=${fw%%:*}
    if ! "$PY" -c "import ${fw#*:}"; then
        check "$name: the venv imports ${fw#*:} (Debian's python3-*: scripts/deps.sh test)" false
        continue
    fi
    # each framework in a process of its own (Django's settings are per process)
    check "the middleware in $name" "$PY" "$SLUICE_SOURCE_DIR/tests/python/middleware.py" "$name"
done
check "the middleware with a sluiced where only admin reads rules" \
    "$PY" "$SLUICE_SOURCE_DIR/tests/python/middleware.py" secured
finish
