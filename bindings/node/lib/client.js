'use strict';
// client.js - the client of sluiced over RESP: ioredis for connections, auto-pipelining, timeouts
// and TLS; decisions as records; the over-limit cache; backoff; onUnreachable.

const { performance } = require('node:perf_hooks');
const { randomBytes } = require('node:crypto');
const Redis = require('ioredis');
const { OverLimitCache } = require('./cache');
const { SplitMix64, backoffMs } = require('./backoff');
const { SluiceError, UnreachableError, decisionFromReply, fallbackDecision } = require('./decision');

const ON_UNREACHABLE = ['raise', 'allow', 'deny'];
const DEFAULTS = {
  host: '127.0.0.1',
  port: 6390,
  timeoutMs: 1000,
  connectTimeoutMs: 1000,
  cacheSize: 1024,
  onUnreachable: 'raise',
  backoffBaseMs: 50,
  backoffCapMs: 2000,
  connections: 1,
  maxRetriesPerRequest: 1,
};

function checkOptions(o) {
  if (!ON_UNREACHABLE.includes(o.onUnreachable)) {
    throw new TypeError(`onUnreachable must be one of ${ON_UNREACHABLE.join(', ')}, not ${JSON.stringify(o.onUnreachable)}`);
  }
  if (!Number.isInteger(o.connections) || o.connections < 1 || o.connections > 64) {
    throw new TypeError('connections must be an integer from 1 to 64');
  }
  for (const k of ['timeoutMs', 'connectTimeoutMs', 'backoffBaseMs', 'backoffCapMs']) {
    if (!Number.isInteger(o[k]) || o[k] < 0) throw new TypeError(`${k} must be an integer >= 0`);
  }
}

function checkCost(cost) {
  if (!Number.isSafeInteger(cost) || cost < 0) throw new TypeError(`cost must be an integer >= 0, not ${cost}`);
  return cost;
}

const LATENCY_MAX_MS = 3600000; // the most a release reports: 1h

// PRIORITY p, or nothing for undefined or null (the rule's lowest).
function priorityArgs(priority) {
  if (priority === undefined || priority === null) return [];
  if (typeof priority !== 'string' || priority === '') throw new TypeError('priority must be a non-empty string');
  return ['PRIORITY', priority];
}

function checkName(what, s) {
  if (typeof s !== 'string' || s.length === 0) throw new TypeError(`${what} must be a non-empty string`);
  return s;
}

class Client {
  /**
   * Connects to sluiced (lazily: the first call connects). Options: host, port, username,
   * password, tls (ioredis/Node TLS options, e.g. {ca}), timeoutMs (each command, 0 none),
   * connectTimeoutMs, connections (ioredis connections used in turn, each auto-pipelined),
   * cacheSize (over-limit cache entries, 0 off), onUnreachable ('raise' | 'allow' | 'deny'),
   * backoffBaseMs / backoffCapMs (reconnects and the 'deny' fallback's retryAfterMs; 50 and
   * 2000 by default, as in every sluice package and the C client's fallback), seed
   * (the backoff's generator), clock (() => ms, monotonic: what the cache reads), redis (ioredis
   * options merged last, for anything else), ioredis (an ioredis client already made, pointed
   * at sluiced: used as it is, and not closed by close()).
   */
  constructor(options = {}) {
    const o = { ...DEFAULTS, ...options };
    checkOptions(o);
    this.options = o;
    this.cache = new OverLimitCache(o.cacheSize);
    this.clock = o.clock || (() => performance.now());
    this.rng = new SplitMix64(o.seed !== undefined ? o.seed : randomBytes(8).readBigUInt64LE());
    this.failures = 0; // calls in a row that found sluiced unreachable
    this.next = 0;
    this.conns = [];
    if (o.ioredis) this.conns.push(o.ioredis); // an ioredis client the caller made (and closes)
    for (let i = 0; !o.ioredis && i < o.connections; i++) this.conns.push(this.connect(o));
    this.owned = !o.ioredis;
  }

  connect(o) {
    const r = new Redis({
      host: o.host,
      port: o.port,
      username: o.username,
      password: o.password,
      tls: o.tls,
      connectTimeout: o.connectTimeoutMs,
      commandTimeout: o.timeoutMs || undefined,
      enableAutoPipelining: true,
      maxRetriesPerRequest: o.maxRetriesPerRequest,
      lazyConnect: true,
      retryStrategy: (times) => Math.max(1, backoffMs(times - 1, o.backoffBaseMs, o.backoffCapMs, this.rng)),
      ...(o.redis || {}),
    });
    r.on('error', () => {}); // every failure reaches the call that met it
    return r;
  }

  // The ioredis connections (for metrics or a custom command).
  get redis() {
    return this.conns;
  }

  // Calls answered by the over-limit cache so far.
  get cacheHits() {
    return this.cache.hits;
  }

  async command(args) {
    const r = this.conns[this.next];
    this.next = (this.next + 1) % this.conns.length;
    try {
      const reply = await r.call(...args);
      this.failures = 0;
      return reply;
    } catch (err) {
      if (err instanceof Redis.ReplyError) {
        this.failures = 0;
        throw new SluiceError(err.message);
      }
      this.failures++;
      throw new UnreachableError(err.message, err);
    }
  }

  // A call that decides: onUnreachable applies when sluiced cannot be asked.
  async deciding(args, withHold) {
    try {
      return decisionFromReply(await this.command(args), withHold);
    } catch (err) {
      return this.fallback(err, withHold);
    }
  }

  // The decision of a call that failed with err: onUnreachable's when sluiced could not be
  // asked (an UnreachableError), else err thrown. The middleware's too, for a request whose rule
  // it could not read.
  fallback(err, withHold = false) {
    if (!(err instanceof UnreachableError) || this.options.onUnreachable === 'raise') throw err;
    const o = this.options;
    const d = o.onUnreachable === 'allow'
      ? fallbackDecision(true, 0)
      : fallbackDecision(false, Math.max(1, backoffMs(this.failures - 1, o.backoffBaseMs, o.backoffCapMs, this.rng)));
    if (withHold) d.holdId = null;
    return d;
  }

  // The cache around a decision of `cost` for the cache name `name`.
  async cached(name, cost, args) {
    const now = this.clock();
    const hit = this.cache.lookup(name, cost, now);
    if (hit) return { ...hit, fallback: false };
    const epoch = this.cache.epoch;
    const d = await this.deciding(args, false);
    if (!d.fallback) this.cache.record(name, cost, d, now, epoch);
    return d;
  }

  /** SL.ALLOW rule key [COST cost] [PRIORITY p]: consumes `cost` units (default 1) when they fit.
   * Resolves with the decision {allowed, limit, remaining, retryAfterMs, resetAfterMs, fromCache,
   * fallback}. Options: priority, one of the rule's priorities (none: the rule's lowest); the
   * decision is then that priority's view, and the over-limit cache neither answers it nor keeps
   * its refusal. A priority the rule lacks rejects with sluiced's SluiceError. */
  async allow(rule, key, cost = 1, { priority } = {}) {
    checkName('rule', rule);
    checkCost(cost);
    const prio = priorityArgs(priority);
    const args = ['SL.ALLOW', rule, String(key), 'COST', String(cost), ...prio];
    if (cost === 0 || prio.length) return this.deciding(args, false);
    return this.cached(OverLimitCache.name(rule, String(key)), cost, args);
  }

  /** SL.PEEK rule key [PRIORITY p]: the decision a request of cost 1 would get, consuming nothing
   * (never cached). Options: priority, that priority's view. */
  async peek(rule, key, { priority } = {}) {
    return this.deciding(['SL.PEEK', checkName('rule', rule), String(key), ...priorityArgs(priority)], false);
  }

  /** SL.THROTTLE under an inline rule (no configuration on the server): {algorithm, limit,
   * windowMs, burst, buckets, maxDelayMs}. Cached like allow(), per parameter set and key. */
  async throttle(key, inline, cost = 1) {
    checkCost(cost);
    const params = inlineArgs(inline);
    const args = ['SL.THROTTLE', String(key), ...params, 'COST', String(cost)];
    if (cost === 0) return this.deciding(args, false);
    return this.cached(OverLimitCache.name(params.join(' '), String(key)), cost, args);
  }

  /** SL.PEEK key algorithm limit window_ms ...: an inline rule's peek. */
  async peekInline(key, inline) {
    return this.deciding(['SL.PEEK', String(key), ...inlineArgs(inline)], false);
  }

  /** SL.SETTLE rule key reserved actual: a reservation of `reserved` units cost `actual`. Giving
   * units back (actual < reserved) forgets the key's cached denial. Resolves with a peek's decision. */
  async settle(rule, key, reserved, actual) {
    checkName('rule', rule);
    checkCost(reserved);
    checkCost(actual);
    if (actual < reserved) this.cache.forget(OverLimitCache.name(rule, String(key)));
    return decisionFromReply(await this.command(['SL.SETTLE', rule, String(key), String(reserved), String(actual)]));
  }

  /** The inline form of settle(). */
  async settleInline(key, inline, reserved, actual) {
    checkCost(reserved);
    checkCost(actual);
    const params = inlineArgs(inline);
    if (actual < reserved) this.cache.forget(OverLimitCache.name(params.join(' '), String(key)));
    return decisionFromReply(await this.command(['SL.SETTLE', String(key), ...params, 'RESERVED', String(reserved), 'ACTUAL', String(actual)]));
  }

  /** SL.RESET rule key: the key starts fresh; its cached denial is forgotten. */
  async reset(rule, key) {
    checkName('rule', rule);
    this.cache.forget(OverLimitCache.name(rule, String(key)));
    await this.command(['SL.RESET', rule, String(key)]);
  }

  /** SL.RESET key (the inline form): the key starts fresh under every inline rule. */
  async resetInline(key, inline) {
    this.cache.forget(OverLimitCache.name(inlineArgs(inline).join(' '), String(key)));
    await this.command(['SL.RESET', String(key)]);
  }

  /** SL.ACQUIRE rule key [COST cost] [TIMEOUT ms] [PRIORITY p]: an in-flight rule's hold. The
   * decision has holdId (null when no hold was made: refused, or let through by shadow mode).
   * Never cached. priority: one of the rule's priorities, as allow()'s. */
  async acquire(rule, key, { cost = 1, timeoutMs, priority } = {}) {
    checkName('rule', rule);
    checkCost(cost);
    const args = ['SL.ACQUIRE', rule, String(key), 'COST', String(cost)];
    if (timeoutMs !== undefined) args.push('TIMEOUT', String(checkCost(timeoutMs)));
    args.push(...priorityArgs(priority));
    return this.deciding(args, true);
  }

  /** SL.RELEASE rule key id [LATENCY <us>us] [DROPPED]: frees the hold. Rejects with the server's
   * "no such hold" when the key holds no live hold of that id. Forgets the key's cached denial,
   * as a settle giving units back does: the freed units may admit what it refused. Options
   * report the hold's work to an adaptive limit (a fixed limit ignores them): latencyMs, its
   * latency in milliseconds (fractions allowed, sent in microseconds; 0 .. 3600000, else a
   * TypeError and nothing sent), and dropped (true: it was dropped, timed out or failed for load). */
  async release(rule, key, holdId, { latencyMs, dropped = false } = {}) {
    checkName('rule', rule);
    if (!Number.isSafeInteger(holdId) || holdId < 1) throw new TypeError('holdId must be an integer >= 1');
    const args = ['SL.RELEASE', rule, String(key), String(holdId)];
    if (latencyMs !== undefined && latencyMs !== null) {
      if (typeof latencyMs !== 'number' || !(latencyMs >= 0 && latencyMs <= LATENCY_MAX_MS)) {
        throw new TypeError(`latencyMs must be a number of milliseconds, 0 .. ${LATENCY_MAX_MS} (1h), not ${latencyMs}`);
      }
      args.push('LATENCY', `${Math.round(latencyMs * 1000)}us`);
    }
    if (dropped) args.push('DROPPED');
    this.cache.forget(OverLimitCache.name(rule, String(key)));
    await this.command(args);
  }

  /** SL.RULE GET name: the rule as sluiced stores it (JSON parsed); rejects with sluiced's
   * "unknown rule" for a name it does not have. */
  async rule(name) {
    return JSON.parse(await this.command(['SL.RULE', 'GET', checkName('rule', name)]));
  }

  /** Closes every connection (waits for replies in flight). */
  async close() {
    if (!this.owned) return;
    await Promise.all(this.conns.map((r) => (r.status === 'wait' ? r.disconnect() : r.quit().catch(() => r.disconnect()))));
  }
}

const ALGORITHMS = ['fixed_window', 'sliding_log', 'sliding_window', 'sliding_buckets', 'token_bucket', 'gcra'];

// An inline rule's arguments: algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms].
function inlineArgs({ algorithm, limit, windowMs, burst, buckets, maxDelayMs }) {
  if (!ALGORITHMS.includes(algorithm)) throw new TypeError(`algorithm must be one of ${ALGORITHMS.join(', ')}`);
  if (!Number.isSafeInteger(limit) || limit < 1) throw new TypeError('limit must be an integer >= 1');
  if (!Number.isSafeInteger(windowMs) || windowMs < 1) throw new TypeError('windowMs must be an integer >= 1');
  const args = [algorithm, String(limit), String(windowMs)];
  if (burst !== undefined) args.push('BURST', String(burst));
  if (buckets !== undefined) args.push('BUCKETS', String(buckets));
  if (maxDelayMs !== undefined) args.push('MAX_DELAY', String(maxDelayMs));
  return args;
}

module.exports = { Client, ON_UNREACHABLE, LATENCY_MAX_MS, inlineArgs };
