#!/usr/bin/env bash
# test_python_inproc.sh - sluice.inproc, the Python package's ctypes binding of libsluice,
# installed from its wheel into a fresh venv: seeded random sequences decided in-process admit
# exactly what sluiced's replay of them admits, for every algorithm; a table shared by threads;
# holds; errors; and the package's backoff against the C client's.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
. "$SLUICE_SOURCE_DIR/tests/python/venv.sh"
python_venv || { echo "could not install the wheel"; exit 1; }
export SLUICE_LIBRARY=$SLUICE_BUILD_DIR/src/libsluice.so.2
export SLUICE_CLIENT_LIBRARY=$SLUICE_BUILD_DIR/src/client/libsluice-client.so.0
need "$SLUICE_LIBRARY" "$SLUICE_CLIENT_LIBRARY"
if sanitized "$SLUICE_LIBRARY"; then
    echo "SKIP: libsluice is built with a sanitizer, which python3 cannot load (the plain build runs this test)"
    exit 77
fi

start_scratch_sluiced sluiced
export SLUICE_RESP_PORT=$RESP_PORT SLUICE_HTTP_PORT=$HTTP_PORT
check "the in-process binding" py_test test_inproc.py
finish
