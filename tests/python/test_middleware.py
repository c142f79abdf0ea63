"""sluice's middleware in FastAPI (uvicorn), Flask and Django (werkzeug's server), each served on
127.0.0.1 and asked with real HTTP requests, against a real sluiced: 429 with problem+json and
the RateLimit fields (the very body and fields sluiced's own /v1/auth gives), a request lacking
its key, shadow modes, and an in-flight rule's hold released when the response ends, when the
handler raises, and when the client disconnects mid-response; a priority from the request, and
the releases' reports (latency, dropped) moving an adaptive limit, or not when not asked for;
a sluiced killed by its PID under the app (fail open, fail closed, a live hold) and started again.
With SLUICE_TEST_STORE, every sluiced's store is Redis.

SLUICE_TEST_FRAMEWORK: the framework to run (asgi, flask, django), its app started in this
process; test_secured needs none.
"""

import http.client
import json
import os
import re
import socket

import pytest

import apps
import harness
import sluice
from sluice.middleware import RateLimit, Request, by_header
from harness import check

RUN = os.urandom(4).hex()


def get(port, path, user=None, base=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers={"X-User": user} if user else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def sluiced_refusal(rule):
    """sluiced's own 429 for the rule, from /v1/auth, after using up a fresh key."""
    key = f"{RUN}-sluiced-{rule}"
    for _ in range(10):
        st, h, body = get(harness.HTTP_PORT, f"/v1/auth/{rule}?key={key}")
        if st == 429:
            return h, body
    return {}, b""


def limited(name, port, client):
    u = f"{RUN}-{name}-fixed"
    first = get(port, "/fixed/ok", u)
    second = get(port, "/fixed/ok", u)
    third = get(port, "/fixed/ok", u)
    check(f"{name}: two requests pass with the RateLimit fields",
          first[0] == 200 and second[0] == 200
          and first[1].get("ratelimit-policy") == '"mw-fixed";q=2;w=3600'
          and re.fullmatch(r'"mw-fixed";r=1;t=\d+', first[1].get("ratelimit", ""))
          and re.fullmatch(r'"mw-fixed";r=0;t=\d+', second[1].get("ratelimit", "")),
          f"{first[:2]} {second[:2]}")
    h, body = sluiced_refusal("mw-fixed")
    check(f"{name}: the third is 429 with sluiced's problem+json body, exactly",
          third[0] == 429 and third[1].get("content-type") == "application/problem+json"
          and body and third[2] == body, f"{third} vs sluiced's {body!r}")
    check(f"{name}: the 429 carries Retry-After (whole seconds > 0) and the fields as sluiced's",
          int(third[1].get("retry-after", "0")) > 0
          and third[1].get("ratelimit-policy") == h.get("ratelimit-policy")
          and re.fullmatch(r'"mw-fixed";r=0;t=\d+', third[1].get("ratelimit", "")), f"{third[1]}")
    st, h, body = get(port, "/fixed/ok")
    check(f"{name}: a request without the key's header is 400, a problem",
          st == 400 and json.loads(body)["status"] == 400
          and h.get("content-type") == "application/problem+json", f"{st} {body!r}")
    st, h, body = get(port, "/fixed/ok", "u" * 2000)
    check(f"{name}: a key longer than sluiced takes is 400, naming the bound, and never sent",
          st == 400 and "longer than 1024 bytes" in json.loads(body)["detail"], f"{st} {body!r}")


def soft(name, port):
    """Django's decorator with block=False: a refusal reaches the view, which decides."""
    u = f"{RUN}-{name}-soft"
    got = [get(port, "/soft/ok", u) for _ in range(3)]
    bodies = [g[2].decode() for g in got]
    check(f"{name}: block=False: every request reaches the view (200), the third with "
          "request.limited and the refusal in request.sluice",
          [g[0] for g in got] == [200] * 3
          and bodies == ["limited=False allowed=True remaining=1",
                         "limited=False allowed=True remaining=0",
                         "limited=True allowed=False remaining=0"], got)
    check(f"{name}: block=False: the view's own answer, with the RateLimit fields, no Retry-After",
          got[2][1].get("content-type") == "text/plain"
          and re.fullmatch(r'"mw-fixed";r=0;t=\d+', got[2][1].get("ratelimit", ""))
          and "retry-after" not in got[2][1], got[2][1])


def shadows(name, port):
    u = f"{RUN}-{name}-shadow"
    got = [get(port, "/shadow/ok", u)[0] for _ in range(3)]
    check(f"{name}: a shadow rule (limit 1) lets three requests through", got == [200] * 3, got)
    got = [get(port, "/mshadow/ok", u + "m") for _ in range(3)]
    check(f"{name}: the middleware's shadow mode lets the third through, reporting r=0",
          [g[0] for g in got] == [200] * 3
          and re.fullmatch(r'"mw-fixed";r=0;t=\d+', got[2][1].get("ratelimit", "")), got)


def unreachable(name, port):
    u = f"{RUN}-{name}-down"
    st, h, _ = get(port, "/open/ok", u)
    check(f"{name}: sluiced down, failing open: the request goes through, with no RateLimit fields",
          st == 200 and "ratelimit" not in h, f"{st} {h}")
    st, h, body = get(port, "/closed/ok", u)
    check(f"{name}: sluiced down, failing closed: 429 saying why, Retry-After, no RateLimit fields",
          st == 429 and "cannot be reached" in json.loads(body)["detail"]
          and int(h.get("retry-after", "0")) >= 1 and "ratelimit" not in h, f"{st} {h} {body!r}")


def fields_of(got):
    return "ratelimit" in got[1] and "ratelimit-policy" in got[1]


def killed(name, port, own):
    """own, the sluiced of /kopen/, /kclosed/ and /khold/, is killed by its PID while the app's
    clients hold pooled connections to it and a request holds an in-flight slot, then started
    again on its ports."""
    u = f"{RUN}-{name}-kill"
    client = sluice.Client(port=own.port, timeout_ms=5000)
    before = [get(port, p, u) for p in ("/kopen/ok", "/kclosed/ok", "/kidle/ok") * 3]
    check(f"{name}: kill: before, both clients are answered by sluiced (200, RateLimit fields)",
          all(g[0] == 200 and fields_of(g) for g in before), [g[:2] for g in before])
    s, head = stream_and_drop(port, "/khold/stream", u + "-held")
    check(f"{name}: kill: a streaming response holds mw-khold's one slot",
          head.startswith(b"HTTP/1.1 200") and client.peek("mw-khold", u + "-held").remaining == 0,
          head[:60])
    client.close()
    own.kill()
    got = get(port, "/kopen/ok", u)
    check(f"{name}: kill: sluiced gone, failing open: 200 with no RateLimit fields",
          got[0] == 200 and not fields_of(got), got[:2])
    st, h, body = get(port, "/kclosed/ok", u)
    check(f"{name}: kill: sluiced gone, failing closed: 429 saying why, with Retry-After",
          st == 429 and "cannot be reached" in json.loads(body)["detail"]
          and int(h.get("retry-after", "0")) >= 1 and "ratelimit" not in h, f"{st} {h} {body!r}")
    got = get(port, "/khold/ok", u + "-other")
    check(f"{name}: kill: an in-flight rule failing open lets a request through, holding nothing",
          got[0] == 200 and not fields_of(got), got[:2])
    failures = apps.KILLED["khold"].release_failures
    s.close()  # the held request ends while sluiced is down: its release fails
    check(f"{name}: kill: the live hold's release fails, counted, the app unharmed",
          harness.poll(30, lambda: apps.KILLED["khold"].release_failures > failures)
          and get(port, "/kopen/ok", u)[0] == 200, apps.KILLED["khold"].release_failures)
    check(f"{name}: kill: sluiced starts again on its ports", own.start())
    got = get(port, "/kidle/ok", u)
    check(f"{name}: kill: a client idle while sluiced was down: its first request after the "
          "restart is sluiced's answer (its dead pooled connection is replaced, not used)",
          got[0] == 200 and fields_of(got), got[:2])
    after = [get(port, p, u) for p in ("/kopen/ok", "/kclosed/ok")]
    check(f"{name}: kill: the clients that met it down: their first requests after the "
          "restart are sluiced's answers", all(g[0] == 200 and fields_of(g) for g in after),
          [g[:2] for g in after])
    client = sluice.Client(port=own.port, timeout_ms=5000)
    left = client.peek("mw-khold", u + "-held").remaining
    if harness.STORE:
        check(f"{name}: kill: the Redis store kept the hold whose release failed (it lasts to "
              "its hold_timeout); a reset frees it", left == 0, left)
        client.reset("mw-khold", u + "-held")
    else:
        check(f"{name}: kill: the memory store's hold died with sluiced", left == 1, left)
    got = get(port, "/khold/ok", u + "-held")
    check(f"{name}: kill: the in-flight rule admits the key again, from sluiced",
          got[0] == 200 and fields_of(got) and harness.poll(30, lambda: client.peek(
              "mw-khold", u + "-held").remaining == 1), got[:2])
    client.close()


def free(client, user):
    """True when the key of user under mw-jobs has its slot free (an acquire is admitted)."""
    d = client.acquire("mw-jobs", user)
    if d.hold_id:
        client.release("mw-jobs", user, d.hold_id)
    return d.allowed


def stream_and_drop(port, path, user):
    """Starts a streaming request, reads its head and a first chunk, and returns the socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-User: {user}\r\n\r\n".encode())
    got = b""
    for _ in range(1000):
        data = s.recv(65536)
        if not data:
            break
        got += data
        if b"\r\n\r\n" in got and len(got) > 1024:
            break
    return s, got


def holds(name, port, client, prefix="/jobs"):
    """The release lands once the response is written, which the client may see first: each
    check polls (bounded) for the slot to come free."""
    u = f"{RUN}-{name}{prefix.replace('/', '-')}"
    got = []
    for _ in range(3):
        got.append(get(port, f"{prefix}/ok", u + "-ok")[0])
        got.append(harness.poll(30, lambda: free(client, u + "-ok")))
    check(f"{name}{prefix}: three requests in turn each get the one slot (released at the end)",
          got == [200, True] * 3, got)
    st = get(port, f"{prefix}/boom", u + "-boom")[0]
    check(f"{name}{prefix}: the handler raised (500) and the hold was released",
          st == 500 and harness.poll(30, lambda: free(client, u + "-boom")), st)
    s, head = stream_and_drop(port, f"{prefix}/stream", u + "-drop")
    check(f"{name}{prefix}: a streaming response holds the slot while it runs",
          head.startswith(b"HTTP/1.1 200") and get(port, f"{prefix}/ok", u + "-drop")[0] == 429
          and not free(client, u + "-drop"), head[:60])
    s.close()  # the client goes away mid-response
    check(f"{name}{prefix}: the client disconnected mid-response and the hold was released",
          harness.poll(20, lambda: free(client, u + "-drop")))


def adaptive(client, user, rule="mw-adapt"):
    """The adaptive rule's limit for user once every hold of it is released (bounded poll), or
    None."""
    seen = []

    def settled():
        d = client.peek(rule, user)  # the key is the X-User header's value
        seen[:] = [d.limit]
        return d.remaining == d.limit

    return seen[0] if harness.poll(30, settled) else None


def priorities(name, port, client):
    u = f"{RUN}-{name}-prio"
    held = client.acquire("mw-prio", u)  # 1 of 2 held: a low request would leave high none

    def prio(p):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/prio/ok", headers={"X-User": u, **({"X-Priority": p} if p else {})})
        r = c.getresponse()
        r.read()
        c.close()
        return r.status

    got = [prio("low"), prio(None), prio("high")]
    check(f"{name}: in-flight priorities: low and none are shed for high's reserve, high passes",
          held.allowed and got == [429, 429, 200], got)
    check(f"{name}: an unknown priority is sluiced's error, not swallowed (500)",
          prio("urgent") == 500)
    client.release("mw-prio", u, held.hold_id)


def reports(name, port, client):
    """mw-adapt waits 10m for a release, so that no request of these is a drop for being slow on
    a loaded machine; only the slow case runs under mw-adapt-slow (latency_timeout 100ms)."""
    def run(tag, paths):
        u = f"{RUN}-{name}-{tag}"
        rule = "mw-adapt-slow" if paths[0].startswith("/adaptslow/") else "mw-adapt"
        for p in paths:
            get(port, p, u)
            adaptive(client, u, rule)  # one request at a time: each release lands before the next
        return adaptive(client, u, rule)

    got = run("grow", ["/adapt/ok", "/adapt/ok"])
    check(f"{name}: report: a window of two requests grows the adaptive limit 2 -> 3",
          got == 3, got)
    for tag, paths in (("e500", ["/adapt/ok", "/adapt/e500"]),
                       ("boom", ["/adapt/ok", "/adapt/boom"]),
                       ("slow", ["/adaptslow/ok", "/adaptslow/slow"])):
        path = paths[1]
        got = run(tag, paths)
        check(f"{name}: report: {path} is a drop (5xx, raised, or slower than latency_timeout): "
              "the limit halves to 1", got == 1, got)
    u = f"{RUN}-{name}-gone"
    s, head = stream_and_drop(port, "/adapt/stream", u)
    s.close()
    get(port, "/adapt/ok", u)
    got = adaptive(client, u)
    check(f"{name}: report: a client gone mid-response is a drop: the limit halves to 1",
          head.startswith(b"HTTP/1.1 200") and got == 1, got)
    got = run("quiet", ["/quiet/ok", "/quiet/ok", "/quiet/boom", "/quiet/slow"])
    check(f"{name}: no report (the default): the adaptive limit stays 2", got == 2, got)


def secured():
    """A sluiced where only admin reads rules: the middleware cannot read the rule's facts, and
    still limits (without the RateLimit fields); given them, it needs no read."""
    own = harness.OwnSluiced("secured", "--requirepass", "pw", "--admin-password", "apw",
                             "--rules", os.path.join(harness.TMP, "rules.yaml"))
    try:
        client = sluice.Client(port=own.port, password="pw")
        req = Request("GET", "/x", {"x-user": RUN}, "127.0.0.1")
        blind = RateLimit(client, "mw-fixed", key=by_header("x-user"))
        got = [blind.check(req) for _ in range(3)]
        check("no permission to read the rule: still limits (2 pass, the third 429), no fields",
              [o.allowed for o in got] == [True, True, False] and got[2].status == 429
              and not any(k.startswith("RateLimit") for o in got for k, _ in o.headers),
              repr(got))
        told = RateLimit(client, "mw-jobs", key=by_header("x-user"), algorithm="concurrency",
                         window="1h")
        a, b = told.check(req), told.check(req)
        check("the rule's facts given: an in-flight rule acquires, with the fields",
              a.allowed and a.hold_id and not b.allowed
              and ("RateLimit-Policy", '"mw-jobs";q=1;w=3600') in a.headers, f"{a} {b}")
        told.release(a)
        check("... and releases", told.check(req).allowed)
    finally:
        own.stop()


def back_after_first_use():
    """sluiced down when the middleware first reads its rule, then up: the next request reads it
    again (whatever RULE_INFO_RETRY_S, the wait after a refusal), learns that mw-jobs (limit 1)
    is an in-flight rule, and acquires and releases: one request after another all pass. While
    sluiced was down, the request was decided by on_unreachable (failing open: no fields)."""
    import asyncio

    import sluice.middleware as mw

    own = harness.OwnSluiced("firstdown", "--rules", os.path.join(harness.TMP, "rules.yaml"))
    retry, mw.RULE_INFO_RETRY_S = mw.RULE_INFO_RETRY_S, 3600
    try:
        client = sluice.Client(port=own.port, on_unreachable="allow", timeout_ms=5000)
        aclient = sluice.AsyncClient(port=own.port, on_unreachable="allow", timeout_ms=5000)
        own.kill()
        req = Request("GET", "/x", {"x-user": f"{RUN}-firstdown"}, "127.0.0.1")
        areq = Request("GET", "/x", {"x-user": f"{RUN}-afirstdown"}, "127.0.0.1")
        lim = RateLimit(client, "mw-jobs", key=by_header("x-user"))
        alim = RateLimit(aclient, "mw-jobs", key=by_header("x-user"))

        def in_turn(one):
            got = []
            for _ in range(3):
                o = one()
                got.append((o.allowed, bool(o.hold_id), bool(o.headers)))
                lim.release(o)
            return got

        async def arun():  # one event loop for the async client's whole life
            adown = await alim.acheck(areq)
            check("sluiced starts again", own.start())
            got = []
            for _ in range(3):
                o = await alim.acheck(areq)
                got.append((o.allowed, bool(o.hold_id), bool(o.headers)))
                await alim.arelease(o)
            await aclient.close()
            return adown, got

        down = lim.check(req)
        adown, agot = asyncio.run(arun())
        check("sluiced down at the first request: decided by on_unreachable (through, no fields)",
              all(o.allowed and o.decision.fallback and not o.headers for o in (down, adown)),
              f"{down} {adown}")
        got = in_turn(lambda: lim.check(req))
        check("sluiced back: requests in turn each acquire mw-jobs' one slot and release it",
              got == [(True, True, True)] * 3, got)
        check("sluiced back (asyncio): the same", agot == [(True, True, True)] * 3, agot)
        client.close()
    finally:
        mw.RULE_INFO_RETRY_S = retry
        own.stop()


# ---- the tests: the app of SLUICE_TEST_FRAMEWORK (asgi, flask, django; one a process, as
# Django's settings are), and a sluiced of the module's own that test_killed kills ------------

FRAMEWORK = os.environ.get("SLUICE_TEST_FRAMEWORK", "")
django_only = pytest.mark.skipif(FRAMEWORK != "django", reason="Django's view decorator")


class App:
    def __init__(self):
        self.name = FRAMEWORK
        self.own = harness.OwnSluiced(f"killed-{FRAMEWORK}", "--rules",
                                      os.path.join(harness.TMP, "rules.yaml"))
        self.port, self.stop_app = apps.FRAMEWORKS[FRAMEWORK](harness.RESP_PORT, self.own.port)
        self.client = sluice.Client(port=harness.RESP_PORT, timeout_ms=5000)

    def stop(self):
        self.stop_app()
        self.own.stop()


@pytest.fixture(scope="module")
def app():
    a = App()
    yield a
    a.stop()


def test_limited(app):
    limited(app.name, app.port, app.client)


def test_shadows(app):
    shadows(app.name, app.port)


def test_unreachable(app):
    unreachable(app.name, app.port)


def test_holds(app):
    holds(app.name, app.port, app.client)


def test_priorities(app):
    priorities(app.name, app.port, app.client)


def test_reports(app):
    reports(app.name, app.port, app.client)


@django_only
def test_decorator_holds(app):
    holds(app.name, app.port, app.client, "/deco")


@django_only
def test_decorator_block_false(app):
    soft(app.name, app.port)


def test_killed(app):
    killed(app.name, app.port, app.own)


def test_secured():
    secured()


def test_rule_read_once_sluiced_is_back():
    back_after_first_use()
