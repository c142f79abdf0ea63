'use strict';
// grpc.js - sluiced's gRPC port driven by Node's gRPC client (@grpc/grpc-js), with the messages
// loaded from sluice's .proto files by @grpc/proto-loader. Run by
// tests/integration/test_grpc_node.sh, which starts sluiced and passes in:
//
//   SLUICE_GRPC_PORT  sluiced's gRPC port, with the rules of test_grpc_node.sh
//   SLUICE_PROTO_DIR  src/proto/grpc
//
// Prints "ok - name" / "not ok - name: why" per case and exits 1 if any failed. Every call has
// a deadline; the clients are closed before exiting.
const assert = require('node:assert/strict');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const TARGET = `127.0.0.1:${Number(process.env.SLUICE_GRPC_PORT)}`;
const PROTO_DIR = process.env.SLUICE_PROTO_DIR;
const DEADLINE_MS = 5000;
const RLS = 'envoy.service.ratelimit.v3.RateLimitService';

const options = { keepCase: true, enums: String, longs: Number, defaults: true };
const load = (file) =>
    grpc.loadPackageDefinition(loader.loadSync(path.join(PROTO_DIR, file), options));
const rls = load('rls.proto');
const hc = load('health.proto');
const creds = grpc.credentials.createInsecure();
const limiter = new rls.envoy.service.ratelimit.v3.RateLimitService(TARGET, creds);
const health = new hc.grpc.health.v1.Health(TARGET, creds);
const raw = new grpc.Client(TARGET, creds);

let failures = 0;

function deadline() {
    return { deadline: Date.now() + DEADLINE_MS };
}

function call(client, method, request) {
    return new Promise((resolve, reject) => {
        client[method](request, deadline(), (err, reply) => (err ? reject(err) : resolve(reply)));
    });
}

function rawCall(method, bytes) {
    return new Promise((resolve, reject) => {
        raw.makeUnaryRequest(method, (b) => b, (b) => b, bytes, deadline(),
            (err, reply) => (err ? reject(err) : resolve(reply)));
    });
}

function ask(domain, descriptors, hits_addend = 0) {
    return call(limiter, 'ShouldRateLimit', { domain, descriptors, hits_addend });
}

function desc(...pairs) {
    return { entries: pairs.map(([key, value]) => ({ key, value })) };
}

async function rejects(promise, code, text) {
    await assert.rejects(promise, (err) => {
        assert.equal(err.code, code, `status ${err.code} (${err.details}), want ${code}`);
        if (text !== undefined) {
            assert.ok(err.details.includes(text), `details '${err.details}' lack '${text}'`);
        }
        return true;
    });
}

async function test(name, fn) {
    try {
        await fn();
        console.log(`ok - ${name}`);
    } catch (err) {
        failures++;
        console.log(`not ok - ${name}: ${err.message}`);
    }
}

async function main() {
    await test('health', async () => {
        for (const service of ['', RLS]) {
            const r = await call(health, 'Check', { service });
            assert.equal(r.status, 'SERVING');
        }
        await rejects(call(health, 'Check', { service: 'nope' }), grpc.status.NOT_FOUND,
            "unknown service 'nope'");
    });

    await test('limit, statuses, then over', async () => {
        for (const want of [1, 0]) {
            const r = await ask('edge', [desc(['remote_address', '10.1.1.1'])]);
            assert.equal(r.overall_code, 'OK');
            const s = r.statuses[0];
            assert.equal(s.limit_remaining, want);
            assert.equal(s.current_limit.requests_per_unit, 2);
            assert.equal(s.current_limit.unit, 'MINUTE');
            assert.equal(s.current_limit.name, 'edge.remote_address');
            assert.ok(Number(s.duration_until_reset.seconds) <= 60);
        }
        const r = await ask('edge', [desc(['remote_address', '10.1.1.1'])]);
        assert.equal(r.overall_code, 'OVER_LIMIT');
        assert.equal(r.statuses[0].code, 'OVER_LIMIT');
    });

    await test('all or nothing, with a descriptor no rule names', async () => {
        const two = [desc(['wide', 'k']), desc(['narrow', 'k']), desc(['nothing', 'k'])];
        assert.equal((await ask('edge', two)).overall_code, 'OK');
        const r = await ask('edge', two);
        assert.equal(r.overall_code, 'OVER_LIMIT');
        assert.deepEqual(r.statuses.map((s) => s.code), ['OK', 'OVER_LIMIT', 'OK']);
        assert.equal(r.statuses[2].current_limit, null);
        const w = await ask('edge', [desc(['wide', 'k'])], 3);
        assert.equal(w.statuses[0].limit_remaining, 6); /* 10 - 1 - 3: the refused one took none */
    });

    await test('errors', async () => {
        await rejects(ask('', [desc(['k', 'v'])]), grpc.status.INVALID_ARGUMENT, 'domain is empty');
        await rejects(rawCall(`/${RLS}/ShouldRateLimit`, Buffer.from([0x0a, 0x10, 0x61])),
            grpc.status.INVALID_ARGUMENT, 'malformed RateLimitRequest');
        await rejects(rawCall(`/${RLS}/Other`, Buffer.alloc(0)), grpc.status.UNIMPLEMENTED,
            `unknown method '/${RLS}/Other'`);
    });

    await test('many calls at once on one connection', async () => {
        const calls = [];
        for (let i = 0; i < 200; i++) {
            calls.push(ask('edge', [desc(['remote_address', `10.2.${i >> 8}.${i & 255}`])]));
        }
        const replies = await Promise.all(calls);
        const admitted = (r) => r.overall_code === 'OK' && r.statuses[0].limit_remaining === 1;
        assert.ok(replies.every(admitted));
    });

    // domain "shop" comes from an envoyproxy/ratelimit file (test_grpc_node.sh's shop.yaml)
    await test('an envoyproxy/ratelimit configuration', async () => {
        const one = async (...pairs) => (await ask('shop', [desc(...pairs)])).statuses[0];
        // a value before a prefix before any value, each list of values counted apart
        let s = await one(['path', '/cart']);
        assert.equal(s.current_limit.name, 'cart');
        assert.equal(s.limit_remaining, 1);
        s = await one(['path', '/api/x']);
        assert.equal(s.current_limit.requests_per_unit, 4);
        assert.equal(s.current_limit.unit, 'HOUR');
        s = await one(['path', '/else']);
        assert.equal(s.current_limit.requests_per_unit, 5);
        // nested: only under vendor=acme; vendor=acme alone has no limit of its own
        for (const want of [1, 0]) {
            s = await one(['vendor', 'acme'], ['sku', 's1']);
            assert.equal(s.limit_remaining, want);
        }
        assert.equal((await ask('shop', [desc(['vendor', 'acme'], ['sku', 's1'])])).overall_code,
            'OVER_LIMIT');
        assert.equal((await one(['vendor', 'other'], ['sku', 's1'])).current_limit, null);
        assert.equal((await one(['vendor', 'acme'])).current_limit, null);
        // unlimited
        for (let i = 0; i < 3; i++) {
            s = await one(['vendor', 'acme'], ['sku', 'free']);
            assert.equal(s.code, 'OK');
            assert.equal(s.limit_remaining, 4294967295);
            assert.equal(s.current_limit, null);
        }
        // replaces: coupon replaces "guest", which is then neither applied nor charged
        assert.equal((await ask('shop', [desc(['guest', 'g'])])).overall_code, 'OK');
        const both = await ask('shop', [desc(['guest', 'g']), desc(['coupon', 'c'])]);
        assert.equal(both.overall_code, 'OK');
        assert.equal(both.statuses[0].current_limit, null);
        assert.equal((await ask('shop', [desc(['guest', 'g'])])).overall_code, 'OVER_LIMIT');
        // shadow_mode: over its limit, still OK
        for (let i = 0; i < 3; i++) {
            assert.equal((await one(['trial', 't'])).code, 'OK');
        }
        // a descriptor's own hits_addend, and its own limit (in a configured domain)
        const hits = { ...desc(['path', '/hits']), hits_addend: { value: 3 } };
        assert.equal((await ask('shop', [hits])).statuses[0].limit_remaining, 2);
        const own = { ...desc(['path', '/own']), limit: { requests_per_unit: 1, unit: 'DAY' } };
        assert.equal((await ask('shop', [own])).statuses[0].current_limit.unit, 'DAY');
        assert.equal((await ask('shop', [own])).overall_code, 'OVER_LIMIT');
        const away = { ...desc(['path', '/own']), limit: { requests_per_unit: 1, unit: 'DAY' } };
        for (let i = 0; i < 2; i++) {
            assert.equal((await ask('nowhere', [away])).overall_code, 'OK');
        }
    });

    limiter.close();
    health.close();
    raw.close();
    process.exit(failures === 0 ? 0 : 1);
}

main();
