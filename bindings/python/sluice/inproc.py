"""In-process limiting: a ctypes binding of libsluice (include/sluice/sluice.h), for a service
that limits inside one process. The same six algorithms, and the in-flight one, as sluiced,
with time given by the caller (int ns since the Unix epoch: time.time_ns(), or a test's clock).

    rule = Rule("token_bucket", limit=10, window="1s", burst=20)
    table = Table(rule)                         # one state per key, thread-safe, sharded
    d = table.decide("user:42", 1, time.time_ns())

Why ctypes: it is in the standard library, so the wheel stays pure Python (no compiler when it
is installed, one wheel for every CPython), and libsluice's interface is plain C structs and
integers, which ctypes describes exactly. A call releases the GIL, so threads share a Table and
its shard locks do the work. The library is the installed libsluice.so.2 (make install, or
sluice's Debian package), or the file SLUICE_LIBRARY names.
"""

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

from .errors import SluiceError

ALGORITHMS = ("fixed_window", "sliding_log", "sliding_window", "sliding_buckets", "token_bucket",
              "gcra", "concurrency")
DEFAULT = -1  # SL_DEFAULT: burst, buckets, max_debt take the algorithm's default
_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9,
       "d": 86400 * 10**9}


class LibraryError(SluiceError):
    """libsluice refused a call: code is its SL_E* value, the message its sl_strerror()."""

    def __init__(self, code, what):
        self.code = code
        super().__init__(f"{what}: {_lib().sl_strerror(code).decode()}")


class _Adaptive(ctypes.Structure):
    _fields_ = [("algorithm", ctypes.c_int), ("min_limit", ctypes.c_int64),
                ("max_limit", ctypes.c_int64), ("backoff_pct", ctypes.c_int64),
                ("timeout_ns", ctypes.c_int64), ("probe", ctypes.c_int64)]


class _Rule(ctypes.Structure):
    _fields_ = [("algorithm", ctypes.c_int), ("limit", ctypes.c_int64),
                ("window_ns", ctypes.c_int64), ("burst", ctypes.c_int64),
                ("buckets", ctypes.c_int64), ("max_delay_ns", ctypes.c_int64),
                ("max_debt", ctypes.c_int64), ("interval_ns", ctypes.c_int64),
                ("tolerance_ns", ctypes.c_int64), ("bucket_ns", ctypes.c_int64),
                ("capacity", ctypes.c_int64), ("state_size", ctypes.c_uint32),
                ("adaptive", _Adaptive)]  # all zero: a fixed limit


class _Decision(ctypes.Structure):
    _fields_ = [("allowed", ctypes.c_bool), ("limit", ctypes.c_int64),
                ("remaining", ctypes.c_int64), ("retry_after_ns", ctypes.c_int64),
                ("reset_after_ns", ctypes.c_int64), ("delay_ns", ctypes.c_int64)]


class _Hold(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("until_ns", ctypes.c_int64),
                ("expired", ctypes.c_int64)]


class _TableConfig(ctypes.Structure):
    _fields_ = [("max_bytes", ctypes.c_size_t), ("key_max", ctypes.c_size_t),
                ("shards", ctypes.c_uint), ("initial_keys", ctypes.c_size_t),
                ("seed", ctypes.c_uint64), ("budget", ctypes.c_void_p),
                ("evict_idle", ctypes.c_bool)]


@dataclass(frozen=True)
class LocalDecision:
    """libsluice's decision: times in ns. delay_ns > 0: a max_delay rule admitted the request
    after that wait, which the caller must wait before acting; retry_after_ns -1: never."""

    allowed: bool
    limit: int
    remaining: int
    retry_after_ns: int
    reset_after_ns: int
    delay_ns: int = 0
    hold_id: int = 0

    @classmethod
    def of(cls, d, hold_id=0):
        return cls(bool(d.allowed), d.limit, d.remaining, d.retry_after_ns, d.reset_after_ns,
                   d.delay_ns, hold_id)


_LIB = []
_I64, _P, _SZ = ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t
_SIGNATURES = {  # name: (restype, argtypes)
    "sl_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "sl_rule_prepare": (ctypes.c_int, [ctypes.POINTER(_Rule)]),
    "sl_state_size": (_SZ, [ctypes.POINTER(_Rule)]),
    "sl_decide": (ctypes.c_int, [ctypes.POINTER(_Rule), _P, _I64, _I64, ctypes.POINTER(_Decision)]),
    "sl_state_is_fresh": (ctypes.c_bool, [ctypes.POINTER(_Rule), _P, _I64]),
    "sl_table_create": (ctypes.c_int, [ctypes.POINTER(_Rule), ctypes.POINTER(_TableConfig),
                                       ctypes.POINTER(_P)]),
    "sl_table_free": (None, [_P]),
    "sl_table_decide": (ctypes.c_int, [_P, ctypes.c_char_p, _SZ, _I64, _I64,
                                       ctypes.POINTER(_Decision)]),
    "sl_table_settle": (ctypes.c_int, [_P, ctypes.c_char_p, _SZ, _I64, _I64, _I64, _I64,
                                       ctypes.POINTER(_Decision)]),
    "sl_table_refund": (ctypes.c_int, [_P, ctypes.c_char_p, _SZ, _I64, _I64, _I64,
                                       ctypes.POINTER(_Decision)]),
    "sl_table_acquire": (ctypes.c_int, [_P, ctypes.c_char_p, _SZ, _I64, _I64, _I64,
                                        ctypes.POINTER(_Decision), ctypes.POINTER(_Hold)]),
    "sl_table_release": (ctypes.c_int, [_P, ctypes.c_char_p, _SZ, ctypes.c_uint64, _I64,
                                        ctypes.POINTER(_Decision), ctypes.POINTER(_Hold)]),
    "sl_table_reset": (ctypes.c_int, [_P, ctypes.c_char_p, _SZ]),
    "sl_table_count": (_SZ, [_P]),
    "sl_table_reclaim": (_SZ, [_P, _I64]),
}


def library_path():
    """The libsluice this process loads: $SLUICE_LIBRARY, else the one the loader finds."""
    return (os.environ.get("SLUICE_LIBRARY") or ctypes.util.find_library("sluice")
            or "libsluice.so.2")


def _lib():
    if not _LIB:
        lib = ctypes.CDLL(library_path())
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        _LIB.append(lib)
    return _LIB[0]


def _ns(v, name):
    """An int of ns, or a duration as rules write it ("1s", "1m30s", "250ms")."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    import re
    parts = re.findall(r"(\d+)(ns|us|ms|s|m|h|d)", v) if isinstance(v, str) else None
    if not parts or "".join(n + u for n, u in parts) != v:
        raise ValueError(f"{name}: not a duration: {v!r}")
    return sum(int(n) * _NS[u] for n, u in parts)


def _key(key):
    return key.encode() if isinstance(key, str) else bytes(key)


def _check(rc, what):
    if rc != 0:
        raise LibraryError(rc, what)


class Rule:
    """A prepared rule: algorithm (one of ALGORITHMS), limit (> 0), window (ns, or "1s"; a
    concurrency rule's hold timeout), burst (token_bucket, gcra), buckets (sliding_buckets),
    max_delay (token_bucket, gcra), max_debt. LibraryError names a field libsluice refuses."""

    def __init__(self, algorithm, limit, window, burst=DEFAULT, buckets=DEFAULT, max_delay=0,
                 max_debt=DEFAULT):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}: one of {', '.join(ALGORITHMS)}")
        self.algorithm = algorithm
        self.c = _Rule(algorithm=ALGORITHMS.index(algorithm) + 1, limit=limit,
                       window_ns=_ns(window, "window"), burst=burst, buckets=buckets,
                       max_delay_ns=_ns(max_delay, "max_delay"), max_debt=max_debt)
        _check(_lib().sl_rule_prepare(ctypes.byref(self.c)), "rule")

    @property
    def capacity(self):
        """Units a fresh key admits at once (a reply's limit)."""
        return self.c.capacity

    def new_state(self):
        """The state of a fresh key: sl_state_size() zero bytes, yours to keep anywhere."""
        return ctypes.create_string_buffer(_lib().sl_state_size(ctypes.byref(self.c)))

    def decide(self, state, cost, now_ns):
        """sl_decide(): decides cost units at now_ns on state (updated when admitted)."""
        d = _Decision()
        _check(_lib().sl_decide(ctypes.byref(self.c), state, cost, now_ns, ctypes.byref(d)),
               "decide")
        return LocalDecision.of(d)

    def is_fresh(self, state, now_ns):
        """True when state decides at now_ns as a fresh key would (it may be forgotten)."""
        return _lib().sl_state_is_fresh(ctypes.byref(self.c), state, now_ns)


class Table:
    """One state per key for one rule, in libsluice's sharded table: thread-safe, reclaims keys
    whose state is fresh again. max_bytes caps its memory (0: none; past it a new key is
    LibraryError "table full" and keys already in keep deciding). seed: the key hash's (0:
    random per table)."""

    def __init__(self, rule, max_bytes=0, seed=0, shards=0):
        self.rule = rule
        cfg = _TableConfig(max_bytes=max_bytes, seed=seed, shards=shards)
        self._t = _P()
        _check(_lib().sl_table_create(ctypes.byref(rule.c), ctypes.byref(cfg),
                                      ctypes.byref(self._t)), "table")

    def __del__(self):
        if getattr(self, "_t", None) and _LIB:
            _LIB[0].sl_table_free(self._t)
            self._t = None

    def __len__(self):
        return _lib().sl_table_count(self._t)

    def decide(self, key, cost, now_ns):
        """Decides cost units for key (str or bytes) at now_ns; cost 0 peeks."""
        k, d = _key(key), _Decision()
        _check(_lib().sl_table_decide(self._t, k, len(k), cost, now_ns, ctypes.byref(d)),
               "decide")
        return LocalDecision.of(d)

    def peek(self, key, now_ns):
        """What key has at now_ns, charging nothing."""
        return self.decide(key, 0, now_ns)

    def settle(self, key, reserved, actual, charged_ns, now_ns):
        """A reservation of `reserved` admitted at charged_ns cost `actual`: gives back or
        charges the difference (LibraryError past the rule's max_debt, nothing charged)."""
        k, d = _key(key), _Decision()
        _check(_lib().sl_table_settle(self._t, k, len(k), reserved, actual, charged_ns, now_ns,
                                      ctypes.byref(d)), "settle")
        return LocalDecision.of(d)

    def refund(self, key, cost, charged_ns, now_ns):
        """Gives back cost units admitted at charged_ns."""
        k, d = _key(key), _Decision()
        _check(_lib().sl_table_refund(self._t, k, len(k), cost, charged_ns, now_ns,
                                      ctypes.byref(d)), "refund")
        return LocalDecision.of(d)

    def acquire(self, key, cost, now_ns, hold_ns=0):
        """An in-flight rule: takes cost units as one hold for hold_ns (0: the rule's window);
        the decision's hold_id names it (0: refused, nothing held)."""
        k, d, h = _key(key), _Decision(), _Hold()
        _check(_lib().sl_table_acquire(self._t, k, len(k), cost, hold_ns, now_ns,
                                       ctypes.byref(d), ctypes.byref(h)), "acquire")
        return LocalDecision.of(d, h.id)

    def release(self, key, hold_id, now_ns):
        """Frees the hold at once; LibraryError when the key holds no live hold of that id."""
        k, d = _key(key), _Decision()
        _check(_lib().sl_table_release(self._t, k, len(k), hold_id, now_ns, ctypes.byref(d),
                                       None), "release")
        return LocalDecision.of(d)

    def reset(self, key):
        """Forgets key: a fresh quota from now on."""
        k = _key(key)
        _check(_lib().sl_table_reset(self._t, k, len(k)), "reset")

    def reclaim(self, now_ns):
        """Drops the keys whose state is fresh at now_ns; returns how many."""
        return _lib().sl_table_reclaim(self._t, now_ns)
