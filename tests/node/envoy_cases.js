'use strict';
// envoy_cases.js - envoyproxy/ratelimit's own integration cases
// (test/integration/integration_test.go) through @grpc/grpc-js: the same cases, names and
// expected answers as tests/integration/envoy_upstream_cases.py (read its header), with the
// messages loaded from sluice's rls.proto by @grpc/proto-loader. Run by
// tests/integration/test_envoy_upstream_cases.sh, which starts sluiced with upstream's files and
// passes in SLUICE_GRPC_PORT and SLUICE_PROTO_DIR; the cases to run are the arguments.
// Prints "ok NAME" / "FAIL NAME: why" per case and exits 1 if any failed. Every call has a
// deadline; the client is closed before exiting.
const assert = require('node:assert/strict');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const TARGET = `127.0.0.1:${Number(process.env.SLUICE_GRPC_PORT)}`;
const DEADLINE_MS = 5000;
const options = { keepCase: true, enums: String, longs: Number, defaults: true };
const rls = grpc.loadPackageDefinition(
    loader.loadSync(path.join(process.env.SLUICE_PROTO_DIR, 'rls.proto'), options));
const limiter = new rls.envoy.service.ratelimit.v3.RateLimitService(
    TARGET, grpc.credentials.createInsecure());

function ask(domain, ...descriptors) {
    const request = {
        domain,
        hits_addend: 1,
        descriptors: descriptors.map((d) => ({ entries: d.map(([key, value]) => ({ key, value })) })),
    };
    return new Promise((resolve, reject) => {
        limiter.ShouldRateLimit(request, { deadline: Date.now() + DEADLINE_MS },
            (err, reply) => (err ? reject(err) : resolve(reply)));
    });
}

const seconds = (s) => (s.duration_until_reset ? s.duration_until_reset.seconds : 0);

// upstream's newDescriptorStatus; the duration's seconds come from the status got
function status(code, limit, left, got) {
    const s = { code, current_limit: null, limit_remaining: left, seconds: 0 };
    if (limit) {
        const [requests_per_unit, unit, name] = limit;
        s.current_limit = { requests_per_unit, unit, name };
        s.seconds = seconds(got);
    }
    return s;
}

// the response got, exactly (nanos dropped, as upstream compares seconds)
function expect(got, overall_code, ...statuses) {
    const seen = {
        overall_code: got.overall_code,
        statuses: got.statuses.map((s) => ({
            code: s.code,
            current_limit: s.current_limit && {
                requests_per_unit: s.current_limit.requests_per_unit,
                unit: s.current_limit.unit,
                name: s.current_limit.name,
            },
            limit_remaining: s.limit_remaining,
            seconds: seconds(s),
        })),
    };
    assert.deepEqual(seen, { overall_code, statuses });
}

async function basic(sfx) {
    expect(await ask('foo', [['hello' + sfx, 'world']]), 'OK', status('OK', null, 0));
    const got = await ask('basic', [['key1' + sfx, 'foo']]);
    expect(got, 'OK', status('OK', [50, 'SECOND', ''], 49, got.statuses[0]));
}

async function another(sfx) {
    for (let i = 0; i < 25; i++) {
        const got = await ask('another', [['key2' + sfx, 'one']]);
        const [code, left] = i >= 20 ? ['OVER_LIMIT', 0] : ['OK', 20 - (i + 1)];
        expect(got, code, status(code, [20, 'MINUTE', ''], left, got.statuses[0]));
    }
    for (let i = 0; i < 15; i++) {
        const got = await ask('another', [['key2' + sfx, 'two']], [['key3' + sfx, 'two']]);
        // once key3 is over, nothing is charged: key2 stays at 10 left
        const [code, left1, left2] =
            i >= 10 ? ['OVER_LIMIT', 10, 0] : ['OK', 20 - (i + 1), 10 - (i + 1)];
        expect(got, code,
            status('OK', [20, 'MINUTE', ''], left1, got.statuses[0]),
            status(code, [10, 'HOUR', ''], left2, got.statuses[1]));
    }
}

async function duration(sfx) {
    const first = seconds((await ask('another', [['key4' + sfx, 'durTest']])).statuses[0]);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const second = seconds((await ask('another', [['key4' + sfx, 'durTest']])).statuses[0]);
    // less time left the second time, unless the day ended in between (a new window)
    assert.ok(second < first || first < 3, `first ${first}s, then ${second}s`);
}

async function shareThreshold() {
    const dom = 'share-threshold-test';
    for (let i = 0; i < 10; i++) {
        const got = await ask(dom, [['files', 'files/a.pdf']]);
        assert.ok(['OK', 'OVER_LIMIT'].includes(got.overall_code), `call ${i}`);
    }
    let got = await ask(dom, [['files', 'files/b.csv']]);
    expect(got, 'OVER_LIMIT', status('OVER_LIMIT', [10, 'HOUR', ''],
        0, got.statuses[0]));
    for (let i = 0; i < 10; i++) {
        got = await ask(dom, [['files_no_share', `files_no_share/${i}`]]);
        expect(got, 'OK', status('OK',
            [10, 'HOUR', ''], 9, got.statuses[0]));
    }
}

async function reloadPresent() {
    let got = await ask('reload', [['key1', 'foo']]);
    expect(got, 'OK', status('OK', [50, 'SECOND', ''], 49, got.statuses[0]));
    got = await ask('reload', [['block', 'foo']]);
    expect(got, 'OVER_LIMIT', status('OVER_LIMIT', [0, 'SECOND', ''], 0, got.statuses[0]));
}

const CASES = {
    basic: () => basic(''),
    basic_local: () => basic('_local'),
    another: () => another(''),
    another_local: () => another('_local'),
    duration: () => duration(''),
    duration_local: () => duration('_local'),
    share_threshold: shareThreshold,
    reload_absent: async () => expect(await ask('reload', [['block', 'foo']]), 'OK',
        status('OK', null, 0)),
    reload_present: reloadPresent,
};

async function main() {
    let failures = 0;
    for (const name of process.argv.slice(2)) {
        try {
            await CASES[name]();
            console.log(`ok ${name}`);
        } catch (err) {
            failures++;
            console.log(`FAIL ${name}: ${err.message}`);
        }
    }
    limiter.close();
    process.exitCode = failures ? 1 : 0;
}

main();
