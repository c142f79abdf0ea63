'use strict';
// backoff.js - exponential backoff with full jitter, and the retry delay that prefers the
// server's answer: the same functions as the C client's slc_backoff_ms / slc_retry_delay_ms
// (docs/client.md, "Retrying"), over a seeded generator so a test can replay a sequence.

const MASK64 = (1n << 64n) - 1n;

// SplitMix64: any 64-bit seed is valid; next() returns the next 64-bit draw as a BigInt.
class SplitMix64 {
  constructor(seed) {
    this.state = BigInt.asUintN(64, BigInt(seed));
  }

  next() {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  }

  // Uniform in [0, max] (max a safe integer >= 0), by Lemire's multiply-and-reject.
  upto(max) {
    const range = BigInt(max) + 1n;
    const threshold = ((1n << 64n) - range) % range;
    for (;;) {
      const m = this.next() * range;
      if ((m & MASK64) >= threshold) return Number(m >> 64n);
    }
  }
}

// The ceiling of attempt's window: min(cap, base * 2^attempt), never overflowing.
function backoffCeilingMs(attempt, baseMs, capMs) {
  const base = Math.max(0, baseMs);
  const cap = Math.max(0, capMs);
  const n = Math.max(0, Math.floor(attempt));
  if (base === 0) return 0;
  if (n >= 63 || base > Math.floor(cap / 2 ** n)) return cap;
  return base * 2 ** n;
}

// Full jitter: uniform in [0, min(cap, base * 2^attempt)] ms, drawn from rng (a SplitMix64).
function backoffMs(attempt, baseMs, capMs, rng) {
  return rng.upto(backoffCeilingMs(attempt, baseMs, capMs));
}

// What to wait before retrying: the decision's retryAfterMs when it has one (> 0, or -1:
// never), else the backoff of this attempt (no decision: the server could not be asked).
function retryDelayMs(decision, attempt, baseMs, capMs, rng) {
  if (decision && (decision.allowed || decision.retryAfterMs > 0 || decision.retryAfterMs === -1)) {
    return decision.retryAfterMs;
  }
  return backoffMs(attempt, baseMs, capMs, rng);
}

module.exports = { SplitMix64, backoffCeilingMs, backoffMs, retryDelayMs };
