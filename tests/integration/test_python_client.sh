#!/usr/bin/env bash
# test_python_client.sh - the Python package's client of sluiced, installed from its wheel into a
# fresh venv: every case of tests/sdk/cases.json with sluice.Client and sluice.AsyncClient (against
# the memory store, then a Redis store: redis-server with sluice.so, as is test_client.py), the
# version and the distribution's name (sluice-ratelimit) and the LICENSE in the wheel agree with
# the project's, pipelining, connection errors and TLS against a real sluiced.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
. "$SLUICE_SOURCE_DIR/tests/python/venv.sh"
need openssl unzip redis-server redis-cli
python_venv || { echo "could not install the wheel"; exit 1; }

sdk_cases_rules "$TMP/rules.yaml"
start_scratch_sluiced sluiced --rules "$TMP/rules.yaml"
export SLUICE_RESP_PORT=$RESP_PORT SLUICE_HTTP_PORT=$HTTP_PORT

export SLUICE_CASES_JSON=$SLUICE_SOURCE_DIR/tests/sdk/cases.json
check "every case of tests/sdk/cases.json, sync and async" py_test test_cases.py
export SLUICE_BACKOFF_JSON=$SLUICE_SOURCE_DIR/tests/sdk/backoff.json
check "every sequence of tests/sdk/backoff.json: the C client's delays from the same seed; deny's backoff, by default and a client's own" \
    py_test test_backoff.py

# the same cases against a sluiced whose store is a redis-server with the project's sluice.so
# (the cases that stop their sluiced get one of their own in the same store)
start_redis redis --loadmodule "$SLUICE_BUILD_DIR/src/module/sluice.so" ||
    { cat "$TMP/redis.log"; exit 1; }
STORE=redis://127.0.0.1:$REDIS_PORT
check "redis-server has sluice.so loaded" grep -qi sluice <(redis-cli -p "$REDIS_PORT" MODULE LIST)
# a deadline far above the 5 ms default: on a loaded machine a late Redis reply would be
# answered by the rule's on_store_error (admit, nothing charged) and the case would differ
STORE_ARGS=(--store "$STORE" --store-timeout 10s)
start_scratch_sluiced sluiced-redis --rules "$TMP/rules.yaml" "${STORE_ARGS[@]}"
REDIS_STORE_PORTS=("$RESP_PORT" "$HTTP_PORT")
against_redis() { # CMD..: CMD with the tests pointed at sluiced-redis
    (
        export SLUICE_RESP_PORT=${REDIS_STORE_PORTS[0]} SLUICE_HTTP_PORT=${REDIS_STORE_PORTS[1]}
        export SLUICE_TEST_STORE="${STORE_ARGS[*]}"
        "$@"
    )
}
check "every case of tests/sdk/cases.json, sync and async, against the Redis store" \
    against_redis py_test test_cases.py
check "... whose keys are in Redis" test "$(redis-cli -p "$REDIS_PORT" DBSIZE)" -gt 0

version=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$SLUICE_SOURCE_DIR/CMakeLists.txt")
check "sluice.__version__ is the project's version ($version)" \
    test "$("$PY" -c 'import sluice; print(sluice.__version__)')" = "$version"
dist_version='from importlib.metadata import version; print(version("sluice-ratelimit"))'
check "the wheel's metadata says the project's version, under the distribution's name" \
    test "$("$PY" -c "$dist_version")" = "$version"
check "the wheel is named with them" \
    test "$(basename "$WHEEL")" = "sluice_ratelimit-$version-py3-none-any.whl"
unzip -l "$WHEEL" >"$TMP/wheel.list"
check "the wheel carries LICENSE" \
    grep -q " sluice_ratelimit-$version.dist-info/LICENSE\$" "$TMP/wheel.list"
check "... the project's, word for word" \
    cmp <(unzip -p "$WHEEL" "sluice_ratelimit-$version.dist-info/LICENSE") \
    "$SLUICE_SOURCE_DIR/LICENSE"
check "the metadata names the license" grep -qx "License: MIT" \
    <(unzip -p "$WHEEL" "sluice_ratelimit-$version.dist-info/METADATA")

# TLS: a self-signed certificate for 127.0.0.1, the client checking it against that certificate
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 2 \
    -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null || exit 1
start_scratch_sluiced tls --rules "$TMP/rules.yaml" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem"
export SLUICE_TLS_PORT=$RESP_PORT SLUICE_TLS_CA=$TMP/cert.pem

check "client behaviours beyond the shared table" py_test test_client.py
check "... and against the Redis store" against_redis py_test test_client.py
finish
