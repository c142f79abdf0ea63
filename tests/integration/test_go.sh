#!/usr/bin/env bash
# test_go.sh - the Go package (bindings/go) as a user gets it: the module is packed into a zip
# as a release would carry it and unpacked into $TMP, and everything runs there, never in the
# source tree: gofmt, go vet, the package's tests (unit tests, the cases of tests/sdk/cases.json
# and the backoff sequences of tests/sdk/backoff.json, the key functions against tests/sdk/keys.json,
# the middleware with a real net/http server and real requests, TLS) against real sluiced
# servers, among them one the test starts, kills by its PID mid-test (with pooled connections,
# and once with an in-flight hold live) and starts again; the shared cases, the middleware, the
# pipeline, the pool and a wrong password tests a second time against sluiced on a Redis store (redis-server with sluice.so); a bounded run of the RESP parser's fuzz target; then a consumer module gets the
# package with `go get` through a GOPROXY=file:// module proxy laid out from the zip, builds, runs
# and builds from `go mod vendor`, and another requires it with a `replace` to the unpacked copy.
# Go's caches live under the build tree (GOCACHE, GOPATH, HOME); no network module proxy is used.
set -u
. "$(dirname "$0")/lib.sh"

need go openssl python3 unzip redis-server
cd "$TMP" || exit 1 # sluiced writes its snapshot where it runs
SRC=$SLUICE_SOURCE_DIR/bindings/go
GODIR=$SLUICE_BUILD_DIR/go
mkdir -p "$GODIR/cache" "$GODIR/path"
export GOCACHE=$GODIR/cache GOPATH=$GODIR/path GOMODCACHE=$GODIR/path/pkg/mod HOME=$TMP \
    GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off GOENV=off GOTOOLCHAIN=local CGO_ENABLED=0

# ---- the artefact: the module's files in a zip, unpacked where a user would keep a copy ------
VERSION=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$SLUICE_SOURCE_DIR/CMakeLists.txt")
python3 - "$SRC" "$TMP/sluice-go-$VERSION.zip" "sluice.dev/go@v$VERSION" <<'EOF'
import os, sys, zipfile
src, out, prefix = sys.argv[1:4]
with zipfile.ZipFile(out, "w") as z:
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            z.write(p, prefix + "/" + os.path.relpath(p, src))
EOF
mkdir -p "$TMP/vendored" && (cd "$TMP/vendored" && python3 -m zipfile -e "$TMP/sluice-go-$VERSION.zip" .)
MOD=$TMP/vendored/sluice.dev/go@v$VERSION
check "the zip holds the module" test -f "$MOD/go.mod" -a -f "$MOD/client.go" -a -f "$MOD/README.md"
check "its module path" grep -qx 'module sluice.dev/go' "$MOD/go.mod"

# ---- servers ----------------------------------------------------------------------------------
sdk_cases_rules "$TMP/rules.yaml"
cat >>"$TMP/rules.yaml" <<'YAML'
  - name: go-mw
    algorithm: fixed_window
    limit: 2
    window: 1h
  - name: go-mw-shadow
    algorithm: fixed_window
    limit: 1
    window: 1h
    shadow: true
  - name: go-mw-jobs
    algorithm: concurrency
    limit: 1
    window: 1h
  - name: go-mw-delay
    algorithm: gcra
    limit: 1
    window: 1h
    burst: 1
    max_delay: 2h
  - name: go-mw-prio
    algorithm: concurrency
    limit: 2
    hold_timeout: 1h
    priorities: [low, high]
    reserve: {high: 1}
  - name: go-mw-adapt
    algorithm: concurrency
    limit: 2
    hold_timeout: 1h
    adaptive: aimd
    min_limit: 1
    max_limit: 8
    backoff: 50
    latency_timeout: 10m
  - name: go-mw-adapt-slow
    algorithm: concurrency
    limit: 2
    hold_timeout: 1h
    adaptive: aimd
    min_limit: 1
    max_limit: 8
    backoff: 50
    latency_timeout: 100ms
YAML
must_start_sluiced sluiced --rules "$TMP/rules.yaml"
MAIN_RESP=$RESP_PORT MAIN_HTTP=$HTTP_PORT
# one sluiced per case that stops its server: the Go test stops it by its PID
SPARES=""
nspare=$(python3 -c 'import json,sys; print(sum(any(s["op"] == "stop_server" for s in c["steps"]) for c in json.load(open(sys.argv[1]))["cases"]))' "$SLUICE_SOURCE_DIR/tests/sdk/cases.json")
for ((i = 0; i < nspare; i++)); do
    must_start_sluiced "spare$i" --rules "$TMP/rules.yaml"
    SPARES+="${SPARES:+,}127.0.0.1:$RESP_PORT/$(cat "$TMP/spare$i.pid")"
done
# TLS: a self-signed certificate for 127.0.0.1 made here
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 2 \
    -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" 2>"$TMP/openssl.log" ||
    { cat "$TMP/openssl.log"; exit 1; }
must_start_sluiced tls --rules "$TMP/rules.yaml" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem"
TLS_RESP=$RESP_PORT
hold_port silent silent || exit 1
# the same rules on a Redis store: a redis-server loading the built sluice.so, a sluiced on it,
# and a spare on it per case that stops its server
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
start_redis redis --loadmodule "$MODULE" || { cat "$TMP/redis.log"; exit 1; }
REDIS_STORE="--store redis://127.0.0.1:$REDIS_PORT --store-timeout 5s"
# shellcheck disable=SC2086 # REDIS_STORE is words
must_start_sluiced rmain --rules "$TMP/rules.yaml" --config-store "$TMP/rmain.db" --snapshot "" $REDIS_STORE
REDIS_RESP=$RESP_PORT REDIS_HTTP=$HTTP_PORT
check "sluiced keeps its state in Redis through the module" poll 10 grep -q "request store redis (sluice.so module)" "$TMP/rmain.log"
RSPARES=""
for ((i = 0; i < nspare; i++)); do
    # shellcheck disable=SC2086
    must_start_sluiced "rspare$i" --rules "$TMP/rules.yaml" --config-store "$TMP/rspare$i.db" --snapshot "" $REDIS_STORE
    RSPARES+="${RSPARES:+,}127.0.0.1:$RESP_PORT/$(cat "$TMP/rspare$i.pid")"
done

export SLUICE_GO_INTEGRATION=1 SLUICE_VERSION=$VERSION \
    SLUICE_RESP_ADDR=127.0.0.1:$MAIN_RESP SLUICE_HTTP_ADDR=127.0.0.1:$MAIN_HTTP \
    SLUICE_TLS_ADDR=127.0.0.1:$TLS_RESP SLUICE_TLS_CA=$TMP/cert.pem \
    SLUICE_SILENT_ADDR=127.0.0.1:$HELD_PORT SLUICE_SPARES=$SPARES \
    SLUICED=$SLUICED SLUICE_RULES=$TMP/rules.yaml SLUICE_STORE_ARGS= \
    SLUICE_CASES=$SLUICE_SOURCE_DIR/tests/sdk/cases.json SLUICE_BACKOFF=$SLUICE_SOURCE_DIR/tests/sdk/backoff.json \
    SLUICE_KEYS=$SLUICE_SOURCE_DIR/tests/sdk/keys.json

# ---- the package, from the unpacked copy ------------------------------------------------------
cd "$MOD" || exit 1
check "gofmt finds nothing to change" test -z "$(gofmt -l . 2>&1)"
check "go vet" go vet ./...
check "go test (unit, cases.json, middleware, TLS)" go test -v -count=1 -timeout 240s ./...
check "go test: cases.json, the middleware, pipelines and the pool again, sluiced on the Redis store" \
    env SLUICE_RESP_ADDR=127.0.0.1:$REDIS_RESP SLUICE_HTTP_ADDR=127.0.0.1:$REDIS_HTTP \
    SLUICE_SPARES="$RSPARES" SLUICE_STORE_ARGS="$REDIS_STORE" \
    go test -v -count=1 -timeout 240s \
    -run '^(TestSharedCases|TestMiddleware|TestPipeline|TestPool|TestWrongPassword|TestClosedClient)' .
check "the RESP parser's fuzz target, a bounded run" \
    go test -count=1 -run '^$' -fuzz '^FuzzReadReply$' -fuzztime 10s -timeout 120s .

# ---- a consumer module: `go get` through a file proxy (GOPROXY=file://) made from the zip -------
# the module proxy protocol's layout: @v/list, and per version .info, .mod and the zip as it is
PROXY=$TMP/goproxy
mkdir -p "$PROXY/sluice.dev/go/@v"
cp "$TMP/sluice-go-$VERSION.zip" "$PROXY/sluice.dev/go/@v/v$VERSION.zip"
cp "$MOD/go.mod" "$PROXY/sluice.dev/go/@v/v$VERSION.mod"
printf '{"Version":"v%s"}\n' "$VERSION" >"$PROXY/sluice.dev/go/@v/v$VERSION.info"
printf 'v%s\n' "$VERSION" >"$PROXY/sluice.dev/go/@v/list"
mkdir -p "$TMP/consumer" && cd "$TMP/consumer" || exit 1
# a module cache of its own, writable so that the cleanup can remove it: the module comes from
# the proxy, not from an earlier run's cache. The checksum database stays on (GOSUMDB empty: the
# default), as a user has it; GONOSUMDB keeps sluice.dev out of it.
export GOMODCACHE=$TMP/consumer-modcache GOFLAGS="-mod=mod -modcacherw"
check "go mod init" go mod init example.com/consumer
check "go get through the file proxy" env GOPROXY="file://$PROXY" GONOSUMDB=sluice.dev GOSUMDB= \
    go get "sluice.dev/go@v$VERSION"
check "go.mod requires the release" grep -q "sluice.dev/go v$VERSION" go.mod
check "go.sum has its hashes" grep -q "^sluice.dev/go v$VERSION h1:" go.sum
check "the module cache holds the zip's files" diff -r "$MOD" "$GOMODCACHE/sluice.dev/go@v$VERSION"
cat >main.go <<'EOF'
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	sluice "sluice.dev/go"
)

func main() {
	c, err := sluice.New(sluice.Options{Addr: os.Getenv("SLUICE_RESP_ADDR")})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	d, err := c.Allow(context.Background(), "sdk-fixed", "consumer", 1)
	if err != nil {
		panic(err)
	}
	lim := &sluice.Limiter{Client: c, Rule: "go-mw", Key: sluice.KeyHeader("X-User")}
	h := lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	codes := ""
	for i := 0; i < 3; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-User", "consumer")
		h.ServeHTTP(rec, req)
		codes += fmt.Sprint(" ", rec.Code)
	}
	fmt.Printf("sluice %s: allowed=%v remaining=%d, codes%s\n", sluice.Version, d.Allowed, d.Remaining, codes)
}
EOF
check "the consumer builds" go build -o consumer .
out=$(./consumer 2>&1)
check "the consumer decides through sluiced: $out" \
    test "$out" = "sluice $VERSION: allowed=true remaining=2, codes 200 200 429"
check "go mod vendor copies the package" go mod vendor
check "the vendored copy is the release's" diff -r "$MOD" vendor/sluice.dev/go -x '*_test.go' -x testdata -x README.md -x 'go.mod'
check "the consumer builds from vendor/, the proxy off" env GOPROXY=off go build -mod=vendor -o consumer-vendored .

# ---- the other way the README gives: the zip unpacked beside the code, and a replace ------------
mkdir -p "$TMP/replaced" && cp main.go "$TMP/replaced/" && cd "$TMP/replaced" || exit 1
check "require + replace to an unpacked copy" sh -c "go mod init example.com/replaced >/dev/null 2>&1 &&
    unzip -q '$TMP/sluice-go-$VERSION.zip' -d third_party && mv third_party/sluice.dev/go@v$VERSION third_party/sluice-go &&
    go mod edit -require=sluice.dev/go@v$VERSION -replace=sluice.dev/go=./third_party/sluice-go &&
    GOPROXY=off go build -o replaced ."
out=$(./replaced 2>&1)
check "the replaced build decides through sluiced: $out" \
    test "$out" = "sluice $VERSION: allowed=true remaining=1, codes 429 429 429"

finish
