#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build and test, only those missing.
# Usage: scripts/deps.sh [build|run|test|deb]   (run, test, deb add what make run / the test
# suite / make deb need)
set -euo pipefail

what=${1:-build}
# Libraries (docs/dev/design.md says why each): libuv (event loops), http-parser (HTTP/1.1), jansson
# (JSON), libyaml (rules files), SQLite and libpq (the config stores), hiredis (the client
# library and the CLI), protobuf-c and its compiler (the gRPC messages), nghttp2 (HTTP/2 for gRPC),
# OpenSSL (TLS on the listeners).
packages=(gcc make cmake pkg-config libuv1-dev libhttp-parser-dev libjansson-dev libyaml-dev
  libsqlite3-dev libpq-dev libhiredis-dev libprotobuf-c-dev protobuf-c-compiler libnghttp2-dev
  libssl-dev)
if [ "$what" = run ]; then
  # what `make run` suggests trying
  packages+=(redis-tools curl)
fi
if [ "$what" = deb ] || [ "$what" = test ]; then
  # Debian packages (make deb, and the tests that build them): dpkg-dev (dpkg-shlibdeps for their
  # dependencies, dpkg-buildflags), file and binutils (CPack's look at the binaries, strip),
  # python3 (packaging/doc_links.py: the packaged docs' links)
  packages+=(dpkg-dev file binutils python3)
fi
if [ "$what" = test ]; then
  # the packages' checks: lintian, systemd-analyze verify (systemd), man (man-db) rendering the
  # man pages with its warnings on, and what sluiced's package depends on for an install with
  # dpkg (procps: kill for systemctl reload)
  packages+=(lintian systemd man-db procps)
  # cmocka: unit tests; clang + compiler-rt: libFuzzer targets and sanitizers; real servers and
  # clients the integration tests drive: redis-server/redis-cli, nginx (auth_request), caddy
  # (forward_auth), curl, sqlite3, postgresql (the PostgreSQL config store's tests start their
  # own), node + npm (ioredis, @grpc/grpc-js, puppeteer-core), chromium and a font (the console's
  # pages in a real browser, headless, and their screenshots); python3 (test drivers, the doc tests) with grpcio
  # and grpc_tools (the gRPC port's real client) and yaml (the doc test reads docs/nginx.md's
  # Traefik files); jq (docs/cli.md's examples); wrk for the benchmarks
  packages+=(libcmocka-dev clang libclang-rt-dev redis-server redis-tools nginx-light caddy curl
    sqlite3 postgresql python3 python3-grpcio python3-grpc-tools python3-yaml jq wrk chromium
    fonts-dejavu-core)
  # the fault harness (tests/fault/): network namespaces and veth pairs (iproute2), partitions
  # and packet loss (nftables), a process's clock stepped (faketime: without it `make faults`
  # skips every cell)
  packages+=(iproute2)
  packages+=(nftables)
  packages+=(faketime)
  # the Go package (bindings/go): Debian's Go toolchain, standard library only, no module proxy
  packages+=(golang-go)
  # the Python package (bindings/python/): its wheel built offline (setuptools, pip) and installed
  # into a venv, redis-py (sync and asyncio), the frameworks its middleware is tested in, and
  # pytest, which runs its tests (tests/python/test_*.py)
  packages+=(python3-setuptools python3-pip python3-venv python3-redis python3-starlette python3-fastapi python3-uvicorn python3-flask python3-django python3-pytest)
  command -v node >/dev/null 2>&1 || packages+=(nodejs)
  command -v npm >/dev/null 2>&1 || packages+=(npm)
  # the Node package's test (test_node_sdk.sh): a certificate for sluiced's TLS made with the
  # openssl tool; its npm packages come through tests/node_sdk/package-lock.json
  packages+=(openssl)
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

# The tests start their own servers on ports they choose. Debian's packages also start system
# services when they install (caddy.service, with a Caddyfile serving port 80; nginx,
# redis-server and postgresql likewise), which would take ports 80, 443, 6379 and 5432 on this
# machine and keep running after the tests. A policy-rc.d that answers 101 ("action forbidden") tells the
# packages' scripts (invoke-rc.d, deb-systemd-invoke) not to start them; one already in place
# (containers have one) is left as it is. A service still enabled for the next boot is disabled
# afterwards where systemd runs.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/deps.sh: no service starts while it installs\nexit 101\n' |
    $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  own_policy=1
  trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ -d /run/systemd/system ]; then
  for p in "${missing[@]}"; do
    case "$p" in
    caddy | nginx-light | redis-server | postgresql)
      unit=${p%-light}
      $sudo systemctl disable --now "$unit.service" >/dev/null 2>&1 || true
      ;;
    esac
  done
fi
[ -z "$own_policy" ] || { $sudo rm -f "$policy"; trap - EXIT; }
