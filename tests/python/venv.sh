# venv.sh - sourced by tests/integration/test_python_*.sh after lib.sh: the Python package as a
# user installs it. python_venv builds the wheel from a copy of bindings/python (offline: Debian's
# setuptools, no build isolation, no index), makes a fresh venv over Debian's packages
# (--system-site-packages: redis-py, Starlette, Flask, Django come from python3-*), installs the
# wheel there and sets PY (the venv's python) and WHEEL. Tests then run from $TMP, so
# `import sluice` finds the installed package, never the source tree. py_test FILE [ARGS..] runs
# the pytest module tests/python/FILE with the venv's python (Debian's python3-pytest).

SYS_PY=/usr/bin/python3

python_venv() {
    [ -x "$SYS_PY" ] || { echo "SKIP: needs $SYS_PY"; exit 77; }
    "$SYS_PY" -c 'import redis.asyncio, setuptools, venv, pytest' 2>/dev/null || {
        echo "SKIP: needs python3-redis, python3-setuptools and python3-pytest (scripts/deps.sh test)"
        exit 77
    }
    cp -r "$SLUICE_SOURCE_DIR/bindings/python" "$TMP/pysrc" || return 1
    rm -rf "$TMP/pysrc/build" "$TMP/pysrc/"*.egg-info
    (cd "$TMP/pysrc" && timeout 300 "$SYS_PY" -m pip wheel --no-deps --no-build-isolation \
        --no-index -q -w "$TMP/wheel" .) >"$TMP/wheel.log" 2>&1 || {
        cat "$TMP/wheel.log"
        return 1
    }
    WHEEL=$(ls "$TMP"/wheel/sluice_ratelimit-*.whl) || return 1
    "$SYS_PY" -m venv --system-site-packages "$TMP/venv" || return 1
    "$TMP/venv/bin/python" -m pip install -q --no-deps --no-index "$WHEEL" \
        >"$TMP/install.log" 2>&1 || {
        cat "$TMP/install.log"
        return 1
    }
    PY=$TMP/venv/bin/python
    export SLUICED SLUICE_TEST_TMP=$TMP
    export PYTHONPATH=$SLUICE_SOURCE_DIR/tests/python # the tests' harness only
    export PYTHONDONTWRITEBYTECODE=1                  # nothing written into the source tree
    cd "$TMP" || return 1
    # the package imported is the installed one
    local where
    where=$("$PY" -c 'import sluice; print(sluice.__file__)') || return 1
    case $where in
    "$TMP/venv/"*) ;;
    *) echo "sluice imported from $where, not from the venv"; return 1 ;;
    esac
}

# py_test FILE [ARGS..]: the tests of tests/python/FILE, each named in the output (-v), nothing
# written into the source tree (no cache, no bytecode)
py_test() {
    local file=$1
    shift
    "$PY" -m pytest -p no:cacheprovider -v -rfEs --rootdir "$SLUICE_SOURCE_DIR/tests/python" \
        "$SLUICE_SOURCE_DIR/tests/python/$file" "$@"
}
