"""Runs every case of tests/sdk/cases.json with sluice.Client and with sluice.AsyncClient: one
test per case and client, which fails naming every step that differed.

SLUICE_CASES_JSON: the path of cases.json. Cases run against the sluiced the shell script started
(SLUICE_RESP_PORT, with cases.json's rules); a case that stops the server gets a sluiced of its
own (harness.OwnSluiced), stopped by its PID at its stop_server step.
"""

import asyncio
import json
import os

import pytest

import harness
import sluice

with open(os.environ["SLUICE_CASES_JSON"]) as f:
    TABLE = json.load(f)
RUN_ID = os.urandom(6).hex()


class FakeClock:
    def __init__(self):
        self.ns = 10**15

    def __call__(self):
        return self.ns


def matches(want, got):
    if isinstance(want, dict):
        return ("gt" not in want or got > want["gt"]) and ("lt" not in want or got < want["lt"])
    return want == got


def fields(d):
    return {"allowed": d.allowed, "limit": d.limit, "remaining": d.remaining,
            "retry_after_ms": d.retry_after_ms, "reset_after_ms": d.reset_after_ms,
            "from_cache": d.from_cache, "fallback": d.fallback, "hold": d.hold_id != 0}


class Run:
    """One case's state: its client, clock, saved holds, the server it may stop."""

    def __init__(self, case, flavour, prefix, rules_path):
        self.case, self.flavour, self.prefix = case, flavour, prefix
        self.clock, self.holds, self.own = FakeClock(), {}, None
        self.failed = []  # the steps that differed, each with what it got
        port = harness.RESP_PORT
        if any(s["op"] == "stop_server" for s in case["steps"]):
            self.own = harness.OwnSluiced("cases-own", "--rules", rules_path)
            port = self.own.port
        opts = dict(case.get("options", {}))
        kind = sluice.Client if flavour == "sync" else sluice.AsyncClient
        self.client = kind(port=port, clock_ns=self.clock, timeout_ms=5000, seed=7, **opts)

    def check(self, name, cond, detail=""):
        if not cond:
            self.failed.append(f"{name}: {detail}")

    async def call(self, step):
        op, c = step["op"], self.client
        key = self.prefix + step.get("key", "")
        prio = step.get("priority")
        args = {"allow": lambda: c.allow(step["rule"], key, step.get("cost", 1), priority=prio),
                "peek": lambda: c.peek(step["rule"], key, priority=prio),
                "settle": lambda: c.settle(step["rule"], key, step["reserved"], step["actual"]),
                "reset": lambda: c.reset(step["rule"], key),
                "acquire": lambda: c.acquire(step["rule"], key, step.get("cost", 1),
                                             step.get("timeout_ms"), priority=prio),
                "release": lambda: c.release(step["rule"], key, self.hold_id(step["hold"]),
                                             latency_ms=step.get("latency_ms"),
                                             dropped=step.get("dropped", False))}
        r = args[op]()
        return await r if asyncio.iscoroutine(r) else r

    def hold_id(self, h):
        return self.holds.get(h, 0) if isinstance(h, str) else h  # 0: never saved, no hold

    async def step(self, i, step):
        name = f"step {i + 1} ({step['op']})"
        want = step.get("expect", {})
        if step["op"] == "advance_ms":
            self.clock.ns += step["ms"] * 1_000_000
            return
        if step["op"] == "stop_server":
            self.own.stop()
            return
        if step["op"] == "cache_hits":
            self.check(name, self.client.cache_hits == want["count"],
                          f"hits {self.client.cache_hits}")
            return
        try:
            got = await self.call(step)
        except (sluice.SluiceError, ValueError) as e:  # ValueError: refused before sending
            self.check(name, "error" in want and want["error"].lower() in str(e).lower(),
                          f"raised {e!r}")
            return
        if "error" in want:
            self.check(name, False, f"expected an error with {want['error']!r}, got {got!r}")
            return
        if "save" in step:
            self.holds[step["save"]] = got.hold_id
        have = fields(got) if got is not None else {}
        bad = {k: have.get(k) for k, v in want.items() if not matches(v, have.get(k))}
        self.check(name, not bad, f"expected {want}, got {got!r}")

    async def run(self):
        try:
            for i, step in enumerate(self.case["steps"]):
                await self.step(i, step)
        finally:
            if self.own:
                self.own.stop()
            r = self.client.close()
            if asyncio.iscoroutine(r):
                await r


@pytest.fixture(scope="module")
def rules_path():
    path = os.path.join(harness.TMP, "cases-rules.yaml")
    with open(path, "w") as f:
        f.write(TABLE["rules_yaml"])
    return path


def test_every_case_has_a_name_of_its_own():
    names = [c["name"] for c in TABLE["cases"]]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("n", range(len(TABLE["cases"])),
                         ids=[c["name"] for c in TABLE["cases"]])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_case(flavour, n, rules_path):
    run = Run(TABLE["cases"][n], flavour, f"{RUN_ID}:{flavour}:{n}:", rules_path)
    asyncio.run(run.run())
    assert not run.failed, "\n".join(run.failed)
