#!/usr/bin/env bash
# readme.sh - the doc test of bindings/node/README.md: its examples run (tests/docs/doctest.py)
# with the package as a user has it: packed with npm pack and installed with npm into a fresh
# directory (with koffi), which NODE_PATH names; express and fastify come from this directory's
# package-lock.json (npm ci). Skipped (exit 77) without node or npm.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

SDK_DIR=$SLUICE_SOURCE_DIR/tests/node_sdk
need node npm
node_packages "$SDK_DIR" || exit 1
mkdir -p "$TMP/pack" "$TMP/app"
(cd "$SLUICE_SOURCE_DIR/bindings/node" && npm pack --silent --pack-destination "$TMP/pack" >/dev/null) || exit 1
KOFFI=$(node -p "require('$SDK_DIR/package.json').dependencies.koffi")
echo '{"name":"sluice-readme","version":"0.0.0","private":true}' >"$TMP/app/package.json"
(cd "$TMP/app" && timeout 300 npm install --no-audit --no-fund --prefer-offline "$TMP"/pack/sluice-*.tgz \
    "koffi@$KOFFI" >"$TMP/install.log" 2>&1) || {
    cat "$TMP/install.log"
    exit 1
}
NODE_PATH=$TMP/app/node_modules:$SDK_DIR/node_modules \
    SLUICE_LIBRARY=$SLUICE_BUILD_DIR/src/libsluice.so.2 \
    python3 "$SLUICE_SOURCE_DIR/tests/docs/doctest.py" --source "$SLUICE_SOURCE_DIR" \
    --build "$SLUICE_BUILD_DIR" "$SLUICE_SOURCE_DIR/bindings/node/README.md"
