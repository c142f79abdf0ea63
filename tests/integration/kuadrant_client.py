"""kuadrant_client.py - test_grpc_kuadrant.sh's driver: limitador's Kuadrant extension
(kuadrant.service.ratelimit.v1: CheckRateLimit, Report) called by a real gRPC client (grpcio,
stubs generated from sluice's .proto files at test time). Each case prints "ok NAME" or
"FAIL NAME: why"; the exit status is the number of failures.

Usage: kuadrant_client.py PORT STUBS_DIR PREFIX CASE..   (PREFIX keeps the keys of one run apart
from another's on the same store)
"""
import os
import subprocess
import sys
import time

import grpc

sys.path.insert(0, sys.argv[2])
import kuadrantrls_pb2_grpc  # noqa: E402 (generated at test time)
import rls_pb2  # noqa: E402

TARGET = "127.0.0.1:%d" % int(sys.argv[1])
PREFIX = sys.argv[3]
TIMEOUT_S = 5
KUADRANT = "kuadrant.service.ratelimit.v1.RateLimitService"
Code = rls_pb2.RateLimitResponse.Code

channel = grpc.insecure_channel(TARGET)
stub = kuadrantrls_pb2_grpc.RateLimitServiceStub(channel)


def desc(*pairs, hits=None):
    d = rls_pb2.RateLimitDescriptor(
        entries=[rls_pb2.RateLimitDescriptor.Entry(key=k, value=PREFIX + v) for k, v in pairs])
    if hits is not None:
        d.hits_addend.value = hits
    return d


def req(domain, *descs, hits=0):
    return rls_pb2.RateLimitRequest(domain=domain, descriptors=list(descs), hits_addend=hits)


def check(domain, *descs, hits=0):
    return stub.CheckRateLimit(req(domain, *descs, hits=hits), timeout=TIMEOUT_S)


def report(domain, *descs, hits=0, timeout_s=TIMEOUT_S):
    return stub.Report(req(domain, *descs, hits=hits), timeout=timeout_s)


def expect(cond, why):
    if not cond:
        raise AssertionError(why)


def expect_status(fn, code, text):
    try:
        fn()
    except grpc.RpcError as e:
        expect(e.code() == code and text in e.details(),
               "status %s %r, want %s %r" % (e.code(), e.details(), code, text))
        return
    raise AssertionError("no error, want %s" % code)


def remaining(r, i=0):
    return r.statuses[i].limit_remaining


# ---- cases ----------------------------------------------------------------------------------

def case_check_counts_nothing():
    # llm.user: fixed_window, 100 tokens an hour; a check asks for room and takes none, whatever
    # its hits_addend says (limitador's check ignores it)
    for hits in (0, 1, 50, 1000):
        r = check("llm", desc(("user", "alice")), hits=hits)
        expect(r.overall_code == Code.OK and remaining(r) == 100, "hits %d: %s" % (hits, r))
        expect(r.statuses[0].current_limit.requests_per_unit == 100, "limit: %s" % r)


def case_report_then_check():
    # the real cost is reported after the response; the next check sees it
    r = report("llm", desc(("user", "bob")), hits=60)
    expect(r.overall_code == Code.OK and len(r.statuses) == 0, "report: %s" % r)
    r = check("llm", desc(("user", "bob")))
    expect(r.overall_code == Code.OK and remaining(r) == 40, "after 60: %s" % r)
    # a report past the limit is counted (the key owes 10) and the check refuses
    expect(report("llm", desc(("user", "bob")), hits=50).overall_code == Code.OK, "report 50")
    r = check("llm", desc(("user", "bob")))
    expect(r.overall_code == Code.OVER_LIMIT and r.statuses[0].code == Code.OVER_LIMIT
           and remaining(r) == 0, "owing: %s" % r)
    # another user has their own count
    r = check("llm", desc(("user", "carol")))
    expect(r.overall_code == Code.OK and remaining(r) == 100, "carol: %s" % r)


def case_room_for_one():
    # llm.tiny: sliding_log, 1 an hour. A peek is allowed with no unit left; a check is not:
    # it asks for room for one more hit, as limitador's does
    expect(check("llm", desc(("tiny", "t"))).overall_code == Code.OK, "fresh")
    expect(report("llm", desc(("tiny", "t"))).overall_code == Code.OK, "report of 1 (hits 0)")
    r = check("llm", desc(("tiny", "t")))
    expect(r.overall_code == Code.OVER_LIMIT and remaining(r) == 0, "full: %s" % r)


def case_descriptors():
    # each descriptor's status on its own; one without a rule has no limit; a descriptor's own
    # hits_addend takes the request's place in a report
    expect(report("llm", desc(("user", "dan"), hits=30), desc(("user", "erin")),
                  desc(("nokey", "x")), hits=7).overall_code == Code.OK, "report")
    r = check("llm", desc(("user", "dan")), desc(("user", "erin")), desc(("nokey", "x")))
    expect(r.overall_code == Code.OK and [remaining(r, i) for i in range(2)] == [70, 93]
           and not r.statuses[2].HasField("current_limit"), "statuses: %s" % r)
    r = check("llm", desc(("tiny", "t")), desc(("user", "dan")))
    expect(r.overall_code == Code.OVER_LIMIT and r.statuses[0].code == Code.OVER_LIMIT
           and r.statuses[1].code == Code.OK and remaining(r, 1) == 70, "one over: %s" % r)


def case_shadow():
    # llm.dry: 1 an hour in shadow mode: counted, never refused
    report("llm", desc(("dry", "d")), hits=2)  # owes 1, its max_debt
    r = check("llm", desc(("dry", "d")))
    expect(r.overall_code == Code.OK, "shadow: %s" % r)


def case_debt_bound():
    # a report that would leave the key owing more than max_debt (the capacity, 100) is refused
    # and charges nothing
    expect_status(lambda: report("llm", desc(("user", "fay")), hits=201),
                  grpc.StatusCode.FAILED_PRECONDITION,
                  "descriptors[0]: the key would owe more than max_debt (100 units")
    r = check("llm", desc(("user", "fay")))
    expect(r.overall_code == Code.OK and remaining(r) == 100, "nothing charged: %s" % r)
    expect(report("llm", desc(("user", "fay")), hits=200).overall_code == Code.OK, "200 fits")
    expect(check("llm", desc(("user", "fay"))).overall_code == Code.OVER_LIMIT, "owing 100")


def case_health():
    # the health check knows the Kuadrant service by name
    import health_pb2, health_pb2_grpc  # noqa: E402 (generated at test time)
    h = health_pb2_grpc.HealthStub(channel)
    r = h.Check(health_pb2.HealthCheckRequest(service=KUADRANT), timeout=TIMEOUT_S)
    expect(r.status == health_pb2.HealthCheckResponse.SERVING, "%s: %s" % (KUADRANT, r))


def case_abandon_report():
    # Redis (port PAUSE_REDIS) paused for a second: the caller gives up on a report before it is
    # counted
    subprocess.run(["redis-cli", "-p", os.environ["PAUSE_REDIS"], "CLIENT", "PAUSE", "1000",
                    "ALL"], check=True, stdout=subprocess.DEVNULL, timeout=TIMEOUT_S)
    expect_status(lambda: report("llm", desc(("user", "gone")), hits=30, timeout_s=0.3),
                  grpc.StatusCode.DEADLINE_EXCEEDED, "")


def case_abandoned_counted():
    # once the store answers, the abandoned report is counted all the same (the stream it came
    # on is long gone); bounded: 50 checks 0.1 s apart
    for _ in range(50):
        r = check("llm", desc(("user", "gone")))
        if remaining(r) == 70:
            return
        time.sleep(0.1)
    raise AssertionError("the abandoned report was not counted: %s" % r)


def case_errors():
    for call in (check, report):
        expect_status(lambda: call("", desc(("user", "x"))), grpc.StatusCode.INVALID_ARGUMENT,
                      "domain is empty")
        expect_status(lambda: call("llm"), grpc.StatusCode.INVALID_ARGUMENT,
                      "0 descriptors: a request carries 1 to 64")
        expect_status(lambda: call("llm", desc(("", "x"))), grpc.StatusCode.INVALID_ARGUMENT,
                      "descriptors[0].entries[0]: key is empty")
    expect_status(lambda: report("llm", desc(("user", "x"), hits=2**63)),
                  grpc.StatusCode.INVALID_ARGUMENT, "descriptors[0]: hits_addend")
    raw = channel.unary_unary("/%s/Report" % KUADRANT, request_serializer=lambda b: b,
                              response_deserializer=lambda b: b)
    expect_status(lambda: raw(b"\x0a\x10ab", timeout=TIMEOUT_S),
                  grpc.StatusCode.INVALID_ARGUMENT, "malformed RateLimitRequest")
    other = channel.unary_unary("/%s/Other" % KUADRANT, request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
    expect_status(lambda: other(b"", timeout=TIMEOUT_S), grpc.StatusCode.UNIMPLEMENTED,
                  "/%s/CheckRateLimit, /%s/Report" % (KUADRANT, KUADRANT))
    # nothing the errors named was charged
    r = check("llm", desc(("user", "x")))
    expect(r.overall_code == Code.OK and remaining(r) == 100, "untouched: %s" % r)


CASES = {
    "check_counts_nothing": case_check_counts_nothing, "report_then_check": case_report_then_check,
    "room_for_one": case_room_for_one, "descriptors": case_descriptors, "shadow": case_shadow,
    "debt_bound": case_debt_bound, "errors": case_errors, "health": case_health,
    "abandon_report": case_abandon_report, "abandoned_counted": case_abandoned_counted,
}


def main():
    failures = 0
    for name in sys.argv[4:]:
        try:
            CASES[name]()
            print("ok %s" % name)
        except Exception as e:  # noqa: BLE001 (any failure is reported, then the next case)
            print("FAIL %s: %s" % (name, e))
            failures += 1
    sys.exit(min(failures, 100))


main()
