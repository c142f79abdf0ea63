'use strict';
// keys.js - the key functions (sluice.keys) against tests/sdk/keys.json, the keys every package's
// middleware (Python, Node, Go) makes of the same request. trusted_proxies: the client address
// is what Express's 'trust proxy' makes req.ip (proxy-addr, which Express calls), then keys.ip.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const proxyaddr = require('proxy-addr');
const sluice = require('sluice');
const { env } = require('./common');

const table = JSON.parse(fs.readFileSync(env('SDK_KEYS'), 'utf8'));
const bits = (v) => ({ ...(v.v4 !== undefined ? { v4: v.v4 } : {}), ...(v.v6 !== undefined ? { v6: v.v6 } : {}) });
const withPrefix = (v) => (v.prefix !== undefined ? { prefix: v.prefix } : {});

const kinds = {
  ip: (v) => [sluice.keys.ip({ ...bits(v), ...withPrefix(v) }), { ip: v.ip, headers: {} }],
  header: (v) => [sluice.keys.header(v.name, withPrefix(v)), { headers: v.headers }],
  route: (v) => [sluice.keys.route(withPrefix(v)), { route: v.route !== undefined ? v.route : v.path, headers: {} }],
  user: (v) => [sluice.keys.user(() => v.user, withPrefix(v)), { req: {}, headers: {} }],
  trusted_proxies: (v) => {
    const headers = v.x_forwarded_for !== undefined ? { 'x-forwarded-for': v.x_forwarded_for } : {};
    const ip = proxyaddr({ headers, connection: { remoteAddress: v.peer }, socket: { remoteAddress: v.peer } }, v.trusted);
    return [sluice.keys.ip({ ...bits(v), ...withPrefix(v) }), { ip, headers }];
  },
};

for (const [kind, make] of Object.entries(kinds)) {
  test(`keys.json: ${kind}`, () => {
    assert.ok(Array.isArray(table[kind]) && table[kind].length > 0, `keys.json has ${kind} vectors`);
    for (const [i, v] of table[kind].entries()) {
      const [key, view] = make(v);
      assert.equal(key(view), v.key, `${kind} ${i}: ${JSON.stringify(v)}`);
    }
  });
}

test('keys.json: ip_refused', () => {
  assert.ok(table.ip_refused.length > 0);
  for (const v of table.ip_refused) assert.throws(() => sluice.keys.ip(bits(v)), TypeError, JSON.stringify(v));
});

// keys.route() in real Express and Fastify apps: the key each request was decided under, as a
// client that records it sees it (no sluiced needed: the key is made before any call).
function recordingClient(seen) {
  return {
    allow: async (rule, key) => { seen.push(key); return { allowed: true, limit: 9, remaining: 8, retryAfterMs: 0, resetAfterMs: 1000 }; },
    acquire: async () => { throw new Error('not an in-flight rule'); },
    rule: async () => ({ algorithm: 'fixed_window', window: '1h' }),
    release: async () => {},
  };
}

async function keysOf(listen, paths) {
  const { base, close } = await listen();
  try {
    for (const p of paths) {
      const r = await fetch(base + p);
      assert.equal(r.status, 200, p);
      await r.text();
    }
  } finally {
    await close();
  }
}

async function expressListen(app) {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((res) => server.once('listening', res));
  return { base: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((res) => server.close(res)) };
}

test('keys.route() in Express: the pattern on a route (under its router\'s mount), the whole path under app.use', async () => {
  const express = require('express');
  const seen = { route: [], router: [], mounted: [], root: [] };
  const mw = (name) => sluice.express({ client: recordingClient(seen[name]), rule: 'r', key: sluice.keys.route() });
  const app = express();
  app.use('/api', mw('mounted'));
  app.use(mw('root'));
  app.get('/api/users/:id', mw('route'), (req, res) => res.send('ok'));
  const router = express.Router();
  router.get('/items/:id', mw('router'), (req, res) => res.send('ok'));
  app.use('/v2', router);
  await keysOf(() => expressListen(app), ['/api/users/1', '/api/users/2', '/v2/items/1', '/v2/items/2']);
  assert.deepEqual(seen.route, ['/api/users/:id', '/api/users/:id'], 'on the route: one key for both');
  assert.deepEqual(seen.router, ['/v2/items/:id', '/v2/items/:id'], 'on a route of a router mounted at /v2');
  assert.deepEqual(seen.mounted, ['/api/users/1', '/api/users/2'], 'app.use(\'/api\', ...): the whole path');
  assert.deepEqual(seen.root, ['/api/users/1', '/api/users/2', '/v2/items/1', '/v2/items/2'], 'app.use(...): the whole path');
});

test('keys.route() in Fastify: the pattern, with its prefix', async () => {
  const Fastify = require('fastify');
  const seen = [];
  const app = Fastify();
  app.register(async (scope) => {
    scope.register(sluice.fastify({ client: recordingClient(seen), rule: 'r', key: sluice.keys.route() }));
    scope.get('/users/:id', async () => 'ok');
  }, { prefix: '/api' });
  await keysOf(async () => {
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { base: `http://127.0.0.1:${app.server.address().port}`, close: () => app.close() };
  }, ['/api/users/1', '/api/users/2']);
  assert.deepEqual(seen, ['/api/users/:id', '/api/users/:id']);
});
