'use strict';
// flexible.js - RateLimiterSluice under rate-limiter-flexible's own documented usage: each
// pattern runs twice, once on RateLimiterRedis over a real redis-server and once on
// RateLimiterSluice over a real sluiced (the constructor the only change), and what the
// application sees must be the same. The limiters use a window the test cannot outlast
// (sliding_log over a day), so no boundary falls inside a run. test_node_sdk.sh runs it twice:
// SDK_PORT a sluiced on its memory store, then one on a Redis store.

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const Redis = require('ioredis');
const express = require('express');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const sluice = require('sluice');
const { env, runPrefix, patient } = require('./common');

const redis = new Redis({ port: Number(env('SDK_REDIS_PORT')), lazyConnect: true });
const client = new sluice.Client({ ...patient, port: Number(env('SDK_PORT')) });
test.after(async () => {
  redis.disconnect();
  await client.close();
});

// The two constructors a user switches between.
const makers = {
  redis: (opts) => new RateLimiterRedis({ storeClient: redis, ...opts }),
  sluice: (opts) => new RateLimiterSluice({ storeClient: client, algorithm: 'sliding_log', ...opts }),
};
const { RateLimiterSluice } = sluice;

// What the application can see of a result: resolved or rejected, the numbers, msBeforeNext as
// "within the duration" (its exact value is a time).
function seen(outcome, r, maxMs) {
  if (r instanceof Error) return { outcome, error: true };
  if (r === null) return { outcome, value: null };
  return {
    outcome, remainingPoints: r.remainingPoints, consumedPoints: r.consumedPoints,
    isFirstInDuration: r.isFirstInDuration, msBeforeNext: r.msBeforeNext > 0 && r.msBeforeNext <= maxMs,
  };
}
const settle = (p, maxMs) => p.then((r) => seen('resolved', r, maxMs), (r) => seen('rejected', r, maxMs));

// Runs pattern(make) for both limiters (fresh key prefixes) and compares what each saw.
async function same(pattern) {
  const got = {};
  for (const [name, make] of Object.entries(makers)) {
    got[name] = await pattern((opts) => make({ ...opts, keyPrefix: runPrefix() + (opts.keyPrefix || 'rl') }));
  }
  assert.deepEqual(got.sluice, got.redis);
  return got.sluice;
}

test('README: consume 2 points at a time, resolved while they fit, rejected once they do not', async () => {
  const trace = await same(async (make) => {
    const rateLimiter = make({ points: 5, duration: 86400 });
    const out = [];
    for (let i = 0; i < 3; i++) out.push(await settle(rateLimiter.consume('1.2.3.4', 2), 86400000));
    return out;
  });
  assert.deepEqual(trace.map((t) => t.outcome), ['resolved', 'resolved', 'rejected']);
  assert.deepEqual(trace.map((t) => t.remainingPoints), [3, 1, 0]);
  assert.equal(trace[0].isFirstInDuration, true);
});

test('README: the Express middleware with the X-RateLimit headers, over real HTTP', async () => {
  const statuses = await same(async (make) => {
    const opts = { points: 5, duration: 86400 };
    const rateLimiter = make(opts);
    const app = express();
    app.use((req, res, next) => {
      rateLimiter.consume(req.ip)
        .then((rateLimiterRes) => {
          res.set({ 'X-RateLimit-Limit': opts.points, 'X-RateLimit-Remaining': rateLimiterRes.remainingPoints });
          next();
        })
        .catch((rateLimiterRes) => {
          res.set({
            'Retry-After': Math.ceil(rateLimiterRes.msBeforeNext / 1000),
            'X-RateLimit-Limit': opts.points,
            'X-RateLimit-Remaining': rateLimiterRes.remainingPoints,
          });
          res.status(429).send('Too Many Requests');
        });
    });
    app.get('/', (req, res) => res.send('ok'));
    const server = http.createServer(app);
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    const out = [];
    try {
      for (let i = 0; i < 7; i++) {
        const r = await fetch(`http://127.0.0.1:${server.address().port}/`);
        const retry = r.headers.get('retry-after');
        out.push([r.status, r.headers.get('x-ratelimit-remaining'), retry === null ? null : Number(retry) > 0]);
      }
    } finally {
      server.closeAllConnections();
      server.close();
    }
    return out;
  });
  assert.deepEqual(statuses.map((s) => s[0]), [200, 200, 200, 200, 200, 429, 429]);
});

test('README: a store failure rejects with an Error, a refusal with a result', async () => {
  const deadPort = Number(env('SDK_REFUSED_PORT')); // held bound, never listening, by the script
  const kinds = {};
  const badRedis = new Redis({ port: deadPort, maxRetriesPerRequest: 0, lazyConnect: true });
  badRedis.on('error', () => {});
  const badSluice = new sluice.Client({ port: deadPort, maxRetriesPerRequest: 0 });
  for (const [name, limiter] of [['redis', new RateLimiterRedis({ storeClient: badRedis, points: 1, duration: 60 })],
    ['sluice', new RateLimiterSluice({ storeClient: badSluice, points: 1, duration: 60 })]]) {
    kinds[name] = await limiter.consume('k').then(() => 'resolved', (rej) => (rej instanceof Error ? 'error' : 'refused'));
  }
  badRedis.disconnect();
  await badSluice.close();
  assert.deepEqual(kinds, { redis: 'error', sluice: 'error' });
});

test('wiki: login brute-force protection (get, consume with blockDuration, delete on success)', async () => {
  const trace = await same(async (make) => {
    const maxWrongAttemptsByIPperDay = 100;
    const maxConsecutiveFailsByUsernameAndIP = 4;
    const limiterSlowBruteByIP = make({ keyPrefix: 'login_fail_ip_per_day', points: maxWrongAttemptsByIPperDay, duration: 60 * 60 * 24, blockDuration: 60 * 60 * 24 });
    const limiterConsecutiveFailsByUsernameAndIP = make({ keyPrefix: 'login_fail_consecutive_username_and_ip', points: maxConsecutiveFailsByUsernameAndIP, duration: 60 * 60 * 24 * 90, blockDuration: 60 * 60 });
    const getUsernameIPkey = (username, ip) => `${username}_${ip}`;

    async function loginRoute(ip, username, passwordOk) {
      const usernameIPkey = getUsernameIPkey(username, ip);
      const [resUsernameAndIP, resSlowByIP] = await Promise.all([
        limiterConsecutiveFailsByUsernameAndIP.get(usernameIPkey),
        limiterSlowBruteByIP.get(ip),
      ]);
      let retrySecs = 0;
      if (resSlowByIP !== null && resSlowByIP.consumedPoints > maxWrongAttemptsByIPperDay) {
        retrySecs = Math.round(resSlowByIP.msBeforeNext / 1000) || 1;
      } else if (resUsernameAndIP !== null && resUsernameAndIP.consumedPoints > maxConsecutiveFailsByUsernameAndIP) {
        retrySecs = Math.round(resUsernameAndIP.msBeforeNext / 1000) || 1;
      }
      if (retrySecs > 0) return [429, retrySecs > 0];
      if (!passwordOk) {
        try {
          await Promise.all([limiterSlowBruteByIP.consume(ip), limiterConsecutiveFailsByUsernameAndIP.consume(usernameIPkey)]);
          return [400, null];
        } catch (rlRejected) {
          if (rlRejected instanceof Error) throw rlRejected;
          return [429, Math.round(rlRejected.msBeforeNext / 1000) > 0];
        }
      }
      if (resUsernameAndIP !== null && resUsernameAndIP.consumedPoints > 0) {
        await limiterConsecutiveFailsByUsernameAndIP.delete(usernameIPkey);
      }
      return [200, null];
    }

    const out = [];
    for (let i = 0; i < 7; i++) out.push(await loginRoute('10.0.0.1', 'eve', false));
    out.push(await loginRoute('10.0.0.1', 'frank', false)); // another user from the same address
    out.push(await loginRoute('10.0.0.1', 'frank', true));
    out.push(await loginRoute('10.0.0.1', 'frank', false)); // a success reset frank's count
    return out;
  });
  assert.deepEqual(trace.map((t) => t[0]), [400, 400, 400, 400, 429, 429, 429, 400, 200, 400]);
});

test('penalty, reward, get and delete tell the same story', async () => {
  const trace = await same(async (make) => {
    const rl = make({ points: 10, duration: 86400 });
    const out = [];
    out.push(await settle(rl.get('k'), 86400000));
    out.push(await settle(rl.consume('k', 2), 86400000));
    out.push(await settle(rl.penalty('k', 3), 86400000));
    out.push(await settle(rl.get('k'), 86400000));
    out.push(await settle(rl.reward('k', 4), 86400000));
    out.push(await settle(rl.get('k'), 86400000));
    out.push(await rl.delete('k'));
    out.push(await settle(rl.get('k'), 86400000));
    out.push(await rl.delete('k'));
    return out.map((o) => (o && typeof o === 'object' ? { ...o, isFirstInDuration: undefined } : o));
  });
  assert.deepEqual(trace.map((t) => (typeof t === 'object' && t.value === undefined ? t.consumedPoints : t)), [
    { outcome: 'resolved', value: null, isFirstInDuration: undefined }, 2, 5, 5, 1, 1, true,
    { outcome: 'resolved', value: null, isFirstInDuration: undefined }, false,
  ]);
});

test('block refuses the key for its duration, and get reports it as over the limit', async () => {
  const trace = await same(async (make) => {
    const rl = make({ points: 3, duration: 86400 });
    const out = [];
    const b = await rl.block('k', 120);
    out.push([b.consumedPoints, b.msBeforeNext]);
    const rej = await rl.consume('k').then(() => null, (r) => r);
    out.push([rej.remainingPoints, rej.msBeforeNext > 110000 && rej.msBeforeNext <= 120000]);
    const g = await rl.get('k');
    out.push([g.consumedPoints > 3, g.msBeforeNext > 0]);
    out.push(await rl.delete('k'));
    out.push(await settle(rl.consume('k'), 86400000));
    return out;
  });
  assert.deepEqual(trace[0], [4, 120000]);
});

test('more points than the limit at once is a refusal (a result, not an Error); keys carry the prefix', async () => {
  const trace = await same(async (make) => {
    const rl = make({ points: 1, duration: 86400 });
    const rej = await rl.consume('big', 2).then(() => null, (r) => r);
    return [rej instanceof Error, rej.remainingPoints, rej.consumedPoints > 1, rej.msBeforeNext >= 0,
      rl.parseKey(rl.getKey('user:1')), rl.getKey('x').endsWith(':x')];
  });
  assert.deepEqual(trace, [false, 0, true, true, 'user:1', true]);
});

test('what rate-limiter-flexible has and sluice refuses is a clear error', async () => {
  assert.throws(() => new RateLimiterSluice({ storeClient: client, execEvenly: true }), /does not support execEvenly/);
  assert.throws(() => new RateLimiterSluice({ storeClient: client, duration: 0 }), /duration must be a number of seconds > 0/);
  assert.throws(() => new RateLimiterSluice({ points: 1 }), /storeClient is not set/);
  await assert.rejects(new RateLimiterSluice({ storeClient: client }).set('k', 1, 1), /does not support set/);
});
