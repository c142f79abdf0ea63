'use strict';
// middleware.js - rate limiting for Express and Fastify over a sluiced Client: one decision per
// request (an acquire for an in-flight rule, released when the response ends, fails or the
// client goes away), the RateLimit headers sluiced's HTTP API sets, and a 429 problem document.
// With `report`, the release reports the request's latency and whether it was dropped, for an
// adaptive limit.

const { performance } = require('node:perf_hooks');

const keys = require('./keys');
const { UnreachableError } = require('./decision');
const { durationSeconds, decisionHeaders, tooManyBody, PROBLEM_TYPE } = require('./http');

const RULE_INFO_TTL_MS = 10000;
const KEY_MAX_BYTES = 1024; // what sluiced takes by default (its tables' key_max)

function checkOptions(o) {
  if (!o || typeof o.client !== 'object') throw new TypeError('options.client must be a sluice Client');
  if (typeof o.rule !== 'string' || o.rule === '') throw new TypeError('options.rule must be a rule name');
  if (o.key !== undefined && typeof o.key !== 'function') throw new TypeError('options.key must be a function (see sluice.keys)');
  if (o.cost !== undefined && typeof o.cost !== 'function' && !(Number.isSafeInteger(o.cost) && o.cost >= 1)) {
    throw new TypeError('options.cost must be an integer >= 1 or a function of the request');
  }
  if (o.inFlight !== undefined && typeof o.inFlight !== 'boolean') throw new TypeError('options.inFlight must be true or false');
  if (o.priority !== undefined && typeof o.priority !== 'function' && typeof o.priority !== 'string') {
    throw new TypeError('options.priority must be a priority name or a function of the request');
  }
}

const LATENCY_MAX_MS = 3600000; // the most a release reports (1h): a longer request reports that

// The shared core: check(view) -> {status: 200|400|429, headers, body, release}. An in-flight
// rule is one whose algorithm sluiced says is concurrency, or any rule with options.inFlight
// (for a sluiced that will not show its rules: SL.ALLOW would take a unit no release returns).
// While the rule was never read and sluiced cannot be reached to read it, a request is decided
// by the client's onUnreachable, never sent as an SL.ALLOW (the rule may be in-flight), and the
// next request reads the rule again.
function limiter(options) {
  checkOptions(options);
  const o = { key: keys.ip(), cost: 1, shadow: false, report: false, keyMaxBytes: KEY_MAX_BYTES, onReleaseError: () => {}, ...options };
  let info = null; // {windowS, inFlight, at}
  let asking = null; // the SL.RULE GET in flight: requests meanwhile wait for it, not ask again
  const stats = { released: 0, releaseErrors: 0 };

  async function fetchRuleInfo(now) {
    try {
      const r = await o.client.rule(o.rule);
      info = { windowS: durationSeconds(r.hold_timeout || r.window), inFlight: r.algorithm === 'concurrency', at: now };
      return info;
    } catch (err) {
      // keep what was known; never known: sluiced unreachable decides by onUnreachable, a
      // refusal (NOPERM) by an allow
      return info || { windowS: null, inFlight: false, at: 0, unreachable: err instanceof UnreachableError ? err : null };
    } finally {
      asking = null;
    }
  }

  function ruleInfo() {
    const now = Date.now();
    if (info && now - info.at < RULE_INFO_TTL_MS) return info;
    if (asking === null) asking = fetchRuleInfo(now);
    return asking;
  }

  function badRequest(detail) {
    return { status: 400, headers: {}, body: JSON.stringify({ type: 'about:blank', title: 'Bad Request', status: 400, detail }), release: null };
  }

  // release(dropped): frees the hold once; with o.report, it reports the latency since `started`
  // (the request's arrival) and dropped.
  function releaser(key, holdId, started) {
    let done = false;
    return (dropped = false) => {
      if (done) return;
      done = true;
      const report = o.report ? { latencyMs: Math.min(Math.max(performance.now() - started, 0), LATENCY_MAX_MS), dropped } : {};
      o.client.release(o.rule, key, holdId, report).then(() => { stats.released++; }, (err) => {
        stats.releaseErrors++;
        o.onReleaseError(err);
      });
    };
  }

  async function check(view) {
    const started = performance.now();
    const key = o.key(view);
    if (key === null || key === undefined) return badRequest(`the request lacks what rule '${o.rule}' keys on`);
    if (Buffer.byteLength(key) > o.keyMaxBytes) return badRequest(`the key is longer than ${o.keyMaxBytes} bytes`);
    const cost = typeof o.cost === 'function' ? o.cost(view.req) : o.cost;
    const priority = typeof o.priority === 'function' ? o.priority(view.req) : o.priority;
    const ri = await ruleInfo();
    let d;
    if (ri.unreachable && !o.inFlight) d = o.client.fallback(ri.unreachable);
    else if (o.inFlight || ri.inFlight) d = await o.client.acquire(o.rule, key, { cost, priority });
    else d = await o.client.allow(o.rule, key, cost, { priority });
    const headers = decisionHeaders(o.rule, ri.windowS, d);
    if (!d.allowed && !o.shadow) return { status: 429, headers, body: tooManyBody(o.rule, ri.windowS, d), release: null };
    if (!d.allowed) delete headers['Retry-After'];
    return { status: 200, headers, body: null, release: d.holdId ? releaser(key, d.holdId, started) : null };
  }

  return { check, stats };
}

// Releases when the response is over: finished, failed, or its connection closed ('close' is
// emitted in every case, once). A response already over by now releases at once. Dropped: the
// response did not finish (the client went away first) or was a 5xx (the handler threw, or
// answered one).
function releaseOnClose(res, release) {
  if (!release) return;
  const over = () => release(!res.writableFinished || res.statusCode >= 500);
  if (res.closed || res.destroyed) over();
  else res.once('close', over);
}

// The route of an Express request as keys.route() sees it: the matched route's pattern under its
// router's mount path ("/api" + "/users/:id") when the middleware runs on that route (Express sets
// req.route only once a route matched), else the whole path ("/api/users/7"; req.path alone is
// relative to where app.use mounted the middleware).
function expressRoute(req) {
  const base = req.baseUrl || '';
  if (req.route && typeof req.route.path === 'string') return base + req.route.path;
  return base + req.path;
}

/** Express middleware: app.use(sluice.express({client, rule, key, cost, shadow, priority, report})). */
function express(options) {
  const lim = limiter(options);
  function sluiceLimit(req, res, next) {
    const view = { ip: req.ip, headers: req.headers, route: expressRoute(req), user: undefined, req };
    lim.check(view).then((out) => {
      for (const [k, v] of Object.entries(out.headers)) res.setHeader(k, v);
      if (out.status !== 200) {
        res.statusCode = out.status;
        res.setHeader('Content-Type', PROBLEM_TYPE);
        res.end(out.body);
        return;
      }
      releaseOnClose(res, out.release);
      next();
    }, next);
  }
  sluiceLimit.stats = lim.stats;
  return sluiceLimit;
}

/** A Fastify plugin (applies to every route of the instance it is registered on):
 * app.register(sluice.fastify({client, rule, key, cost, shadow, priority, report})). */
function fastify(options) {
  const lim = limiter(options);
  async function sluicePlugin(app) {
    app.addHook('onRequest', async (request, reply) => {
      const route = request.routeOptions && request.routeOptions.url ? request.routeOptions.url : request.url.split('?')[0];
      const out = await lim.check({ ip: request.ip, headers: request.headers, route, user: undefined, req: request });
      reply.headers(out.headers);
      if (out.status !== 200) {
        reply.code(out.status).type(PROBLEM_TYPE).send(Buffer.from(out.body)); // a Buffer: no charset added
        return reply;
      }
      releaseOnClose(reply.raw, out.release);
      return undefined;
    });
  }
  sluicePlugin[Symbol.for('skip-override')] = true; // the hook reaches the routes of the parent
  sluicePlugin[Symbol.for('fastify.display-name')] = 'sluice';
  sluicePlugin.stats = lim.stats;
  return sluicePlugin;
}

module.exports = { express, fastify, keys, limiter };
