"""sluice.backoff_ms against tests/sdk/backoff.json, the delays every client package must draw
from the same seed (the C client's slc_backoff_ms): one Rng per sequence, seeded once, drawn in
order. Then its fallbacks: on_unreachable="deny" with the default backoff and a client's own
(backoff_base_ms, backoff_cap_ms), sync and async, against a port that refuses.
SLUICE_BACKOFF_JSON: the path of backoff.json.
"""

import asyncio
import json
import os

import pytest

import harness
import sluice
from sluice.backoff import Rng

with open(os.environ["SLUICE_BACKOFF_JSON"]) as f:
    TABLE = json.load(f)
SEQUENCES = TABLE["sequences"]
FALLBACKS = TABLE["fallbacks"]


def test_there_are_sequences():
    assert len(SEQUENCES) >= 2


@pytest.mark.parametrize("seq", SEQUENCES, ids=lambda s: f"seed {s['seed']}")
def test_sequence(seq):
    rng = Rng(seq["seed"])
    got = [sluice.backoff_ms(a, seq["base_ms"], seq["cap_ms"], rng) for a in seq["attempts"]]
    assert got == seq["delays_ms"]


def test_the_defaults_are_the_tables():
    defaults = [f for f in FALLBACKS if not f["options"]]
    assert len(defaults) == 1 and len(FALLBACKS) >= 2, FALLBACKS
    d = defaults[0]
    for kind in (sluice.Client, sluice.AsyncClient):
        kw = kind.__init__.__kwdefaults__
        assert (kw["backoff_base_ms"], kw["backoff_cap_ms"]) == (d["base_ms"], d["cap_ms"]), kind


@pytest.mark.parametrize("case", FALLBACKS, ids=lambda f: f["name"])
def test_the_drawn_delays_are_the_backoffs(case):
    rng = Rng(case["seed"])
    want = [max(1, sluice.backoff_ms(i, case["base_ms"], case["cap_ms"], rng))
            for i in range(len(case["retry_after_ms"]))]
    assert want == case["retry_after_ms"]


@pytest.mark.parametrize("case", FALLBACKS, ids=lambda f: f["name"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_deny_refuses_with_the_clients_backoff(flavour, case):
    opts = dict(port=harness.refused_port(), timeout_ms=2000, on_unreachable="deny",
                seed=case["seed"], **case["options"])
    n = len(case["retry_after_ms"])
    if flavour == "sync":
        c = sluice.Client(**opts)
        got = [c.allow("sdk-fixed", "k") for _ in range(n)]
        c.close()
    else:
        async def run():
            a = sluice.AsyncClient(**opts)
            try:
                return [await a.allow("sdk-fixed", "k") for _ in range(n)]
            finally:
                await a.close()
        got = asyncio.run(run())
    assert all(not d.allowed and d.fallback for d in got), got
    assert [d.retry_after_ms for d in got] == case["retry_after_ms"]


@pytest.mark.parametrize("bad", [{"backoff_base_ms": -1}, {"backoff_cap_ms": 1.5},
                                 {"backoff_cap_ms": None}, {"backoff_base_ms": True}])
def test_a_backoff_option_that_is_not_a_count_of_ms_is_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        sluice.Client(**bad)
