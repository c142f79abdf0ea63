'use strict';
// flexible.js - rate-limiter-flexible's API (RateLimiterRedis and friends) over sluiced, so its
// users switch by changing the constructor. The differences are listed in README.md.
//
// A limiter of `points` per `duration` seconds is an inline rule (SL.THROTTLE: nothing to
// configure on the server) of `algorithm` (default fixed_window) over keyPrefix:key; or, with
// `rule`, a rule sluiced already has (then points and duration are the rule's).

const { Client } = require('./client');

class RateLimiterRes {
  constructor(remainingPoints = 0, msBeforeNext = 0, consumedPoints = 0, isFirstInDuration = false) {
    this.remainingPoints = remainingPoints;
    this.msBeforeNext = msBeforeNext;
    this.consumedPoints = consumedPoints;
    this.isFirstInDuration = Boolean(isFirstInDuration);
  }

  toJSON() {
    const { remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration } = this;
    return { remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration };
  }

  toString() {
    return JSON.stringify(this.toJSON());
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toJSON();
  }
}

function checkPoints(what, n) {
  if (!Number.isSafeInteger(n) || n < 0) throw new TypeError(`${what} must be an integer >= 0, not ${n}`);
  return n;
}

class RateLimiterSluice {
  /**
   * Options: storeClient (a sluice Client, or an ioredis client pointed at sluiced), points
   * (default 4), duration (seconds, default 1), keyPrefix (default "rlflx"), blockDuration
   * (seconds a key refused once stays refused, in this process; default 0), algorithm (the
   * inline rule's, default "fixed_window"), rule (a named rule of sluiced's instead).
   */
  constructor(opts = {}) {
    const unsupported = ['execEvenly', 'inMemoryBlockOnConsumed', 'insuranceLimiter', 'blockOnConsumed'].filter((k) => opts[k]);
    if (unsupported.length) throw new TypeError(`RateLimiterSluice does not support ${unsupported.join(', ')}`);
    const sc = opts.storeClient;
    if (!sc) throw new Error('storeClient is not set');
    this.client = sc instanceof Client ? sc : new Client({ ioredis: sc });
    this.points = opts.points === undefined ? 4 : opts.points;
    this.duration = opts.duration === undefined ? 1 : opts.duration;
    if (!Number.isSafeInteger(this.points) || this.points < 1) throw new Error('points must be an integer >= 1');
    if (!(this.duration > 0) || !Number.isFinite(this.duration)) {
      throw new Error('duration must be a number of seconds > 0 (sluice keeps no key forever)');
    }
    this.keyPrefix = opts.keyPrefix === undefined ? 'rlflx' : opts.keyPrefix;
    if (typeof this.keyPrefix !== 'string') throw new Error('keyPrefix must be string');
    this.blockDuration = opts.blockDuration || 0;
    this.rule = opts.rule || null;
    this.inline = { algorithm: opts.algorithm || 'fixed_window', limit: this.points, windowMs: Math.round(this.duration * 1000) };
    this.blocked = new Map(); // rlKey -> the time its block ends, ms (Date.now())
  }

  get msDuration() {
    return this.duration * 1000;
  }

  get msBlockDuration() {
    return this.blockDuration * 1000;
  }

  getKey(key) {
    return this.keyPrefix.length > 0 ? `${this.keyPrefix}:${key}` : String(key);
  }

  parseKey(rlKey) {
    return this.keyPrefix.length > 0 ? rlKey.substring(this.keyPrefix.length + 1) : rlKey;
  }

  blockedMs(rlKey) {
    const until = this.blocked.get(rlKey);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left > 0) return left;
    this.blocked.delete(rlKey);
    return 0;
  }

  decide(rlKey, points) {
    return this.rule ? this.client.allow(this.rule, rlKey, points) : this.client.throttle(rlKey, this.inline, points);
  }

  peekKey(rlKey) {
    return this.rule ? this.client.peek(this.rule, rlKey) : this.client.peekInline(rlKey, this.inline);
  }

  settleKey(rlKey, reserved, actual) {
    return this.rule ? this.client.settle(this.rule, rlKey, reserved, actual) : this.client.settleInline(rlKey, this.inline, reserved, actual);
  }

  /** Consumes points (default 1): resolves with a RateLimiterRes when they fit, rejects with one
   * when they do not (nothing is charged then), and with an Error when sluiced fails. */
  async consume(key, points = 1) {
    checkPoints('points', points);
    const rlKey = this.getKey(key);
    const left = this.blockedMs(rlKey);
    if (left > 0) throw new RateLimiterRes(0, left);
    let d;
    try {
      d = await this.decide(rlKey, points);
    } catch (err) {
      if (/exceeds/.test(err.message)) throw new RateLimiterRes(0, this.msDuration, points, false);
      throw err;
    }
    const consumed = d.limit - d.remaining;
    if (d.allowed) return new RateLimiterRes(d.remaining, d.resetAfterMs, consumed, consumed === points);
    const res = new RateLimiterRes(0, d.retryAfterMs, consumed + points, false);
    if (this.blockDuration > 0) {
      this.blocked.set(rlKey, Date.now() + this.msBlockDuration);
      res.msBeforeNext = this.msBlockDuration;
    }
    throw res;
  }

  /** Charges points even past the limit (a settle: the key owes them, up to one window's worth). */
  async penalty(key, points = 1) {
    checkPoints('points', points);
    const d = await this.settleKey(this.getKey(key), 0, points);
    return new RateLimiterRes(d.remaining, d.resetAfterMs, d.limit - d.remaining, false);
  }

  /** Gives points back (never more than the key has used). */
  async reward(key, points = 1) {
    checkPoints('points', points);
    const d = await this.settleKey(this.getKey(key), points, 0);
    return new RateLimiterRes(d.remaining, d.resetAfterMs, d.limit - d.remaining, false);
  }

  /** The key's state as a RateLimiterRes, or null when it has used nothing. A key blocked in this
   * process reports points + 1 consumed until the block ends, as rate-limiter-flexible's block does. */
  async get(key) {
    const rlKey = this.getKey(key);
    const d = await this.peekKey(rlKey);
    const blockedMs = this.blockedMs(rlKey);
    if (blockedMs > 0) return new RateLimiterRes(0, blockedMs, Math.max(d.limit - d.remaining, this.points + 1), false);
    const consumed = d.limit - d.remaining;
    if (consumed === 0 && d.resetAfterMs === 0) return null;
    return new RateLimiterRes(d.remaining, d.resetAfterMs, consumed, false);
  }

  /** Forgets the key (and its block): resolves true when it had used something, else false. */
  async delete(key) {
    const rlKey = this.getKey(key);
    const had = (await this.get(key)) !== null;
    this.blocked.delete(rlKey);
    if (this.rule) await this.client.reset(this.rule, rlKey);
    else await this.client.resetInline(rlKey, this.inline);
    return had;
  }

  /** Refuses the key for secDuration seconds: in this process for the whole time, and on sluiced
   * (every process) for the rest of its current window, by charging what it has left. */
  async block(key, secDuration) {
    if (!(secDuration > 0)) throw new TypeError('secDuration must be > 0');
    const rlKey = this.getKey(key);
    this.blocked.set(rlKey, Date.now() + secDuration * 1000);
    const d = await this.peekKey(rlKey);
    if (d.remaining > 0) await this.settleKey(rlKey, 0, d.remaining);
    return new RateLimiterRes(0, secDuration * 1000, this.points + 1, false);
  }

  /** Not supported: sluice keeps usage as its algorithm counts it, not as a number one can set. */
  async set() {
    throw new Error('RateLimiterSluice does not support set(): use reward(), penalty() or delete()');
  }
}

module.exports = { RateLimiterSluice, RateLimiterRes };
