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
