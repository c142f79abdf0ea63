"""What the sync and the async client share, with no I/O: the commands they send, the options,
the over-limit cache around a call, and the answer when sluiced cannot be reached."""

import math
import os
import time

from . import backoff
from .cache import DEFAULT_SIZE, OverLimitCache
from .decision import Decision, parse_decision
from .errors import ServerError, UnreachableError

ON_UNREACHABLE = ("raise", "allow", "deny")
# on_unreachable="deny"'s backoff, the defaults of backoff_base_ms and backoff_cap_ms: the same in
# every client package, and the C client's fallback in docs/client.md ("When sluiced cannot be
# reached")
BACKOFF_BASE_MS = 50
BACKOFF_CAP_MS = 2000
LATENCY_MAX_MS = 3_600_000  # the most a release reports: 1h


def _check_cost(name, n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{name} must be an integer >= 0, not {n!r}")


def _priority(priority):
    """PRIORITY p, or nothing for None (the rule's lowest)."""
    if priority is None:
        return ()
    if not isinstance(priority, str) or not priority:
        raise ValueError(f"priority must be a non-empty string or None, not {priority!r}")
    return ("PRIORITY", priority)


def allow_args(rule, key, cost, priority=None):
    _check_cost("cost", cost)
    return ("SL.ALLOW", rule, key) + (("COST", cost) if cost != 1 else ()) + _priority(priority)


def many_request(req):
    """An allow_many request, (rule, key, cost) or (rule, key, cost, priority), as the four."""
    rule, key, cost, *rest = req
    if len(rest) > 1:
        raise ValueError(f"a request is (rule, key, cost[, priority]), not {req!r:.100}")
    return rule, key, cost, rest[0] if rest else None


def peek_args(rule, key, priority=None):
    return ("SL.PEEK", rule, key) + _priority(priority)


def acquire_args(rule, key, cost, timeout_ms, priority=None):
    _check_cost("cost", cost)
    args = ("SL.ACQUIRE", rule, key) + (("COST", cost) if cost != 1 else ())
    if timeout_ms is not None:
        _check_cost("timeout_ms", timeout_ms)
        args += ("TIMEOUT", timeout_ms)
    return args + _priority(priority)


def release_args(rule, key, hold_id, latency_ms=None, dropped=False):
    """SL.RELEASE rule key id [LATENCY <us>us] [DROPPED]: latency_ms (a number, fractions
    allowed) is sent in whole microseconds, as the C client sends it."""
    args = ("SL.RELEASE", rule, key, hold_id)
    if latency_ms is not None:
        if (isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float))
                or not math.isfinite(latency_ms) or not 0 <= latency_ms <= LATENCY_MAX_MS):
            raise ValueError(f"latency_ms must be a number of milliseconds, 0 .. {LATENCY_MAX_MS} "
                             f"(1h), not {latency_ms!r}")
        args += ("LATENCY", f"{round(latency_ms * 1000)}us")
    return args + (("DROPPED",) if dropped else ())


def settle_args(rule, key, reserved, actual, at_ms):
    _check_cost("reserved", reserved)
    _check_cost("actual", actual)
    args = ("SL.SETTLE", rule, key, reserved, actual)
    return args + (("AT", at_ms),) if at_ms is not None else args


class Core:
    """The client's state apart from its connections: options, cache, clock, failures in a row."""

    def __init__(self, cache_size=DEFAULT_SIZE, on_unreachable="raise", clock_ns=None, seed=None,
                 backoff_base_ms=BACKOFF_BASE_MS, backoff_cap_ms=BACKOFF_CAP_MS):
        if on_unreachable not in ON_UNREACHABLE:
            raise ValueError(f"on_unreachable must be one of {ON_UNREACHABLE}, not {on_unreachable!r}")
        _check_cost("backoff_base_ms", backoff_base_ms)
        _check_cost("backoff_cap_ms", backoff_cap_ms)
        self.backoff_base_ms, self.backoff_cap_ms = backoff_base_ms, backoff_cap_ms
        self.cache = OverLimitCache(cache_size)
        self.on_unreachable = on_unreachable
        self.clock_ns = clock_ns or time.monotonic_ns
        self.rng = backoff.Rng(seed if seed is not None else int.from_bytes(os.urandom(8), "little"))
        self.failures = 0  # calls in a row that found sluiced unreachable

    def cached(self, rule, key, cost, priority=None):
        """A cached refusal for an allow of cost, or None; and when the request is sent. A
        request with a priority is never answered by the cache."""
        now = self.clock_ns()
        hit = self.cache.lookup(rule, key, cost, now) if cost >= 1 and priority is None else None
        return hit, now

    def answered(self, rule, key, cost, reply, asked_ns, priority=None):
        """The Decision of an SL.ALLOW reply, recorded in the cache (unless it had a priority)."""
        self.failures = 0
        d = parse_decision(reply)
        if priority is None:
            self.cache.record(rule, key, cost, d, asked_ns)
        return d

    def unreachable(self, exc):
        """What a call that could not reach sluiced (exc, an UnreachableError) returns, or
        raises (on_unreachable)."""
        attempt = self.failures
        self.failures += 1
        if self.on_unreachable == "allow":
            return Decision(True, 0, 0, 0, 0, fallback=True)
        if self.on_unreachable == "deny":
            wait = backoff.backoff_ms(attempt, self.backoff_base_ms, self.backoff_cap_ms,
                                     self.rng)
            return Decision(False, 0, 0, max(1, wait), 0, fallback=True)
        raise exc


def unreachable_error(exc):
    """The UnreachableError of a connection error or timeout."""
    return UnreachableError(f"sluiced unreachable: {exc}")


def server_error(exc):
    """A ServerError with the server's text exactly."""
    return ServerError(str(exc))
