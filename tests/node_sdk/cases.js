'use strict';
// cases.js - every case of tests/sdk/cases.json (the table every language's client runs) against
// the sluiced test_node_sdk.sh started with its rules_yaml, through the installed package.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const sluice = require('sluice');
const { env, serverCtl, runPrefix, patient } = require('./common');

const table = JSON.parse(fs.readFileSync(env('SDK_CASES'), 'utf8'));
const port = Number(env('SDK_CASES_PORT'));
const casesName = process.env.SDK_CASES_NAME || 'cases'; // the name test_node_sdk.sh stops and starts

// cases.json's field names -> the package's.
const FIELDS = {
  allowed: 'allowed', limit: 'limit', remaining: 'remaining', retry_after_ms: 'retryAfterMs',
  reset_after_ms: 'resetAfterMs', from_cache: 'fromCache', fallback: 'fallback',
};

function expectFields(got, expect, where) {
  for (const [name, want] of Object.entries(expect)) {
    if (name === 'error') continue;
    const value = name === 'hold' ? got.holdId !== null : got[FIELDS[name]];
    assert.notEqual(FIELDS[name] === undefined && name !== 'hold', true, `${where}: unknown field ${name}`);
    if (want !== null && typeof want === 'object') {
      if ('gt' in want) assert.ok(value > want.gt, `${where}: ${name} ${value} not > ${want.gt}`);
      if ('lt' in want) assert.ok(value < want.lt, `${where}: ${name} ${value} not < ${want.lt}`);
    } else {
      assert.equal(value, want, `${where}: ${name}`);
    }
  }
}

async function runStep(ctx, step, where) {
  const { client, prefix, holds } = ctx;
  const key = step.key === undefined ? undefined : prefix + step.key;
  switch (step.op) {
    case 'allow': return client.allow(step.rule, key, step.cost === undefined ? 1 : step.cost, { priority: step.priority });
    case 'peek': return client.peek(step.rule, key, { priority: step.priority });
    case 'settle': return client.settle(step.rule, key, step.reserved, step.actual);
    case 'reset': return client.reset(step.rule, key);
    case 'acquire': {
      const d = await client.acquire(step.rule, key, { cost: step.cost, timeoutMs: step.timeout_ms, priority: step.priority });
      if (step.save) holds[step.save] = d.holdId;
      return d;
    }
    case 'release': return client.release(step.rule, key, typeof step.hold === 'string' ? holds[step.hold] : step.hold,
      { latencyMs: step.latency_ms, dropped: step.dropped });
    case 'advance_ms': ctx.now += step.ms; return undefined;
    case 'stop_server': await serverCtl('stop', casesName); ctx.stopped = true; return undefined;
    case 'cache_hits': return { count: client.cacheHits };
    default: throw new Error(`${where}: unknown op ${step.op}`);
  }
}

test('every case has a name of its own', () => {
  const names = table.cases.map((c) => c.name);
  assert.deepEqual(names.filter((n, i) => names.indexOf(n) !== i), []);
});

for (const c of table.cases) {
  test(c.name, async () => {
    const ctx = { prefix: runPrefix(), holds: {}, now: 1000, stopped: false };
    const o = c.options || {};
    ctx.client = new sluice.Client({
      ...patient, port, clock: () => ctx.now,
      ...(o.cache_size !== undefined ? { cacheSize: o.cache_size } : {}),
      ...(o.on_unreachable !== undefined ? { onUnreachable: o.on_unreachable } : {}),
    });
    try {
      for (const [i, step] of c.steps.entries()) {
        const where = `step ${i + 1} (${step.op})`;
        const expect = step.expect || {};
        if ('error' in expect) {
          await assert.rejects(runStep(ctx, step, where), (err) => {
            assert.ok(err.message.toLowerCase().includes(expect.error.toLowerCase()), `${where}: "${err.message}" lacks "${expect.error}"`);
            return true;
          }, `${where}: did not raise`);
          continue;
        }
        const got = await runStep(ctx, step, where);
        if (step.op === 'cache_hits') assert.equal(got.count, expect.count, `${where}: cache hits`);
        else if (Object.keys(expect).length) expectFields(got, expect, where);
      }
    } finally {
      await ctx.client.close();
      if (ctx.stopped) await serverCtl('start', casesName);
    }
  });
}
