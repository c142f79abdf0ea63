'use strict';
// middleware.js - Express and Fastify, each serving real HTTP on 127.0.0.1 with the package's
// middleware over a real sluiced: 429 with problem+json and sluiced's RateLimit headers, a
// shadow rule that never blocks, onUnreachable, a key the request lacks (400), and an in-flight
// rule whose hold is released when the response ends, when the handler throws, and when the
// client disconnects in the middle of the response; a priority read from the request, and the
// releases' reports (latency, dropped) moving an adaptive limit, or not when not asked for; and
// sluiced killed by its PID mid-test and started again (fail open and fail closed).

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const sluice = require('sluice');
const express = require('express');
const Fastify = require('fastify');
const { env, poll, sleep, runPrefix, patient, serverCtl } = require('./common');

const SLOW_MS = 150; // past mw-adapt-slow's latency_timeout of 100ms

const port = Number(env('SDK_PORT'));

// A port whose connections are refused: test_node_sdk.sh holds it bound, never listening, for
// the whole run (a port chosen and closed here could be given next to one of the test's own
// HTTP servers).
const refusedPort = Number(env('SDK_REFUSED_PORT'));

// The routes both frameworks serve: /ok answers, /boom throws, /e500 answers 500, /slow answers
// after SLOW_MS, /stream writes a first chunk and then waits until `release` is called (or
// forever).
function routes(state) {
  return {
    ok: () => 'ok',
    boom: () => { throw new Error('the handler failed'); },
    stream: (raw) => new Promise((resolve) => {
      raw.write('first chunk\n');
      state.streaming++;
      state.waiting.push(resolve);
    }),
  };
}

async function expressApp(limits) {
  const app = express();
  const state = { streaming: 0, waiting: [] };
  const r = routes(state);
  for (const [path, opts] of Object.entries(limits)) {
    const mw = sluice.express(opts);
    app.get(`/${path}/ok`, mw, (req, res) => res.send(r.ok()));
    app.get(`/${path}/boom`, mw, () => r.boom());
    app.get(`/${path}/e500`, mw, (req, res) => res.status(500).send('failed'));
    app.get(`/${path}/slow`, mw, async (req, res) => {
      await sleep(SLOW_MS);
      res.send('ok');
    });
    app.get(`/${path}/stream`, mw, async (req, res) => {
      await r.stream(res);
      res.end('done');
    });
  }
  app.use((err, req, res, next) => { // eslint-disable-line no-unused-vars
    res.status(500).send(`error: ${err.message}`);
  });
  const server = http.createServer(app);
  await new Promise((res) => server.listen(0, '127.0.0.1', res));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    state,
    close: async () => {
      state.waiting.forEach((f) => f());
      server.closeAllConnections();
      await new Promise((res) => server.close(res));
    },
  };
}

async function fastifyApp(limits) {
  const app = Fastify();
  const state = { streaming: 0, waiting: [] };
  const r = routes(state);
  for (const [path, opts] of Object.entries(limits)) {
    app.register(async (scope) => {
      scope.register(sluice.fastify(opts));
      scope.get(`/${path}/ok`, async () => r.ok());
      scope.get(`/${path}/boom`, async () => r.boom());
      scope.get(`/${path}/e500`, async (request, reply) => reply.code(500).send('failed'));
      scope.get(`/${path}/slow`, async () => {
        await sleep(SLOW_MS);
        return 'ok';
      });
      scope.get(`/${path}/stream`, (request, reply) => {
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': 'text/plain' });
        r.stream(reply.raw).then(() => reply.raw.end('done'));
      });
    });
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    base: `http://127.0.0.1:${app.server.address().port}`,
    state,
    close: async () => {
      state.waiting.forEach((f) => f());
      app.server.closeAllConnections();
      await app.close();
    },
  };
}

const get = (url, headers = {}) => fetch(url, { headers });

// Opens /stream, reads its first chunk, and leaves the socket open: returns the request.
function openStream(url, headers) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers }, (res) => {
      res.once('data', () => resolve({ req, res }));
    });
    req.on('error', (err) => (err.code === 'ECONNRESET' ? null : reject(err)));
  });
}

for (const [name, make] of [['express', expressApp], ['fastify', fastifyApp]]) {
  test(`${name}: a refused request is a 429 problem with sluiced's headers`, async () => {
    const client = new sluice.Client({ ...patient, port });
    const app = await make({ fixed: { client, rule: 'mw-fixed', key: sluice.keys.header('x-user') } });
    const user = { 'x-user': `${runPrefix()}alice` };
    try {
      const a = await get(`${app.base}/fixed/ok`, user);
      assert.equal(a.status, 200);
      assert.equal(await a.text(), 'ok');
      assert.equal(a.headers.get('ratelimit-policy'), '"mw-fixed";q=2;w=3600');
      assert.match(a.headers.get('ratelimit'), /^"mw-fixed";r=1;t=\d+$/);
      assert.equal(a.headers.get('retry-after'), null);
      assert.equal((await get(`${app.base}/fixed/ok`, user)).status, 200);
      const c = await get(`${app.base}/fixed/ok`, user);
      assert.equal(c.status, 429);
      assert.equal(c.headers.get('content-type'), 'application/problem+json');
      assert.equal(c.headers.get('ratelimit-policy'), '"mw-fixed";q=2;w=3600');
      assert.match(c.headers.get('ratelimit'), /^"mw-fixed";r=0;t=\d+$/);
      assert.ok(Number(c.headers.get('retry-after')) >= 1 && Number(c.headers.get('retry-after')) <= 3600);
      assert.deepEqual(await c.json(), { type: 'about:blank', title: 'Too Many Requests', status: 429, detail: "rule 'mw-fixed' allows 2 per 3600s" });
      const other = await get(`${app.base}/fixed/ok`, { 'x-user': `${runPrefix()}bob` });
      assert.equal(other.status, 200, 'another key has its own quota');
      const none = await get(`${app.base}/fixed/ok`);
      assert.equal(none.status, 400, 'a request without the header is refused, not given a shared key');
      assert.equal(none.headers.get('content-type'), 'application/problem+json');
      const long = { 'x-user': `${runPrefix()}${'x'.repeat(2000)}` };
      const tooLong = await get(`${app.base}/fixed/ok`, long);
      assert.equal(tooLong.status, 400, 'a key longer than sluiced takes is refused here');
      assert.match((await tooLong.json()).detail, /longer than 1024 bytes/);
    } finally {
      await app.close();
      await client.close();
    }
  });

  test(`${name}: a shadow rule never blocks`, async () => {
    const client = new sluice.Client({ ...patient, port });
    const local = new sluice.Client({ ...patient, port });
    const app = await make({
      shadow: { client, rule: 'mw-shadow', key: sluice.keys.header('x-user') },
      localshadow: { client: local, rule: 'mw-fixed', key: sluice.keys.header('x-user'), shadow: true },
    });
    const user = { 'x-user': `${runPrefix()}carol` };
    try {
      for (let i = 0; i < 4; i++) {
        const r = await get(`${app.base}/shadow/ok`, user);
        assert.equal(r.status, 200, `shadow request ${i + 1}`);
        const l = await get(`${app.base}/localshadow/ok`, user);
        assert.equal(l.status, 200, `shadow option, request ${i + 1}`);
        assert.equal(l.headers.get('retry-after'), null);
        if (i >= 2) assert.match(l.headers.get('ratelimit'), /;r=0;/, 'the headers still say what is left');
      }
    } finally {
      await app.close();
      await client.close();
      await local.close();
    }
  });

  test(`${name}: onUnreachable decides when sluiced cannot be reached`, async () => {
    const dead = refusedPort;
    const mk = (onUnreachable) => new sluice.Client({ port: dead, onUnreachable, maxRetriesPerRequest: 0, seed: 1 });
    const clients = { allow: mk('allow'), deny: mk('deny'), raise: mk('raise') };
    const app = await make(Object.fromEntries(Object.entries(clients).map(([k, client]) => [k, { client, rule: 'mw-fixed', key: sluice.keys.ip() }])));
    try {
      assert.equal((await get(`${app.base}/allow/ok`)).status, 200);
      const d = await get(`${app.base}/deny/ok`);
      assert.equal(d.status, 429);
      assert.ok(Number(d.headers.get('retry-after')) >= 1);
      assert.equal(d.headers.get('ratelimit'), null, 'no limit to report');
      assert.equal((await get(`${app.base}/raise/ok`)).status, 500);
    } finally {
      await app.close();
      await Promise.all(Object.values(clients).map((c) => c.close()));
    }
  });

  test(`${name}: an in-flight hold is released when the response ends, when the handler throws, and when the client disconnects`, async () => {
    const client = new sluice.Client({ ...patient, port });
    const mw = { client, rule: 'mw-jobs', key: sluice.keys.header('x-user') };
    const app = await make({ jobs: mw });
    const user = { 'x-user': `${runPrefix()}dave` };
    const free = async () => {
      const d = await client.peek('mw-jobs', user['x-user']);
      return d.remaining === 1;
    };
    try {
      // ends: one slot, so the second request gets it only if the first gave it back
      for (let i = 0; i < 3; i++) {
        const r = await get(`${app.base}/jobs/ok`, user);
        assert.equal(r.status, 200, `request ${i + 1} after the one before ended`);
        await r.text();
        assert.ok(await poll(free), `the hold of request ${i + 1} was released`);
      }
      // throws
      const boom = await get(`${app.base}/jobs/boom`, user);
      assert.equal(boom.status, 500);
      assert.ok(await poll(free), 'released after the handler threw');
      assert.equal((await get(`${app.base}/jobs/ok`, user)).status, 200);
      assert.ok(await poll(free));
      // disconnects: while the stream is open the slot is taken; once the client goes, it is free
      const { req } = await openStream(`${app.base}/jobs/stream`, user);
      assert.equal(app.state.streaming, 1);
      const busy = await get(`${app.base}/jobs/ok`, user);
      assert.equal(busy.status, 429, 'the streaming response holds the slot');
      assert.equal(await free(), false);
      req.destroy();
      assert.ok(await poll(free), 'released after the client disconnected mid-response');
      assert.equal(app.state.waiting.length, 1, 'the handler had not finished: the disconnect released it');
      assert.equal((await get(`${app.base}/jobs/ok`, user)).status, 200);
    } finally {
      await app.close();
      await client.close();
    }
  });
}

for (const [name, make] of [['express', expressApp], ['fastify', fastifyApp]]) {
  test(`${name}: a priority from the request; an unknown one is sluiced's error (500)`, async () => {
    const client = new sluice.Client({ ...patient, port });
    const app = await make({
      prio: { client, rule: 'mw-prio', key: sluice.keys.header('x-user'), priority: (req) => req.headers['x-priority'] },
    });
    const u = `${runPrefix()}erin`;
    const held = await client.acquire('mw-prio', u); // 1 of 2: a low request would leave high none
    try {
      assert.ok(held.allowed);
      const status = async (p) => (await get(`${app.base}/prio/ok`, { 'x-user': u, ...(p ? { 'x-priority': p } : {}) })).status;
      assert.equal(await status('low'), 429, 'low is shed for the reserve of high');
      assert.equal(await status(null), 429, 'none is the lowest');
      assert.equal(await status('high'), 200, 'high passes');
      assert.equal(await status('urgent'), 500, 'an unknown priority is an error, not a decision');
    } finally {
      await client.release('mw-prio', u, held.holdId);
      await app.close();
      await client.close();
    }
  });

  test(`${name}: report: releases report latency and drops to an adaptive limit; without it, nothing`, async () => {
    const client = new sluice.Client({ ...patient, port });
    const user = sluice.keys.header('x-user');
    const app = await make({
      adapt: { client, rule: 'mw-adapt', key: user, report: true },
      adaptslow: { client, rule: 'mw-adapt-slow', key: user, report: true },
      quiet: { client, rule: 'mw-adapt', key: user },
    });
    // the adaptive rule's limit for u once every hold of it is released: mw-adapt (latency_timeout
    // 10m, so that no request is a drop for being slow on a loaded machine), or mw-adapt-slow
    // (100ms) for the paths under /adaptslow/
    const limit = async (u, rule = 'mw-adapt') => {
      let seen;
      const settled = await poll(async () => {
        const d = await client.peek(rule, u);
        seen = d.limit;
        return d.remaining === d.limit;
      });
      assert.ok(settled, `the holds of ${u} were released`);
      return seen;
    };
    const run = async (tag, paths) => {
      const u = `${runPrefix()}${tag}`;
      const rule = paths[0].startsWith('/adaptslow/') ? 'mw-adapt-slow' : 'mw-adapt';
      for (const p of paths) {
        await (await get(`${app.base}${p}`, { 'x-user': u })).text();
        await limit(u, rule); // one request at a time: each release lands before the next
      }
      return limit(u, rule);
    };
    try {
      assert.equal(await run('grow', ['/adapt/ok', '/adapt/ok']), 3, 'a window of two requests grows the limit 2 -> 3');
      for (const p of ['/adapt/e500', '/adapt/boom']) {
        assert.equal(await run('drop', ['/adapt/ok', p]), 1, `${p} is a drop (5xx, thrown): halved to 1`);
      }
      assert.equal(await run('drop', ['/adaptslow/ok', '/adaptslow/slow']), 1, 'a request slower than latency_timeout is a drop: halved to 1');
      const u = `${runPrefix()}gone`;
      const { req } = await openStream(`${app.base}/adapt/stream`, { 'x-user': u });
      req.destroy();
      await limit(u);
      await (await get(`${app.base}/adapt/ok`, { 'x-user': u })).text();
      assert.equal(await limit(u), 1, 'a client gone mid-response is a drop');
      assert.equal(await run('quiet', ['/quiet/ok', '/quiet/ok', '/quiet/boom', '/quiet/slow']), 2, 'no report (the default): the limit stays 2');
    } finally {
      await app.close();
      await client.close();
    }
  });
}

// sluiced killed by its PID (SIGKILL) while the app holds pooled connections and an in-flight
// hold is live: requests are decided by onUnreachable (allow: served without RateLimit fields;
// deny: 429 with Retry-After), the lost release reaches onReleaseError, and once sluiced is
// started again on its ports the same client decides again. What became of the lost hold
// depends on the store: a memory store lost it with the process, a Redis store kept it.
const killPort = Number(env('SDK_KILL_PORT'));
const killName = env('SDK_KILL_NAME');
const redisStore = process.env.SDK_STORE === 'redis';
for (const [name, make] of [['express', expressApp], ['fastify', fastifyApp]]) {
  for (const mode of ['allow', 'deny']) {
    test(`${name}: sluiced killed mid-request and started again, onUnreachable ${mode}`, async () => {
      const client = new sluice.Client({ ...patient, port: killPort, connections: 2, onUnreachable: mode, maxRetriesPerRequest: 0 });
      let releaseErrors = 0;
      const opts = (rule) => ({ client, rule, key: sluice.keys.header('x-user'), onReleaseError: () => { releaseErrors++; } });
      const app = await make({ fixed: opts('mw-fixed'), jobs: opts('mw-jobs') });
      const u = runPrefix();
      const user = (who) => ({ 'x-user': `${u}${who}` });
      let killed = false;
      try {
        const first = await Promise.all([0, 1, 2, 3].map((i) => get(`${app.base}/fixed/ok`, user(`p${i}`))));
        for (const r of first) assert.equal(r.status, 200, 'decided through the pool before the kill');
        await Promise.all(first.map((r) => r.text()));
        const { req, res } = await openStream(`${app.base}/jobs/stream`, user('held'));
        assert.equal((await client.peek('mw-jobs', `${u}held`)).remaining, 0, 'the hold is live');
        await serverCtl('kill', killName);
        killed = true;
        app.state.waiting.splice(0).forEach((f) => f()); // the handler ends its response after the kill
        await new Promise((r) => res.on('end', r).resume());
        req.destroy();
        assert.ok(await poll(() => releaseErrors === 1), `the lost release reached onReleaseError (${releaseErrors})`);
        for (const path of ['/fixed/ok', '/jobs/ok', '/fixed/ok', '/jobs/ok']) {
          const r = await get(`${app.base}${path}`, user('down'));
          await r.text();
          assert.equal(r.status, mode === 'allow' ? 200 : 429, `${path} with sluiced down`);
          assert.equal(r.headers.get('ratelimit'), null, 'no limit to report');
          if (mode === 'deny') assert.ok(Number(r.headers.get('retry-after')) >= 1, 'a refusal says when to retry');
        }
        await serverCtl('start', killName);
        killed = false;
        const back = await poll(async () => {
          const r = await get(`${app.base}/fixed/ok`, user('back'));
          await r.text();
          return r.status === 200 && r.headers.get('ratelimit') !== null;
        }, 400);
        assert.ok(back, 'a decision from sluiced after its restart');
        const second = await get(`${app.base}/fixed/ok`, user('back'));
        assert.equal(second.status, 200);
        assert.match(second.headers.get('ratelimit'), /;r=0;/);
        const third = await get(`${app.base}/fixed/ok`, user('back'));
        assert.equal(third.status, 429, 'mw-fixed admits 2: the third is refused by sluiced');
        assert.notEqual(third.headers.get('ratelimit'), null);
        const fresh = await get(`${app.base}/jobs/ok`, user('fresh'));
        assert.equal(fresh.status, 200);
        assert.notEqual(fresh.headers.get('ratelimit'), null);
        assert.ok(await poll(async () => (await client.peek('mw-jobs', `${u}fresh`)).remaining === 1), 'released after the restart');
        const held = await client.peek('mw-jobs', `${u}held`);
        assert.equal(held.remaining, redisStore ? 0 : 1, redisStore ? 'Redis kept the hold whose release was lost' : 'the memory store lost it with the process');
      } finally {
        if (killed) await serverCtl('start', killName);
        await app.close();
        await client.close();
      }
    });
  }
}

// sluiced down when the middleware first reads its rule, then up: that request is decided by
// onUnreachable (allow: served without RateLimit fields), the next reads the rule again and so
// acquires mw-jobs (in flight, a limit of 1) and releases: one request after another all pass.
for (const [name, make] of [['express', expressApp], ['fastify', fastifyApp]]) {
  test(`${name}: an in-flight rule first read while sluiced is down`, async () => {
    const client = new sluice.Client({ ...patient, port: killPort, onUnreachable: 'allow', maxRetriesPerRequest: 0 });
    const u = runPrefix();
    const app = await make({ jobs: { client, rule: 'mw-jobs', key: () => `${u}firstdown` } });
    let killed = false;
    try {
      await serverCtl('kill', killName);
      killed = true;
      const down = await get(`${app.base}/jobs/ok`);
      await down.text();
      assert.equal(down.status, 200, 'sluiced down, failing open');
      assert.equal(down.headers.get('ratelimit'), null, 'no limit to report');
      await serverCtl('start', killName);
      killed = false;
      const reached = await poll(async () => client.rule('mw-jobs').then(() => true, () => false), 400);
      assert.ok(reached, 'the client reaches sluiced again');
      for (let i = 0; i < 3; i++) {
        const r = await get(`${app.base}/jobs/ok`);
        await r.text();
        assert.equal(r.status, 200, `sluiced back, request ${i + 1}`);
        assert.notEqual(r.headers.get('ratelimit'), null, `sluiced back, request ${i + 1}: decided by sluiced`);
        assert.ok(await poll(async () => (await client.peek('mw-jobs', `${u}firstdown`)).remaining === 1), `request ${i + 1}'s hold was released`);
      }
    } finally {
      if (killed) await serverCtl('start', killName);
      await app.close();
      await client.close();
    }
  });
}

// A sluiced with an admin password does not show its rules to the default user: the middleware
// cannot read that mw-jobs (a limit of 1) is an in-flight rule and decides with SL.ALLOW, which
// takes a unit no release returns (after one request the next is refused); with inFlight set by
// hand it acquires and releases, and one request after another all pass.
const lockedPort = Number(env('SDK_LOCKED_PORT'));
for (const [name, make] of [['express', expressApp], ['fastify', fastifyApp]]) {
  test(`${name}: inFlight by hand where sluiced will not show the rule`, async () => {
    const client = new sluice.Client({ ...patient, port: lockedPort, password: 'pw' });
    const u = runPrefix();
    const app = await make({
      guessed: { client, rule: 'mw-jobs', key: () => `${u}guessed` },
      byhand: { client, rule: 'mw-jobs', key: () => `${u}byhand`, inFlight: true },
    });
    try {
      await assert.rejects(client.rule('mw-jobs'), /NOPERM/);
      const codes = [];
      for (let i = 0; i < 3; i++) {
        const r = await get(`${app.base}/guessed/ok`);
        await r.text();
        codes.push(r.status);
      }
      assert.deepEqual(codes, [200, 429, 429], 'SL.ALLOW kept the unit of the first request');
      for (let i = 0; i < 3; i++) {
        const r = await get(`${app.base}/byhand/ok`);
        await r.text();
        assert.equal(r.status, 200, `inFlight, request ${i + 1}`);
        assert.ok(await poll(async () => (await client.peek('mw-jobs', `${u}byhand`)).remaining === 1), `request ${i + 1}'s hold was released`);
      }
    } finally {
      await app.close();
      await client.close();
    }
  });
}

test('keys: an address as its network, a header, the route, the user', () => {
  assert.equal(sluice.keys.ip({ v4: 24 })({ ip: '10.1.2.3' }), '10.1.2.0/24');
  assert.equal(sluice.keys.ip({ v4: 24 })({ ip: '::ffff:10.1.2.3' }), '10.1.2.0/24');
  assert.equal(sluice.keys.ip({ v6: 64, prefix: 'ip:' })({ ip: '2001:db8:1:2:3:4:5:6' }), 'ip:2001:db8:1:2:0:0:0:0/64');
  assert.equal(sluice.keys.ip({ v6: 56 })({ ip: '2001:db8::1:ff' }), '2001:db8:0:0:0:0:0:0/56');
  assert.equal(sluice.keys.ip()({ ip: '10.1.2.3' }), '10.1.2.3');
  assert.equal(sluice.keys.ip()({ ip: 'not an address' }), null);
  assert.throws(() => sluice.keys.ip({ v4: 33 }), /v4 must be an integer from 0 to 32/);
  assert.equal(sluice.keys.header('X-Api-Key')({ headers: { 'x-api-key': 'k1' } }), 'k1');
  assert.equal(sluice.keys.route({ prefix: 'r:' })({ route: '/users/:id' }), 'r:/users/:id');
  assert.equal(sluice.keys.user((req) => req.user)({ req: { user: 42 } }), '42');
  assert.equal(sluice.keys.user((req) => req.user)({ req: {} }), null);
});
