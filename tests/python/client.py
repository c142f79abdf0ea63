"""sluice.Client and sluice.AsyncClient beyond tests/sdk/cases.json: pipelines, a pool used by
threads and tasks at once, a server that never answers (timeouts, on_unreachable's backoff),
holds released by a block that raises, and TLS against a real sluiced."""

import asyncio
import os
import socket
import threading

import harness
import sluice
from harness import check

PORT = harness.RESP_PORT
TLS_PORT = int(os.environ["SLUICE_TLS_PORT"])
TLS_CA = os.environ["SLUICE_TLS_CA"]
RUN = os.urandom(4).hex() + ":"


def pipelines():
    c = sluice.Client(port=PORT)
    k = RUN + "pipe"
    got = c.allow_many([("sdk-fixed", k, 1)] * 4 + [("sdk-no-such-rule", k, 1)])
    check("a pipeline answers in order: 2, 1, 0 left, then a denial",
          [d.remaining for d in got[:3]] == [2, 1, 0] and got[3].allowed is False, repr(got))
    check("a pipeline gives each request's error in its place",
          isinstance(got[4], sluice.ServerError) and "sdk-no-such-rule" in str(got[4]))
    again = c.allow_many([("sdk-fixed", k, 1), ("sdk-fixed", k, 2)])
    check("a pipeline answers a cached denial itself and sends the other cost",
          again[0].from_cache and not again[1].from_cache and c.cache_hits == 1, repr(again))
    k = RUN + "pipe-prio"
    got = c.allow_many([("sdk-tiers", k, 7, "low"), ("sdk-tiers", k, 1, "low"),
                        ("sdk-tiers", k, 1, "high"), ("sdk-tiers", k, 1, "urgent")])
    again = c.allow_many([("sdk-tiers", k, 1, "low")])
    check("a pipeline sends each request's priority: low shed for high's reserve, high admitted",
          [d.allowed for d in got[:3]] == [True, False, True] and got[2].remaining == 2, repr(got))
    check("... an unknown one is that request's ServerError",
          isinstance(got[3], sluice.ServerError) and "unknown priority 'urgent'" in str(got[3]))
    check("... and a refusal with a priority is not cached",
          not again[0].allowed and not again[0].from_cache and c.cache_hits == 1, repr(again))


def pooled_threads():
    c = sluice.Client(port=PORT, cache_size=0, max_connections=4, timeout_ms=10000)
    k, results = RUN + "threads", []
    lock = threading.Lock()

    def work():
        for _ in range(5):
            d = c.allow("sdk-fixed", k)
            with lock:
                results.append(d.allowed)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    check("8 threads on a pool of 4 connections: 40 answers, exactly 3 admitted",
          len(results) == 40 and results.count(True) == 3, f"{len(results)} {results.count(True)}")


async def pooled_tasks():
    c = sluice.AsyncClient(port=PORT, cache_size=0, timeout_ms=10000)
    k = RUN + "tasks"
    got = await asyncio.gather(*[c.allow("sdk-fixed", k) for _ in range(30)])
    check("30 concurrent tasks: exactly 3 admitted",
          sum(d.allowed for d in got) == 3, repr([d.allowed for d in got]))
    got = await c.allow_many([("sdk-bucket", k, 2), ("sdk-bucket", k, 2), ("sdk-bucket", k, 2)])
    check("an async pipeline: 2 and 2 of a burst of 4, then a denial",
          [d.allowed for d in got] == [True, True, False], repr(got))
    got = await c.allow_many([("sdk-tiers", k, 7, "low"), ("sdk-tiers", k, 1, "low"),
                              ("sdk-tiers", k, 1, "high"), ("sdk-tiers", k, 1, "urgent")])
    check("an async pipeline with priorities: low shed, high admitted, an unknown one its error",
          [d.allowed for d in got[:3]] == [True, False, True]
          and isinstance(got[3], sluice.ServerError), repr(got))
    await c.close()


def silent_port():
    """A port that accepts connections and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


def unreachable():
    s = silent_port()
    port = s.getsockname()[1]
    c = sluice.Client(port=port, timeout_ms=200)
    try:
        c.allow("sdk-fixed", "x")
        check("a server that never answers: the call raises once the timeout passes", False)
    except sluice.UnreachableError as e:
        check("a server that never answers: the call raises once the timeout passes",
              "timeout" in str(e).lower(), str(e))
    deny = sluice.Client(port=port, timeout_ms=200, on_unreachable="deny", seed=5)
    rng = sluice.Rng(5)
    want = [max(1, sluice.backoff_ms(i, 50, 5000, rng)) for i in range(4)]
    got = [deny.allow("sdk-fixed", "x").retry_after_ms for _ in range(4)]
    check("fail closed: the n-th failure in a row waits backoff_ms(n, 50, 5000)", got == want,
          f"{got} != {want}")
    allow = sluice.Client(port=port, timeout_ms=200, on_unreachable="allow")
    d = allow.acquire("sdk-jobs", "x")
    check("fail open: an acquire is admitted, marked fallback, with no hold",
          d.allowed and d.fallback and d.hold_id == 0, repr(d))
    async def async_silent():
        a = sluice.AsyncClient(port=port, timeout_ms=200)
        try:
            await a.allow("sdk-fixed", "x")
            return "no error"
        except sluice.UnreachableError as e:
            return str(e)
        finally:
            await a.close()

    got = asyncio.run(async_silent())
    check("asyncio: a server that never answers raises UnreachableError", "sluiced" in got, got)
    s.close()
    for call in ("reset", "release", "command"):
        args = {"reset": ("sdk-fixed", "x"), "release": ("sdk-jobs", "x", 1),
                "command": ("PING",)}[call]
        try:
            getattr(allow, call)(*args)
            check(f"{call} on a server that never answers raises UnreachableError", False)
        except sluice.UnreachableError:
            check(f"{call} on a server that never answers raises UnreachableError", True)
    refused = harness.free_port()
    try:
        sluice.Client(port=refused).allow("sdk-fixed", "x")
        check("a refused connection raises UnreachableError", False)
    except sluice.UnreachableError:
        check("a refused connection raises UnreachableError", True)


def holds():
    c = sluice.Client(port=PORT)
    k = RUN + "holds"
    try:
        with c.hold("sdk-jobs", k, cost=2) as d:
            check("a hold of 2 takes both slots", d.allowed and d.remaining == 0, repr(d))
            check("meanwhile another acquire is refused", not c.acquire("sdk-jobs", k).allowed)
            raise KeyError("the work failed")
    except KeyError:
        pass
    d = c.acquire("sdk-jobs", k, cost=2)
    check("the block raised and its hold was released", d.allowed, repr(d))
    c.release("sdk-jobs", k, d.hold_id)
    try:
        c.allow("sdk-fixed", k, -1)
        check("a negative cost is refused before anything is sent", False)
    except ValueError:
        check("a negative cost is refused before anything is sent", c.peek("sdk-fixed", k).remaining == 3)


async def tls():
    c = sluice.Client(port=TLS_PORT, tls=True, tls_ca=TLS_CA)
    d = c.allow("sdk-fixed", RUN + "tls")
    check("TLS: a decision over a connection checked against the server's certificate",
          d.allowed and d.remaining == 2, repr(d))
    a = sluice.AsyncClient(port=TLS_PORT, tls=True, tls_ca=TLS_CA)
    d = await a.allow("sdk-fixed", RUN + "tls")
    check("TLS, asyncio: the same key's second request", d.allowed and d.remaining == 1, repr(d))
    await a.close()
    other = os.path.join(harness.TMP, "other-ca.pem")
    os.system(f"openssl req -x509 -newkey rsa:2048 -nodes -keyout {other}.key -out {other} "
              "-days 2 -subj /CN=other 2>/dev/null")
    try:
        sluice.Client(port=TLS_PORT, tls=True, tls_ca=other).allow("sdk-fixed", RUN + "tls")
        check("TLS: a certificate another CA signed is refused", False)
    except sluice.UnreachableError as e:
        check("TLS: a certificate another CA signed is refused", "certificate" in str(e).lower(), str(e))
    try:
        sluice.Client(port=TLS_PORT, timeout_ms=1000).allow("sdk-fixed", RUN + "tls")
        check("a plain connection to the TLS port fails", False)
    except sluice.SluiceError:
        check("a plain connection to the TLS port fails", True)


def passwords():
    own = harness.OwnSluiced("auth", "--requirepass", "pw", "--admin-password", "apw", "--rules",
                             os.path.join(harness.TMP, "rules.yaml"))
    try:
        d = sluice.Client(port=own.port, password="pw").allow("sdk-fixed", "k")
        check("--requirepass: a client with the password is answered", d.allowed, repr(d))
        for pw in (None, "wrong"):
            c = sluice.Client(port=own.port, password=pw, on_unreachable="allow")
            try:
                c.allow("sdk-fixed", "k")
                check(f"password {pw!r}: refused as an error, never failed open", False)
            except sluice.ServerError as e:
                check(f"password {pw!r}: refused as an error, never failed open", True, str(e))
        user = sluice.Client(port=own.port, password="pw")
        admin = sluice.Client(port=own.port, username="admin", password="apw")
        try:
            user.reset("sdk-fixed", "k")
            check("--admin-password: a reset needs admin", False)
        except sluice.ServerError as e:
            check("--admin-password: a reset needs admin", "no permissions" in str(e), str(e))
        admin.reset("sdk-fixed", "k")
        check("username admin resets the key", user.peek("sdk-fixed", "k").remaining == 3)
    finally:
        own.stop()


pipelines()
passwords()
pooled_threads()
asyncio.run(pooled_tasks())
unreachable()
holds()
asyncio.run(tls())
harness.finish()
