"""envoy_upstream_cases.py - test_envoy_upstream_cases.sh's grpcio driver: the request and
expected-response cases of envoyproxy/ratelimit's own integration test
(test/integration/integration_test.go), asked of sluiced loaded with that test's configuration
files unchanged (tests/envoy_upstream/integration/). Each expected answer is written as upstream
writes it, whole (every status, code, limit and remaining count, and the limit's name: empty for
these files' unnamed limits; the duration until reset is taken from the answer, as upstream's
test takes it), with sluice's one documented difference: a request over one of its limits
charges none of its descriptors (upstream's answer with
STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true).

Usage: envoy_upstream_cases.py GRPC_PORT STUBS_DIR CASE..
Each case prints "ok NAME" or "FAIL NAME: why"; the exit status is the number of failures.
The node driver (tests/node/envoy_cases.js) asks the same cases through @grpc/grpc-js.
"""
import sys
import time

import grpc

sys.path.insert(0, sys.argv[2])
import rls_pb2  # noqa: E402 (generated at test time)
import rls_pb2_grpc  # noqa: E402

GRPC_PORT = int(sys.argv[1])
TIMEOUT_S = 5
R = rls_pb2.RateLimitResponse
OK, OVER = R.Code.Value("OK"), R.Code.Value("OVER_LIMIT")
SECOND, MINUTE, HOUR = (R.RateLimit.Unit.Value(u) for u in ("SECOND", "MINUTE", "HOUR"))
STUB = rls_pb2_grpc.RateLimitServiceStub(grpc.insecure_channel("127.0.0.1:%d" % GRPC_PORT))


def ask(domain, *descriptors):
    """descriptors: each a list of (key, value); hits_addend 1 as upstream's test sends"""
    req = rls_pb2.RateLimitRequest(domain=domain, hits_addend=1)
    for entries in descriptors:
        d = req.descriptors.add()
        for k, v in entries:
            d.entries.add(key=k, value=v)
    return STUB.ShouldRateLimit(req, timeout=TIMEOUT_S)


def status(code, rpu=None, unit=None, name=None, left=0, got=None):
    """upstream's newDescriptorStatus; the duration's seconds come from the answer got"""
    s = R.DescriptorStatus(code=code, limit_remaining=left)
    if rpu is not None:
        s.current_limit.CopyFrom(R.RateLimit(requests_per_unit=rpu, unit=unit, name=name))
        s.duration_until_reset.seconds = got.duration_until_reset.seconds
    return s


def expect(got, overall, *statuses):
    """None when got is exactly the response of overall and statuses (its durations' nanos
    dropped, as upstream compares only seconds)"""
    want = R(overall_code=overall, statuses=statuses)
    seen = R()
    seen.CopyFrom(got)
    for s in seen.statuses:
        if s.HasField("duration_until_reset"):
            s.duration_until_reset.nanos = 0
    return None if seen == want else "got %s want %s" % (seen, want)


def case_basic(suffix):
    """testBasicBaseConfig's first calls: a domain no file names, then basic's key1"""
    got = ask("foo", [("hello" + suffix, "world")])
    why = expect(got, OK, status(OK))
    if why:
        return "unknown domain: " + why
    got = ask("basic", [("key1" + suffix, "foo")])
    return expect(got, OK, status(OK, 50, SECOND, "", 49, got.statuses[0]))


def case_another(suffix):
    """25 calls on key2 (20 a minute), then 15 on key2 and key3 (10 an hour) together"""
    for i in range(25):
        got = ask("another", [("key2" + suffix, "one")])
        code, left = (OVER, 0) if i >= 20 else (OK, 20 - (i + 1))
        why = expect(got, code,
                     status(code, 20, MINUTE, "", left, got.statuses[0]))
        if why:
            return "one key, call %d: %s" % (i, why)
    for i in range(15):
        got = ask("another", [("key2" + suffix, "two")], [("key3" + suffix, "two")])
        code, left1, left2 = OK, 20 - (i + 1), 10 - (i + 1)
        if i >= 10:  # key3 is over: nothing is charged, key2 stays at 10 left
            code, left1, left2 = OVER, 10, 0
        why = expect(got, code,
                     status(OK, 20, MINUTE, "", left1, got.statuses[0]),
                     status(code, 10, HOUR, "", left2, got.statuses[1]))
        if why:
            return "two keys, call %d: %s" % (i, why)
    return None


def case_duration(suffix):
    """the same key twice, 2 s apart: less time until reset the second time (key4: a day)"""
    first = ask("another", [("key4" + suffix, "durTest")]).statuses[0].duration_until_reset
    time.sleep(2)
    second = ask("another", [("key4" + suffix, "durTest")]).statuses[0].duration_until_reset
    if second.seconds < first.seconds:
        return None
    if first.seconds < 3:  # the day ended between the two calls: a new window
        return None
    return "first %ds, then %ds" % (first.seconds, second.seconds)


def case_share_threshold():
    """files/* with share_threshold counts every value in one bucket; files_no_share/* apart"""
    dom = "share-threshold-test"
    for i in range(10):
        got = ask(dom, [("files", "files/a.pdf")])
        if got.overall_code not in (OK, OVER):
            return "call %d: %s" % (i, got)
    got = ask(dom, [("files", "files/b.csv")])
    why = expect(got, OVER, status(OVER, 10, HOUR, "", 0,
                                   got.statuses[0]))
    if why:
        return "files/b.csv: " + why
    for i in range(10):
        got = ask(dom, [("files_no_share", "files_no_share/%d" % i)])
        why = expect(got, OK, status(OK, 10, HOUR, "", 9, got.statuses[0]))
        if why:
            return "files_no_share/%d: %s" % (i, why)
    return None


def case_reload_absent():
    """before reload.yaml is in the directory: its domain is not limited"""
    return expect(ask("reload", [("block", "foo")]), OK, status(OK))


def case_reload_present():
    """after reload.yaml is copied in: key1 50 a second; block (0 a second) refuses"""
    got = ask("reload", [("key1", "foo")])
    why = expect(got, OK, status(OK, 50, SECOND, "", 49, got.statuses[0]))
    if why:
        return why
    got = ask("reload", [("block", "foo")])
    return expect(got, OVER, status(OVER, 0, SECOND, "", 0, got.statuses[0]))


def is_blocked():
    """for the script's polls: 0 while reload.yaml's block refuses"""
    return 0 if ask("reload", [("block", "poll")]).overall_code == OVER else 1


CASES = {
    "basic": lambda: case_basic(""), "basic_local": lambda: case_basic("_local"),
    "another": lambda: case_another(""), "another_local": lambda: case_another("_local"),
    "duration": lambda: case_duration(""), "duration_local": lambda: case_duration("_local"),
    "share_threshold": case_share_threshold,
    "reload_absent": case_reload_absent, "reload_present": case_reload_present,
}


def main():
    if sys.argv[3:] == ["blocked?"]:
        return is_blocked()
    failed = 0
    for name in sys.argv[3:]:
        try:
            why = CASES[name]()
        except Exception as e:  # a crash is a failure of that case, with its reason
            why = "%s: %s" % (type(e).__name__, e)
        print("ok %s" % name if why is None else "FAIL %s: %s" % (name, why), flush=True)
        failed += why is not None
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
