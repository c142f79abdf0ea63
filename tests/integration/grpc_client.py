"""grpc_client.py - test_grpc.sh's driver: a real gRPC client (grpcio, with stubs generated from
sluice's .proto files) against sluiced's gRPC port. Each case prints "ok NAME" or "FAIL NAME: why";
the exit status is the number of failures (at most 100).

Usage: grpc_client.py PORT STUBS_DIR CASE..   (cases: see CASES below; they run in the order given
and share the server's state, so the shell script says which to run against which server)
"""
import socket
import sys
import time

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

channel = grpc.insecure_channel(TARGET)
stub = rls_pb2_grpc.RateLimitServiceStub(channel)
health = health_pb2_grpc.HealthStub(channel)


def desc(*pairs, hits=None):
    d = rls_pb2.RateLimitDescriptor(
        entries=[rls_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in pairs])
    if hits is not None:
        d.hits_addend.value = hits
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
    for service in ("", RLS):
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


CASES = {
    "health": case_health, "limit": case_limit, "unknown": case_unknown,
    "all_or_nothing": case_all_or_nothing, "hits": case_hits, "shadow": case_shadow,
    "errors": case_errors, "misuse": case_misuse,
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
