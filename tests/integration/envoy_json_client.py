"""envoy_json_client.py - test_envoy_json.sh's driver: envoyproxy/ratelimit's HTTP routes on
sluiced's HTTP port (POST /json, GET /healthcheck) beside its gRPC port. Each case prints
"ok NAME" or "FAIL NAME: why"; the exit status is the number of failures.

Usage: envoy_json_client.py GRPC_PORT HTTP_PORT STUBS_DIR CASE..

The parity case sends each request twice, once as a gRPC call and once as JSON written by
protobuf's own json_format (as protojson writes it: camelCase names, 64-bit integers as strings;
and with the proto names), each on keys of its own, and requires the JSON answer to be the gRPC
answer as json_format writes it, with the HTTP status upstream gives its overall code.
"""
import http.client
import json
import sys
import time

import grpc

sys.path.insert(0, sys.argv[3])
from google.protobuf import json_format  # noqa: E402
import rls_pb2  # noqa: E402 (generated at test time)
import rls_pb2_grpc  # noqa: E402

GRPC_PORT, HTTP_PORT = int(sys.argv[1]), int(sys.argv[2])
TIMEOUT_S = 5


def post(body, method="POST", path="/json", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", HTTP_PORT, timeout=TIMEOUT_S)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, r.getheader("Content-Type"), data


def request(domain, descs, hits=0):
    """descs: [( [(key, value)..], {"limit": (rpu, unit), "hits": n} )]"""
    req = rls_pb2.RateLimitRequest(domain=domain, hits_addend=hits)
    for entries, extra in descs:
        d = req.descriptors.add()
        for k, v in entries:
            d.entries.add(key=k, value=v)
        if "limit" in extra:
            d.limit.requests_per_unit, d.limit.unit = extra["limit"]
        if "hits" in extra:
            d.hits_addend.value = extra["hits"]
    return req


MINUTE = rls_pb2.RateLimitResponse.RateLimit.Unit.Value("MINUTE")
# each request is sent 3 times over each carrier; {k} is the carrier's own part of every value
PARITY = [
    ("edge", [([("remote_address", "10.0.0.{k}")], {})]),
    ("edge", [([("remote_address", "10.0.1.{k}")], {}), ([("path", "/health")], {}),
              ([("nobody", "x{k}")], {})]),
    ("edge", [([("path", "/login{k}")], {"hits": 2})]),
    ("edge", [([("tenant", "acme"), ("user", "u{k}")], {}),
              ([("tenant", "acme"), ("user", "admin")], {})]),
    ("edge", [([("own", "o{k}")], {"limit": (2, MINUTE)})]),
    ("nowhere", [([("remote_address", "{k}")], {})]),
]


def without_reset(d):
    for s in d.get("statuses", []):
        s.pop("durationUntilReset", None)
    return d


def case_parity():
    """The limits here are per minute and per hour, in windows that start on the clock's minute:
    a run that crosses a minute's end compares a gRPC answer from one window with a JSON answer
    from the next, so a failed run that crossed one is run again, on keys of its own."""
    for attempt in range(3):
        minute = time.time() // 60
        why = parity_run(attempt)
        if why is None or time.time() // 60 == minute:
            return why
    return why


def parity_run(attempt):
    stub = rls_pb2_grpc.RateLimitServiceStub(grpc.insecure_channel("127.0.0.1:%d" % GRPC_PORT))
    seen = set()
    for n, (domain, descs) in enumerate(PARITY):
        for rnd in range(3):
            def mine(carrier):
                return request(domain, [([(k, v.format(k=carrier)) for k, v in e], x)
                                        for e, x in descs])
            got = json_format.MessageToDict(stub.ShouldRateLimit(mine("g%d" % attempt),
                                                                 timeout=TIMEOUT_S))
            body = json_format.MessageToJson(mine("h%d" % attempt), preserving_proto_field_name=rnd == 1)
            status, ctype, data = post(body.encode())
            answer = json.loads(data)
            json_format.ParseDict(answer, rls_pb2.RateLimitResponse())  # its names are protojson's
            want_status = 429 if got.get("overallCode") == "OVER_LIMIT" else 200
            if status != want_status or ctype != "application/json":
                return "request %d round %d: HTTP %d %s, want %d" % (n, rnd, status, ctype,
                                                                     want_status)
            if without_reset(answer) != without_reset(got):
                return "request %d round %d: JSON %s, gRPC %s" % (n, rnd, answer, got)
            seen.update(s["code"] + ("+limit" if "currentLimit" in s else "")
                        for s in answer["statuses"])
    # what was compared covers every kind of status: limited, refused, with no limit
    if seen != {"OK", "OK+limit", "OVER_LIMIT+limit"}:
        return "the statuses compared were only %s" % sorted(seen)
    return None


def case_shapes():
    body = {"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address",
                                                            "value": "shapes"}]}]}
    want = [(200, 2), (200, 1), (200, None), (429, None)]
    for i, (st, left) in enumerate(want):
        status, ctype, data = post(json.dumps(body))
        a = json.loads(data)
        s = a["statuses"][0]
        if status != st or s.get("limitRemaining") != left:
            return "call %d: HTTP %d %s" % (i, status, data)
        limit = {"requestsPerUnit": 3, "unit": "MINUTE"}  # no name: upstream's unnamed limit
        if s["currentLimit"] != limit or not s["durationUntilReset"].endswith("s"):
            return "call %d: %s" % (i, data)
        if a["overallCode"] != ("OK" if st == 200 else "OVER_LIMIT"):
            return "call %d: %s" % (i, data)
    # any method and any content type, as upstream (curl --data sends a form type)
    status, _, data = post(json.dumps(body).replace("shapes", "m"), method="PUT",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    if status != 200:
        return "PUT with a form type: HTTP %d %s" % (status, data)
    return None


BAD = [
    (b"", "invalid JSON"),
    (b"{\"domain\":\"edge\"", "invalid JSON"),
    (b"{\"domain\":\"edge\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"val\":\"v\"}]}]}",
     "unknown field"),
    (b"{\"domain\":\"edge\",\"tenant\":\"x\",\"descriptors\":[]}", "unknown field"),
    (b"{\"domain\":\"\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}]}]}", "domain is empty"),
    (b"{\"domain\":\"edge\",\"descriptors\":[]}", "descriptors"),
    (b"{\"domain\":\"edge\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}],"
     b"\"limit\":{\"requestsPerUnit\":1,\"unit\":\"FORTNIGHT\"}}]}", "unit"),
]


def case_bad():
    for body, says in BAD:
        status, _, data = post(body)
        if status != 400 or says not in data.decode():
            return "%r: HTTP %d %s" % (body, status, data)
    # nothing was charged by a refused request
    ok = b"{\"domain\":\"edge\",\"descriptors\":[{\"entries\":[{\"key\":\"remote_address\"," \
         b"\"value\":\"bad\"}]}]}"
    status, _, data = post(ok)
    if status != 200 or json.loads(data)["statuses"][0].get("limitRemaining") != 2:
        return "after the refusals: HTTP %d %s" % (status, data)
    return None


def case_healthcheck():
    for method in ("GET", "HEAD", "POST"):
        status, ctype, data = post(None, method=method, path="/healthcheck")
        want = b"" if method == "HEAD" else b"OK"
        if status != 200 or data != want or not ctype.startswith("text/plain"):
            return "%s: HTTP %d %s %r" % (method, status, ctype, data)
    return None


CASES = {"parity": case_parity, "shapes": case_shapes, "bad": case_bad,
         "healthcheck": case_healthcheck}


def main():
    failed = 0
    for name in sys.argv[4:]:
        try:
            why = CASES[name]()
        except Exception as e:  # a crash is a failure of that case, with its reason
            why = "%s: %s" % (type(e).__name__, e)
        print("ok %s" % name if why is None else "FAIL %s: %s" % (name, why), flush=True)
        failed += why is not None
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
