'use strict';
// native.js - libsluice in this process, through koffi (a C FFI from npm: no compiler at
// install). The table and the pure algorithms of include/sluice/sluice.h, time given by the
// caller in nanoseconds (a BigInt, or a Number of ns; nowNs() reads libsluice's clock).
//
// koffi is an optional peer dependency: only this file needs it, and only when load() is called.

const ALGORITHMS = ['fixed_window', 'sliding_log', 'sliding_window', 'sliding_buckets', 'token_bucket', 'gcra', 'concurrency'];
const SL_DEFAULT = -1;
const NS_PER_MS = 1000000n;
const LIBRARY_NAMES = ['libsluice.so.2', 'libsluice.so', 'libsluice.dylib'];

class NativeError extends Error {
  // A libsluice error: code is the SL_E* number, message sl_strerror()'s text.
  constructor(code, message) {
    super(message);
    this.name = 'NativeError';
    this.code = code;
  }
}

// koffi's type names are global to the process: the structs are declared on the first load()
// and reused by the next (a second declaration of a name throws).
let declaredTypes = null;

function declareTypes(koffi) {
  if (declaredTypes) return declaredTypes;
  const t = {};
  t.adaptive = koffi.struct('sl_adaptive_t', {
    algorithm: 'int', min_limit: 'int64_t', max_limit: 'int64_t', backoff_pct: 'int64_t',
    timeout_ns: 'int64_t', probe: 'int64_t',
  });
  t.rule = koffi.struct('sl_rule_t', {
    algorithm: 'int', limit: 'int64_t', window_ns: 'int64_t', burst: 'int64_t', buckets: 'int64_t',
    max_delay_ns: 'int64_t', max_debt: 'int64_t', interval_ns: 'int64_t', tolerance_ns: 'int64_t',
    bucket_ns: 'int64_t', capacity: 'int64_t', state_size: 'uint32_t',
    adaptive: 'sl_adaptive_t', // all zero: a fixed limit
  });
  t.decision = koffi.struct('sl_decision_t', {
    allowed: 'bool', limit: 'int64_t', remaining: 'int64_t', retry_after_ns: 'int64_t',
    reset_after_ns: 'int64_t', delay_ns: 'int64_t',
  });
  t.hold = koffi.struct('sl_hold_t', { id: 'uint64_t', until_ns: 'int64_t', expired: 'int64_t' });
  t.config = koffi.struct('sl_table_config_t', {
    max_bytes: 'size_t', key_max: 'size_t', shards: 'unsigned int', initial_keys: 'size_t', seed: 'uint64_t',
    budget: 'void *', evict_idle: 'bool',
  });
  t.table = koffi.opaque('sl_table_t');
  t.decisionSize = koffi.sizeof(t.decision);
  t.holdSize = koffi.sizeof(t.hold);
  t.holdIdAt = koffi.offsetof(t.hold, 'id');
  declaredTypes = t;
  return t;
}

function declare(koffi, lib) {
  const t = declareTypes(koffi);
  const f = (sig) => lib.func(sig);
  return {
    types: t,
    strerror: f('const char *sl_strerror(int code)'),
    prepare: f('int sl_rule_prepare(_Inout_ sl_rule_t *rule)'),
    decide: f('int sl_decide(const void *rule, void *state, int64_t cost, int64_t now_ns, void *out)'),
    settle: f('int sl_settle(const void *rule, void *state, int64_t reserved, int64_t actual, int64_t charged_ns, int64_t now_ns, void *out)'),
    stateIsFresh: f('bool sl_state_is_fresh(const void *rule, const void *state, int64_t now_ns)'),
    now: f('int64_t sl_now_ns()'),
    durationParse: f('int sl_duration_parse(const char *text, size_t len, _Out_ int64_t *ns)'),
    create: f('int sl_table_create(const sl_rule_t *rule, const sl_table_config_t *cfg, _Out_ sl_table_t **out)'),
    free: f('void sl_table_free(sl_table_t *table)'),
    tdecide: f('int sl_table_decide(sl_table_t *table, const void *key, size_t key_len, int64_t cost, int64_t now_ns, void *out)'),
    tsettle: f('int sl_table_settle(sl_table_t *table, const void *key, size_t key_len, int64_t reserved, int64_t actual, int64_t charged_ns, int64_t now_ns, void *out)'),
    tacquire: f('int sl_table_acquire(sl_table_t *table, const void *key, size_t key_len, int64_t cost, int64_t hold_ns, int64_t now_ns, void *out, void *hold)'),
    trelease: f('int sl_table_release(sl_table_t *table, const void *key, size_t key_len, uint64_t id, int64_t now_ns, void *out, void *released)'),
    treset: f('int sl_table_reset(sl_table_t *table, const void *key, size_t key_len)'),
    tcount: f('size_t sl_table_count(sl_table_t *table)'),
    treclaim: f('size_t sl_table_reclaim(sl_table_t *table, int64_t now_ns)'),
  };
}

function loadLibrary(koffi, library) {
  const names = library ? [library] : process.env.SLUICE_LIBRARY ? [process.env.SLUICE_LIBRARY] : LIBRARY_NAMES;
  let last;
  for (const name of names) {
    try {
      return koffi.load(name);
    } catch (err) {
      last = err;
    }
  }
  throw new Error(`cannot load libsluice (tried ${names.join(', ')}; set SLUICE_LIBRARY or pass {library}): ${last.message}`);
}

const toNs = (v) => (typeof v === 'bigint' ? v : BigInt(Math.round(v)));

// Out parameters are written into Buffers made once and read back by offset: decoding a struct
// into a new object on every call costs more than the call (see docs/design.md).
function layout(koffi, type, fields) {
  return Object.fromEntries(fields.map((f) => [f, koffi.offsetof(type, f)]));
}

function decisionReader(koffi, t) {
  const at = layout(koffi, t.decision, ['allowed', 'limit', 'remaining', 'retry_after_ns', 'reset_after_ns', 'delay_ns']);
  // An int64 as a Number from its two 32-bit words (the high one signed): the same value, rounded
  // once, as Number(readBigInt64LE()), without making a BigInt, which took a fifth of a decide().
  const i64 = (b, o) => b.readInt32LE(o + 4) * 4294967296 + b.readUInt32LE(o);
  const { allowed, limit, remaining, retry_after_ns: retry, reset_after_ns: reset, delay_ns: delay } = at;
  return (b) => ({
    allowed: b[allowed] !== 0, limit: i64(b, limit), remaining: i64(b, remaining),
    retryAfterNs: i64(b, retry), resetAfterNs: i64(b, reset), delayNs: i64(b, delay),
  });
}

/** Loads libsluice ({library: a path or name}; else $SLUICE_LIBRARY; else libsluice.so.2 where
 * the dynamic loader finds it) and returns the binding: {rule, table, decide, settle,
 * stateIsFresh, nowNs, NativeError}. */
function load(options = {}) {
  const koffi = require('koffi');
  const fn = declare(koffi, loadLibrary(koffi, options.library));
  const t = fn.types;
  const readDecision = decisionReader(koffi, t);
  const out = Buffer.alloc(t.decisionSize); // one thread: reused by every call
  const holdOut = Buffer.alloc(t.holdSize);
  const check = (rc) => {
    if (rc !== 0) throw new NativeError(rc, fn.strerror(rc));
  };
  const checkCost = (what, n) => {
    if (!Number.isSafeInteger(n)) throw new TypeError(`${what} must be an integer, not ${n}`);
    return n;
  };
  const key = (k) => (Buffer.isBuffer(k) ? k : Buffer.from(String(k), 'utf8'));
  const nowNs = () => BigInt(fn.now());

  function windowNs(w) {
    if (typeof w === 'bigint') return w;
    if (typeof w === 'number') return BigInt(w) * NS_PER_MS; // ms, as sluiced reads a bare number
    const ns = [0];
    check(fn.durationParse(String(w), Buffer.byteLength(String(w)), ns));
    return BigInt(ns[0]);
  }

  /** A prepared rule: {algorithm, limit, window ('1s', ms, or a BigInt of ns), burst, buckets,
   * maxDelay, maxDebt}. Throws NativeError (with libsluice's reason) for a bad one. */
  function rule(spec) {
    const a = ALGORITHMS.indexOf(spec.algorithm);
    if (a < 0) throw new NativeError(-1, `unknown algorithm ${JSON.stringify(spec.algorithm)} (one of ${ALGORITHMS.join(', ')})`);
    const r = {
      algorithm: a + 1, limit: BigInt(spec.limit), window_ns: windowNs(spec.window),
      burst: BigInt(spec.burst === undefined ? SL_DEFAULT : spec.burst),
      buckets: BigInt(spec.buckets === undefined ? SL_DEFAULT : spec.buckets),
      max_delay_ns: spec.maxDelay === undefined ? 0n : windowNs(spec.maxDelay),
      max_debt: BigInt(spec.maxDebt === undefined ? SL_DEFAULT : spec.maxDebt),
      interval_ns: 0n, tolerance_ns: 0n, bucket_ns: 0n, capacity: 0n, state_size: 0,
    };
    check(fn.prepare(r));
    const native = Buffer.alloc(koffi.sizeof(t.rule)); // the prepared rule as C reads it
    koffi.encode(native, t.rule, r);
    return Object.freeze({ ...r, capacity: Number(r.capacity), stateSize: r.state_size, native });
  }

  /** The pure algorithm over a state you keep (a Buffer of rule.stateSize bytes, zeros for a new
   * key): decides `cost` at nowNs and updates the state when admitted. */
  function decide(r, state, cost, now) {
    if (!Buffer.isBuffer(state) || state.length < r.stateSize) throw new TypeError(`state must be a Buffer of ${r.stateSize} bytes`);
    check(fn.decide(r.native, state, checkCost('cost', cost), toNs(now), out));
    return readDecision(out);
  }

  function settle(r, state, reserved, actual, chargedNs, now) {
    if (!Buffer.isBuffer(state) || state.length < r.stateSize) throw new TypeError(`state must be a Buffer of ${r.stateSize} bytes`);
    check(fn.settle(r.native, state, checkCost('reserved', reserved), checkCost('actual', actual), toNs(chargedNs), toNs(now), out));
    return readDecision(out);
  }

  const stateIsFresh = (r, state, now) => fn.stateIsFresh(r.native, state, toNs(now));

  /** A thread-safe table of per-key state for one rule (libsluice's sl_table). Options: maxBytes,
   * keyMax, shards, seed (0 random), evictIdle. close() frees it; a closed table throws. */
  function table(r, opts = {}) {
    const cfg = {
      max_bytes: opts.maxBytes || 0, key_max: opts.keyMax || 0, shards: opts.shards || 0, initial_keys: 0,
      seed: BigInt(opts.seed || 0), budget: null, evict_idle: Boolean(opts.evictIdle),
    };
    const made = [null];
    check(fn.create(r, cfg, made));
    let handle = made[0];
    const live = () => {
      if (handle === null) throw new NativeError(-14, 'the table is closed');
      return handle;
    };
    return {
      rule: r,
      decide(k, cost = 1, now = nowNs()) {
        const b = key(k);
        check(fn.tdecide(live(), b, b.length, checkCost('cost', cost), toNs(now), out));
        return readDecision(out);
      },
      settle(k, reserved, actual, chargedNs, now = nowNs()) {
        const b = key(k);
        check(fn.tsettle(live(), b, b.length, checkCost('reserved', reserved), checkCost('actual', actual), toNs(chargedNs), toNs(now), out));
        return readDecision(out);
      },
      acquire(k, cost = 1, { holdNs = 0n, now = nowNs() } = {}) {
        const b = key(k);
        check(fn.tacquire(live(), b, b.length, checkCost('cost', cost), toNs(holdNs), toNs(now), out, holdOut));
        const id = Number(holdOut.readBigUInt64LE(t.holdIdAt));
        return { ...readDecision(out), holdId: id || null };
      },
      release(k, holdId, now = nowNs()) {
        const b = key(k);
        check(fn.trelease(live(), b, b.length, checkCost('holdId', holdId), toNs(now), out, holdOut));
        return readDecision(out);
      },
      reset(k) {
        const b = key(k);
        check(fn.treset(live(), b, b.length));
      },
      count: () => Number(fn.tcount(live())),
      reclaim: (now = nowNs()) => Number(fn.treclaim(live(), toNs(now))),
      close() {
        if (handle !== null) fn.free(handle);
        handle = null;
      },
    };
  }

  return { rule, table, decide, settle, stateIsFresh, nowNs, NativeError, ALGORITHMS };
}

module.exports = { load, NativeError, ALGORITHMS };
