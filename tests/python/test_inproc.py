"""sluice.inproc, the ctypes binding of libsluice, against sluiced: seeded random sequences of
(time, key, cost) decided in-process and replayed by sluiced (POST /v1/replay, its own table and
the given times) must admit exactly the same requests, for every algorithm. Also: a table shared
by threads admits exactly its limit, holds, errors, and the backoff of sluice.backoff_ms against
the C client's slc_backoff_ms for the same seeds.

SLUICE_SEED picks one seed (a failure names the seed that found it); else seeds 1..4.
"""

import ctypes
import http.client
import json
import os
import random
import threading

import pytest

import harness
import sluice
from harness import check
from sluice import inproc

BASE_NS = 1_700_000_000_000_000_000
RULES = [  # the rule as sluiced's replay takes it, and as sluice.inproc.Rule takes it
    ({"algorithm": "fixed_window", "limit": 5, "window": "1s"}, {}),
    ({"algorithm": "sliding_log", "limit": 5, "window": "1s"}, {}),
    ({"algorithm": "sliding_window", "limit": 5, "window": "1s"}, {}),
    ({"algorithm": "sliding_buckets", "limit": 6, "window": "1s", "buckets": 4}, {"buckets": 4}),
    ({"algorithm": "token_bucket", "limit": 5, "window": "1s", "burst": 8}, {"burst": 8}),
    ({"algorithm": "gcra", "limit": 5, "window": "1s", "burst": 3}, {"burst": 3}),
    ({"algorithm": "token_bucket", "limit": 5, "window": "1s", "max_delay": "300ms"},
     {"max_delay": "300ms"}),
]


def sequence(rng, capacity, n=40):
    """n requests on 3 keys: times that stay, step a little or jump past a window; costs 1-3,
    now and then one above the capacity (never admitted)."""
    t, out = BASE_NS + rng.randrange(10**9), []
    for _ in range(n):
        t += rng.choice([0, 0, rng.randrange(1, 10**8), rng.randrange(10**8, 6 * 10**8),
                         rng.randrange(10**9, 3 * 10**9)])
        cost = capacity + 1 if rng.random() < 0.05 else rng.randint(1, 3)
        out.append((t, rng.choice("abc"), cost))
    return out


def replay_admitted(spec, reqs):
    """Per key, how many of reqs sluiced's replay admits."""
    body = dict(spec, unit="ns", log="".join(f"{t} {k} {c}\n" for t, k, c in reqs))
    conn = http.client.HTTPConnection("127.0.0.1", harness.HTTP_PORT, timeout=30)
    conn.request("POST", "/v1/replay", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    answer = json.loads(r.read())
    conn.close()
    if r.status != 200 or not answer.get("complete"):
        raise RuntimeError(f"replay: {r.status} {answer}")
    return {k["key"]: k["admitted"] for k in answer["keys"]}


def same_as_sluiced(seed):
    rng = random.Random(seed)
    for spec, extra in RULES:
        rule = inproc.Rule(spec["algorithm"], spec["limit"], spec["window"], **extra)
        table = inproc.Table(rule, seed=seed)
        states = {k: rule.new_state() for k in "abc"}
        reqs = sequence(rng, rule.capacity)
        mine, pure, theirs, before = [], [], [], {}
        for i, (t, k, c) in enumerate(reqs):
            mine.append(table.decide(k, c, t).allowed)
            pure.append(rule.decide(states[k], c, t).allowed)
            now = replay_admitted(spec, reqs[: i + 1])
            theirs.append(now.get(k, 0) > before.get(k, 0))
            before = now
        name = f"seed {seed}: {spec}"
        check(f"{name}: in-process decisions are sluiced's, request by request", mine == theirs,
              f"\n  mine   {mine}\n  theirs {theirs}\n  reqs {reqs}")
        check(f"{name}: Table and Rule.decide on a state agree", mine == pure)


def cache_never_wrong(seed):
    """sluice.OverLimitCache in front of libsluice (as the client puts it in front of sluiced):
    over seeded random requests, times, resets and refunds, every answer the cache gives is a
    refusal the table gives too at that time, for every algorithm and a cache smaller than the
    keys (evictions). For a max_delay rule, the table may admit with a delay where the cache
    refuses: the documented limit of a cache that does not know the rule."""
    rng = random.Random(seed)
    for spec, extra in RULES:
        rule = inproc.Rule(spec["algorithm"], spec["limit"], spec["window"], **extra)
        table, cache = inproc.Table(rule, seed=seed), sluice.OverLimitCache(rng.choice([1, 4, 64]))
        now, hits, wrong = BASE_NS, 0, []
        for _ in range(600):
            now += rng.choice([0, 0, rng.randrange(1, 2 * 10**8), rng.randrange(10**9)])
            k, c = rng.choice("abcdefgh"), rng.randint(1, rule.capacity + 1)
            if rng.random() < 0.03:
                table.reset(k)
                cache.forget("r", k)
                continue
            hit = cache.lookup("r", k, c, now)
            d = table.decide(k, c, now)
            if hit is not None:
                hits += 1
                # a max_delay rule admits with a delay what the cache, knowing no rule, still
                # refuses (docs/client.md says so): that, and only that, is allowed to differ
                delayed = d.allowed and d.delay_ns > 0 and "max_delay" in spec
                if (d.allowed and not delayed) or d.retry_after_ns > hit.retry_after_ms * 10**6:
                    wrong.append((k, c, now, hit, d))
                continue
            ms = -1 if d.retry_after_ns < 0 else -(-d.retry_after_ns // 10**6)
            cache.record("r", k, c, sluice.Decision(d.allowed, d.limit, d.remaining, ms,
                                                    -(-d.reset_after_ns // 10**6)), now)
        check(f"seed {seed}: {spec['algorithm']}: the cache answered {hits} times, each a "
              "refusal the table gives, no later than its retry time", hits > 0 and not wrong,
              wrong[:2])


def threads():
    rule = inproc.Rule("fixed_window", 1000, "1h")
    table, admitted, lock = inproc.Table(rule), [], threading.Lock()

    def work():
        n = sum(table.decide("shared", 1, BASE_NS).allowed for _ in range(400))
        with lock:
            admitted.append(n)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    check("4 threads, 1600 requests on one table and key: exactly 1000 admitted",
          sum(admitted) == 1000 and len(admitted) == 4, admitted)


def holds_and_errors():
    table = inproc.Table(inproc.Rule("concurrency", 2, "1m"))
    a = table.acquire("k", 1, BASE_NS)
    b = table.acquire("k", 1, BASE_NS)
    c = table.acquire("k", 1, BASE_NS)
    check("holds: two of limit 2 admitted with ids, the third refused with none",
          a.allowed and b.allowed and a.hold_id and b.hold_id and a.hold_id != b.hold_id
          and not c.allowed and c.hold_id == 0)
    table.release("k", a.hold_id, BASE_NS)
    check("a release frees its slot at once", table.acquire("k", 1, BASE_NS).allowed)
    try:
        table.release("k", a.hold_id, BASE_NS)
        check("a second release of one hold is an error", False)
    except inproc.LibraryError as e:
        check("a second release of one hold is an error", "hold" in str(e), str(e))
    check("after the hold timeout the key is free again",
          table.acquire("k", 2, BASE_NS + 60 * 10**9).allowed)
    for bad, field in [(dict(algorithm="gcra", limit=0, window="1s"), "limit"),
                       (dict(algorithm="fixed_window", limit=1, window="0s"), "window"),
                       (dict(algorithm="fixed_window", limit=1, window="1s", burst=3), "burst")]:
        try:
            inproc.Rule(**bad)
            check(f"a rule with a bad {field} is refused", False)
        except inproc.LibraryError as e:
            check(f"a rule with a bad {field} is refused, naming it", field in str(e), str(e))
    try:
        inproc.Table(inproc.Rule("fixed_window", 1, "1s")).decide("k", -1, BASE_NS)
        check("a negative cost is an error", False)
    except inproc.LibraryError as e:
        check("a negative cost is an error", "cost" in str(e), str(e))


def backoff_as_c():
    lib = ctypes.CDLL(os.environ["SLUICE_CLIENT_LIBRARY"])
    lib.slc_backoff_ms.restype = ctypes.c_int64
    lib.slc_backoff_ms.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.POINTER(ctypes.c_uint64)]
    rng = random.Random(11)
    same = 0
    for _ in range(200):
        seed = rng.getrandbits(64)
        attempt, base, cap = rng.randrange(-2, 80), rng.randrange(-5, 10**4), rng.randrange(-5, 10**7)
        state, py = ctypes.c_uint64(seed), sluice.Rng(seed)
        c = [lib.slc_backoff_ms(attempt, base, cap, ctypes.byref(state)) for _ in range(5)]
        p = [sluice.backoff_ms(attempt, base, cap, py) for _ in range(5)]
        same += c == p and state.value == py.state
    check("backoff_ms draws what the C client's slc_backoff_ms draws, for 200 seeds", same == 200,
          f"{same}/200")


SEEDS = [int(os.environ["SLUICE_SEED"])] if os.environ.get("SLUICE_SEED") else [1, 2, 3, 4]


@pytest.mark.parametrize("seed", SEEDS)
def test_same_as_sluiced(seed):
    same_as_sluiced(seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_cache_never_wrong(seed):
    cache_never_wrong(seed)


def test_threads():
    threads()


def test_holds_and_errors():
    holds_and_errors()


def test_backoff_as_c():
    backoff_as_c()
