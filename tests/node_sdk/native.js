'use strict';
// native.js - libsluice in-process through the installed package (koffi), under seeded random
// operations (SLUICE_SEED=n replays a run; the seed is printed): the table and the pure
// algorithm over a caller's state agree on every decision of every algorithm; fixed_window and
// sliding_log decide exactly as a model of their definition; a peek changes no byte; in-flight
// holds never pass the limit and a hold is released once; bad input is a NativeError naming it;
// a second loadNative() works beside the first.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const sluice = require('sluice');

const native = sluice.loadNative();
const SEED = process.env.SLUICE_SEED ? BigInt(process.env.SLUICE_SEED) : crypto.randomBytes(8).readBigUInt64LE();
console.log(`# SLUICE_SEED=${SEED}`);
const rng = new sluice.SplitMix64(SEED);
const pick = (n) => rng.upto(Math.floor(n) - 1); // uniform in [0, n)

const T0 = 1700000000000000000n; // a time in ns, 2023
const MS = 1000000n;

test('the table and the pure algorithm over a Buffer agree, for every algorithm; a peek changes nothing', () => {
  for (const algorithm of native.ALGORITHMS.filter((a) => a !== 'concurrency')) {
    for (let round = 0; round < 20; round++) {
      const limit = 1 + pick(8);
      const windowMs = 10 + pick(1000);
      const spec = { algorithm, limit, window: windowMs };
      if (algorithm === 'sliding_buckets') spec.window = 10 * (1 + pick(100)); // buckets (10) divide it
      const rule = native.rule(spec);
      const table = native.table(rule, { seed: 1 });
      const states = [0, 1, 2].map(() => Buffer.alloc(rule.stateSize));
      let now = T0 + BigInt(pick(1000)) * MS;
      for (let i = 0; i < 200; i++) {
        now += BigInt(pick(windowMs / 4 + 1)) * MS + BigInt(pick(1000));
        const k = pick(3);
        const cost = pick(rule.capacity + 1); // 0 (a peek) .. the capacity
        const before = Buffer.from(states[k]);
        const pure = native.decide(rule, states[k], cost, now);
        const viaTable = table.decide(`key${k}`, cost, now);
        const where = `${algorithm} ${JSON.stringify(spec)} step ${i} key ${k} cost ${cost} (seed ${SEED})`;
        assert.deepEqual(viaTable, pure, where);
        if (cost === 0 || !pure.allowed) assert.deepEqual(states[k], before, `${where}: a peek or a refusal changed the state`);
      }
      table.close();
    }
  }
});

test('fixed_window and sliding_log decide exactly as their definitions', () => {
  for (let round = 0; round < 30; round++) {
    const limit = 1 + pick(6);
    const windowMs = 50 + pick(500);
    const W = BigInt(windowMs) * MS;
    const fixed = native.table(native.rule({ algorithm: 'fixed_window', limit, window: windowMs }));
    const log = native.table(native.rule({ algorithm: 'sliding_log', limit, window: windowMs }));
    const counts = new Map(); // fixed: window index -> units
    const admitted = []; // sliding_log: [t, units]
    let now = T0;
    for (let i = 0; i < 300; i++) {
      now += BigInt(pick(windowMs / 3 + 1)) * MS;
      const cost = 1 + pick(limit);
      const w = now / W;
      const used = counts.get(w) || 0;
      const f = fixed.decide('k', cost, now);
      assert.equal(f.allowed, used + cost <= limit, `fixed_window round ${round} step ${i} (seed ${SEED})`);
      if (f.allowed) counts.set(w, used + cost);
      assert.equal(f.remaining, limit - (counts.get(w) || 0));
      const inWindow = admitted.filter(([t]) => t > now - W).reduce((s, [, c]) => s + c, 0);
      const l = log.decide('k', cost, now);
      assert.equal(l.allowed, inWindow + cost <= limit, `sliding_log round ${round} step ${i} (seed ${SEED})`);
      if (l.allowed) admitted.push([now, cost]);
    }
    fixed.close();
    log.close();
  }
});

test('in-flight holds never pass the limit; a hold is released once and frees exactly its units', () => {
  for (let round = 0; round < 20; round++) {
    const limit = 1 + pick(6);
    const table = native.table(native.rule({ algorithm: 'concurrency', limit, window: '1h' }));
    const holds = new Map(); // id -> units
    let now = T0;
    for (let i = 0; i < 200; i++) {
      now += BigInt(pick(1000)) * MS; // far inside the hour: nothing expires
      const held = [...holds.values()].reduce((s, c) => s + c, 0);
      if (holds.size > 0 && pick(2) === 0) {
        const ids = [...holds.keys()];
        const id = ids[pick(ids.length)];
        const d = table.release('k', id, now);
        holds.delete(id);
        assert.equal(d.remaining, limit - held + (held - [...holds.values()].reduce((s, c) => s + c, 0)));
        assert.throws(() => table.release('k', id, now), (err) => err instanceof native.NativeError && err.code === -18);
      } else {
        const cost = 1 + pick(limit);
        const d = table.acquire('k', cost, { now });
        assert.equal(d.allowed, held + cost <= limit, `round ${round} step ${i} (seed ${SEED})`);
        if (d.allowed) holds.set(d.holdId, cost);
        else assert.equal(d.holdId, null);
      }
      assert.ok([...holds.values()].reduce((s, c) => s + c, 0) <= limit);
    }
    table.close();
  }
});

test('bad input is a NativeError that says what is wrong, and changes nothing', () => {
  assert.throws(() => native.rule({ algorithm: 'fixed_window', limit: 0, window: '1s' }), /limit must be a positive integer/);
  assert.throws(() => native.rule({ algorithm: 'leaky', limit: 1, window: '1s' }), /unknown algorithm "leaky"/);
  assert.throws(() => native.rule({ algorithm: 'fixed_window', limit: 1, window: 'soon' }), native.NativeError);
  assert.throws(() => native.rule({ algorithm: 'fixed_window', limit: 1, window: '1s', burst: 3 }), /burst/);
  const t = native.table(native.rule({ algorithm: 'fixed_window', limit: 1, window: '1s' }), { keyMax: 8 });
  assert.throws(() => t.decide('a key longer than eight bytes', 1, T0), /key/);
  assert.throws(() => t.decide('k', -1, T0), /cost/);
  assert.throws(() => t.decide('k', 1.5, T0), /cost must be an integer/);
  assert.equal(t.count(), 0);
  assert.equal(t.decide('k', 1, T0).allowed, true);
  t.close();
  assert.throws(() => t.decide('k', 1, T0), /closed/);
  const r = native.rule({ algorithm: 'gcra', limit: 1, window: '1s' });
  assert.throws(() => native.decide(r, Buffer.alloc(1), 1, T0), /state must be a Buffer of 8 bytes/);
});

test('loadNative() a second time gives a second binding that works beside the first', () => {
  const again = sluice.loadNative(); // koffi's struct names are global: declared once, reused
  const a = native.table(native.rule({ algorithm: 'fixed_window', limit: 2, window: '1s' }));
  const b = again.table(again.rule({ algorithm: 'fixed_window', limit: 2, window: '1s' }));
  assert.deepEqual([a.decide('k', 2, T0).allowed, b.decide('k', 1, T0).allowed, a.decide('k', 1, T0).allowed], [true, true, false]);
  assert.deepEqual(b.decide('k', 1, T0), { allowed: true, limit: 2, remaining: 0, retryAfterNs: 0, resetAfterNs: 1000000000, delayNs: 0 });
  // a refusal's retry time is exact in ns (an int64 read from two 32-bit words)
  const d = b.decide('k', 1, T0 + 123456789n);
  assert.deepEqual([d.allowed, d.retryAfterNs, d.resetAfterNs], [false, 876543211, 876543211]);
  a.close();
  b.close();
});
