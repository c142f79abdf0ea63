"""soak_model.py - what the chaos soak (tests/soak/) knows of its rules, shared by the driver's
helper (soak_ctl.py), the clients (soak_client.py) and the checker (soak_check.py).

A rule is identified in traces by a rule id: its name for a named rule ("f_log"), or "i:" and
its canonical parameters for an inline rule ("i:gcra:10:1000:4:0", which SL.THROTTLE gcra 10
1000 BURST 4 and CL.THROTTLE k 4 10 1 share). A named rule that changes gets a new capacity at
every change, so the `limit` a reply carries (the capacity: N, a token_bucket's B, a gcra's
B + 1) names the version that decided it.

What the checker may assert of each algorithm (docs/algorithms.md), with W the window in ns:
  sliding_log, sliding_buckets  never more than N units in any window (t - W, t]
  fixed_window                  never more than N units in an aligned window [kW, (k+1)W)
  token_bucket, gcra            in any closed interval of length L, at most (L + tau) // T units,
                                T = ceil(W / N), tau = T * B (token_bucket) or T * (B + 1) (gcra)
  sliding_window                an estimate: replies are checked for form only
"""
import json

NS_PER_MS = 1000000
NS_PER_S = 1000000000

EXACT = ("fixed_window", "sliding_log", "sliding_buckets", "token_bucket", "gcra")
ALGORITHMS = EXACT + ("sliding_window",)


def ceil_div(a, b):
    return -(-a // b)


class Params:
    """One version of a rule: algorithm, limit N, window in ms, burst B, buckets K."""

    def __init__(self, algorithm, limit, window_ms, burst=0, buckets=0):
        assert algorithm in ALGORITHMS
        self.algorithm = algorithm
        self.limit = limit
        self.window_ms = window_ms
        tokens = algorithm in ("token_bucket", "gcra")
        self.burst = (burst or limit) if tokens else 0
        self.buckets = (buckets or 10) if algorithm == "sliding_buckets" else 0

    @property
    def window_ns(self):
        return self.window_ms * NS_PER_MS

    @property
    def capacity(self):
        """The `limit` every reply carries."""
        if self.algorithm == "token_bucket":
            return self.burst
        if self.algorithm == "gcra":
            return self.burst + 1
        return self.limit

    @property
    def interval_ns(self):
        """token_bucket / gcra: T, the emission interval."""
        return ceil_div(self.window_ns, self.limit)

    @property
    def tau_ns(self):
        """token_bucket / gcra: the tolerance."""
        return self.interval_ns * self.capacity

    def span_ns(self):
        """The longest reset_after (and retry_after) a reply may carry, ns."""
        a, w = self.algorithm, self.window_ns
        if a in ("token_bucket", "gcra"):
            return self.tau_ns
        if a == "sliding_buckets":
            return w + w // self.buckets
        if a == "sliding_window":
            return 2 * w
        return w

    def rid(self):
        """The rule id of the inline rule with these parameters."""
        return "i:%s:%d:%d:%d:%d" % (self.algorithm, self.limit, self.window_ms, self.burst,
                                     self.buckets)

    def throttle_args(self):
        """SL.THROTTLE's rule arguments (after the key)."""
        out = [self.algorithm, self.limit, self.window_ms]
        if self.burst:
            out += ["BURST", self.burst]
        if self.buckets:
            out += ["BUCKETS", self.buckets]
        return out

    def fields(self):
        """The rule's numbers as sluiced prints them in a rule's JSON."""
        out = {"algorithm": self.algorithm, "limit": self.limit,
               "window": window_text(self.window_ms)}
        if self.algorithm in ("token_bucket", "gcra"):
            out["burst"] = self.burst
        if self.buckets:
            out["buckets"] = self.buckets
        return out

    def encode(self):
        return "%s %d %d %d %d" % (self.algorithm, self.limit, self.window_ms, self.burst,
                                   self.buckets)

    @staticmethod
    def decode(words):
        a, n, w, b, k = words
        return Params(a, int(n), int(w), int(b), int(k))


def params_of_rid(rid):
    """The parameters of an inline rule id, or None for a named rule."""
    if not rid.startswith("i:"):
        return None
    return Params.decode(rid[2:].split(":"))


def window_text(ms):
    return "%ds" % (ms // 1000) if ms % 1000 == 0 else "%dms" % ms


class Rule:
    """A named rule: its name, parameters and options."""

    def __init__(self, name, params, closed=False, deny=False):
        self.name = name
        self.params = params
        self.closed = closed
        self.deny = deny

    def json(self):
        """The rule as GET /v1/rules/{name} answers it (field order aside)."""
        out = {"name": self.name}
        out.update(self.params.fields())
        out.update({"shadow": False, "on_store_error": "deny" if self.deny else "allow",
                    "cold_start": "closed" if self.closed else "open"})
        return out

    def yaml(self):
        lines = ["  - name: %s" % self.name]
        for k, v in self.params.fields().items():
            lines.append("    %s: %s" % (k, v))
        if self.closed:
            lines.append("    cold_start: closed")
        if self.deny:
            lines.append("    on_store_error: deny")
        return "\n".join(lines)


def rules_yaml(rules):
    return "rules:\n" + "\n".join(r.yaml() for r in rules) + "\n"


# ---- the memory sluiced ------------------------------------------------------------------------
# File rules never changed. cold_start: closed where a key saturated at start-up is free again
# after exactly one window (tau <= W for token_bucket and gcra, N dividing W in ns), so that
# "closed" owes no allowance at all.
MEM_FILE_STATIC = [
    Rule("f_log", Params("sliding_log", 10, 2000), closed=True),
    Rule("f_slow", Params("sliding_log", 3, 10000), closed=True),  # outlives a crash loop
    Rule("f_buckets", Params("sliding_buckets", 12, 2000, buckets=4), closed=True),
    Rule("f_fixed", Params("fixed_window", 8, 1000), closed=True),
    Rule("f_tb", Params("token_bucket", 5, 1000, burst=5), closed=True),
    Rule("f_gcra", Params("gcra", 10, 1000, burst=4), closed=True),
    Rule("f_sw", Params("sliding_window", 10, 1000)),
]


def _versioned(name, gen):
    """Version `gen` of a rule that changes: a capacity no other version of it has."""
    if name == "fe_log":
        return Params("sliding_log", 6 + gen, 1500)
    if name == "fe_tb":
        return Params("token_bucket", 4, 1000, burst=5 + gen)
    if name == "f_extra":
        return Params("gcra", 20, 1000, burst=2 + gen)
    if name == "a_log":
        return Params("sliding_log", 5 + gen, 1000)
    if name == "a_buckets":
        return Params("sliding_buckets", 9 + gen, 3000, buckets=6)
    if name == "a_fixed":
        return Params("fixed_window", 7 + gen, 1000)
    if name == "a_tb":
        return Params("token_bucket", 3 + gen % 4, 1000, burst=6 + gen)
    if name == "a_gcra":
        return Params("gcra", 8, 1000, burst=2 + gen)
    if name == "a_sw":
        return Params("sliding_window", 8 + gen, 1000)
    raise KeyError(name)


def versioned_rule(name, gen):
    return Rule(name, _versioned(name, gen))


MEM_FILE_EDITED = ["fe_log", "fe_tb"]  # edited in the file, then SIGHUP
MEM_FILE_TOGGLED = "f_extra"  # in the file, then not, then again
MEM_API = ["a_log", "a_buckets", "a_fixed", "a_tb", "a_gcra", "a_sw"]  # SL.RULE SET, PUT

# Inline rules: fixed parameter sets. INLINE_GCRA is also CL.THROTTLE k 4 10 1.
INLINE = [
    Params("sliding_log", 8, 1500),
    Params("fixed_window", 10, 1000),
    Params("sliding_buckets", 12, 2000, buckets=8),
    Params("token_bucket", 6, 1000, burst=9),
    Params("gcra", 10, 1000, burst=4),
    Params("sliding_window", 10, 1000),
]
CL_THROTTLE = (4, 10, 1)  # max_burst, count, period_s: INLINE's gcra
CL_PARAMS = Params("gcra", 10, 1000, burst=4)
# Settled reservations, on keys one client alone uses (so the settle's AT is the admission's)
SETTLE = [Params("sliding_log", 20, 2000), Params("token_bucket", 10, 1000, burst=15)]

# ---- the sluiced on the Redis Cluster: file rules that never change, failing closed ---------
REDIS_RULES = [
    Rule("r_log", Params("sliding_log", 10, 2000), deny=True),
    Rule("r_buckets", Params("sliding_buckets", 12, 2000, buckets=4), deny=True),
    Rule("r_fixed", Params("fixed_window", 8, 1000), deny=True),
    Rule("r_tb", Params("token_bucket", 5, 1000, burst=7), deny=True),
    Rule("r_gcra", Params("gcra", 10, 1000, burst=4), deny=True),
    Rule("r_sw", Params("sliding_window", 10, 1000), deny=True),
]

# ---- Redis Cluster key slots --------------------------------------------------------------


def _crc16_table():
    table = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) if c & 0x8000 else c << 1
        table.append(c & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def key_slot(key):
    """The cluster slot of sluiced's Redis keys for a client key ("sl:{key}:..."; the client
    keys here have no braces)."""
    crc = 0
    for b in key.encode():
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ b) & 0xFF]
    return crc & 16383


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
