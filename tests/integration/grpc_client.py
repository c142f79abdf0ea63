"""grpc_client.py - test_grpc.sh's driver: a real gRPC client (grpcio, with stubs generated from
sluice's .proto files) against sluiced's gRPC port. Each case prints "ok NAME" or "FAIL NAME: why";
the exit status is the number of failures (at most 100).

Usage: grpc_client.py PORT STUBS_DIR CASE..   (cases: see CASES below; they run in the order given
and share the server's state, so the shell script says which to run against which server)
"""
import os
import signal
import socket
import sys
import time
import urllib.request

import grpc

sys.path.insert(0, sys.argv[2])
import health_pb2  # noqa: E402 (generated at test time)
import health_pb2_grpc  # noqa: E402
import rls_pb2  # noqa: E402
import rls_pb2_grpc  # noqa: E402

PORT = int(sys.argv[1])
TARGET = "127.0.0.1:%d" % PORT
TIMEOUT_S = 5
RLS = "envoy.service.ratelimit.v3.RateLimitService"
Code = rls_pb2.RateLimitResponse.Code
Unit = rls_pb2.RateLimitResponse.RateLimit.Unit

def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def make_channel():
    """A plain channel, or with GRPC_TLS_CA set a TLS one trusting that CA (and with
    GRPC_TLS_CERT and GRPC_TLS_KEY, presenting that client certificate)."""
    ca = os.environ.get("GRPC_TLS_CA")
    if not ca:
        return grpc.insecure_channel(TARGET)
    cert, key = os.environ.get("GRPC_TLS_CERT"), os.environ.get("GRPC_TLS_KEY")
    creds = grpc.ssl_channel_credentials(
        root_certificates=read_file(ca),
        private_key=read_file(key) if key else None,
        certificate_chain=read_file(cert) if cert else None)
    return grpc.secure_channel(TARGET, creds)


channel = make_channel()
stub = rls_pb2_grpc.RateLimitServiceStub(channel)
health = health_pb2_grpc.HealthStub(channel)


def desc(*pairs, hits=None, limit=None):
    d = rls_pb2.RateLimitDescriptor(
        entries=[rls_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in pairs])
    if hits is not None:
        d.hits_addend.value = hits
    if limit is not None:
        d.limit.requests_per_unit, d.limit.unit = limit
    return d


def ask(domain, *descs, hits=0):
    return stub.ShouldRateLimit(
        rls_pb2.RateLimitRequest(domain=domain, descriptors=list(descs), hits_addend=hits),
        timeout=TIMEOUT_S)


def expect(cond, why):
    if not cond:
        raise AssertionError(why)


def expect_status(fn, code, text=None):
    try:
        fn()
    except grpc.RpcError as e:
        expect(e.code() == code, "status %s, want %s (%s)" % (e.code(), code, e.details()))
        if text is not None:
            expect(text in (e.details() or ""), "message %r lacks %r" % (e.details(), text))
        return
    raise AssertionError("succeeded, want %s" % code)


def raw_call(method, payload):
    """A unary call whose request bytes are given as they are (no message type)."""
    call = channel.unary_unary(method, request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
    return call(payload, timeout=TIMEOUT_S)


# ---- cases ----------------------------------------------------------------------------------

def case_health():
    # "ratelimit": the name envoyproxy/ratelimit registers, which its probes ask for
    for service in ("", RLS, "kuadrant.service.ratelimit.v1.RateLimitService", "ratelimit"):
        r = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT_S)
        expect(r.status == health_pb2.HealthCheckResponse.SERVING, "service %r: %s" % (service, r))
    expect_status(lambda: health.Check(health_pb2.HealthCheckRequest(service="nope"),
                                       timeout=TIMEOUT_S),
                  grpc.StatusCode.NOT_FOUND, "unknown service 'nope'")


def case_limit():
    # edge.remote_address: fixed_window, 3 a minute
    for want in (2, 1, 0):
        r = ask("edge", desc(("remote_address", "10.0.0.1")))
        expect(r.overall_code == Code.OK, "admitted: %s" % r)
        s = r.statuses[0]
        expect(s.code == Code.OK and s.limit_remaining == want, "remaining %d: %s" % (want, r))
        expect(s.current_limit.requests_per_unit == 3 and s.current_limit.unit == Unit.MINUTE
               and s.current_limit.name == "edge.remote_address", "limit: %s" % r)
        expect(0 < s.duration_until_reset.seconds * 10**9 + s.duration_until_reset.nanos
               <= 60 * 10**9, "reset: %s" % r)
    r = ask("edge", desc(("remote_address", "10.0.0.1")))
    expect(r.overall_code == Code.OVER_LIMIT and r.statuses[0].code == Code.OVER_LIMIT,
           "the fourth is over: %s" % r)
    expect(len(r.response_headers_to_add) == 0, "headers only when asked for: %s" % r)
    r = ask("edge", desc(("remote_address", "10.0.0.2")))
    expect(r.overall_code == Code.OK and r.statuses[0].limit_remaining == 2,
           "another address has its own count: %s" % r)


def case_unknown():
    # no rule for this domain, nor for this descriptor: OK with no limit
    for domain, d in (("nodomain", desc(("remote_address", "x"))), ("edge", desc(("nokey", "x")))):
        r = ask(domain, d)
        expect(r.overall_code == Code.OK and len(r.statuses) == 1, "%s: %s" % (domain, r))
        expect(r.statuses[0].code == Code.OK and not r.statuses[0].HasField("current_limit"),
               "no limit: %s" % r)


def case_all_or_nothing():
    # edge.wide allows 10, edge.narrow 1 (per hour): the second request is refused by narrow
    # and charges wide nothing
    r = ask("edge", desc(("wide", "k")), desc(("narrow", "k")))
    expect(r.overall_code == Code.OK, "first: %s" % r)
    r = ask("edge", desc(("wide", "k")), desc(("narrow", "k")))
    expect(r.overall_code == Code.OVER_LIMIT, "second: %s" % r)
    expect([s.code for s in r.statuses] == [Code.OK, Code.OVER_LIMIT], "statuses: %s" % r)
    r = ask("edge", desc(("wide", "k")))
    expect(r.statuses[0].limit_remaining == 8, "wide charged once before, once now: %s" % r)


def case_hits():
    # edge.bulk allows 10 an hour: the request's hits_addend is every descriptor's cost, a
    # descriptor's own replaces it, and a cost over what is left is refused whole
    r = ask("edge", desc(("bulk", "a")), hits=4)
    expect(r.statuses[0].limit_remaining == 6, "hits_addend 4: %s" % r)
    r = ask("edge", desc(("bulk", "a"), hits=5), hits=4)
    expect(r.statuses[0].limit_remaining == 1, "own hits_addend 5: %s" % r)
    r = ask("edge", desc(("bulk", "a"), hits=2))
    expect(r.overall_code == Code.OVER_LIMIT, "2 over 1 left: %s" % r)
    r = ask("edge", desc(("bulk", "a"), hits=0))
    expect(r.overall_code == Code.OK and r.statuses[0].limit_remaining == 1, "peek: %s" % r)
    r = ask("edge", desc(("bulk", "b"), hits=11))
    expect(r.overall_code == Code.OVER_LIMIT, "never admissible: %s" % r)


def case_key_override():
    # a rule's override for one list of values (looked up in the config store, so the answer
    # may come after the batch that read the call, with the memory store too)
    login = desc(("authenticated", "false"), ("path", "/login"))
    r = ask("edge", login)
    expect(r.overall_code == Code.OK and r.statuses[0].current_limit.requests_per_unit == 1,
           "the override's limit: %s" % r)
    r = ask("edge", login)
    expect(r.overall_code == Code.OVER_LIMIT, "the override's second: %s" % r)
    r = ask("edge", desc(("authenticated", "false"), ("path", "/home")))
    expect(r.overall_code == Code.OK and r.statuses[0].limit_remaining == 2,
           "other values have the rule's limit: %s" % r)


def case_headers():
    # run against a server with --grpc-ratelimit-headers: the RateLimit fields of the status
    # with the fewest units left
    r = ask("edge", desc(("wide", "h")), desc(("remote_address", "10.8.8.8")), desc(("x", "y")))
    got = {h.key: h.value for h in r.response_headers_to_add}
    reset_s = r.statuses[1].duration_until_reset.seconds + \
        (1 if r.statuses[1].duration_until_reset.nanos else 0)
    expect(got.get("ratelimit-policy") == '"edge.remote_address";q=3;w=60',
           "policy: %s" % got)
    expect(got.get("ratelimit") == '"edge.remote_address";r=2;t=%d' % reset_s,
           "limit: %s (reset %d s)" % (got, reset_s))
    r = ask("edge", desc(("x", "y")))
    expect(len(r.response_headers_to_add) == 0, "no limit, no headers: %s" % r)


def case_never_beside():
    # a cost its rule can never admit answers the whole before the other descriptors are
    # looked at: OVER_LIMIT, the other's status OK with no limit, nothing charged
    r = ask("edge", desc(("wide", "n")), desc(("bulk", "n"), hits=11))
    expect(r.overall_code == Code.OVER_LIMIT, "never admissible: %s" % r)
    expect([s.code for s in r.statuses] == [Code.OK, Code.OVER_LIMIT], "statuses: %s" % r)
    r = ask("edge", desc(("wide", "n")))
    expect(r.statuses[0].limit_remaining == 9, "wide charged only now: %s" % r)


def case_empty_value():
    # an empty value is a key of its own (the empty key)
    for want in (2, 1):
        r = ask("edge", desc(("remote_address", "")))
        expect(r.overall_code == Code.OK and r.statuses[0].limit_remaining == want,
               "empty value: %s" % r)


def case_override():
    # a descriptor's own limit (2 an hour) replaces the rule's (3 a minute), counted apart from
    # it, in a domain some rule stands for (as envoyproxy/ratelimit: in a configured domain)
    domain = "edge"
    for want in (1, 0):
        r = ask(domain, desc(("remote_address", "10.5.5.5"), limit=(2, Unit.HOUR)))
        s = r.statuses[0]
        expect(r.overall_code == Code.OK and s.limit_remaining == want, "%s: %s" % (domain, r))
        expect(s.current_limit.requests_per_unit == 2 and s.current_limit.unit == Unit.HOUR
               and s.current_limit.name == "",
               "the override's limit, unnamed as envoyproxy/ratelimit's: %s" % r)
    r = ask(domain, desc(("remote_address", "10.5.5.5"), limit=(2, Unit.HOUR)))
    expect(r.overall_code == Code.OVER_LIMIT, "%s: the third is over: %s" % (domain, r))
    # a domain no rule stands for has no limits, asked for or not
    for _ in range(3):
        r = ask("nodomain", desc(("remote_address", "10.5.5.5"), limit=(2, Unit.HOUR)))
        expect(r.overall_code == Code.OK and not r.statuses[0].HasField("current_limit"),
               "nodomain: no limit: %s" % r)
    r = ask("edge", desc(("remote_address", "10.5.5.5")))
    s = r.statuses[0]
    expect(s.limit_remaining == 2 and s.current_limit.requests_per_unit == 3,
           "the rule's count is its own: %s" % r)
    expect_status(lambda: ask("edge", desc(("remote_address", "x"), limit=(0, Unit.HOUR))),
                  grpc.StatusCode.INVALID_ARGUMENT, "requests_per_unit is 0")


def case_shadow():
    # edge.dry allows 1 an hour in shadow mode: decided and counted, always allowed
    for _ in range(3):
        r = ask("edge", desc(("dry", "k")))
        expect(r.overall_code == Code.OK, "shadow: %s" % r)


def case_errors():
    expect_status(lambda: ask("", desc(("remote_address", "x"))),
                  grpc.StatusCode.INVALID_ARGUMENT, "domain is empty")
    expect_status(lambda: ask("edge"), grpc.StatusCode.INVALID_ARGUMENT,
                  "0 descriptors: a request carries 1 to 64")
    expect_status(lambda: ask("edge", desc(("", "x"))), grpc.StatusCode.INVALID_ARGUMENT,
                  "descriptors[0].entries[0]: key is empty")
    expect_status(lambda: raw_call("/%s/ShouldRateLimit" % RLS, b"\x0a\x10ab"),
                  grpc.StatusCode.INVALID_ARGUMENT, "malformed RateLimitRequest")
    expect_status(lambda: raw_call("/%s/Other" % RLS, b""), grpc.StatusCode.UNIMPLEMENTED,
                  "unknown method '/%s/Other'" % RLS)
    expect_status(lambda: raw_call("/grpc.health.v1.Health/Watch", b""),
                  grpc.StatusCode.UNIMPLEMENTED)
    # the server runs with --max-request-size 2k
    expect_status(lambda: ask("edge", desc(("remote_address", "x" * 4000))),
                  grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than the largest accepted")
    r = ask("edge", desc(("remote_address", "10.9.9.9")))
    expect(r.overall_code == Code.OK, "still served after the errors: %s" % r)


def read_until_closed(s, limit_s):
    """Reads s until the server closes it (True) or limit_s passes (False)."""
    s.settimeout(0.2)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if s.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except ConnectionResetError:
            return True
    return False


def case_misuse():
    # not HTTP/2 at all, and a broken frame after a good preface: each closes that connection,
    # and the client's own connection goes on being served
    for name, data in (("HTTP/1.1", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                       ("bad frame", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                        b"\x00\x00\x03\x04\x00\x00\x00\x00\x00abc")):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT_S)
        s.sendall(data)
        expect(read_until_closed(s, TIMEOUT_S), "%s: the connection stays open" % name)
        s.close()
    r = health.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S)
    expect(r.status == health_pb2.HealthCheckResponse.SERVING, "served after misuse: %s" % r)


# ---- HTTP/2 by hand: frames a client library would never send ------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(ftype, flags, stream, payload=b""):
    n = len(payload)
    return bytes([n >> 16, (n >> 8) & 255, n & 255, ftype, flags]) + \
        stream.to_bytes(4, "big") + payload


def hpack_int(value, prefix_bits, first):
    """HPACK's integer: `first` holds the bits above the prefix."""
    top = (1 << prefix_bits) - 1
    if value < top:
        return bytes([first | value])
    out, value = [first | top], value - top
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    return bytes(out + [value])


def literal(name, value, huffman_a=0):
    """A header field without indexing, new name; huffman_a > 0: the value is that many 'a's,
    Huffman-coded ('a' is the 5-bit code 00011: eight of them are 5 bytes)."""
    assert huffman_a % 8 == 0
    head = b"\x00" + hpack_int(len(name), 7, 0) + name
    if huffman_a:
        coded = bytes([0x18, 0xC6, 0x31, 0x8C, 0x63]) * (huffman_a // 8)
        return head + hpack_int(len(coded), 7, 0x80) + coded
    return head + hpack_int(len(value), 7, 0) + value


def request_block(path=b"/grpc.health.v1.Health/Check", extra=b""):
    return (literal(b":method", b"POST") + literal(b":scheme", b"http") +
            literal(b":path", path) + literal(b":authority", b"x") +
            literal(b"content-type", b"application/grpc") + literal(b"te", b"trailers") + extra)


def read_frames(s, until, limit_s):
    """Reads frames until until(frames) is true or the connection ends; returns (frames, open)."""
    s.settimeout(0.2)
    deadline, data, frames = time.monotonic() + limit_s, b"", []
    while time.monotonic() < deadline and not until(frames):
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return frames, False
        if chunk == b"":
            return frames, False
        data += chunk
        while len(data) >= 9 and len(data) >= 9 + int.from_bytes(data[:3], "big"):
            n = int.from_bytes(data[:3], "big")
            frames.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF,
                           data[9:9 + n]))
            data = data[9 + n:]
    return frames, True


def has(ftype, flags=None, stream=None):
    return lambda frames: any(f[0] == ftype and (flags is None or f[1] & flags) and
                              (stream is None or f[2] == stream) for f in frames)


def h2_connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT_S)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0))
    return s


def alive(s):
    """The connection still answers a PING."""
    s.sendall(frame(PING, 0, 0, b"12345678"))
    frames, is_open = read_frames(s, has(PING, ACK), TIMEOUT_S)
    return is_open and has(PING, ACK)(frames)


def case_h2_abuse():
    # a header list over 16 KiB (20000 bytes once decoded): that stream is reset, the
    # connection goes on
    s = h2_connect()
    s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                    request_block(extra=literal(b"x-big", None, huffman_a=20000))))
    frames, is_open = read_frames(s, has(RST_STREAM, stream=1), TIMEOUT_S)
    expect(has(RST_STREAM, stream=1)(frames), "huge headers: stream 1 not reset: %s" %
           [f[:3] for f in frames])
    expect(is_open and alive(s), "huge headers: the connection was closed")
    s.close()
    # a flood of streams left open: those past the 100 advertised are refused, the connection
    # goes on
    s = h2_connect()
    s.sendall(b"".join(frame(HEADERS, END_HEADERS, 2 * i + 1, request_block())
                       for i in range(150)))
    frames, is_open = read_frames(s, has(RST_STREAM, stream=2 * 149 + 1), TIMEOUT_S)
    refused = [f for f in frames if f[0] == RST_STREAM]
    expect(len(refused) >= 50, "stream flood: %d streams refused, want 50" % len(refused))
    expect(is_open and alive(s), "stream flood: the connection was closed")
    s.close()
    # bodies held open on three streams: past twice --max-request-size (2k) together, the
    # stream that would go over is answered (RESOURCE_EXHAUSTED), the others wait their end
    s = h2_connect()
    part = b"\x00\x00\x00\x07\xd0" + b"x" * 1495  # a 2000-byte message begun
    block = request_block(path=("/%s/ShouldRateLimit" % RLS).encode())
    s.sendall(b"".join(frame(HEADERS, END_HEADERS, sid, block) + frame(DATA, 0, sid, part)
                       for sid in (1, 3, 5)))
    frames, is_open = read_frames(s, has(HEADERS, END_STREAM, stream=5), TIMEOUT_S)
    answered = sorted(f[2] for f in frames if f[0] == HEADERS)
    expect(is_open and answered == [5], "bodies over the connection's cap: answered %s" % answered)
    expect(alive(s), "bodies over the cap: the connection was closed")
    s.close()
    # a window update past 2^31 - 1: a flow-control error, that connection is closed
    s = h2_connect()
    s.sendall(frame(WINDOW_UPDATE, 0, 0, (0x7FFFFFFF).to_bytes(4, "big")))
    frames, is_open = read_frames(s, lambda f: False, TIMEOUT_S)
    expect(not is_open and has(GOAWAY)(frames), "window overflow: no GOAWAY and close")
    s.close()
    r = health.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S)
    expect(r.status == health_pb2.HealthCheckResponse.SERVING, "served after abuse: %s" % r)


def case_full():
    # run against a server with --max-clients 1: while one connection is open, the next is
    # told so in HTTP/2 (the server's SETTINGS, then a GOAWAY saying why) and closed
    held = None
    for _ in range(20):  # a probe's connection may not be closed on the server's side yet
        held = h2_connect()
        try:
            if alive(held):
                break
        except OSError:
            pass
        held.close()
        held = None
    expect(held is not None, "no connection served")
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT_S)
    frames, is_open = read_frames(s, lambda f: False, TIMEOUT_S)
    goaway = [f for f in frames if f[0] == GOAWAY]
    expect(not is_open and frames and frames[0][0] == SETTINGS and len(goaway) == 1,
           "refused: %s" % [f[:3] for f in frames])
    expect(goaway[0][3][8:] == b"too many clients", "GOAWAY's debug data: %r" % goaway[0][3])
    s.close()
    held.close()


def rls_call_frames(address):
    """A ShouldRateLimit call by hand: its framed body (one descriptor, remote_address=address,
    in domain edge) and its header block."""
    req = rls_pb2.RateLimitRequest(domain="edge", descriptors=[desc(("remote_address", address))])
    msg = req.SerializeToString()
    body = b"\x00" + len(msg).to_bytes(4, "big") + msg
    return body, request_block(path=("/%s/ShouldRateLimit" % RLS).encode())


def case_abandon():
    # run while the request store cannot answer yet: stream 1 is reset by the client while its
    # decision waits, then the connection closes with stream 3's waiting; the answers that come
    # later find no one to answer (and under ASan, nothing leaks or is used after it is freed)
    body, block = rls_call_frames("10.7.7.7")
    s = h2_connect()
    s.sendall(frame(HEADERS, END_HEADERS, 1, block) + frame(DATA, END_STREAM, 1, body) +
              frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")) +
              frame(HEADERS, END_HEADERS, 3, block) + frame(DATA, END_STREAM, 3, body))
    s.close()


def case_stop_answers():
    # sluiced (SLUICED_PID) is stopped while a call waits on the request store (paused by the
    # script): it says GOAWAY with no error, naming that call's stream as the last it answers,
    # and still answers it before closing
    body, block = rls_call_frames("10.8.8.8")
    s = h2_connect()
    # stream 1 whole; stream 3 with half its body, which will not come: not answered, and the
    # GOAWAY names stream 1 as the last, so the client knows 3 was not processed
    s.sendall(frame(HEADERS, END_HEADERS, 1, block) + frame(DATA, END_STREAM, 1, body) +
              frame(HEADERS, END_HEADERS, 3, block) + frame(DATA, 0, 3, body[:6]) +
              frame(PING, 0, 0, b"12345678"))
    frames, is_open = read_frames(s, has(PING, ACK), TIMEOUT_S)
    expect(is_open and has(PING, ACK)(frames), "the calls were read (the PING behind answered)")
    os.kill(int(os.environ["SLUICED_PID"]), signal.SIGTERM)
    frames, _ = read_frames(s, lambda fs: has(HEADERS, END_STREAM, 1)(fs), 10)
    goaways = [f for f in frames if f[0] == GOAWAY]
    expect(goaways and int.from_bytes(goaways[0][3][:4], "big") == 1 and
           int.from_bytes(goaways[0][3][4:8], "big") == 0,
           "a GOAWAY (NO_ERROR, last stream 1) first: %s" % goaways)
    expect(has(DATA, None, 1)(frames) and has(HEADERS, END_STREAM, 1)(frames),
           "stream 1 answered, message and trailers: %s" % [(f[0], f[1], f[2]) for f in frames])
    expect(frames.index(goaways[0]) < min(i for i, f in enumerate(frames) if f[2] == 1),
           "the GOAWAY before the answer")
    s.close()


def case_held_cap():
    # (the server's --max-input-buffers is 300k) eight connections each hold a 60 KB body of a
    # call not yet ended: counted against the cap, so the largest are closed (a GOAWAY saying
    # why) until the rest fit, and a new client is served
    _, block = rls_call_frames("x")
    conns = []
    for i in range(8):
        s = h2_connect()
        s.sendall(frame(HEADERS, END_HEADERS, 1, block) +
                  b"".join(frame(DATA, 0, 1, b"\0" * 15000) for _ in range(4)) +
                  frame(PING, 0, 0, b"12345678"))
        conns.append(s)
    # each connection's PING answered (or the connection closed); then, the server's one loop
    # having enforced the cap after each read, a second PING tells the closed from the served
    goaways = [[] for _ in conns]
    for rnd in range(2):
        for i, s in enumerate(conns):
            if goaways[i]:
                continue
            if rnd == 1:
                s.sendall(frame(PING, 0, 0, b"87654321"))
            frames, _ = read_frames(s, lambda fs: has(PING, ACK)(fs) or has(GOAWAY)(fs),
                                    TIMEOUT_S)
            goaways[i] = [f[3][8:] for f in frames if f[0] == GOAWAY]
    closed = sum(1 for g in goaways if g)
    for g in goaways:
        expect(not g or b"max-input-buffers" in g[0], "the GOAWAY says why: %r" % g)
    expect(2 <= closed <= 7, "the largest were closed, not all: %d of 8" % closed)
    # while the others still hold theirs: counted, and within the cap
    url = "http://127.0.0.1:%s/metrics" % os.environ["SLUICE_HTTP_PORT"]
    text = urllib.request.urlopen(url, timeout=TIMEOUT_S).read().decode()
    held = [int(float(line.split()[1])) for line in text.splitlines()
            if line.startswith("sluice_input_buffers_bytes ")][0]
    expect((8 - closed) * 60000 <= held <= 300 * 1024,
           "%d bytes held by %d connections, cap 300k" % (held, 8 - closed))
    r = health.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S)
    expect(r.status == health_pb2.HealthCheckResponse.SERVING, "a new client is served")
    for s in conns:
        s.close()


def case_abandoned_charged():
    # after case_abandon: both abandoned calls were decided (a fixed window of 3)
    r = ask("edge", desc(("remote_address", "10.7.7.7")))
    expect(r.overall_code == Code.OK and r.statuses[0].limit_remaining == 0,
           "two abandoned calls charged, this one the third: %s" % r)



# ---- envoyproxy/ratelimit configurations (test_grpc_envoy.sh's edge.yaml and api.yaml) --------

def status_of(domain, *pairs, hits=None):
    r = ask(domain, desc(*pairs, hits=hits))
    return r.overall_code, r.statuses[0]


def no_limit(s):
    return s.code == Code.OK and not s.HasField("current_limit")


def case_envoy_nested():
    # tenant=acme, then any user: 2 an hour per (tenant, user); no limit for other tenants or
    # for the tenant alone (its node has no limit of its own)
    for want in (1, 0):
        code, s = status_of("edge", ("tenant", "acme"), ("user", "bob"))
        expect(code == Code.OK and s.limit_remaining == want, "bob: %s" % s)
        expect(s.current_limit.requests_per_unit == 2 and s.current_limit.unit == Unit.HOUR
               and s.current_limit.name == "", "the nested limit, with no name: %s" % s)
    code, s = status_of("edge", ("tenant", "acme"), ("user", "bob"))
    expect(code == Code.OVER_LIMIT, "bob's third: %s" % s)
    code, s = status_of("edge", ("tenant", "acme"), ("user", "eve"))
    expect(code == Code.OK and s.limit_remaining == 1, "eve counts apart: %s" % s)
    for pairs in ((("tenant", "other"), ("user", "bob")), (("tenant", "acme"),)):
        code, s = status_of("edge", *pairs)
        expect(code == Code.OK and no_limit(s), "%s: no limit: %s" % (pairs, s))


def case_envoy_values():
    # a value before a prefix before any value; a value with nothing configured ends the lookup
    code, s = status_of("edge", ("path", "/login"))
    expect(s.current_limit.requests_per_unit == 2 and s.current_limit.unit == Unit.MINUTE and
           s.current_limit.name == "login" and s.limit_remaining == 1, "/login: %s" % s)
    code, s = status_of("edge", ("path", "/api/v1"))
    expect(s.current_limit.requests_per_unit == 4 and s.current_limit.unit == Unit.HOUR and
           s.limit_remaining == 3, "/api/v1: %s" % s)
    code, s = status_of("edge", ("path", "/other"), hits=3)
    expect(s.current_limit.requests_per_unit == 5 and s.limit_remaining == 2,
           "/other with hits 3: %s" % s)
    for _ in range(8):
        code, s = status_of("edge", ("path", "/health"))
        expect(code == Code.OK and not s.HasField("current_limit"), "/health: %s" % s)


def case_envoy_unlimited():
    for _ in range(5):
        code, s = status_of("edge", ("tenant", "acme"), ("user", "admin"))
        expect(code == Code.OK and s.limit_remaining == 4294967295 and
               not s.HasField("current_limit"), "admin: %s" % s)


def case_envoy_replaces():
    # free_plan allows 1 an hour; a request that also carries promo (which replaces free_plan)
    # is not limited by free_plan, and is not charged to it
    r = ask("edge", desc(("plan", "free")))
    expect(r.overall_code == Code.OK, "the plan's first: %s" % r)
    for _ in range(3):
        r = ask("edge", desc(("plan", "free")), desc(("promo", "spring")))
        expect(r.overall_code == Code.OK and no_limit(r.statuses[0]) and
               r.statuses[1].current_limit.requests_per_unit == 100, "replaced: %s" % r)
    r = ask("edge", desc(("plan", "free")))
    expect(r.overall_code == Code.OVER_LIMIT, "the plan alone is over: %s" % r)


def case_envoy_replaces_chain():
    # A replaces B, B replaces C (1 an hour): whatever the order of the descriptors, only A
    # applies, and C is not charged; a descriptor asking its own limit replaces nothing
    for order in (("rb", "rc", "ra"), ("rc", "rb", "ra"), ("ra", "rc", "rb")):
        r = ask("edge", *[desc((k, "v")) for k in order])
        names = [st.current_limit.name if st.HasField("current_limit") else None
                 for st in r.statuses]
        want = [("A" if k == "ra" else None) for k in order]
        expect(r.overall_code == Code.OK and names == want, "%s: %s" % (order, names))
    code, s = status_of("edge", ("rc", "v"))
    expect(code == Code.OK and s.limit_remaining == 0, "C charged only now: %s" % s)
    r = ask("edge", desc(("ra", "w"), limit=(5, Unit.HOUR)), desc(("rb", "w")))
    expect(r.statuses[0].current_limit.requests_per_unit == 5 and
           r.statuses[1].current_limit.name == "B", "an own limit replaces nothing: %s" % r)


def case_envoy_shadow():
    for _ in range(3):
        code, s = status_of("edge", ("dry", "k"))
        expect(code == Code.OK, "shadow: %s" % s)


def case_envoy_second_file():
    for want in (1, 0):
        code, s = status_of("api", ("client_id", "c1"))
        expect(code == Code.OK and s.limit_remaining == want, "api: %s" % s)
    code, s = status_of("api", ("client_id", "c1"))
    expect(code == Code.OVER_LIMIT, "api's third: %s" % s)


def limit_of(domain, *pairs):
    """The requests_per_unit a descriptor is given now (0: none); it charges one unit, so callers
    use a key no one else does."""
    code, s = status_of(domain, *pairs)
    return s.current_limit.requests_per_unit if s.HasField("current_limit") else 0


def case_envoy_limit_3():
    expect(limit_of("edge", ("remote_address", "probe3")) == 3, "remote_address: 3 a minute")


def case_envoy_limit_10():
    expect(limit_of("edge", ("remote_address", "probe10")) == 10, "remote_address: 10 a minute")


def case_envoy_api_rule():
    # a rule made over RESP with a descriptor: country=xx, 1 an hour
    code, s = status_of("edge", ("country", "xx"))
    expect(code == Code.OK and s.current_limit.requests_per_unit == 1, "country: %s" % s)
    code, s = status_of("edge", ("country", "xx"))
    expect(code == Code.OVER_LIMIT, "country's second: %s" % s)


def case_envoy_imported():
    # domains imported over RESP, HTTP and the CLI: one a minute each
    for domain in ("viaresp", "viahttp", "viacli"):
        code, s = status_of(domain, ("k", "v"))
        expect(code == Code.OK and s.current_limit.requests_per_unit == 1, "%s: %s" % (domain, s))
        code, s = status_of(domain, ("k", "v"))
        expect(code == Code.OVER_LIMIT, "%s's second: %s" % (domain, s))


def case_envoy_quota():
    # envoyproxy/ratelimit's quota.sh, with its example's services: s1 1 an hour, s2 2, both in
    # quota mode. A request is refused only when every quota descriptor is over; a quota
    # descriptor over its limit says OVER_LIMIT and is not charged; those with room are
    def codes(r):
        return [Code.Name(r.overall_code)] + [Code.Name(s.code) for s in r.statuses]

    def remaining(r):
        return [s.limit_remaining for s in r.statuses]

    both = (desc(("service", "s1")), desc(("service", "s2")))
    r = ask("edge", *both)
    expect(codes(r) == ["OK", "OK", "OK"] and remaining(r) == [0, 1], "first: %s" % r)
    r = ask("edge", *both)
    expect(codes(r) == ["OK", "OVER_LIMIT", "OK"] and remaining(r) == [0, 0], "second: %s" % r)
    r = ask("edge", *both)
    expect(codes(r) == ["OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT"], "third: %s" % r)
    r = ask("edge", desc(("service", "s1")))
    expect(codes(r) == ["OVER_LIMIT", "OVER_LIMIT"], "one quota descriptor, over: %s" % r)
    # beside a descriptor not in quota mode (qplain, 2 an hour): every quota descriptor over
    # refuses the request, and qplain is not charged by it
    r = ask("edge", desc(("qplain", "a")), desc(("service", "s3")))
    expect(codes(r) == ["OK", "OK", "OK"] and remaining(r) == [1, 0], "qplain and s3: %s" % r)
    r = ask("edge", desc(("qplain", "a")), desc(("service", "s3")))
    expect(codes(r)[0] == "OVER_LIMIT" and codes(r)[2] == "OVER_LIMIT", "s3 over: %s" % r)
    r = ask("edge", desc(("qplain", "a")))
    expect(codes(r) == ["OK", "OK"] and remaining(r) == [0], "qplain charged once: %s" % r)
    # qplain over refuses the request, whatever room a quota descriptor has, and s4 is not charged
    r = ask("edge", desc(("qplain", "a")), desc(("service", "s4")))
    expect(codes(r) == ["OVER_LIMIT", "OVER_LIMIT", "OK"], "qplain over: %s" % r)
    r = ask("edge", desc(("service", "s4")), hits=2)
    expect(codes(r) == ["OK", "OK"] and remaining(r) == [3], "s4 uncharged till now: %s" % r)


def case_envoy_quota_global():
    # every descriptor in quota mode (QUOTA_MODE=true): qplain (2 an hour) over its limit refuses
    # a request only alone; beside a descriptor no limit applies to, never
    for want in ("OK", "OK", "OVER_LIMIT"):
        r = ask("edge", desc(("qplain", "g")))
        expect(Code.Name(r.overall_code) == want, "qplain alone, %s: %s" % (want, r))
    for _ in range(2):
        r = ask("edge", desc(("qplain", "g")), desc(("nolimit", "x")))
        expect(r.overall_code == Code.OK and r.statuses[0].code == Code.OVER_LIMIT,
               "beside a descriptor with no limit: %s" % r)
    r = ask("edge", desc(("qplain", "h")), desc(("qplain", "g")))
    expect(r.overall_code == Code.OK and r.statuses[0].limit_remaining == 1 and
           r.statuses[1].code == Code.OVER_LIMIT, "h has room, g has not: %s" % r)


def case_envoy_week():
    # unit: week, Envoy's WEEK: one a week, reset within 7 days
    r = ask("edge", desc(("weekly", "x")))
    s = r.statuses[0]
    expect(r.overall_code == Code.OK and s.current_limit.unit == Unit.WEEK and
           0 < s.duration_until_reset.seconds <= 7 * 86400, "first: %s" % r)
    r = ask("edge", desc(("weekly", "x")))
    expect(r.overall_code == Code.OVER_LIMIT, "second: %s" % r)


CASES = {
    "health": case_health, "limit": case_limit, "unknown": case_unknown,
    "all_or_nothing": case_all_or_nothing, "hits": case_hits, "key_override": case_key_override, "headers": case_headers,
    "never_beside": case_never_beside,
    "empty_value": case_empty_value, "override": case_override,
    "shadow": case_shadow,
    "errors": case_errors, "misuse": case_misuse, "h2_abuse": case_h2_abuse,
    "abandon": case_abandon, "full": case_full, "abandoned_charged": case_abandoned_charged,
    "stop_answers": case_stop_answers, "held_cap": case_held_cap,
    "envoy_nested": case_envoy_nested, "envoy_values": case_envoy_values,
    "envoy_unlimited": case_envoy_unlimited, "envoy_replaces": case_envoy_replaces,
    "envoy_replaces_chain": case_envoy_replaces_chain,
    "envoy_shadow": case_envoy_shadow, "envoy_second_file": case_envoy_second_file,
    "envoy_limit_3": case_envoy_limit_3, "envoy_limit_10": case_envoy_limit_10,
    "envoy_api_rule": case_envoy_api_rule, "envoy_imported": case_envoy_imported,
    "envoy_quota": case_envoy_quota, "envoy_week": case_envoy_week,
    "envoy_quota_global": case_envoy_quota_global,
}


def main():
    fails = 0
    for name in sys.argv[3:]:
        try:
            CASES[name]()
            print("ok", name)
        except (AssertionError, grpc.RpcError) as e:
            print("FAIL %s: %s" % (name, e))
            fails += 1
    return min(fails, 100)


if __name__ == "__main__":
    sys.exit(main())
