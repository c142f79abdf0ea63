"""sluice.backoff_ms against tests/sdk/backoff.json, the delays every client package must draw
from the same seed (the C client's slc_backoff_ms): one Rng per sequence, seeded once, drawn in
order. SLUICE_BACKOFF_JSON: the path of backoff.json.
"""

import json
import os

import pytest

import sluice
from sluice.backoff import Rng

with open(os.environ["SLUICE_BACKOFF_JSON"]) as f:
    SEQUENCES = json.load(f)["sequences"]


def test_there_are_sequences():
    assert len(SEQUENCES) >= 2


@pytest.mark.parametrize("seq", SEQUENCES, ids=lambda s: f"seed {s['seed']}")
def test_sequence(seq):
    rng = Rng(seq["seed"])
    got = [sluice.backoff_ms(a, seq["base_ms"], seq["cap_ms"], rng) for a in seq["attempts"]]
    assert got == seq["delays_ms"]
