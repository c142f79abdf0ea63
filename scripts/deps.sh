#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build and test, only those missing.
# Usage: scripts/deps.sh [build|test]   (test adds what the test suite needs)
set -euo pipefail

what=${1:-build}
packages=(gcc make cmake pkg-config)
if [ "$what" = test ]; then
  # cmocka: unit tests; clang + compiler-rt: libFuzzer targets and sanitizers
  packages+=(libcmocka-dev clang libclang-rt-dev)
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
