#!/usr/bin/env bash
# test_server_tls.sh - sluiced's listeners over TLS, with real clients: redis-cli --tls (one
# command, and 3,000 pipelined: records that span reads, replies larger than a record), curl
# over HTTPS, grpcio over TLS (Python's); a plain client, and bytes that are not TLS at all, on
# a TLS port (closed; the server goes on); ALPN (a gRPC port refuses a client that offers only
# http/1.1); a renewed certificate read again when its files change (a rewrite, a Kubernetes
# Secret's ..data swap) and on SIGHUP (new connections get it), a broken one logged (the
# certificate in use stays); client certificates (--tls-client-ca) on the listeners
# --tls names, the others plain; a client that never finishes its handshake (the idle timeout);
# start-up errors that name the setting, the file and why (a missing or unreadable file: the
# system's reason); a certificate that has expired or is not valid yet served with a warning at
# start and on SIGHUP, and its end in /metrics.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

PY=/usr/bin/python3 # Debian's, where python3-grpcio and python3-grpc-tools install
need openssl redis-cli curl "$PY"
"$PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null || {
    echo "SKIP: needs python3-grpcio and python3-grpc-tools"
    exit 77
}
redis-cli --help 2>&1 | grep -q -- --tls || {
    echo "SKIP: this redis-cli was built without TLS"
    exit 77
}
mkdir -p "$TMP/stubs"
"$PY" -m grpc_tools.protoc -I "$SLUICE_SOURCE_DIR/src/proto/grpc" --python_out="$TMP/stubs" \
    --grpc_python_out="$TMP/stubs" rls.proto health.proto || exit 1

# A CA, two server certificates for 127.0.0.1 (the second for the renewal) and a client one.
pki() {
    local d=$TMP/pki
    mkdir -p "$d" && cd "$d" || return 1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
        -subj "/CN=sluice test CA" 2>/dev/null || return 1
    printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
    local n
    for n in server renewed client; do
        openssl req -newkey rsa:2048 -nodes -keyout "$n.key" -out "$n.csr" -subj "/CN=$n" \
            2>/dev/null || return 1
        openssl x509 -req -in "$n.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -out "$n.pem" $([ "$n" = client ] || echo -extfile san.ext) 2>/dev/null || return 1
    done
    # certificates with dates of their own (openssl ca takes them; openssl x509 does not): one
    # that expired on 2021-01-01, one not valid before 2100-01-01
    printf '[ca]\ndefault_ca = t\n[t]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n%s\n' \
        'default_md = sha256
policy = any
[any]
commonName = supplied' >ca.cnf
    : >index.txt
    echo 1000 >serial
    for n in expired future; do
        openssl req -newkey rsa:2048 -nodes -keyout "$n.key" -out "$n.csr" -subj "/CN=$n" \
            2>/dev/null || return 1
    done
    openssl ca -batch -notext -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
        -out expired.pem -startdate 20200101000000Z -enddate 20210101000000Z -extfile san.ext \
        >/dev/null 2>&1 || return 1
    openssl ca -batch -notext -config ca.cnf -cert ca.pem -keyfile ca.key -in future.csr \
        -out future.pem -startdate 21000101000000Z -enddate 21010101000000Z -extfile san.ext \
        >/dev/null 2>&1 || return 1
    cd - >/dev/null || return 1
}
pki || { echo "could not make certificates"; exit 1; }
P=$TMP/pki
cp "$P/server.pem" "$TMP/cert.pem"
cp "$P/server.key" "$TMP/key.pem"

start_sluiced s1 --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --config-store "$TMP/s1.db" \
    --snapshot "" --threads 2 --idle-timeout 2s || { cat "$TMP/s1.log"; exit 1; }
check "the log says which listeners speak TLS" grep -q "port $GRPC_PORT (gRPC over TLS)" "$TMP/s1.log"

tls_cli() { redis-cli --tls --cacert "$P/ca.pem" -h 127.0.0.1 -p "$RESP_PORT" "$@"; }
check "RESP over TLS" test "$(tls_cli PING)" = PONG
first=$(tls_cli SL.THROTTLE tk fixed_window 2 60000 | head -1)
second=$(tls_cli SL.THROTTLE tk fixed_window 2 60000 | head -1)
third=$(tls_cli SL.THROTTLE tk fixed_window 2 60000 | head -1)
check "RESP over TLS decides: allowed, allowed, refused" test "$first $second $third" = "1 1 0"

# 3,000 pipelined commands in one connection: requests span TLS records and reads, and so do
# the replies
for ((i = 0; i < 3000; i++)); do printf 'SL.THROTTLE p%d gcra 100 1000\r\n' "$i"; done >"$TMP/pipe.txt"
tls_cli --pipe <"$TMP/pipe.txt" >"$TMP/pipe.out" 2>&1
check "3,000 pipelined over TLS, every one answered" grep -q "errors: 0, replies: 3000" "$TMP/pipe.out"

curl_tls() { curl -s --cacert "$P/ca.pem" "$@"; }
check "HTTPS /healthz" test "$(curl_tls -o /dev/null -w '%{http_code}' "https://127.0.0.1:$HTTP_PORT/healthz")" = 200
check "HTTPS /metrics counts the pipelined calls" grep -q '^sluice_requests_total{protocol="resp"} 30[0-9][0-9]' \
    <(curl_tls "https://127.0.0.1:$HTTP_PORT/metrics")
check "a rule over TLS" test "$(tls_cli SL.RULE SET h '{"algorithm":"gcra","limit":5,"window":"1s"}')" = OK
check "HTTPS POST /v1/allow" grep -q '"allowed":true' \
    <(curl_tls -X POST -H 'Content-Type: application/json' -d '{"rule":"h","key":"k"}' "https://127.0.0.1:$HTTP_PORT/v1/allow")

grpc_cases() { GRPC_TLS_CA=$P/ca.pem "$PY" "$SLUICE_SOURCE_DIR/tests/integration/grpc_client.py" \
    "$GRPC_PORT" "$TMP/stubs" "$@"; }
check "gRPC over TLS: the health check" grep -qx "ok health" <(grpc_cases health 2>&1)
check "gRPC over TLS: an unknown domain" grep -qx "ok unknown" <(grpc_cases unknown 2>&1)

# clients that do not speak TLS
check "a plain RESP client gets nothing" test "$(redis-cli -p "$RESP_PORT" PING 2>/dev/null)" != PONG
check "bytes that are not TLS: closed" "$PY" - "$RESP_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"\x16\x03\x01\x00\x05hello, this is no ClientHello\r\n" * 4)
data = s.recv(4096)
while data and len(data) < 65536:  # an alert at most, then the end
    more = s.recv(4096)
    if not more:
        break
    data += more
sys.exit(0)
PY
check "ALPN: a gRPC port refuses a client offering only http/1.1" bash -c \
    "! openssl s_client -connect 127.0.0.1:$GRPC_PORT -alpn http/1.1 -CAfile '$P/ca.pem' </dev/null >/dev/null 2>&1"
check "ALPN: the gRPC port accepts h2" bash -c \
    "openssl s_client -connect 127.0.0.1:$GRPC_PORT -alpn h2 -CAfile '$P/ca.pem' </dev/null 2>/dev/null | grep -q 'ALPN protocol: h2'"
check "after all that, TLS clients are still served" test "$(tls_cli PING)" = PONG

# a client that connects and never finishes its handshake is closed by the idle timeout
check "an unfinished handshake is closed by the idle timeout" "$PY" - "$RESP_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"\x16\x03\x01")  # the start of a record, then nothing
sys.exit(0 if s.recv(1) == b"" else 1)
PY

# A renewed certificate for new connections, read again when its files change and on SIGHUP; a
# broken one changes nothing
subject() { openssl s_client -connect "127.0.0.1:${1:-$RESP_PORT}" -CAfile "$P/ca.pem" </dev/null 2>/dev/null |
    openssl x509 -noout -subject 2>/dev/null; }
check "the first certificate" grep -q "CN = server" <(subject)
cp "$P/renewed.pem" "$TMP/cert.pem"
cp "$P/renewed.key" "$TMP/key.pem"
check "files changed: read again, no signal" wait_log s1 "TLS files changed: TLS certificate $TMP/cert.pem read again"
check "new connections get the renewed certificate" grep -q "CN = renewed" <(subject)
kill -HUP "$(cat "$TMP/s1.pid")"
check "SIGHUP: read again" wait_log s1 "SIGHUP: TLS certificate $TMP/cert.pem read again"
cp "$P/server.pem" "$TMP/cert.pem" # a certificate that does not match the key
check "files changed: the mismatch is logged" wait_log s1 "TLS files changed: --tls-key $TMP/key.pem: not the key of the certificate in --tls-cert (.*key values mismatch) (the certificate in use stays)"
kill -HUP "$(cat "$TMP/s1.pid")"
check "SIGHUP: the mismatch is logged" wait_log s1 "SIGHUP: --tls-key $TMP/key.pem: not the key of the certificate in --tls-cert (.*key values mismatch) (the certificate in use stays)"
check "the renewed certificate stays in use" grep -q "CN = renewed" <(subject)
check "s1 stops cleanly" stop_bg s1 TERM

# A Kubernetes Secret mounted as a directory: tls.crt and tls.key are links through ..data,
# which the kubelet swaps to a new directory in one rename
K=$TMP/secret
mkdir -p "$K/..v1" "$K/..v2"
cp "$P/server.pem" "$K/..v1/tls.crt" && cp "$P/server.key" "$K/..v1/tls.key"
cp "$P/renewed.pem" "$K/..v2/tls.crt" && cp "$P/renewed.key" "$K/..v2/tls.key"
ln -s ..v1 "$K/..data" && ln -s ..data/tls.crt "$K/tls.crt" && ln -s ..data/tls.key "$K/tls.key"
start_sluiced s5 --tls-cert "$K/tls.crt" --tls-key "$K/tls.key" --tls resp --config-store "$TMP/s5.db" \
    --snapshot "" || { cat "$TMP/s5.log"; exit 1; }
check "a Secret: the first certificate" grep -q "CN = server" <(subject)
ln -s ..v2 "$K/..data_tmp" && mv -T "$K/..data_tmp" "$K/..data"
check "a Secret's swap: read again, no signal" wait_log s5 "TLS files changed: TLS certificate $K/tls.crt read again"
check "a Secret's swap: new connections get the renewed certificate" grep -q "CN = renewed" <(subject)
check "s5 stops cleanly" stop_bg s5 TERM

# client certificates, on HTTP and gRPC only (RESP stays plain)
start_sluiced s2 --tls-cert "$P/server.pem" --tls-key "$P/server.key" --tls-client-ca "$P/ca.pem" \
    --tls http,grpc --config-store "$TMP/s2.db" --snapshot "" || { cat "$TMP/s2.log"; exit 1; }
check "--tls http,grpc: RESP is plain" test "$(redis-cli -p "$RESP_PORT" PING)" = PONG
check "no client certificate: refused" bash -c \
    "! curl -s --cacert '$P/ca.pem' https://127.0.0.1:$HTTP_PORT/healthz"
check "with the client certificate: served" test "$(curl_tls --cert "$P/client.pem" --key "$P/client.key" \
    -o /dev/null -w '%{http_code}' "https://127.0.0.1:$HTTP_PORT/healthz")" = 200
check "gRPC with the client certificate" grep -qx "ok health" \
    <(GRPC_TLS_CERT=$P/client.pem GRPC_TLS_KEY=$P/client.key grpc_cases health 2>&1)
check "gRPC without one: refused" bash -c "! grep -qx 'ok health' <(GRPC_TLS_CA='$P/ca.pem' '$PY' \
    '$SLUICE_SOURCE_DIR/tests/integration/grpc_client.py' $GRPC_PORT '$TMP/stubs' health 2>&1)"
check "s2 stops cleanly" stop_bg s2 TERM

# start-up errors name what is wrong
startup_error() { # EXPECTED ARGS..
    local want=$1 out
    shift
    out=$("$SLUICED" --port 0 --http-port "$(free_port)" --grpc-port 0 --snapshot "" \
        --config-store "$TMP/err.db" "$@" 2>&1)
    [ $? -ne 0 ] && grep -q -- "$want" <<<"$out" || { echo "  got: $out"; return 1; }
}
check "a certificate without its key" startup_error "--tls-cert and --tls-key go together: --tls-key is missing" \
    --tls-cert "$P/server.pem"
check "an unknown listener in --tls" startup_error "--tls: 'smtp' is not a listener" \
    --tls-cert "$P/server.pem" --tls-key "$P/server.key" --tls http,smtp
check "a key of another certificate" startup_error \
    "--tls-key $P/client.key: not the key of the certificate in --tls-cert (.*key values mismatch)" \
    --tls-cert "$P/server.pem" --tls-key "$P/client.key"
check "a certificate file that is missing" startup_error \
    "--tls-cert $TMP/none.pem: No such file or directory" \
    --tls-cert "$TMP/none.pem" --tls-key "$P/server.key"
check "a key file that is missing" startup_error "--tls-key $TMP/x/key.pem: No such file or directory" \
    --tls-cert "$P/server.pem" --tls-key "$TMP/x/key.pem"
check "a key that is a directory" startup_error "--tls-key $P: Is a directory" \
    --tls-cert "$P/server.pem" --tls-key "$P"
check "a client CA file that is missing" startup_error \
    "--tls-client-ca $TMP/ca.pem: No such file or directory" \
    --tls-cert "$P/server.pem" --tls-key "$P/server.key" --tls-client-ca "$TMP/ca.pem"
check "a file that is no certificate" startup_error \
    "--tls-cert $P/server.key: not a PEM certificate chain (" \
    --tls-cert "$P/server.key" --tls-key "$P/server.key"
if [ "$(id -u)" != 0 ]; then # root reads any file
    cp "$P/server.key" "$TMP/locked.key" && chmod 000 "$TMP/locked.key"
    check "a key file that cannot be read" startup_error "--tls-key $TMP/locked.key: Permission denied" \
        --tls-cert "$P/server.pem" --tls-key "$TMP/locked.key"
fi

# a certificate out of its dates is served (the operator may be mid-renewal), with a warning at
# start and again on SIGHUP; /metrics gives its end, unix seconds
start_sluiced s3 --tls-cert "$P/expired.pem" --tls-key "$P/expired.key" --tls http \
    --config-store "$TMP/s3.db" --snapshot "" || { cat "$TMP/s3.log"; exit 1; }
EXPIRED="TLS certificate $P/expired.pem (--tls-cert) expired on 2021-01-01 00:00:00 UTC, [0-9]* days ago"
check "an expired certificate: warned at start" wait_log s3 "WARN $EXPIRED"
check "an expired certificate: still served" \
    test "$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$HTTP_PORT/healthz")" = 200
check "an expired certificate: its end in /metrics" grep -qx \
    'sluice_tls_certificate_expiry_timestamp_seconds 1609459200' \
    <(curl -sk "https://127.0.0.1:$HTTP_PORT/metrics")
kill -HUP "$(cat "$TMP/s3.pid")"
check "an expired certificate: warned again on SIGHUP" wait_log s3 "WARN $EXPIRED" 2
stop_bg s3 TERM
start_sluiced s4 --tls-cert "$P/future.pem" --tls-key "$P/future.key" --tls http \
    --config-store "$TMP/s4.db" --snapshot "" || { cat "$TMP/s4.log"; exit 1; }
check "a certificate not valid yet: warned" wait_log s4 \
    "WARN TLS certificate $P/future.pem (--tls-cert) is not valid before 2100-01-01 00:00:00 UTC"
check "a certificate not valid yet: its end in /metrics" grep -qx \
    'sluice_tls_certificate_expiry_timestamp_seconds 4133980800' \
    <(curl -sk "https://127.0.0.1:$HTTP_PORT/metrics")
stop_bg s4 TERM
check "a valid certificate is not warned about" bash -c "! grep -q 'TLS certificate.*(--tls-cert)' '$TMP/s1.log'"
finish
