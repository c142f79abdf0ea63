#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build and test, only those missing.
# Usage: scripts/deps.sh [build|run|test]   (run, test add what make run / the test suite need)
set -euo pipefail

what=${1:-build}
# Libraries (docs/design.md says why each): libuv (event loops), http-parser (HTTP/1.1), jansson
# (JSON), libyaml (rules files), SQLite (config store), hiredis (the client library and the CLI).
packages=(gcc make cmake pkg-config libuv1-dev libhttp-parser-dev libjansson-dev libyaml-dev
  libsqlite3-dev libhiredis-dev)
if [ "$what" = run ]; then
  # what `make run` suggests trying
  packages+=(redis-tools curl)
fi
if [ "$what" = test ]; then
  # cmocka: unit tests; clang + compiler-rt: libFuzzer targets and sanitizers; real servers and
  # clients the integration tests drive: redis-server/redis-cli, nginx (auth_request), curl,
  # sqlite3, node + npm (ioredis); python3 (test drivers, the doc tests); wrk for the benchmarks
  packages+=(libcmocka-dev clang libclang-rt-dev redis-server redis-tools nginx-light curl sqlite3
    python3 wrk)
  command -v node >/dev/null 2>&1 || packages+=(nodejs)
  command -v npm >/dev/null 2>&1 || packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "scripts/deps.sh: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
