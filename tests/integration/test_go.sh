#!/usr/bin/env bash
# test_go.sh - the Go package (bindings/go) as a user gets it: the module is packed into a zip
# as a release would carry it and unpacked into $TMP, and everything runs there, never in the
# source tree: gofmt, go vet, the package's tests (unit tests, the cases of tests/sdk/cases.json
# and the backoff sequences of tests/sdk/backoff.json, the key functions against tests/sdk/keys.json,
# the middleware with a real net/http server and real requests, TLS) against real sluiced
# servers, a bounded run of the RESP parser's fuzz target, and a consumer module that requires
# the package through a `replace` to the unpacked copy and builds from `go mod vendor`.
# Go's caches live under the build tree (GOCACHE, GOPATH, HOME); no module proxy is used.
set -u
. "$(dirname "$0")/lib.sh"

need go openssl python3
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

export SLUICE_GO_INTEGRATION=1 SLUICE_VERSION=$VERSION \
    SLUICE_RESP_ADDR=127.0.0.1:$MAIN_RESP SLUICE_HTTP_ADDR=127.0.0.1:$MAIN_HTTP \
    SLUICE_TLS_ADDR=127.0.0.1:$TLS_RESP SLUICE_TLS_CA=$TMP/cert.pem \
    SLUICE_SILENT_ADDR=127.0.0.1:$HELD_PORT SLUICE_SPARES=$SPARES \
    SLUICE_CASES=$SLUICE_SOURCE_DIR/tests/sdk/cases.json SLUICE_BACKOFF=$SLUICE_SOURCE_DIR/tests/sdk/backoff.json \
    SLUICE_KEYS=$SLUICE_SOURCE_DIR/tests/sdk/keys.json

# ---- the package, from the unpacked copy ------------------------------------------------------
cd "$MOD" || exit 1
check "gofmt finds nothing to change" test -z "$(gofmt -l . 2>&1)"
check "go vet" go vet ./...
check "go test (unit, cases.json, middleware, TLS)" go test -v -count=1 -timeout 240s ./...
check "the RESP parser's fuzz target, a bounded run" \
    go test -count=1 -run '^$' -fuzz '^FuzzReadReply$' -fuzztime 10s -timeout 120s .

# ---- a consumer module: require + replace to the copy, built from go mod vendor ---------------
mkdir -p "$TMP/consumer" && cd "$TMP/consumer" || exit 1
cat >go.mod <<EOF
module example.com/consumer

go 1.19

require sluice.dev/go v$VERSION

replace sluice.dev/go => $MOD
EOF
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
check "go mod vendor copies the package" go mod vendor
check "the vendored copy is the unpacked one" diff -r "$MOD" vendor/sluice.dev/go -x '*_test.go' -x testdata -x README.md -x 'go.mod'
check "the consumer builds from vendor/" go build -mod=vendor -o consumer .
out=$(./consumer 2>&1)
check "the consumer decides through sluiced: $out" \
    test "$out" = "sluice $VERSION: allowed=true remaining=2, codes 200 200 429"

finish
