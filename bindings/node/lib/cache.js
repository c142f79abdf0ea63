'use strict';
// cache.js - the over-limit cache: the C client's rules exactly (docs/client.md, "The over-limit
// cache"). Pure: no I/O; time is what the caller passes (a monotonic clock, in ms).
//
// A denial of a cost >= 1 with retryAfterMs > 0 is remembered per (rule, key) until it passes;
// until then a call of that same cost is answered here. Not cached: admissions, denials with
// retryAfterMs 0 or -1, peeks, other costs. Any admission of cost >= 1 drops the entry; forget()
// (a reset, a settle that gives units back) drops it and starts a new epoch, so an answer to a
// request sent before the forget is not remembered. Bounded: at `size` entries, a new one
// replaces an expired one or the one expiring first among the PROBE oldest.

const PROBE = 8;

class OverLimitCache {
  // size: entries at most (0: off).
  constructor(size) {
    if (!Number.isInteger(size) || size < 0) throw new TypeError('cacheSize must be an integer >= 0');
    this.size = size;
    this.entries = new Map();
    this.epoch = 0;
    this.hits = 0;
  }

  static name(rule, key) {
    return `${rule.length}:${rule}${key}`;
  }

  // The cached denial of (name, cost) at nowMs, or null.
  lookup(name, cost, nowMs) {
    const e = this.entries.get(name);
    if (e === undefined) return null;
    if (nowMs >= e.retryAtMs) {
      this.entries.delete(name);
      return null;
    }
    if (cost !== e.cost) return null; // a smaller cost may fit, a larger one later: ask
    this.hits++;
    return {
      allowed: false,
      limit: e.limit,
      remaining: e.remaining,
      retryAfterMs: Math.ceil(e.retryAtMs - nowMs),
      resetAfterMs: nowMs < e.resetAtMs ? Math.ceil(e.resetAtMs - nowMs) : 0,
      fromCache: true,
    };
  }

  // Learns from the server's decision d of (name, cost), asked at askedMs in epoch `epoch`.
  record(name, cost, d, askedMs, epoch) {
    if (this.size === 0 || epoch !== this.epoch) return;
    let e = this.entries.get(name);
    if (e !== undefined && askedMs >= e.retryAtMs) {
      this.entries.delete(name);
      e = undefined;
    }
    if (d.allowed || !(cost >= 1 && d.retryAfterMs > 0)) {
      if (e !== undefined && d.allowed && cost >= 1) this.entries.delete(name);
      else if (e !== undefined) report(e, d, askedMs);
      return;
    }
    if (e === undefined) {
      this.makeRoom(askedMs);
      e = {};
      this.entries.set(name, e);
    }
    e.cost = cost;
    e.retryAtMs = askedMs + d.retryAfterMs;
    report(e, d, askedMs);
  }

  forget(name) {
    this.epoch++;
    this.entries.delete(name);
  }

  makeRoom(nowMs) {
    if (this.entries.size < this.size) return;
    let victim = null;
    let victimAt = Infinity;
    let seen = 0;
    for (const [name, e] of this.entries) {
      if (nowMs >= e.retryAtMs) {
        this.entries.delete(name);
        return;
      }
      if (e.retryAtMs < victimAt) {
        victim = name;
        victimAt = e.retryAtMs;
      }
      if (++seen === PROBE) break;
    }
    this.entries.delete(victim);
  }
}

function report(e, d, askedMs) {
  e.limit = d.limit;
  e.remaining = d.remaining;
  e.resetAtMs = askedMs + Math.max(0, d.resetAfterMs);
}

module.exports = { OverLimitCache, PROBE };
