"""The over-limit cache: per (rule, key), the latest cost sluiced refused and until when, so the
same request is answered without asking (docs/client.md, "The over-limit cache": the same rules
as the C client's src/remote/overlimit_cache.c).

Cached: a refusal of a cost >= 1 whose retry_after_ms > 0, answered for that very cost until
retry_after has passed (counted from when the request was sent). Not cached: admissions, peeks,
acquires, other costs, refusals with retry_after_ms -1. An admission of the key drops its entry;
a reset and a settle that gives units back forget it.

Bounded: `size` slots; a (rule, key) may live in one of PROBE slots from its hash's place, and
when all of them hold live entries the one whose hold ends first is dropped. Every call does at
most PROBE steps. The hash is Python's, seeded per process, so senders of keys cannot aim at one
slot. Pure: time is the caller's now_ns (monotonic), no clock read, no lock: one cache per
client, used from one thread or one event loop.
"""

from .decision import Decision

PROBE = 8
DEFAULT_SIZE = 1024
_NS_PER_MS = 1_000_000


def _ceil_ms(ns):
    return -(-ns // _NS_PER_MS)


class _Entry:
    __slots__ = ("rk", "cost", "hold_ns", "reset_at_ns", "limit", "remaining")

    def __init__(self, rk, cost, hold_ns, reset_at_ns, limit, remaining):
        self.rk, self.cost, self.hold_ns = rk, cost, hold_ns
        self.reset_at_ns, self.limit, self.remaining = reset_at_ns, limit, remaining


class OverLimitCache:
    """The cache of one client: size entries (0: it holds nothing)."""

    def __init__(self, size=DEFAULT_SIZE):
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"cache_size must be an integer >= 0, not {size!r}")
        self.size = size
        self.probe = min(PROBE, size)
        self.slots = [None] * size
        self.hits = 0

    def _places(self, rk):
        start = hash(rk) % self.size if self.size else 0
        return [(start + i) % self.size for i in range(self.probe)]

    def _find(self, rk):
        for i in self._places(rk):
            e = self.slots[i]
            if e is not None and e.rk == rk:
                return i
        return None

    def lookup(self, rule, key, cost, now_ns):
        """A cached refusal of `cost` for (rule, key) at now_ns, or None (then ask the server).
        An entry found expired is dropped."""
        rk = (rule, key)
        i = self._find(rk)
        if i is None:
            return None
        e = self.slots[i]
        if now_ns >= e.hold_ns:
            self.slots[i] = None
            return None
        if e.cost != cost:
            return None
        self.hits += 1
        return Decision(
            allowed=False,
            limit=e.limit,
            remaining=e.remaining,
            retry_after_ms=max(1, _ceil_ms(e.hold_ns - now_ns)),
            reset_after_ms=max(0, _ceil_ms(e.reset_at_ns - now_ns)),
            from_cache=True,
        )

    def record(self, rule, key, cost, d, asked_ns):
        """Tells the cache what the server answered to a request of `cost` sent at asked_ns."""
        if self.size == 0:
            return
        rk = (rule, key)
        i = self._find(rk)
        if cost >= 1 and d.allowed:
            if i is not None:
                self.slots[i] = None
            return
        if cost >= 1 and d.retry_after_ms > 0:
            e = _Entry(rk, cost, asked_ns + d.retry_after_ms * _NS_PER_MS,
                       asked_ns + d.reset_after_ms * _NS_PER_MS, d.limit, d.remaining)
            self.slots[i if i is not None else self._victim(rk, asked_ns)] = e
            return
        if i is not None:  # a peek: what the server says of the key now
            e = self.slots[i]
            e.limit, e.remaining = d.limit, d.remaining
            e.reset_at_ns = asked_ns + d.reset_after_ms * _NS_PER_MS

    def _victim(self, rk, now_ns):
        """The slot a new entry takes: a free or expired one, else the one whose hold ends first."""
        best = None
        for i in self._places(rk):
            e = self.slots[i]
            if e is None or e.hold_ns <= now_ns:
                return i
            if best is None or e.hold_ns < self.slots[best].hold_ns:
                best = i
        return best

    def forget(self, rule, key):
        """Drops (rule, key)'s entry, if any."""
        if self.size == 0:
            return
        i = self._find((rule, key))
        if i is not None:
            self.slots[i] = None
