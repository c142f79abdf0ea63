"""sluice_core.py - the core (libsluice.so of the build tree) called from the integration tests'
Python drivers through ctypes: the reference that sluice.so (tests/integration/test_module*.sh)
and the Lua scripts (tests/integration/lua/lua_equiv.py) are compared with, for what `sluice
replay` cannot express (settles and refunds, the stored bytes).

    core = Core(build_dir)
    rule = core.rule("sliding_log", limit=5, window_ns=10**9)    (max_debt=...: a settle's bound)
    keys = Keys(core, rule)
    keys.decide("k", cost, now_ns)                          -> Decision
    keys.settle("k", reserved, actual, charged_ns, now_ns)  -> Decision
    keys.lease("k", want, lease_ns, now_ns)                 -> Lease, or None when refused
    keys.lease_return("k", lease, unused, now_ns)           -> Decision
    keys.packed("k")                                         -> bytes (sl_state_pack)
    keys.copy("k")                                           -> a state to keep (None: absent)
    keys.with_rule("k", other_rule, now_ns)                  -> the key converted to other numbers
    keys.closed_start("k", from_ns, now_ns)                  -> an absent key saturated at from_ns
    core.fresh(rule, state, now_ns)                          -> bool (a state, None: absent)

Keys holds each key's state as Redis would: a decision or settle that leaves the state fresh at
its time removes the key (sluice.so deletes it then), and an absent key is all zero bytes.

An ASan build's library needs the ASan runtime preloaded into python3 (the test scripts do it).
"""
import ctypes
import os

ALGORITHMS = {"fixed_window": 1, "sliding_log": 2, "sliding_window": 3, "sliding_buckets": 4,
              "token_bucket": 5, "gcra": 6}
SL_DEFAULT = -1
SL_EDEBT = -16  # a settle refused by the rule's max_debt
NOW_MAX_NS = (2**63 - 1) // 2  # SL_NOW_MAX_NS: later times are decided as this one


class Adaptive(ctypes.Structure):
    """sl_adaptive_t: all zero is a fixed limit."""
    _fields_ = [("algorithm", ctypes.c_int),
                ("min_limit", ctypes.c_int64),
                ("max_limit", ctypes.c_int64),
                ("backoff_pct", ctypes.c_int64),
                ("timeout_ns", ctypes.c_int64),
                ("probe", ctypes.c_int64)]


class Rule(ctypes.Structure):
    _fields_ = [("algorithm", ctypes.c_int),
                ("limit", ctypes.c_int64),
                ("window_ns", ctypes.c_int64),
                ("burst", ctypes.c_int64),
                ("buckets", ctypes.c_int64),
                ("max_delay_ns", ctypes.c_int64),
                ("max_debt", ctypes.c_int64),
                ("interval_ns", ctypes.c_int64),
                ("tolerance_ns", ctypes.c_int64),
                ("bucket_ns", ctypes.c_int64),
                ("capacity", ctypes.c_int64),
                ("state_size", ctypes.c_uint32),
                ("adaptive", Adaptive)]


class Decision(ctypes.Structure):
    _fields_ = [("allowed", ctypes.c_bool),
                ("limit", ctypes.c_int64),
                ("remaining", ctypes.c_int64),
                ("retry_after_ns", ctypes.c_int64),
                ("reset_after_ns", ctypes.c_int64),
                ("delay_ns", ctypes.c_int64)]

    def fields(self):
        return (int(self.allowed), self.limit, self.remaining, self.retry_after_ns,
                self.reset_after_ns, self.delay_ns)


class Lease(ctypes.Structure):
    _fields_ = [("granted", ctypes.c_int64),
                ("at_ns", ctypes.c_int64),
                ("until_ns", ctypes.c_int64),
                ("remaining", ctypes.c_int64),
                ("reset_after_ns", ctypes.c_int64)]


class Core:
    def __init__(self, build_dir):
        lib = ctypes.CDLL(os.path.join(build_dir, "src", "libsluice.so"))
        i64, p = ctypes.c_int64, ctypes.c_void_p
        rp, dp = ctypes.POINTER(Rule), ctypes.POINTER(Decision)
        lib.sl_rule_prepare.argtypes = [rp]
        lib.sl_decide.argtypes = [rp, p, i64, i64, dp]
        lib.sl_settle.argtypes = [rp, p, i64, i64, i64, i64, dp]
        lib.sl_state_is_fresh.argtypes = [rp, p, i64]
        lib.sl_state_is_fresh.restype = ctypes.c_bool
        lib.sl_state_packed_max.argtypes = [rp]
        lib.sl_state_packed_max.restype = ctypes.c_size_t
        lib.sl_state_pack.argtypes = [rp, p, p]
        lib.sl_state_pack.restype = ctypes.c_size_t
        lib.sl_state_unpack.argtypes = [rp, p, ctypes.c_size_t, p]
        lib.sl_state_convert.argtypes = [rp, p, rp, p, i64]
        lib.sl_state_saturate.argtypes = [rp, p, i64]
        lp = ctypes.POINTER(Lease)
        lib.sl_lease.argtypes = [rp, p, i64, i64, i64, lp]
        lib.sl_lease_return.argtypes = [rp, p, lp, i64, i64, dp]
        self.lib = lib

    def fresh(self, rule, state, now_ns):
        """Whether a state (None: an absent key) is fresh at now_ns."""
        return state is None or self.lib.sl_state_is_fresh(ctypes.byref(rule), state, now_ns)

    def rule(self, algorithm, limit, window_ns, burst=SL_DEFAULT, buckets=SL_DEFAULT,
             max_delay_ns=0, max_debt=SL_DEFAULT):
        r = Rule(algorithm=ALGORITHMS[algorithm], limit=limit, window_ns=window_ns, burst=burst,
                 buckets=buckets, max_delay_ns=max_delay_ns, max_debt=max_debt)
        rc = self.lib.sl_rule_prepare(ctypes.byref(r))
        if rc != 0:
            raise ValueError("sl_rule_prepare: %d" % rc)
        return r


class Keys:
    """States of many keys under one rule, kept as sluice.so keeps them in Redis."""

    def __init__(self, core, rule):
        self.core, self.rule, self.states = core, rule, {}
        self.rules = {}  # key -> the rule its state was written under, when not self.rule

    def with_rule(self, key, rule, now_ns):
        """The key's state converted (sl_state_convert) to `rule` at now_ns when it was written
        under other numbers; then decide() and settle() go on under `rule` for this key. Returns
        whether the numbers differed (what makes sluice.so write the converted value)."""
        have = self.rules.get(key, self.rule)
        if same_numbers(have, rule):
            self.rules[key] = rule
            return False
        state = self.states.get(key)
        if state is not None:
            out = ctypes.create_string_buffer(rule.state_size)
            rc = self.core.lib.sl_state_convert(ctypes.byref(have), state, ctypes.byref(rule),
                                                out, now_ns)
            assert rc == 0, rc
            self.states[key] = out
        self.rules[key] = rule
        return state is not None

    def closed_start(self, key, from_ns, now_ns):
        """A closed start from from_ns (sluice.so's CLOSED_FROM, the scripts' closed_from): an
        absent key, while now_ns is within one window of from_ns, takes the state of the whole
        capacity taken at from_ns (sl_state_saturate). Returns whether it did (what makes
        sluice.so and the scripts write the key, whatever they decide, unless they only peek)."""
        rule = self.rule_of(key)
        from_ns, now_ns = min(from_ns, NOW_MAX_NS), min(max(now_ns, 0), NOW_MAX_NS)  # clamped
        if key in self.states or now_ns >= from_ns + rule.window_ns:
            return False
        state = ctypes.create_string_buffer(rule.state_size)
        assert self.core.lib.sl_state_saturate(ctypes.byref(rule), state, from_ns) == 0
        self.states[key] = state
        return True

    def rule_of(self, key):
        return self.rules.get(key, self.rule)

    def save(self, key):
        """What the key holds (its state and rule), for restore(): a command that converts a key
        but writes nothing (a peek) leaves Redis's value as it was."""
        return (self.copy(key), self.rules.get(key))

    def restore(self, key, saved):
        state, rule = saved
        self.states.pop(key, None)
        self.rules.pop(key, None)
        if state is not None:
            self.states[key] = state
        if rule is not None:
            self.rules[key] = rule

    def _state(self, key):
        return self.states.get(key) or ctypes.create_string_buffer(self.rule_of(key).state_size)

    def keep(self, key, now_ns):
        """Drops the key when its state is fresh at now_ns (what a write of it does in Redis)."""
        state = self.states.get(key)
        if state is not None and self.core.fresh(self.rule_of(key), state, now_ns):
            self.states.pop(key, None)

    def _keep(self, key, state, now_ns):
        self.states[key] = state
        self.keep(key, now_ns)

    def decide(self, key, cost, now_ns):
        state, d = self._state(key), Decision()
        rule = self.rule_of(key)
        rc = self.core.lib.sl_decide(ctypes.byref(rule), state, cost, now_ns, ctypes.byref(d))
        assert rc == 0, rc
        if d.allowed and cost > 0:
            self._keep(key, state, now_ns)
        return d

    def settle(self, key, reserved, actual, charged_ns, now_ns):
        """sl_settle(): the decision after it, or None when the rule's max_debt refused the
        charge (SL_EDEBT: nothing changed, as sluice.so and the scripts then write nothing)."""
        state, d = self._state(key), Decision()
        rule = self.rule_of(key)
        rc = self.core.lib.sl_settle(ctypes.byref(rule), state, reserved, actual, charged_ns,
                                     now_ns, ctypes.byref(d))
        if rc == SL_EDEBT:
            return None
        assert rc == 0, rc
        if reserved != actual:
            self._keep(key, state, max(now_ns, charged_ns))
        return d

    def lease(self, key, want, lease_ns, now_ns):
        """sl_lease(): the lease, or None when the rule refuses the lease time (SL_ELEASE)."""
        state, out = self._state(key), Lease()
        rule = self.rule_of(key)
        rc = self.core.lib.sl_lease(ctypes.byref(rule), state, want, lease_ns, now_ns,
                                    ctypes.byref(out))
        if rc == -15:
            return None
        assert rc == 0, rc
        if out.granted > 0:
            self._keep(key, state, out.at_ns)
        return out

    def lease_return(self, key, lease, unused, now_ns):
        """sl_lease_return() of a lease sl_lease() granted."""
        state, d = self._state(key), Decision()
        rule = self.rule_of(key)
        rc = self.core.lib.sl_lease_return(ctypes.byref(rule), state, ctypes.byref(lease), unused,
                                           now_ns, ctypes.byref(d))
        assert rc == 0, rc
        tokens = rule.algorithm in (ALGORITHMS["token_bucket"], ALGORITHMS["gcra"])
        if unused > 0 or (tokens and lease.until_ns > lease.at_ns):  # as a settle that gives back
            self._keep(key, state, max(now_ns, lease.at_ns))
        return d

    def copy(self, key):
        """A copy of the key's state (None when absent), for Core.fresh later."""
        state = self.states.get(key)
        return None if state is None else ctypes.create_string_buffer(state.raw, len(state))

    def packed(self, key):
        """The key's state in its packed form, or None for an absent key."""
        state = self.states.get(key)
        if state is None:
            return None
        rule = ctypes.byref(self.rule_of(key))
        out = ctypes.create_string_buffer(self.core.lib.sl_state_packed_max(rule))
        n = self.core.lib.sl_state_pack(rule, state, out)
        return out.raw[:n]


def same_numbers(a, b):
    """Whether two prepared rules have the same algorithm and numbers."""
    return all(getattr(a, f) == getattr(b, f) for f in
               ("algorithm", "limit", "window_ns", "burst", "buckets", "max_delay_ns"))


def params_hash(rule):
    """sluice.so's 16-bit hash of a prepared rule's parameters (formats 1 to 3's bytes 2-3)."""
    h = 0xcbf29ce484222325
    for v in (rule.limit, rule.window_ns, rule.burst, rule.buckets, rule.max_delay_ns):
        v &= (1 << 64) - 1
        for i in range(8):
            h ^= (v >> (8 * i)) & 0xff
            h = (h * 0x100000001b3) & ((1 << 64) - 1)
    return (h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48)) & 0xffff


def varint(v):
    """LEB128, shortest form."""
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def duration_code(ns):
    return (ns // 10**6) << 1 if ns % 10**6 == 0 else ns << 1 | 1


def module_header(rule, fmt=None):
    """sluice.so's header of a prepared rule (src/module/value.h): magic, format (5 for
    sliding_log, 4 for the others; `fmt` another) and algorithm, then the numbers the state is
    written under."""
    if fmt is None:
        fmt = 5 if rule.algorithm == ALGORITHMS["sliding_log"] else 4
    out = bytes([0xF5, fmt << 4 | rule.algorithm]) + varint(rule.limit)
    out += varint(duration_code(rule.window_ns))
    if rule.algorithm in (ALGORITHMS["token_bucket"], ALGORITHMS["gcra"]):
        out += varint(rule.burst) + varint(duration_code(rule.max_delay_ns))
    if rule.algorithm == ALGORITHMS["sliding_buckets"]:
        out += varint(rule.buckets)
    return out


def module_value(rule, packed):
    """The bytes sluice.so stores for a packed state: its header, then the state."""
    if packed is None:
        return None
    return module_header(rule) + packed


def module_value_old(rule, packed):
    """The bytes an older sluice.so stored (formats 1 to 3): 4 bytes of header, the state."""
    version = 1
    if rule.algorithm == ALGORITHMS["sliding_log"]:
        version = 3 if packed[0] & 0x30 else 2
    h = params_hash(rule)
    return bytes([0xF5, version << 4 | rule.algorithm, h & 0xff, h >> 8]) + packed


def _leb128(data, i):
    v, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def log_entries(packed):
    """A packed sliding_log (src/core/sliding_log.c), either form: (unit in ns, [(stamp_ns,
    units)], latest_ns or None, dropped)."""
    e, flags = packed[0] % 16, packed[0] - packed[0] % 16
    unit = 10 ** e
    n, i = _leb128(packed, 1)
    out, t = [], 0
    for _ in range(n):
        d, i = _leb128(packed, i)
        u = 1
        if flags & 64:  # the delta shifted left once, the low bit set when a count follows
            d, more = d >> 1, d & 1
            if more:
                u, i = _leb128(packed, i)
        t += d * unit
        if out and out[-1][0] == t:
            out[-1] = (t, out[-1][1] + u)
        else:
            out.append((t, u))
    latest = None
    if flags & 32:
        d, i = _leb128(packed, i)
        latest = t + d * unit
    return unit, out, latest, bool(flags & 16)


def log_packed_old(rule, packed):
    """The older form of a packed sliding_log (one stamp per unit), as an older sluice.so wrote
    the same usage: its stamps, the newest N of them with DROPPED when there are more; the
    latest time (LATEST) only when fewer than N (the older ring had no room for it)."""
    unit, entries, latest, _ = log_entries(packed)
    stamps = [t for t, u in entries for _ in range(u)]
    dropped = len(stamps) > rule.limit
    stamps = stamps[-rule.limit:] if dropped else stamps
    if len(stamps) == rule.limit:
        latest = None  # a full ring recorded its newest stamp as the latest time
    e = 0
    while e < 9 and all(x % 10 ** (e + 1) == 0 for x in stamps + ([latest] if latest else [])):
        e += 1
    out = bytes([e + (16 if dropped else 0) + (32 if latest else 0)]) + varint(len(stamps))
    prev = 0
    for x in stamps:
        out += varint((x - prev) // 10 ** e)
        prev = x
    if latest:
        out += varint((latest - prev) // 10 ** e)
    return out


def debt_refused(rule, alg=None):
    """The error sluice.so (alg None) or a script (alg its algorithm) replies for a settle its
    rule's max_debt refused, as resp_client shows it."""
    text = ("settle refused: the key would owe more than max_debt (%d units past its limit); "
            "nothing was charged" % rule.max_debt)
    return "-ERR " + (text if alg is None else "sluice %s: %s" % (alg, text))
