"""conform.py - the store conformance test's driver (test_store_conformance.sh): the same steps
against several sluiced, each over its own request store, and their answers compared.

Every step (a RESP command, an HTTP request, a gRPC ShouldRateLimit call, or the clock moving)
goes to every sluiced in turn, waiting for each answer; then the answers, normalised, must be
equal to the first sluiced's (the memory store). The clock is the file fakeclock.so reads in every
process: it stands still between steps, so every store decides at the same nanosecond.

Normalised answers: RESP replies as they are (times on the wire are whole milliseconds, rounded
up); HTTP the status, the body (JSON parsed) and the RateLimit, RateLimit-Policy and Retry-After
fields; gRPC the overall code, each status (code, limit, remaining, duration_until_reset rounded
up to whole milliseconds, as RESP and HTTP round) and the headers it asks Envoy to add.

Scenarios are scripted (SCENARIOS below) or random (--seed: command sequences drawn from a seeded
generator; the seed is printed, and `--seed N --random-steps M` replays it). A scenario marked
"relaxed" (the leased and approximate modes) compares only what those modes promise to answer
alike with one sluiced: allowed, limit and remaining (docs/server.md: their times come from a
lease or a count, not from Redis).

Usage: conform.py --clock FILE --stubs DIR --target NAME:RESP:HTTP:GRPC... [--seed N]
                  [--random-steps M] [--random-runs K] [--only SCENARIO]
Exit status: 0 when every answer matched, 1 otherwise.
"""
import argparse
import http.client
import json
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from resp_client import Conn  # noqa: E402

MS = 1000000
T0_NS = 1893456000 * 10**9  # 2030-01-01T00:00:00Z: a whole second, so whole windows start here

# name: (capacity, window_ms) of tests/integration/conformance/rules.yaml
RULES = {
    "fw": (5, 10000), "sw": (5, 10000), "sb": (6, 12000), "sl": (5, 10000), "tb": (3, 10000),
    "gc": (4, 10000), "odd": (4, 1000), "oddtb": (4, 3000), "oddsw": (7, 3000),
    "oddsb": (7, 9000), "gcd": (2, 2000), "tbd": (2, 3000), "debt": (10, 60000),
    "dry": (1, 3600000), "big": (1000, 3600000),
}
STRICT = ["fw", "sw", "sb", "sl", "tb", "gc", "odd", "oddtb", "oddsw", "oddsb"]
# inline rules (SL.THROTTLE's arguments after the key) of every algorithm
INLINE = [
    ["fixed_window", "4", "5000"], ["sliding_window", "4", "6000"],
    ["sliding_buckets", "6", "6000", "BUCKETS", "3"], ["sliding_log", "3", "4000"],
    ["token_bucket", "3", "3000", "BURST", "2"], ["gcra", "3", "1000", "BURST", "1"],
    ["gcra", "2", "2000", "MAX_DELAY", "1500"],
]


class Clock:
    """The shared clock: 8 bytes, ns since the epoch, read by fakeclock.so in every process."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR)
        self.now_ns = T0_NS
        self.set(T0_NS)

    def set(self, ns):
        self.now_ns = ns
        os.pwrite(self.fd, struct.pack("<q", ns), 0)

    def step_ms(self, ms):
        self.set(self.now_ns + int(ms * MS))


class Target:
    def __init__(self, spec, stubs):
        name, resp, http_port, grpc_port = spec.split(":")
        self.name = name
        self.resp = Conn(int(resp))
        self.http_port = int(http_port)
        self.http = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        self.grpc = None
        if stubs:
            import grpc
            import rls_pb2_grpc
            self.channel = grpc.insecure_channel("127.0.0.1:%s" % grpc_port)
            self.grpc = rls_pb2_grpc.RateLimitServiceStub(self.channel)

    def run(self, step):
        kind = step[0]
        if kind == "resp":
            return norm_resp(self.resp.call(*step[1]))
        if kind == "http":
            return self.run_http(*step[1:])
        if kind == "grpc":
            return self.run_grpc(*step[1:])
        raise ValueError(kind)

    def run_http(self, method, path, body):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        data = json.dumps(body) if body is not None else None
        for attempt in range(2):  # a keep-alive connection the server closed: once more
            try:
                self.http.request(method, path, body=data, headers=headers)
                r = self.http.getresponse()
                text = r.read().decode()
                break
            except (http.client.HTTPException, ConnectionError):
                self.http.close()
                self.http = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
                if attempt == 1:
                    raise
        fields = {k: r.getheader(k) for k in ("RateLimit", "RateLimit-Policy", "Retry-After")
                  if r.getheader(k) is not None}
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return [r.status, fields, parsed]

    def run_grpc(self, domain, descs, hits):
        import grpc
        import rls_pb2
        ds = []
        for entries, own_hits in descs:
            d = rls_pb2.RateLimitDescriptor(entries=[
                rls_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in entries])
            if own_hits is not None:
                d.hits_addend.value = own_hits
            ds.append(d)
        try:
            r = self.grpc.ShouldRateLimit(
                rls_pb2.RateLimitRequest(domain=domain, descriptors=ds, hits_addend=hits),
                timeout=30)
        except grpc.RpcError as e:
            return ["error", str(e.code()), e.details()]
        out = [rls_pb2.RateLimitResponse.Code.Name(r.overall_code)]
        for s in r.statuses:
            ns = s.duration_until_reset.seconds * 10**9 + s.duration_until_reset.nanos
            out.append([rls_pb2.RateLimitResponse.Code.Name(s.code),
                        s.current_limit.requests_per_unit, s.current_limit.unit,
                        s.current_limit.name, s.limit_remaining, -(-ns // MS)])
        out.append(sorted((h.key, h.value) for h in r.response_headers_to_add))
        return out


def norm_resp(r):
    if isinstance(r, bytes):
        return r.decode(errors="replace")
    if isinstance(r, list):
        return [norm_resp(x) for x in r]
    return r


def relax(answer):
    """What the leased and approximate modes answer alike: allowed, limit, remaining."""
    if isinstance(answer, list) and len(answer) == 5 and all(isinstance(x, int) for x in answer):
        return answer[:3]
    if isinstance(answer, list) and len(answer) == 3 and isinstance(answer[2], dict):
        body = answer[2]
        keep = ("allowed", "limit", "remaining")
        if "checks" in body:
            return [answer[0], body.get("allowed"),
                    [{k: c.get(k) for k in keep} for c in body["checks"]]]
        return [answer[0], {k: body.get(k) for k in keep}]
    return answer


# ---- steps -----------------------------------------------------------------------------------

def R(*args):
    return ("resp", [str(a) for a in args])


def H(method, path, body=None):
    return ("http", method, path, body)


def G(domain, descs, hits=0):
    """descs: [([(key, value)...], own hits_addend or None)]"""
    return ("grpc", domain, descs, hits)


def T(ms):
    """The clock moves ms milliseconds (whole ones: see "Time" at the top)."""
    return ("clock", int(ms))


def allow(rule, key, cost=None):
    return R("SL.ALLOW", rule, key, "COST", cost) if cost is not None else R("SL.ALLOW", rule, key)


def check(rule, key, cost=1):
    return {"rule": rule, "key": key, "cost": cost}


def algorithm_steps(rule, via):
    """One rule through its life, over RESP or HTTP: costs at, under and past what is left and
    past the capacity, refunds, debt, reset, and the clock rolling its window."""
    cap, win = RULES[rule]
    k = "%s:%s" % (rule, via)
    if via == "resp":
        a = lambda c: allow(rule, k, c)  # noqa: E731
        peek = R("SL.PEEK", rule, k)
        settle = lambda r, act: R("SL.SETTLE", rule, k, r, act)  # noqa: E731
        reset = R("SL.RESET", rule, k)
    else:
        a = lambda c: H("POST", "/v1/allow", check(rule, k, c))  # noqa: E731
        peek = H("POST", "/v1/allow", check(rule, k, 0))
        settle = lambda r, act: H("POST", "/v1/settle", {  # noqa: E731
            "rule": rule, "key": k, "reserved": r, "actual": act})
        reset = R("SL.RESET", rule, k)
    auth = lambda c: H("GET", "/v1/auth/%s?key=%s&cost=%d" % (rule, k, c))  # noqa: E731
    return [
        peek, a(1), a(cap - 1), a(1), peek, a(0), auth(1), a(cap + 1), T(1), a(1), T(win / 3),
        a(1), auth(1), T(win / 3), peek, a(cap), T(win), peek, a(cap), a(1), settle(2, 0), peek,
        a(2), a(1), T(win / 7), settle(0, 3), peek, a(1), T(win / 2), settle(1, 0), peek,
        T(win * 2), peek, auth(cap), auth(1), a(cap - 1), reset, peek, a(cap), T(win / 4 + 1),
        a(1), peek,
    ]


def inline_steps():
    steps = []
    for i, args in enumerate(INLINE):
        k = "in:%d" % i
        win = int(args[2])
        steps += [R("SL.THROTTLE", k, *args), R("SL.THROTTLE", k, *args, "COST", 2),
                  R("SL.PEEK", k, *args), R("SL.THROTTLE", k, *args, "COST", 9), T(win / 3),
                  R("SL.THROTTLE", k, *args), R("SL.SETTLE", k, *args, "RESERVED", 1, "ACTUAL", 0),
                  R("SL.PEEK", k, *args), R("SL.SETTLE", k, *args, "RESERVED", 0, "ACTUAL", 2),
                  R("SL.PEEK", k, *args), T(win), R("SL.THROTTLE", k, *args, "COST", 0),
                  R("SL.RESET", k), R("SL.PEEK", k, *args), R("SL.THROTTLE", k, *args, "COST", -1)]
    for q in (None, 2, 6):
        c = ["CL.THROTTLE", "cell", 3, 10, 60] + ([q] if q else [])
        steps += [R(*c), R(*c), T(1500), R(*c), R(*c), T(6000), R(*c)]
    return steps


def override_steps():
    k = "ov:tenant"
    return [
        allow("fw", k, 3), R("SL.OVERRIDE", "SET", "fw", k, '{"limit":2}'), allow("fw", k),
        R("SL.PEEK", "fw", k), R("SL.OVERRIDE", "GET", "fw", k), allow("sl", k, 2),
        R("SL.OVERRIDE", "SET", "sl", k, '{"limit":20}'), allow("sl", k, 4),
        H("POST", "/v1/allow", check("sl", k, 15)), R("SL.OVERRIDE", "DEL", "sl", k),
        R("SL.PEEK", "sl", k), R("SL.ALLOWALL", "fw", k, "sl", k), T(10000),
        R("SL.OVERRIDE", "DEL", "fw", k), allow("fw", k, 5),
        R("SL.OVERRIDE", "SET", "gc", k, '{"blocked":true}'), allow("gc", k),
        R("SL.ALLOWALL", "fw", "ov:other", "gc", k), R("SL.OVERRIDE", "DEL", "gc", k),
        allow("gc", k),
    ]


def allowall_steps():
    s = []
    # one client key under several rules (one cluster slot: one script with sluice.so)
    s += [R("SL.ALLOWALL", "fw", "m1", "sl", "m1", "gc", "m1", "COST", 2),
          R("SL.ALLOWALL", "fw", "m1", "sl", "m1", "gc", "m1", "COST", 2),
          R("SL.PEEK", "fw", "m1"), R("SL.PEEK", "sl", "m1"), R("SL.PEEK", "gc", "m1"),
          R("SL.ALLOWALL", "fw", "m1", "sl", "m1", "COST", 1), T(2500),
          R("SL.ALLOWALL", "fw", "m1", "gc", "m1", "sl", "m1"),
          R("SL.ALLOWALL", "fw", "m1", "sl", "m1", "COST", 5)]
    # several client keys (several slots: each charged, the charged refunded on a refusal)
    s += [allow("fw", "x2", 5), allow("sl", "y2", 3),
          R("SL.ALLOWALL", "sl", "y2", "fw", "x2", "gc", "z2"),
          R("SL.PEEK", "sl", "y2"), R("SL.PEEK", "gc", "z2"),
          R("SL.ALLOWALL", "sl", "y2", "gc", "z2", "COST", 2),
          R("SL.ALLOWALL", "sl", "y2", "gc", "z2", "sw", "w2", "COST", 2),
          allow("tb", "v2", 3), T(400),
          # two refused: which one answers, and its retry_after
          R("SL.ALLOWALL", "sw", "w2", "tb", "v2", "fw", "x2", "COST", 1),
          R("SL.ALLOWALL", "fw", "x2", "tb", "v2", "COST", 1),
          R("SL.ALLOWALL", "gcd", "d2", "gcd", "d3", "COST", 1),
          R("SL.ALLOWALL", "gcd", "d2", "gcd", "d3", "COST", 2),
          R("SL.ALLOWALL", "gcd", "d2", "fw", "x2"), R("SL.PEEK", "gcd", "d2"),
          # a pair named twice counts twice; a shadow rule never blocks the whole
          R("SL.ALLOWALL", "big", "t2", "big", "t2", "COST", 400),
          R("SL.ALLOWALL", "big", "t2", "big", "t2", "COST", 100), R("SL.PEEK", "big", "t2"),
          R("SL.ALLOWALL", "dry", "s2", "fw", "s2"), R("SL.ALLOWALL", "dry", "s2", "fw", "s2"),
          R("SL.ALLOWALL", "dry", "s2", "fw", "x2"), R("SL.PEEK", "dry", "s2"),
          R("SL.ALLOWALL", "fw", "x2", "fw", "q2", "COST", 9)]
    # the same over HTTP
    batch = lambda *cs, **kw: H("POST", "/v1/allow", dict({"checks": list(cs)}, **kw))  # noqa
    s += [batch(check("sw", "h1", 2), check("sl", "h1", 3), check("tb", "h1", 1)),
          batch(check("sw", "h1", 2), check("sl", "h1", 3), check("tb", "h1", 1)),
          batch(check("sw", "h1", 1), check("sl", "h1", 3), check("tb", "h9", 3)),
          batch(check("tb", "h9", 1), check("sw", "h1", 4), check("fw", "h1", 1)),
          batch(check("fw", "h1", 5), check("sw", "h1", 9)),
          batch(check("sw", "h1", 3), check("sl", "h2", 5), independent=True),
          batch(check("dry", "h3", 1), check("dry", "h3", 1), check("fw", "h3", 1)),
          T(10000), batch(check("sw", "h1", 2), check("sl", "h1", 3), check("tb", "h1", 1)),
          H("GET", "/v1/auth/sw?key=h1&cost=3")]
    # two checks over their limits, and one that fits: one client key (one slot), then several
    s += [allow("fw", "r1", 5), allow("sl", "r1", 4), T(1000),
          batch(check("gc", "r1", 1), check("fw", "r1", 1), check("sl", "r1", 2),
                check("dry", "r1", 1)),
          R("SL.ALLOWALL", "gc", "r1", "fw", "r1", "sl", "r1", "COST", 2),
          allow("fw", "r2", 5), allow("sl", "r3", 4), T(1000),
          batch(check("gc", "r4", 1), check("fw", "r2", 1), check("sl", "r3", 2),
                check("dry", "r4", 1)),
          R("SL.ALLOWALL", "gc", "r4", "fw", "r2", "sl", "r3", "COST", 2),
          R("SL.PEEK", "gc", "r1"), R("SL.PEEK", "gc", "r4"),
          # equal costs (one script inside Redis with sluice.so, when in one slot)
          allow("fw", "r5", 5), allow("sl", "r5", 5), T(1000),
          batch(check("gc", "r5", 1), check("fw", "r5", 1), check("sl", "r5", 1),
                check("sw", "r5", 1)),
          batch(check("gc", "r6", 1), check("fw", "r5", 1), check("sl", "r5", 1))]
    return s


def envoy_steps():
    """envoyproxy/ratelimit's integration test, domain "another": key2 (20 a minute) and key3
    (10 an hour) together, fifteen times; the last five are over key3's limit, and key2, not
    charged, keeps what it has."""
    both = [([("key2", "v")], None), ([("key3", "v")], None)]
    s = [G("another", both) for _ in range(15)]
    s += [G("another", [([("key2", "w")], 5), ([("key3", "w")], None)], 2),
          G("another", [([("key2", "w")], 19), ([("key3", "w")], 0)]),
          G("another", [([("key2", "w")], None), ([("key3", "w")], None)], 9),
          G("another", [([("key2", "w")], None), ([("key3", "w")], None)], 9),
          G("another", [([("key2", "w")], 0)]), G("another", [([("key3", "w")], 0)]), T(61000),
          G("another", both), G("another", [([("key2", "w")], None), ([("key4", "w")], None)]),
          G("nosuchdomain", both)]
    # both over their limits at once, with costs alike and not
    s += [G("another", [([("key2", "y")], 20), ([("key3", "y")], 10)]),
          G("another", [([("key2", "y")], None), ([("key3", "y")], None)], 1),
          G("another", [([("key2", "y")], None), ([("key3", "y")], None)], 1),
          G("another", [([("key2", "x")], None), ([("key3", "y")], None)], 1),
G("another", [([("key2", "x")], 20), ([("key3", "x")], 9)]),
          G("another", [([("key2", "x")], None), ([("key3", "x")], 2)])]
    return s


def quota_steps():
    """quota_mode (quota.yaml): service_1 (1 a minute) and service_2 (2) in quota mode, alone,
    together and beside plain (3, not in quota mode), with costs; then unit: week."""
    s1, s2 = ([("service", "service_1")], None), ([("service", "service_2")], None)
    plain = ([("plain", "a")], None)
    s = [G("quota", [s1, s2]) for _ in range(4)]
    s += [T(61000)] + [G("quota", [plain, s1, s2]) for _ in range(5)]
    s += [T(61000), G("quota", [s1, s2], 2), G("quota", [s2, s1], 2), G("quota", [s2]),
          G("quota", [([("service", "service_2")], 3), s1]), G("quota", [s1, plain, s1])]
    s += [G("quota", [([("weekly", "w")], None)]) for _ in range(3)]
    return s


def maxdelay_steps():
    s = []
    for rule in ("gcd", "tbd"):
        k = "md:" + rule
        s += [allow(rule, k), allow(rule, k), allow(rule, k), allow(rule, k), R("SL.PEEK", rule, k),
              allow(rule, k, 2), T(700), allow(rule, k), H("POST", "/v1/allow", check(rule, k, 1)),
              T(5000), allow(rule, k, 2), R("SL.SETTLE", rule, k, 2, 0), R("SL.PEEK", rule, k)]
    return s


def debt_steps():
    k = "debt:k"
    return [allow("debt", k, 8), R("SL.SETTLE", "debt", k, 1, 5), R("SL.SETTLE", "debt", k, 0, 9),
            H("POST", "/v1/settle", {"rule": "debt", "key": k, "reserved": 0, "actual": 9}),
            R("SL.PEEK", "debt", k), R("SL.SETTLE", "debt", k, 0, 2), R("SL.PEEK", "debt", k),
            allow("debt", k), T(30000), R("SL.PEEK", "debt", k), T(31000), allow("debt", k),
            ("settle_at", "debt", k, 2, 0, -500), R("SL.PEEK", "debt", k)]


def mode_steps(rule):
    """A leased or approximate rule, one sluiced, one loop: what it admits and has left. A peek
    asks Redis, which has an approximate rule's admissions once they are synced (every
    sync_interval, on the event loop's timer): it is polled until it has. After the clock jumps,
    a pause longer than sync_interval (of the kernel's clock, which the loop's count ages by)
    lets the count go stale, as it would have in the time the jump stands for."""
    k = "m:%s" % rule
    s = []
    for i in range(45):
        s.append(allow(rule, k, 1 + i % 3 // 2))
        if i % 10 == 9:
            s.append(T(100))
    s += [("until_equal", R("SL.PEEK", rule, k)), T(61000), ("pause", 0.2), allow(rule, k, 40),
          allow(rule, k), ("until_equal", R("SL.PEEK", rule, k)), T(30000), ("pause", 0.2),
          allow(rule, k, 3), allow(rule, k, 30), ("until_equal", R("SL.PEEK", rule, k))]
    return s


def acquire(rule, key, *more):
    return ("acquire", R("SL.ACQUIRE", rule, key, *[str(m) for m in more]))


def release(rule, key, n, via="resp", *more):
    """SL.RELEASE (or POST /v1/release) of the id the n-th acquire of the scenario got (from
    each store its own); `more` is what follows the id (RESP: LATENCY ms, DROPPED) or one dict
    of more body fields (HTTP: latency_ms, dropped)."""
    return ("release", rule, key, n, via) + tuple(more)


def hacquire(body):
    return ("acquire", H("POST", "/v1/acquire", body))


def holds_steps():
    """In-flight limits: acquires up to the limit, a refusal's retry_after (the earliest expiry
    that frees enough), a release that frees once, releases refused (again, id 0, made up, an
    expired hold's), TIMEOUT and its bounds, expiry on the clock, a key with an override's limit,
    a shadow rule (admitted, no hold), and plain decisions and peeks on the rule."""
    k, w = "inf:k", "inf:wide"
    return [
        acquire("inf", k), T(1000), acquire("inf", k, "COST", 2), acquire("inf", k),
        acquire("inf", k, "COST", 4), R("SL.PEEK", "inf", k), release("inf", k, 0),
        release("inf", k, 0), R("SL.RELEASE", "inf", k, 0), R("SL.RELEASE", "inf", k, 12345),
        acquire("inf", k, "TIMEOUT", 2000), acquire("inf", k), acquire("inf", k, "TIMEOUT", 20000),
        acquire("inf", k, "TIMEOUT", 0), T(2000), R("SL.PEEK", "inf", k),
        release("inf", k, 4), acquire("inf", k), T(8000), R("SL.PEEK", "inf", k),
        release("inf", k, 1), allow("inf", k), allow("inf", k, 2), R("SL.PEEK", "inf", k),
        T(10000), R("SL.PEEK", "inf", k), acquire("inf", k, "COST", 3),
        acquire("inf", w, "COST", 4), acquire("inf", w), acquire("inf", w), release("inf", w, 10),
        acquire("inf", w), R("SL.PEEK", "inf", w),
        acquire("infdry", "d"), acquire("infdry", "d"), R("SL.PEEK", "infdry", "d"),
        R("SL.RELEASE", "infdry", "d", 1), R("SL.ACQUIRE", "fw", "x"),
        # over HTTP (acquires 16 on)
        T(20000), hacquire({"rule": "inf", "key": "h"}),
        hacquire({"rule": "inf", "key": "h", "cost": 2, "timeout_ms": 3000}),
        hacquire({"rule": "inf", "key": "h"}), release("inf", "h", 17, "http"),
        release("inf", "h", 17, "http"), hacquire({"rule": "inf", "key": "h", "cost": 4}),
        hacquire({"rule": "inf", "key": "h", "timeout_ms": 20000}),
        hacquire({"rule": "inf", "key": "h", "cots": 2}),
        hacquire({"rule": "fw", "key": "h"}), H("POST", "/v1/release", {"rule": "inf", "key": "h"}),
        H("POST", "/v1/release", {"rule": "inf", "key": "h", "id": 0, "extra": 1}),
        H("GET", "/v1/acquire"), T(3000), release("inf", "h", 16), R("SL.PEEK", "inf", "h"),
        # a charge past the limit: a hold of its own while a slot is free; with none, refused
        # (it would have to join a live hold), and every holder's release still works
        acquire("inf", "s"), R("SL.SETTLE", "inf", "s", 0, 2), acquire("inf", "s"),
        R("SL.SETTLE", "inf", "s", 0, 1), R("SL.PEEK", "inf", "s"), release("inf", "s", 23),
        release("inf", "s", 24), R("SL.PEEK", "inf", "s"),
    ]


PRIORITIZED = ["pfw", "psw", "psb", "psl", "ptb", "pgc", "pinf"]


def priority_steps():
    """Priorities on every algorithm (rules p*: of 10 units low may use 5, high 8, critical all):
    each priority admitted up to its share and shed past it while the higher ones pass, a request
    naming none (the lowest), peeks by priority, costs whose reserve never fits, unknown
    priorities, the clock refilling, an override's limit scaling the percent, and an inline
    rule's RESERVE."""
    steps = []
    for r in PRIORITIZED:
        k = "p:" + r
        if r == "pinf":
            a = lambda p, c=1: acquire(r, k, "COST", c, "PRIORITY", p)  # noqa: E731
        else:
            a = lambda p, c=1: R("SL.ALLOW", r, k, "COST", c, "PRIORITY", p)  # noqa: E731
        steps += [a("low"), a("low", 3), a("low"), a("low"), R("SL.ALLOW", r, k),
                  R("SL.PEEK", r, k, "PRIORITY", "low"), R("SL.PEEK", r, k, "PRIORITY", "high"),
                  a("high"), a("high", 2), a("high"), a("critical"), a("critical", 2),
                  a("critical"), a("critical"), R("SL.PEEK", r, k), a("low", 6), a("high", 9),
                  a("nope"), R("SL.ALLOW", r, k, "PRIORITY", "low", "PRIORITY", "high"),
                  T(3000), a("low"), a("high"), a("critical"), T(10000), a("low", 5), a("low"),
                  a("high", 3), a("high")]
    steps += [acquire("pinf", "p:wide", "COST", 16, "PRIORITY", "low"),
              acquire("pinf", "p:wide", "COST", 3, "PRIORITY", "high"),
              acquire("pinf", "p:wide", "COST", 4, "PRIORITY", "critical"),
              acquire("pinf", "p:wide", "PRIORITY", "critical"),
              R("SL.ALLOW", "fw", "p:none", "PRIORITY", "low"),
              R("SL.ALLOWALL", "pfw", "p:all", "psl", "p:all", "COST", 5, "PRIORITY", "low"),
              R("SL.ALLOWALL", "pfw", "p:all", "psl", "p:all2", "PRIORITY", "low"),
              R("SL.ALLOWALL", "psl", "p:all2", "pfw", "p:all", "COST", 2, "PRIORITY", "high"),
              H("POST", "/v1/allow", {"checks": [{"rule": "ptb", "key": "p:h", "cost": 6,
                                                  "priority": "high"},
                                                 {"rule": "psw", "key": "p:h", "cost": 6}]}),
              H("POST", "/v1/allow", {"rule": "psb", "key": "p:h", "cost": 4,
                                      "priority": "critical"}),
              H("POST", "/v1/allow", {"rule": "psb", "key": "p:h", "cots": 4}),
              R("SL.THROTTLE", "p:in", "fixed_window", 10, 10000, "RESERVE", 4),
              R("SL.THROTTLE", "p:in", "fixed_window", 10, 10000, "COST", 5, "RESERVE", 4),
              R("SL.THROTTLE", "p:in", "fixed_window", 10, 10000, "COST", 2, "RESERVE", 4),
              R("SL.THROTTLE", "p:in", "fixed_window", 10, 10000, "COST", 4),
              R("SL.PEEK", "p:in", "fixed_window", 10, 10000, "RESERVE", 1)]
    return steps


def adaptive_steps():
    """An adaptive limit (AIMD, limit 2 in 1..6, latency_timeout 100ms): a window of as many
    samples as the limit, each with at least half the limit in flight, grows it by one; a
    release without LATENCY (or of no live hold) is no sample; DROPPED, or a latency past
    latency_timeout, in a window cuts the limit to 90 % at its end (rounded down); the
    decisions' limit is the adaptive limit; bad LATENCY and latency_ms are refused."""
    k = "ada:k"
    return [
        acquire("ada", k), acquire("ada", k), acquire("ada", k),  # ids 0, 1; the third refused
        release("ada", k, 0, "resp", "LATENCY", 10), R("SL.PEEK", "ada", k),
        release("ada", k, 1, "resp", "LATENCY", 10), R("SL.PEEK", "ada", k),  # limit 3
        acquire("ada", k), acquire("ada", k), acquire("ada", k), acquire("ada", k),  # 3..5; 6 no
        release("ada", k, 3, "resp", "LATENCY", 20), release("ada", k, 4),  # the 2nd: no sample
        release("ada", k, 5, "resp", "LATENCY", "15ms"), R("SL.PEEK", "ada", k),
        release("ada", k, 4, "resp", "LATENCY", 1),  # no live hold: no sample
        acquire("ada", k), release("ada", k, 7, "http", {"latency_ms": 12.5}),  # limit 4
        R("SL.PEEK", "ada", k),
        acquire("ada", k), acquire("ada", k), acquire("ada", k), acquire("ada", k),  # 8..11
        release("ada", k, 8, "resp", "DROPPED"), release("ada", k, 9, "resp", "LATENCY", 150),
        release("ada", k, 10, "http", {"latency_ms": 5, "dropped": False}),
        release("ada", k, 11, "resp", "LATENCY", 5, "DROPPED"), R("SL.PEEK", "ada", k),  # 3
        acquire("ada", k), acquire("ada", k),  # 12, 13
        release("ada", k, 12, "resp", "LATENCY", 30), release("ada", k, 13, "http", {}),
        R("SL.PEEK", "ada", k), acquire("ada", k, "COST", 4),  # over the limit now, not max
        hacquire({"rule": "ada", "key": k, "cost": 4}), acquire("ada", k, "COST", 7),
    ]


def adaptive_rounds(rule, rounds, seed):
    """Rounds of acquires (8 each: those past the limit refused) and their releases, with
    latencies that grow with the holds in flight past 5 and a drop now and then, so that the
    limit grows, shrinks and (Vegas) probes; every answer compared, none predicted."""
    rng = random.Random(seed)
    k, steps, n = "%s:r" % rule, [], 0
    for r in range(rounds):
        first = n
        for _ in range(8):
            steps.append(acquire(rule, k))
            n += 1
        for i in range(first, n):
            busy = n - i
            lat = 10 + (busy - 5) * 3 if busy > 5 else 10
            pick = rng.randrange(10)
            more = (["DROPPED"] if pick == 0 else [] if pick == 1 else
                    ["LATENCY", "%dus" % (lat * 1000 + rng.randrange(999))])
            steps.append(release(rule, k, i, "resp", *more))
        steps.append(R("SL.PEEK", rule, k))
        if r % 5 == 4:
            steps.append(T(1000))
    return steps


def adaptive_argument_steps():
    """What every store answers alike about adaptive limits: bad LATENCY and latency_ms refused
    before any store is asked, and a fixed limit that takes a sample and stays."""
    k = "ada:k"
    return [
        R("SL.RELEASE", "ada", k, 1, "LATENCY", "x"), R("SL.RELEASE", "ada", k, 1, "LATENCY"),
        R("SL.RELEASE", "ada", k, 1, "LATENCY", 1, "LATENCY", 2),
        R("SL.RELEASE", "ada", k, 1, "LATENCY", 3600001), R("SL.RELEASE", "ada", k, 1, "DROPPED", 1),
        H("POST", "/v1/release", {"rule": "ada", "key": k, "id": 1, "latency_ms": -1}),
        H("POST", "/v1/release", {"rule": "ada", "key": k, "id": 1, "dropped": "yes"}),
        acquire("inf", "ada"), release("inf", "ada", 0, "resp", "LATENCY", 5, "DROPPED"),
        R("SL.PEEK", "inf", "ada"),
    ]


SCENARIOS = [("algorithm %s over %s" % (r, via), False, algorithm_steps(r, via))
             for r in STRICT for via in ("resp", "http")]
SCENARIOS += [("inline rules", False, inline_steps()), ("overrides", False, override_steps()),
              ("multi-checks", False, allowall_steps()), ("envoy descriptors", False, envoy_steps()),
              ("envoy quota_mode", False, quota_steps()),
              ("max_delay", False, maxdelay_steps()), ("debt", False, debt_steps()),
              ("leased", True, mode_steps("lease")), ("approximate", True, mode_steps("approx")),
              ("in-flight holds", False, holds_steps()), ("priorities", False, priority_steps()),
              ("adaptive limit", False, adaptive_steps()),
              ("adaptive limit arguments", False, adaptive_argument_steps()),
              ("adaptive rounds aimd", False, adaptive_rounds("ada", 30, 1)),
              ("adaptive rounds vegas", False, adaptive_rounds("adv", 40, 2))]


# ---- random sequences ------------------------------------------------------------------------

def random_steps(rng, n, tag):
    """n random steps on a few keys of a few rules: every deciding command and route, costs
    around what is left, and the clock moving by steps from 0 to past a window."""
    rules = ["fw", "sw", "sb", "sl", "tb", "gc", "odd", "oddtb", "gcd", "tbd", "debt", "dry"]
    keys = ["%s:%d" % (tag, i) for i in range(3)]
    steps = []
    for _ in range(n):
        rule, key = rng.choice(rules), rng.choice(keys)
        cap = RULES[rule][0]
        cost = rng.choice([0, 1, 1, 1, 2, cap - 1, cap, cap + 1])
        op = rng.randrange(100)
        if op < 30:
            steps.append(allow(rule, key, cost))
        elif op < 38:
            steps.append(R("SL.PEEK", rule, key))
        elif op < 46:
            steps.append(H("POST", "/v1/allow", check(rule, key, cost)))
        elif op < 52:
            steps.append(H("GET", "/v1/auth/%s?key=%s&cost=%d" % (rule, key, max(cost, 1))))
        elif op < 60:
            steps.append(R("SL.SETTLE", rule, key, rng.choice([0, 1, 2]), rng.choice([0, 1, 3])))
        elif op < 62:
            steps.append(R("SL.RESET", rule, key))
        elif op < 72:
            pairs = []
            for _ in range(rng.randint(2, 4)):
                pairs += [rng.choice(rules), rng.choice(keys)]
            steps.append(R("SL.ALLOWALL", *pairs, "COST", rng.choice([1, 1, 2, 3])))
        elif op < 78:
            cs = [check(rng.choice(rules), rng.choice(keys), rng.choice([0, 1, 2]))
                  for _ in range(rng.randint(2, 4))]
            steps.append(H("POST", "/v1/allow", {"checks": cs}))
        elif op < 84:
            args = rng.choice(INLINE)
            steps.append(R("SL.THROTTLE", key, *args, "COST", rng.choice([0, 1, 2])))
        else:
            steps.append(T(rng.choice([0, 1, 7, 333, 1000, 2500, 10000, 61000])))
    return steps


# ---- known differences ------------------------------------------------------------------------
# Answers that differ today for a reason a store must fix (test_store_conformance.sh's header
# would name each). A known step that answers alike fails too, so that the list stays true.
# (scenario, step index): (stores that differ, why)
KNOWN = {}


# ---- running ---------------------------------------------------------------------------------

class Run:
    def __init__(self, targets, clock, trace=False):
        self.trace = trace
        self.targets = targets
        self.clock = clock
        self.failures = 0
        self.known = 0
        self.known_seen = {}
        self.steps = 0

    def hold_ids(self, step, got, ids):
        """An acquire's answers (RESP's six numbers, or HTTP's body) with each hold id checked
        for its shape (an integer in [1, 2^48 - 2] when admitted, 0 when not) and replaced by
        that shape, the id kept per target; or a release step made into each target's release
        of its own id (RESP, or HTTP when the step says so)."""
        if step[0] == "acquire":
            out = []
            for t, g in zip(self.targets, got):
                if isinstance(g, list) and len(g) == 6:
                    hid, g = g[5], g[:5] + [None]
                elif isinstance(g, list) and len(g) == 3 and isinstance(g[2], dict):
                    hid, g = g[2].get("hold_id", 0), [g[0], g[1], dict(g[2], hold_id=None)]
                else:
                    hid = 0
                ids.setdefault(t.name, []).append(hid)
                shape = 0 if hid == 0 else "id" if 1 <= hid < 2**48 - 1 else "bad id %r" % hid
                out.append(g[:5] + [shape] if len(g) == 6 else
                           [g[0], g[1], dict(g[2], hold_id=shape)] if len(g) == 3 and
                           isinstance(g[2], dict) else g)
            return out
        _, rule, key, n, via = step[:5]
        more = step[5:]
        if via == "http":
            return [t.run(H("POST", "/v1/release", dict({"rule": rule, "key": key,
                                                          "id": ids[t.name][n]},
                                                         **(more[0] if more else {}))))
                    for t in self.targets]
        return [t.run(R("SL.RELEASE", rule, key, ids[t.name][n], *more)) for t in self.targets]

    def scenario(self, name, relaxed, steps):
        bad = 0
        ids = {}
        for i, step in enumerate(steps):
            if step[0] == "clock":
                self.clock.step_ms(step[1])
                continue
            if step[0] == "pause":  # a lower bound of the kernel's clock only: never a flake
                time.sleep(step[1])
                continue
            if step[0] == "until_equal":
                step = step[1]
                for _ in range(200):  # at most 10 s
                    got = [t.run(step) for t in self.targets]
                    cmp = [relax(g) for g in got] if relaxed else got
                    if all(c == cmp[0] for c in cmp[1:]):
                        break
                    time.sleep(0.05)
            if step[0] == "settle_at":  # SL.SETTLE ... AT unix_ms, relative to the clock
                _, rule, key, res, act, dt = step
                at = (self.clock.now_ns // MS) + dt
                step = R("SL.SETTLE", rule, key, res, act, "AT", at)
            self.steps += 1
            if step[0] == "release":
                got = self.hold_ids(step, None, ids)
            elif step[0] == "acquire":
                got = self.hold_ids(step, [t.run(step[1]) for t in self.targets], ids)
            else:
                got = [t.run(step) for t in self.targets]
            cmp = [relax(g) for g in got] if relaxed else got
            differ = [t.name for t, c in zip(self.targets, cmp) if c != cmp[0]]
            known = KNOWN.get((name, i))
            if known is not None:
                if set(differ) != set(known[0]):
                    bad += 1
                    print("FAIL [%s] step %d: %s: known to differ in %s (%s), differs in %s"
                          % (name, i, describe(step), ",".join(known[0]), known[1],
                             ",".join(differ) or "none"))
                    for t, g in zip(self.targets, got):
                        print("    %-8s %s" % (t.name, json.dumps(g)))
                else:
                    self.known += 1
                    if self.trace or self.known_seen.get(known[1], 0) == 0:
                        print("known [%s] step %d: %s: %s (%s)" % (
                            name, i, describe(step), known[1], ",".join(differ)))
                    self.known_seen[known[1]] = self.known_seen.get(known[1], 0) + 1
                continue
            if self.trace:
                print("  %d %s\n    %s" % (i, describe(step), "\n    ".join(
                    "%-8s %s" % (t.name, json.dumps(g)) for t, g in zip(self.targets, got))))
            if differ:
                bad += 1
                if bad <= 50:
                    print("FAIL [%s] step %d: %s" % (name, i, describe(step)))
                    for t, g in zip(self.targets, got):
                        print("    %-8s %s" % (t.name, json.dumps(g)))
        self.failures += bad
        print("%s [%s]: %d steps%s" % ("ok" if bad == 0 else "FAIL", name, len(steps),
                                         "" if bad == 0 else ", %d differ" % bad))
        return bad == 0


def describe(step):
    if step[0] == "acquire":
        return describe(step[1])
    if step[0] == "release":
        return "release (%s) %s %s <id of acquire %d>" % (step[4], step[1], step[2], step[3])
    if step[0] == "resp":
        return " ".join(step[1])
    if step[0] == "http":
        return "%s %s %s" % (step[1], step[2], json.dumps(step[3]) if step[3] else "")
    return "gRPC %s %s hits %s" % (step[1], json.dumps(step[2]), step[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clock", required=True)
    ap.add_argument("--stubs", default="")
    ap.add_argument("--target", action="append", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--random-steps", type=int, default=300)
    ap.add_argument("--random-runs", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--trace", action="store_true", help="print every answer")
    a = ap.parse_args()
    if a.stubs:
        sys.path.insert(0, a.stubs)
    clock = Clock(a.clock)
    run = Run([Target(t, a.stubs) for t in a.target], clock, a.trace)
    for name, relaxed, steps in SCENARIOS:
        if a.only and a.only not in name:
            continue
        if not a.stubs and any(s[0] == "grpc" for s in steps):
            print("skip [%s]: no gRPC stubs" % name)
            continue
        run.scenario(name, relaxed, steps)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    for r in range(a.random_runs if not a.only else 0):
        s = seed + r
        ok = run.scenario("random seed %d" % s, False,
                          random_steps(random.Random(s), a.random_steps, "rnd%d" % s))
        if not ok:
            print("  replay: conform.py ... --seed %d --random-runs 1 --random-steps %d"
                  % (s, a.random_steps))
    print("%d steps on %d stores, %d answers differ, %d known differences"
          % (run.steps, len(run.targets), run.failures, run.known))
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
