'use strict';
// client.js - the client beyond the shared cases: TLS to a sluiced with a certificate made by
// the test, auto-pipelining and a pool of connections, the version, the backoff's sequence, the
// cache's bound, timeouts, and bad arguments refused before anything is sent.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const sluice = require('sluice');
const { env, runPrefix, patient } = require('./common');

const port = Number(env('SDK_PORT'));

test('the package says the project version', () => {
  const cmake = fs.readFileSync(env('SDK_VERSION_FILE'), 'utf8');
  const m = cmake.match(/project\(sluice VERSION ([0-9.]+)/);
  assert.ok(m, 'CMakeLists.txt names a version');
  assert.equal(sluice.version, m[1]);
  assert.equal(require('sluice/package.json').version, m[1]);
});

test('a TLS connection to a sluiced with a certificate signed by a CA the client trusts', async () => {
  const client = new sluice.Client({ ...patient, port: Number(env('SDK_TLS_PORT')), tls: { ca: fs.readFileSync(env('SDK_TLS_CA')) } });
  try {
    const d = await client.allow('mw-fixed', `${runPrefix()}tls`);
    assert.equal(d.allowed, true);
    assert.equal(d.remaining, 1);
    assert.ok(client.redis[0].stream.encrypted, 'the connection is a TLS socket');
  } finally {
    await client.close();
  }
});

test('a TLS client that does not trust the certificate is refused, not answered', async () => {
  const client = new sluice.Client({ port: Number(env('SDK_TLS_PORT')), tls: {}, maxRetriesPerRequest: 0, timeoutMs: 3000 });
  try {
    await assert.rejects(client.allow('mw-fixed', 'x'), (err) => err instanceof sluice.UnreachableError);
  } finally {
    await client.close();
  }
});

test('calls made together go out as one pipeline and answer in order', async () => {
  const client = new sluice.Client({ ...patient, port, cacheSize: 0 });
  const key = `${runPrefix()}pipe`;
  try {
    await client.peek('pipe', key); // connected
    const calls = [];
    for (let i = 0; i < 100; i++) calls.push(client.allow('pipe', key));
    assert.ok(client.redis[0].autoPipelineQueueSize > 0, 'queued for one write');
    const got = await Promise.all(calls);
    assert.deepEqual(got.map((d) => d.remaining), Array.from({ length: 100 }, (_, i) => 999 - i));
  } finally {
    await client.close();
  }
});

test('a pool of connections shares the calls and every one of them counts', async () => {
  const client = new sluice.Client({ ...patient, port, connections: 3 });
  const key = `${runPrefix()}pool`;
  try {
    const got = await Promise.all(Array.from({ length: 30 }, () => client.allow('pipe', key)));
    assert.equal(client.redis.length, 3);
    assert.deepEqual(got.map((d) => d.remaining).sort((a, b) => b - a), Array.from({ length: 30 }, (_, i) => 999 - i));
    for (const r of client.redis) assert.equal(r.status, 'ready');
  } finally {
    await client.close();
  }
});

test('a server that accepts and never answers is a timeout, and onUnreachable applies', async () => {
  const silent = net.createServer(() => {}); // holds every connection, says nothing
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  const opts = { port: silent.address().port, timeoutMs: 200, connectTimeoutMs: 200, maxRetriesPerRequest: 0, redis: { enableReadyCheck: false } };
  const raise = new sluice.Client(opts);
  const deny = new sluice.Client({ ...opts, onUnreachable: 'deny', seed: 7 });
  try {
    await assert.rejects(raise.allow('mw-fixed', 'k'), /timed out/i);
    const d = await deny.allow('mw-fixed', 'k');
    assert.deepEqual({ ...d, retryAfterMs: d.retryAfterMs > 0 }, { allowed: false, limit: 0, remaining: 0, retryAfterMs: true, resetAfterMs: 0, fromCache: false, fallback: true });
  } finally {
    raise.redis[0].disconnect();
    deny.redis[0].disconnect();
    silent.close();
  }
});

// The C client's seeded sequences (tests/sdk/backoff.json, the table every package runs): the
// same seed gives the same delays, draw by draw.
test('backoff: the shared seeded sequences give the C client\'s delays', () => {
  const table = JSON.parse(fs.readFileSync(env('SDK_BACKOFF'), 'utf8'));
  assert.ok(table.sequences.length > 0, 'backoff.json has sequences');
  for (const s of table.sequences) {
    assert.equal(s.attempts.length, s.delays_ms.length, `seed ${s.seed}: one delay per attempt`);
    const rng = new sluice.SplitMix64(s.seed);
    const got = s.attempts.map((n) => sluice.backoffMs(n, s.base_ms, s.cap_ms, rng));
    assert.deepEqual(got, s.delays_ms, `seed ${s.seed}, base ${s.base_ms}, cap ${s.cap_ms}`);
  }
});

// backoff.json's fallbacks: 'deny' refuses with the client's backoff, by default (the same base
// and cap in every package) and with a client's own backoffBaseMs / backoffCapMs. A server that
// never answers: each call times out on a connection that stays up, so no reconnect draws from
// the generator between the calls.
test('backoff: deny refuses with the client\'s backoff, the default and a client\'s own (backoff.json)', async () => {
  const table = JSON.parse(fs.readFileSync(env('SDK_BACKOFF'), 'utf8'));
  const defaults = table.fallbacks.filter((f) => Object.keys(f.options).length === 0);
  assert.equal(defaults.length, 1, 'backoff.json has one fallback with the defaults');
  const plain = new sluice.Client(); // never connects: nothing is called
  assert.deepEqual([plain.options.backoffBaseMs, plain.options.backoffCapMs], [defaults[0].base_ms, defaults[0].cap_ms]);
  await plain.close();
  const silent = net.createServer(() => {});
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  try {
    for (const f of table.fallbacks) {
      const rng = new sluice.SplitMix64(f.seed);
      const drawn = f.retry_after_ms.map((_, i) => Math.max(1, sluice.backoffMs(i, f.base_ms, f.cap_ms, rng)));
      assert.deepEqual(drawn, f.retry_after_ms, `${f.name}: the table's delays are backoffMs's`);
      const own = {};
      if (f.options.backoff_base_ms !== undefined) own.backoffBaseMs = f.options.backoff_base_ms;
      if (f.options.backoff_cap_ms !== undefined) own.backoffCapMs = f.options.backoff_cap_ms;
      const c = new sluice.Client({
        port: silent.address().port, timeoutMs: 200, connectTimeoutMs: 2000, maxRetriesPerRequest: 0,
        redis: { enableReadyCheck: false }, onUnreachable: 'deny', seed: f.seed, ...own,
      });
      try {
        const got = [];
        for (let i = 0; i < f.retry_after_ms.length; i++) got.push(await c.allow('mw-fixed', 'k'));
        assert.ok(got.every((d) => !d.allowed && d.fallback), `${f.name}: every call refused as a fallback`);
        assert.deepEqual(got.map((d) => d.retryAfterMs), f.retry_after_ms, f.name);
      } finally {
        c.redis[0].disconnect();
      }
    }
  } finally {
    silent.close();
  }
});

test('backoff: full jitter within [0, min(cap, base * 2^n)], the same seed the same delays', () => {
  const a = new sluice.SplitMix64(42);
  const b = new sluice.SplitMix64(42);
  for (let n = 0; n < 70; n++) {
    const d = sluice.backoffMs(n, 50, 5000, a);
    assert.ok(d >= 0 && d <= Math.min(5000, 50 * 2 ** n), `attempt ${n}: ${d}`);
    assert.equal(sluice.backoffMs(n, 50, 5000, b), d);
  }
  assert.equal(sluice.retryDelayMs({ allowed: false, retryAfterMs: 1234 }, 3, 50, 100, a), 1234);
  assert.equal(sluice.retryDelayMs({ allowed: false, retryAfterMs: -1 }, 3, 50, 100, a), -1);
  assert.ok(sluice.retryDelayMs(null, 1, 50, 100, a) <= 100);
});

test('the over-limit cache keeps at most its size, dropping the entry that expires first', () => {
  const c = new sluice.OverLimitCache(8);
  const deny = (retryAfterMs) => ({ allowed: false, limit: 1, remaining: 0, retryAfterMs, resetAfterMs: retryAfterMs });
  for (let i = 0; i < 8; i++) c.record(`k${i}`, 1, deny(1000 + i), 0, c.epoch);
  c.record('new', 1, deny(5000), 0, c.epoch);
  assert.equal(c.entries.size, 8);
  assert.equal(c.lookup('k0', 1, 1), null, 'the earliest expiry went');
  assert.ok(c.lookup('k1', 1, 1) && c.lookup('new', 1, 1));
  // a reply to a request sent before a forget is not remembered
  const epoch = c.epoch;
  c.forget('k1');
  c.record('late', 1, deny(1000), 0, epoch);
  assert.equal(c.lookup('late', 1, 1), null);
});

test('bad arguments are refused with a clear error before anything is sent', async () => {
  assert.throws(() => new sluice.Client({ onUnreachable: 'maybe' }), /onUnreachable must be one of raise, allow, deny/);
  assert.throws(() => new sluice.Client({ cacheSize: -1 }), /cacheSize/);
  const client = new sluice.Client({ ...patient, port });
  try {
    await assert.rejects(client.allow('mw-fixed', 'k', -1), /cost must be an integer >= 0/);
    await assert.rejects(client.allow('mw-fixed', 'k', 1.5), /cost must be an integer >= 0/);
    await assert.rejects(client.allow('', 'k'), /rule must be a non-empty string/);
    await assert.rejects(client.release('mw-jobs', 'k', 0), /holdId/);
    assert.equal(client.redis[0].status, 'wait', 'nothing connected for them');
  } finally {
    await client.close();
  }
});

test('SL.RULE GET reads a rule; an unknown one is an error naming it', async () => {
  const client = new sluice.Client({ ...patient, port });
  try {
    const r = await client.rule('mw-jobs');
    assert.equal(r.algorithm, 'concurrency');
    await assert.rejects(client.rule('no-such-rule'), /unknown rule 'no-such-rule'/);
  } finally {
    await client.close();
  }
});
