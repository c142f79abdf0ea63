"""Retry helpers: exponential backoff with full jitter, and a delay that prefers the server's.

The same generator as the C client's (src/client/retry.c: SplitMix64 and Lemire's
multiply-and-reject), so one seed gives the same delays in C and in Python.
"""

_MASK64 = (1 << 64) - 1


class Rng:
    """SplitMix64 over a 64-bit state; any integer seeds it (taken modulo 2^64)."""

    def __init__(self, seed=0):
        self.state = seed & _MASK64

    def next64(self):
        """Advances the state and returns the next 64-bit value."""
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def uniform_upto(self, top):
        """Uniform in [0, top] (0 <= top < 2^63), without modulo bias."""
        span = top + 1
        m = self.next64() * span
        low = m & _MASK64
        if low < span:
            threshold = (-span) % span
            while low < threshold:
                m = self.next64() * span
                low = m & _MASK64
        return m >> 64


def backoff_ms(attempt, base_ms, cap_ms, rng):
    """A delay drawn uniformly from [0, min(cap_ms, base_ms * 2^attempt)] ms, both ends included
    ("full jitter"). Negative arguments count as 0; a large attempt just reaches the cap. rng is
    an Rng, advanced by the call."""
    base_ms, cap_ms, attempt = max(base_ms, 0), max(cap_ms, 0), max(attempt, 0)
    if base_ms == 0:
        ceiling = 0
    elif attempt >= 63 or base_ms > (cap_ms >> attempt):
        ceiling = cap_ms
    else:
        ceiling = base_ms << attempt
    return rng.uniform_upto(ceiling)


def retry_delay_ms(decision, attempt, base_ms, cap_ms, rng):
    """How long to wait before attempt `attempt` (from 0) of a request that got `decision`
    (None when the call failed): an admission's retry_after_ms (0, or a max_delay rule's wait);
    a denial's retry_after_ms when it is > 0 (not capped: sooner is pointless) or -1 (never:
    do not retry); otherwise backoff_ms()."""
    if decision is not None and (
        decision.allowed or decision.retry_after_ms > 0 or decision.retry_after_ms == -1
    ):
        return decision.retry_after_ms
    return backoff_ms(attempt, base_ms, cap_ms, rng)
