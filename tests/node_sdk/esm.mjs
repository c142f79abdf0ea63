// esm.mjs - the package's ES module face: the same classes as require('sluice'), and a call.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import sluice, { Client, version, RateLimiterSluice } from 'sluice';

const require = createRequire(import.meta.url);

test('import and require give the same package', async () => {
  const cjs = require('sluice');
  assert.equal(Client, cjs.Client);
  assert.equal(RateLimiterSluice, cjs.RateLimiterSluice);
  assert.equal(sluice.version, version);
  const client = new Client({ port: Number(process.env.SDK_PORT), timeoutMs: 20000, connectTimeoutMs: 20000 });
  try {
    const d = await client.peek('mw-fixed', `esm${process.pid}`);
    assert.equal(d.limit, 2);
  } finally {
    await client.close();
  }
});
