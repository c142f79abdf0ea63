'use strict';
// node_bench.js - the npm package sluice beside rate-limiter-flexible, run by bench/packages/node.sh
// from a directory where the packed sluice .tgz is installed (express, ioredis and
// rate-limiter-flexible come from tests/node_sdk's lockfile through NODE_PATH). Prints figures;
// asserts nothing. Subcommands:
//
//   serve CASE PORT [STORE_PORT]   an Express app on 127.0.0.1:PORT, GET /hello -> "hello", with
//                                  CASE: bare (no limiter), sluice (sluice.express over sluiced
//                                  at STORE_PORT), rlf (RateLimiterRedis over the redis-server
//                                  at STORE_PORT, used as its README shows for Express)
//   load PORT N KEYS SEED          N requests over one keep-alive connection, one at a time, each
//                                  with an x-key header drawn uniformly from KEYS keys; prints
//                                  "p50_us p99_us req_per_s non200"
//   inproc N KEYS ROUNDS           decisions/s in this process: the koffi binding's table.decide
//                                  against RateLimiterMemory.consume, the same key stream
//   client N KEYS ROUNDS BATCH MEM_PORT SLREDIS_PORT REDIS_PORT
//                                  decisions/s over one connection, BATCH calls in flight at a
//                                  time: Client.allow (sluiced memory, sluiced over Redis),
//                                  RateLimiterSluice.consume (sluiced over Redis), and
//                                  RateLimiterRedis.consume (the redis-server, ioredis as its
//                                  README makes it, and with enableAutoPipelining)

const http = require('node:http');

const RULE = 'bench'; // fixed_window, a limit no run reaches (node.sh writes the rules file)
const POINTS = 1000000000;
const DURATION_S = 3600;

// A seeded generator (splitmix32-like), so every case draws the same key stream.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return ((z ^ (z >>> 16)) >>> 0) / 4294967296;
  };
}

function keyStream(n, keys, seed) {
  const r = rng(seed);
  const out = new Array(n);
  for (let i = 0; i < n; i++) out[i] = `user:${Math.floor(r() * keys)}`;
  return out;
}

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];
}

// ---- serve -------------------------------------------------------------------------------------
function serve(kind, port, storePort) {
  const express = require('express');
  const app = express();
  if (kind === 'sluice') {
    const sluice = require('sluice');
    const client = new sluice.Client({ port: storePort });
    app.use(sluice.express({ client, rule: RULE, key: sluice.keys.header('x-key') }));
  } else if (kind === 'rlf') {
    const Redis = require('ioredis');
    const { RateLimiterRedis } = require('rate-limiter-flexible');
    const redisClient = new Redis({ port: storePort, enableOfflineQueue: false });
    const rateLimiter = new RateLimiterRedis({
      storeClient: redisClient, keyPrefix: 'middleware', points: POINTS, duration: DURATION_S,
    });
    app.use((req, res, next) => {
      rateLimiter.consume(req.headers['x-key'])
        .then(() => next())
        .catch(() => res.status(429).send('Too Many Requests'));
    });
  } else if (kind !== 'bare') {
    throw new Error(`unknown case ${kind}`);
  }
  app.get('/hello', (req, res) => res.send('hello'));
  app.listen(port, '127.0.0.1', () => console.log(`listening ${kind} ${port}`));
}

// ---- load --------------------------------------------------------------------------------------
async function load(port, n, keys, seed) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const stream = keyStream(n, keys, seed);
  const lat = new Float64Array(n);
  let bad = 0;
  const one = (key) => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/hello', agent, headers: { 'x-key': key } }, (res) => {
      if (res.statusCode !== 200) bad++;
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end();
  });
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const a = process.hrtime.bigint();
    await one(stream[i]);
    lat[i] = Number(process.hrtime.bigint() - a) / 1000;
  }
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  lat.sort();
  console.log(`${quantile(lat, 0.5).toFixed(1)} ${quantile(lat, 0.99).toFixed(1)} ${(n / wall).toFixed(0)} ${bad}`);
}

// ---- rounds of interleaved cases ---------------------------------------------------------------
// Each case is an async function of a key stream returning nothing; one untimed warm-up of each,
// then ROUNDS rounds in which every case runs once (so drift hits all alike). Prints each case's
// median decisions/s (min, max), its median per-round ratio to the first case, and this process's
// CPU time per decision (user + system, process.cpuUsage): what the library costs its caller,
// which another process taking the CPU moves far less than it moves the rate.
async function rounds(title, cases, stream, nRounds) {
  for (const c of cases) await c.run(stream.slice(0, Math.min(stream.length, 20000)));
  const rates = cases.map(() => []);
  const cpus = cases.map(() => []);
  for (let r = 0; r < nRounds; r++) {
    for (let i = 0; i < cases.length; i++) {
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      await cases[i].run(stream);
      rates[i].push(stream.length / (Number(process.hrtime.bigint() - t0) / 1e9));
      const c1 = process.cpuUsage(c0);
      cpus[i].push((c1.user + c1.system) / stream.length);
    }
  }
  console.log(`${title}: ${stream.length} decisions per round, ${nRounds} rounds, medians`);
  for (let i = 0; i < cases.length; i++) {
    const ratio = median(rates[i].map((v, r) => v / rates[0][r]));
    console.log(`  ${cases[i].name.padEnd(52)} ${median(rates[i]).toFixed(0).padStart(9)} decisions/s` +
      `  (min ${Math.min(...rates[i]).toFixed(0)}, max ${Math.max(...rates[i]).toFixed(0)})` +
      `  x${ratio.toFixed(2)} of the first  ${median(cpus[i]).toFixed(2)} us CPU/decision here`);
  }
}

// ---- inproc ------------------------------------------------------------------------------------
async function inproc(n, keys, nRounds) {
  const sluice = require('sluice');
  const { RateLimiterMemory } = require('rate-limiter-flexible');
  const native = sluice.loadNative();
  const table = native.table(native.rule({ algorithm: 'fixed_window', limit: POINTS, window: `${DURATION_S}s` }));
  const mem = new RateLimiterMemory({ points: POINTS, duration: DURATION_S });
  const stream = keyStream(n, keys, 7);
  const t = native.nowNs();
  await rounds('in-process decisions, one thread', [
    { name: 'RateLimiterMemory.consume(key) (awaited)', run: async (s) => { for (const k of s) await mem.consume(k); } },
    { name: 'sluice table.decide(key) (libsluice over koffi)', run: async (s) => { for (const k of s) table.decide(k); } },
    { name: 'sluice table.decide(key, 1, now) (time passed in)', run: async (s) => { for (const k of s) table.decide(k, 1, t); } },
  ], stream, nRounds);
  table.close();
}

// ---- client ------------------------------------------------------------------------------------
async function client(n, keys, nRounds, batch, memPort, slRedisPort, redisPort) {
  const sluice = require('sluice');
  const Redis = require('ioredis');
  const { RateLimiterRedis } = require('rate-limiter-flexible');
  const onMem = new sluice.Client({ port: memPort, timeoutMs: 0 });
  const onRedis = new sluice.Client({ port: slRedisPort, timeoutMs: 0 });
  const drop = new sluice.RateLimiterSluice({ storeClient: onRedis, points: POINTS, duration: DURATION_S });
  const plain = new Redis({ port: redisPort, enableOfflineQueue: false });
  const piped = new Redis({ port: redisPort, enableOfflineQueue: false, enableAutoPipelining: true });
  await Promise.all([plain, piped].map((r) => new Promise((ok) => (r.status === 'ready' ? ok() : r.once('ready', ok)))));
  const rlf = new RateLimiterRedis({ storeClient: plain, keyPrefix: 'a', points: POINTS, duration: DURATION_S });
  const rlfPiped = new RateLimiterRedis({ storeClient: piped, keyPrefix: 'b', points: POINTS, duration: DURATION_S });
  // BATCH calls at a time, all made in one tick (auto-pipelining sends them in one write)
  const batched = (call) => async (s) => {
    for (let i = 0; i < s.length; i += batch) {
      const p = [];
      for (let j = i; j < Math.min(s.length, i + batch); j++) p.push(call(s[j]));
      await Promise.all(p);
    }
  };
  await rounds(`client decisions over one connection, ${batch} in flight`, [
    { name: 'RateLimiterRedis.consume -> redis-server', run: batched((k) => rlf.consume(k)) },
    { name: 'RateLimiterRedis.consume, ioredis auto-pipelined', run: batched((k) => rlfPiped.consume(k)) },
    { name: 'Client.allow -> sluiced (memory store)', run: batched((k) => onMem.allow(RULE, k)) },
    { name: 'Client.allow -> sluiced -> redis-server (sluice.so)', run: batched((k) => onRedis.allow(RULE, k)) },
    { name: 'RateLimiterSluice.consume -> sluiced -> redis-server', run: batched((k) => drop.consume(k)) },
  ], keyStream(n, keys, 11), nRounds);
  await Promise.all([onMem.close(), onRedis.close(), plain.quit(), piped.quit()]);
}

const [cmd, ...a] = process.argv.slice(2);
const num = (i) => Number(a[i]);
const run = {
  serve: () => serve(a[0], num(1), num(2)),
  load: () => load(num(0), num(1), num(2), num(3)),
  inproc: () => inproc(num(0), num(1), num(2)),
  client: () => client(num(0), num(1), num(2), num(3), num(4), num(5), num(6)),
}[cmd];
if (!run) {
  console.error('usage: node_bench.js serve|load|inproc|client ...');
  process.exit(2);
}
Promise.resolve(run()).catch((err) => {
  console.error(err);
  process.exit(1);
});
