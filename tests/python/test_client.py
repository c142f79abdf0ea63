"""sluice.Client and sluice.AsyncClient beyond tests/sdk/cases.json: pipelines, a pool used by
threads and tasks at once, a server that never answers (timeouts, on_unreachable's backoff),
holds released by a block that raises, passwords, and TLS against a real sluiced."""

import asyncio
import os
import socket
import threading

import pytest

import harness
import sluice

PORT = harness.RESP_PORT
TLS_PORT = int(os.environ["SLUICE_TLS_PORT"])
TLS_CA = os.environ["SLUICE_TLS_CA"]
RUN = os.urandom(4).hex() + ":"
# for a server that answers: a timeout no loaded machine reaches (the tests of timeouts set theirs)
PATIENT = dict(timeout_ms=20000)


def test_pipelines():
    c = sluice.Client(port=PORT, **PATIENT)
    k = RUN + "pipe"
    got = c.allow_many([("sdk-fixed", k, 1)] * 4 + [("sdk-no-such-rule", k, 1)])
    # in order: 2, 1, 0 left, then a denial; each request's error in its place
    assert [d.remaining for d in got[:3]] == [2, 1, 0] and got[3].allowed is False, got
    assert isinstance(got[4], sluice.ServerError) and "sdk-no-such-rule" in str(got[4])
    # a cached denial answered by the client, the other cost sent
    again = c.allow_many([("sdk-fixed", k, 1), ("sdk-fixed", k, 2)])
    assert again[0].from_cache and not again[1].from_cache and c.cache_hits == 1, again


def test_pipeline_priorities():
    c = sluice.Client(port=PORT, **PATIENT)
    k = RUN + "pipe-prio"
    got = c.allow_many([("sdk-tiers", k, 7, "low"), ("sdk-tiers", k, 1, "low"),
                        ("sdk-tiers", k, 1, "high"), ("sdk-tiers", k, 1, "urgent")])
    # each request's priority sent: low shed for high's reserve, high admitted
    assert [d.allowed for d in got[:3]] == [True, False, True] and got[2].remaining == 2, got
    # an unknown one is that request's ServerError
    assert isinstance(got[3], sluice.ServerError) and "unknown priority 'urgent'" in str(got[3])
    # a refusal with a priority is not cached
    again = c.allow_many([("sdk-tiers", k, 1, "low")])
    assert not again[0].allowed and not again[0].from_cache and c.cache_hits == 0, again


def test_pooled_threads():
    """8 threads on a pool of 4 connections: 40 answers, exactly 3 admitted."""
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
    assert len(results) == 40 and results.count(True) == 3, results


def test_pooled_tasks():
    async def run():
        c = sluice.AsyncClient(port=PORT, cache_size=0, timeout_ms=10000)
        k = RUN + "tasks"
        try:
            got = await asyncio.gather(*[c.allow("sdk-fixed", k) for _ in range(30)])
            assert sum(d.allowed for d in got) == 3, got  # 30 concurrent tasks
            got = await c.allow_many([("sdk-bucket", k, 2)] * 3)
            assert [d.allowed for d in got] == [True, True, False], got  # 2 and 2 of a burst of 4
            got = await c.allow_many([("sdk-tiers", k, 7, "low"), ("sdk-tiers", k, 1, "low"),
                                      ("sdk-tiers", k, 1, "high"), ("sdk-tiers", k, 1, "urgent")])
            assert [d.allowed for d in got[:3]] == [True, False, True], got
            assert isinstance(got[3], sluice.ServerError), got
        finally:
            await c.close()

    asyncio.run(run())


@pytest.fixture
def silent_port():
    """A port that accepts connections and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    yield s.getsockname()[1]
    s.close()


def test_a_server_that_never_answers_raises_once_the_timeout_passes(silent_port):
    with pytest.raises(sluice.UnreachableError, match="(?i)timeout"):
        sluice.Client(port=silent_port, timeout_ms=200).allow("sdk-fixed", "x")


def test_fail_closed_waits_the_backoff_of_the_failures_in_a_row(silent_port):
    deny = sluice.Client(port=silent_port, timeout_ms=200, on_unreachable="deny", seed=5)
    rng = sluice.Rng(5)
    want = [max(1, sluice.backoff_ms(i, 50, 2000, rng)) for i in range(4)]
    assert [deny.allow("sdk-fixed", "x").retry_after_ms for _ in range(4)] == want


def test_fail_open_admits_an_acquire_marked_fallback_with_no_hold(silent_port):
    d = sluice.Client(port=silent_port, timeout_ms=200, on_unreachable="allow").acquire("sdk-jobs",
                                                                                         "x")
    assert d.allowed and d.fallback and d.hold_id == 0, d


def test_asyncio_a_server_that_never_answers_raises(silent_port):
    async def run():
        a = sluice.AsyncClient(port=silent_port, timeout_ms=200)
        try:
            with pytest.raises(sluice.UnreachableError, match="sluiced"):
                await a.allow("sdk-fixed", "x")
        finally:
            await a.close()

    asyncio.run(run())


@pytest.mark.parametrize("call,args", [("reset", ("sdk-fixed", "x")),
                                       ("release", ("sdk-jobs", "x", 1)), ("command", ("PING",))])
def test_calls_that_do_not_decide_raise_whatever_on_unreachable(silent_port, call, args):
    allow = sluice.Client(port=silent_port, timeout_ms=200, on_unreachable="allow")
    with pytest.raises(sluice.UnreachableError):
        getattr(allow, call)(*args)


def test_a_refused_connection_raises():
    with pytest.raises(sluice.UnreachableError):
        sluice.Client(port=harness.refused_port()).allow("sdk-fixed", "x")


def test_holds():
    c = sluice.Client(port=PORT, **PATIENT)
    k = RUN + "holds"
    with pytest.raises(KeyError):
        with c.hold("sdk-jobs", k, cost=2) as d:
            assert d.allowed and d.remaining == 0, d  # a hold of 2 takes both slots
            assert not c.acquire("sdk-jobs", k).allowed  # meanwhile another is refused
            raise KeyError("the work failed")
    d = c.acquire("sdk-jobs", k, cost=2)
    assert d.allowed, d  # the block raised and its hold was released
    c.release("sdk-jobs", k, d.hold_id)


def test_a_negative_cost_is_refused_before_anything_is_sent():
    c = sluice.Client(port=PORT, **PATIENT)
    k = RUN + "negative"
    with pytest.raises(ValueError):
        c.allow("sdk-fixed", k, -1)
    assert c.peek("sdk-fixed", k).remaining == 3


@pytest.fixture(scope="module")
def other_ca():
    other = os.path.join(harness.TMP, "other-ca.pem")
    os.system(f"openssl req -x509 -newkey rsa:2048 -nodes -keyout {other}.key -out {other} "
              "-days 2 -subj /CN=other 2>/dev/null")
    return other


def test_tls(other_ca):
    c = sluice.Client(port=TLS_PORT, **PATIENT, tls=True, tls_ca=TLS_CA)
    d = c.allow("sdk-fixed", RUN + "tls")
    assert d.allowed and d.remaining == 2, d  # checked against the server's certificate

    async def second():
        a = sluice.AsyncClient(port=TLS_PORT, **PATIENT, tls=True, tls_ca=TLS_CA)
        try:
            return await a.allow("sdk-fixed", RUN + "tls")
        finally:
            await a.close()

    d = asyncio.run(second())
    assert d.allowed and d.remaining == 1, d  # asyncio: the same key's second request
    with pytest.raises(sluice.UnreachableError, match="(?i)certificate"):  # another CA's
        sluice.Client(port=TLS_PORT, **PATIENT, tls=True, tls_ca=other_ca).allow("sdk-fixed",
                                                                               RUN + "tls")
    with pytest.raises(sluice.SluiceError):  # a plain connection to the TLS port
        sluice.Client(port=TLS_PORT, timeout_ms=1000).allow("sdk-fixed", RUN + "tls")


def test_passwords():
    own = harness.OwnSluiced("auth", "--requirepass", "pw", "--admin-password", "apw", "--rules",
                             os.path.join(harness.TMP, "rules.yaml"))
    try:
        d = sluice.Client(port=own.port, **PATIENT, password="pw").allow("sdk-fixed", "k")
        assert d.allowed, d  # --requirepass: a client with the password is answered
        for pw in (None, "wrong"):  # refused as an error, never failed open
            c = sluice.Client(port=own.port, **PATIENT, password=pw, on_unreachable="allow")
            with pytest.raises(sluice.ServerError):
                c.allow("sdk-fixed", "k")
        user = sluice.Client(port=own.port, **PATIENT, password="pw")
        admin = sluice.Client(port=own.port, **PATIENT, username="admin", password="apw")
        with pytest.raises(sluice.ServerError, match="no permissions"):  # a reset needs admin
            user.reset("sdk-fixed", "k")
        admin.reset("sdk-fixed", "k")
        assert user.peek("sdk-fixed", "k").remaining == 3
    finally:
        own.stop()
