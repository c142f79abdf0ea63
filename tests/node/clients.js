'use strict';
// clients.js - sluiced driven by ioredis and node-redis as an application would drive them.
// Run by tests/integration/test_node.sh, which starts the servers and passes them in:
//
//   SLUICE_PORT          sluiced with the rules of test_node.sh (api: 3 per hour, pipe: 50 per hour)
//   SLUICE_AUTH_PORT     sluiced started with --requirepass $SLUICE_PASSWORD
//   SLUICE_RESTART_PORT  sluiced the shell restarts on request: this script creates
//                        $SLUICE_RESTART_DIR/restart.request and waits (bounded) for restart.done
//
// Prints "ok - name" / "not ok - name: why" per case and exits 1 if any failed. Every wait is
// bounded; both clients are closed (quit or disconnect) before exiting.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Redis = require('ioredis');
const { createClient, ErrorReply } = require('redis');
const { ReplyError } = Redis;

const HOST = '127.0.0.1';
const PORT = Number(process.env.SLUICE_PORT);
const AUTH_PORT = Number(process.env.SLUICE_AUTH_PORT);
const PASSWORD = process.env.SLUICE_PASSWORD;
const RESTART_PORT = Number(process.env.SLUICE_RESTART_PORT);
const RESTART_DIR = process.env.SLUICE_RESTART_DIR;
const CASE_TIMEOUT_MS = 20000;

let failures = 0;
let cases = 0;
const closers = [];

function withTimeout(promise, ms, what) {
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function test(name, fn) {
    cases++;
    try {
        await withTimeout(Promise.resolve().then(fn), CASE_TIMEOUT_MS, name);
        console.log(`ok - ${name}`);
    } catch (err) {
        failures++;
        console.log(`not ok - ${name}: ${err && err.stack ? err.stack : err}`);
    }
}

// The rejection of promise, which must be a server error reply, an instance of errClass
// (ioredis: ReplyError, node-redis: ErrorReply), with exactly the message want.
async function expectReplyError(promise, errClass, want) {
    await assert.rejects(promise, (err) => {
        assert.ok(err instanceof errClass, `${err} (${err.constructor.name}) is not a ${errClass.name}`);
        assert.equal(err.message, want);
        return true;
    });
}

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function ioredis(port, extra = {}) {
    const r = new Redis({ host: HOST, port, lazyConnect: true, ...extra });
    r.on('error', () => {}); // connection errors are expected while a server restarts
    closers.push(() => r.disconnect());
    return r;
}

function nodeRedis(port, extra = {}) {
    const c = createClient({ socket: { host: HOST, port, connectTimeout: 5000 }, ...extra });
    c.on('error', () => {}); // reconnection errors are expected while a server restarts
    closers.push(() => (c.isOpen ? c.destroy() : undefined));
    return c;
}

// [allowed, limit, remaining, retry_after_ms, reset_after_ms] with the first three as given.
function assertDecision(reply, allowed, limit, remaining) {
    assert.ok(Array.isArray(reply), `reply ${JSON.stringify(reply)} is not an array`);
    assert.equal(reply.length, 5, `reply ${JSON.stringify(reply)}`);
    assert.deepEqual(reply.slice(0, 3), [allowed, limit, remaining], `reply ${JSON.stringify(reply)}`);
    for (const v of reply) {
        assert.equal(typeof v, 'number');
    }
    if (allowed === 0) {
        assert.ok(reply[3] > 0, `a denial carries retry_after_ms > 0: ${JSON.stringify(reply)}`);
    }
}

// Asks the shell to restart the sluiced on RESTART_PORT and waits until it has.
async function restartServer() {
    const done = path.join(RESTART_DIR, 'restart.done');
    fs.writeFileSync(path.join(RESTART_DIR, 'restart.request'), '');
    for (let i = 0; i < 600 && !fs.existsSync(done); i++) {
        await sleep(50);
    }
    assert.ok(fs.existsSync(done), 'the server was not restarted within 30 s');
}

async function ioredisCases() {
    const r = ioredis(PORT, { connectionName: 'node-it' });
    await test('ioredis: connects (ready check sends INFO, connectionName CLIENT SETNAME)', async () => {
        await r.connect();
        assert.equal(r.status, 'ready');
        assert.match(await r.info('server'), /sluice_version:/);
        assert.equal(await r.client('GETNAME'), 'node-it');
        assert.equal(await r.ping(), 'PONG');
    });
    await test('ioredis: SL.ALLOW through call()', async () => {
        assertDecision(await r.call('SL.ALLOW', 'api', 'io:k1'), 1, 3, 2);
        assertDecision(await r.call('SL.ALLOW', 'api', 'io:k1'), 1, 3, 1);
        assertDecision(await r.call('sl.allow', 'api', 'io:k1', 'COST', 1), 1, 3, 0);
        assertDecision(await r.call('SL.ALLOW', 'api', 'io:k1'), 0, 3, 0);
        assertDecision(await r.call('SL.ALLOW', 'api', 'io:k2'), 1, 3, 2);
    });
    await test('ioredis: a pipeline of 100 commands, replies in order', async () => {
        const p = r.pipeline();
        for (let i = 0; i < 100; i++) {
            p.call('SL.ALLOW', 'pipe', 'io:p');
        }
        const results = await p.exec();
        assert.equal(results.length, 100);
        results.forEach(([err, reply], i) => {
            assert.equal(err, null, `command ${i}: ${err}`);
            if (i < 50) {
                assertDecision(reply, 1, 50, 49 - i);
            } else {
                assertDecision(reply, 0, 50, 0);
            }
        });
    });
    await test('ioredis: an error inside a pipeline stays with its command', async () => {
        const results = await r
            .pipeline()
            .call('SL.THROTTLE', 'io:pe', 'gcra', 10, 3600000, 'BURST', 0)
            .call('SL.ALLOW', 'nope', 'k')
            .call('SL.THROTTLE', 'io:pe', 'gcra', 10, 3600000, 'BURST', 0)
            .exec();
        assert.equal(results[0][0], null);
        assertDecision(results[0][1], 1, 1, 0);
        assert.ok(results[1][0] instanceof ReplyError);
        assert.equal(results[1][0].message, "ERR unknown rule 'nope'");
        assert.equal(results[2][0], null);
        assertDecision(results[2][1], 0, 1, 0);
    });
    // Keys decided more than once use windows of an hour, which refill nothing while the test
    // runs, so the answers do not depend on how long the machine takes between two calls.
    await test('ioredis: SL.THROTTLE gcra with BURST', async () => {
        assertDecision(await r.call('SL.THROTTLE', 'io:g', 'gcra', 10, 3600000, 'BURST', 5), 1, 6, 5);
        assertDecision(await r.call('SL.THROTTLE', 'io:g', 'gcra', 10, 3600000, 'BURST', 5, 'COST', 5), 1, 6, 0);
        assertDecision(await r.call('SL.THROTTLE', 'io:g', 'gcra', 10, 3600000, 'BURST', 5), 0, 6, 0);
    });
    await test('ioredis: CL.THROTTLE, redis-cell reply', async () => {
        assert.deepEqual(await r.call('CL.THROTTLE', 'io:c0', 15, 30, 60), [0, 16, 15, -1, 2]);
        assert.deepEqual(await r.call('CL.THROTTLE', 'io:c', 15, 30, 3600), [0, 16, 15, -1, 120]);
        // two 120 s intervals less the seconds gone by since the first call
        const second = await r.call('CL.THROTTLE', 'io:c', 15, 30, 3600);
        assert.deepEqual(second.slice(0, 4), [0, 16, 14, -1]);
        assert.ok(second[4] > 180 && second[4] <= 240, `reset ${second[4]}`);
        const big = await r.call('CL.THROTTLE', 'io:c', 15, 30, 3600, 17);
        assert.deepEqual(big.slice(0, 4), [1, 16, 14, -1]);
        assert.ok(big[4] > 180 && big[4] <= second[4], `reset ${big[4]}`);
    });
    await test('ioredis: errors are ReplyError with the exact message', async () => {
        await expectReplyError(r.call('SL.ALLOW', 'nope', 'k'), ReplyError, "ERR unknown rule 'nope'");
        await expectReplyError(
            r.call('SL.ALLOW', 'api'),
            ReplyError,
            "ERR wrong number of arguments for 'sl.allow' command",
        );
        await expectReplyError(r.call('SL.ALLOW', 'api', 'k', 'COST', -1), ReplyError, 'ERR cost must be >= 0');
        await expectReplyError(
            r.call('SL.THROTTLE', 'k', 'leaky', 1, 1000),
            ReplyError,
            "ERR unknown algorithm 'leaky' (fixed_window, sliding_log, sliding_window, sliding_buckets, token_bucket, gcra, concurrency)",
        );
        await expectReplyError(
            r.call('CL.THROTTLE', 'k', 'x', 30, 60),
            ReplyError,
            "ERR Couldn't parse as integer: x",
        );
        await expectReplyError(r.call('SL.ALLOW', 'api', 'x'.repeat(1100)), ReplyError, 'ERR key is longer than 1024 bytes');
        // the connection survives every error
        assertDecision(await r.call('SL.ALLOW', 'api', 'io:after-errors'), 1, 3, 2);
    });
    await test('ioredis: SL.RULE SET / GET / DEL', async () => {
        assert.equal(await r.call('SL.RULE', 'SET', 'io-rule', '{"algorithm":"gcra","limit":5,"window":"1s"}'), 'OK');
        assert.match(await r.call('SL.RULE', 'GET', 'io-rule'), /"algorithm": ?"gcra"/);
        assertDecision(await r.call('SL.ALLOW', 'io-rule', 'x'), 1, 6, 5);
        assert.equal(await r.call('SL.RULE', 'DEL', 'io-rule'), 1);
        await expectReplyError(r.call('SL.ALLOW', 'io-rule', 'x'), ReplyError, "ERR unknown rule 'io-rule'");
    });
    await test('ioredis: quit', async () => {
        assert.equal(await r.quit(), 'OK');
    });
}

async function nodeRedisCases() {
    const c = nodeRedis(PORT);
    await test('node-redis: connects', async () => {
        await c.connect();
        assert.equal(await c.ping(), 'PONG');
    });
    await test('node-redis: SL.ALLOW through sendCommand()', async () => {
        assertDecision(await c.sendCommand(['SL.ALLOW', 'api', 'nr:k1']), 1, 3, 2);
        assertDecision(await c.sendCommand(['SL.ALLOW', 'api', 'nr:k1', 'COST', '2']), 1, 3, 0);
        assertDecision(await c.sendCommand(['SL.ALLOW', 'api', 'nr:k1']), 0, 3, 0);
    });
    await test('node-redis: 100 commands at once (auto-pipelined), replies in order', async () => {
        const replies = await Promise.all(
            Array.from({ length: 100 }, () => c.sendCommand(['SL.ALLOW', 'pipe', 'nr:p'])),
        );
        replies.forEach((reply, i) => {
            if (i < 50) {
                assertDecision(reply, 1, 50, 49 - i);
            } else {
                assertDecision(reply, 0, 50, 0);
            }
        });
    });
    await test('node-redis: execAsPipeline of 100 commands', async () => {
        const m = c.multi();
        for (let i = 0; i < 100; i++) {
            m.addCommand(['SL.THROTTLE', 'nr:pp', 'sliding_log', '60', '3600000']);
        }
        const replies = await m.execAsPipeline();
        assert.equal(replies.length, 100);
        replies.forEach((reply, i) => assertDecision(reply, i < 60 ? 1 : 0, 60, i < 60 ? 59 - i : 0));
    });
    await test('node-redis: SL.THROTTLE and CL.THROTTLE', async () => {
        // gcra's limit is max_burst + 1, as redis-cell's; max_burst defaults to the limit
        assertDecision(await c.sendCommand(['SL.THROTTLE', 'nr:g', 'gcra', '10', '1000']), 1, 11, 10);
        assertDecision(await c.sendCommand(['SL.THROTTLE', 'nr:g1', 'gcra', '10', '3600000', 'BURST', '0']), 1, 1, 0);
        assertDecision(await c.sendCommand(['SL.THROTTLE', 'nr:g1', 'gcra', '10', '3600000', 'BURST', '0']), 0, 1, 0);
        assert.deepEqual(await c.sendCommand(['CL.THROTTLE', 'nr:c', '15', '30', '60']), [0, 16, 15, -1, 2]);
    });
    await test('node-redis: errors are ErrorReply with the exact message', async () => {
        await expectReplyError(c.sendCommand(['SL.ALLOW', 'nope', 'k']), ErrorReply, "ERR unknown rule 'nope'");
        await expectReplyError(
            c.sendCommand(['SL.THROTTLE', 'k', 'gcra', '0', '1000']),
            ErrorReply,
            'ERR limit must be > 0',
        );
        await expectReplyError(
            c.sendCommand(['CL.THROTTLE', 'k', '1', '2', '3', '4', '5']),
            ErrorReply,
            'ERR Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]',
        );
        assert.equal(await c.ping(), 'PONG');
    });
    await test('node-redis: close', async () => {
        await c.close();
        assert.equal(c.isOpen, false);
    });
}

async function authCases() {
    await test('ioredis: password sends AUTH before the ready check', async () => {
        const r = ioredis(AUTH_PORT, { password: PASSWORD });
        await r.connect();
        assertDecision(await r.call('SL.THROTTLE', 'auth:io', 'gcra', 10, 1000), 1, 11, 10);
        await r.quit();
    });
    await test('ioredis: no password -> NOAUTH', async () => {
        // no ready check: it would fail on INFO with the same NOAUTH before any command
        const r = ioredis(AUTH_PORT, { enableReadyCheck: false, maxRetriesPerRequest: 0 });
        await r.connect();
        await expectReplyError(r.call('SL.ALLOW', 'api', 'k'), ReplyError, 'NOAUTH Authentication required.');
        r.disconnect();
    });
    await test('ioredis: wrong password -> WRONGPASS', async () => {
        const r = ioredis(AUTH_PORT, { password: 'wrong', enableReadyCheck: false, retryStrategy: () => null });
        const seen = new Promise((resolve) => r.once('error', resolve));
        await r.connect().catch(() => {});
        const err = await withTimeout(seen, 5000, 'the AUTH error event');
        assert.equal(err.message, 'WRONGPASS invalid username-password pair or user is disabled.');
        r.disconnect();
    });
    await test('node-redis: password', async () => {
        const c = nodeRedis(AUTH_PORT, { password: PASSWORD });
        await c.connect();
        assertDecision(await c.sendCommand(['SL.THROTTLE', 'auth:nr', 'gcra', '10', '1000']), 1, 11, 10);
        await c.close();
    });
    await test('node-redis: wrong password fails connect() with WRONGPASS', async () => {
        const c = nodeRedis(AUTH_PORT, { password: 'wrong', socket: { host: HOST, port: AUTH_PORT, reconnectStrategy: false } });
        await expectReplyError(
            c.connect(),
            ErrorReply,
            'WRONGPASS invalid username-password pair or user is disabled.',
        );
    });
}

async function restartCases() {
    const r = ioredis(RESTART_PORT);
    const c = nodeRedis(RESTART_PORT);
    let ioReady = 0;
    let nrReconnects = 0;
    r.on('ready', () => ioReady++);
    c.on('reconnecting', () => nrReconnects++);
    await test('restart: both clients connected before', async () => {
        await r.connect();
        await c.connect();
        assertDecision(await r.call('SL.ALLOW', 'api', 'rs:io'), 1, 3, 2);
        assertDecision(await c.sendCommand(['SL.ALLOW', 'api', 'rs:nr']), 1, 3, 2);
    });
    await test('restart: the server restarts', restartServer);
    await test('restart: ioredis reconnects (a second ready) and its commands succeed', async () => {
        // Rules live in the store file, so "api" is there again; counters were not snapshotted.
        const reply = await r.call('SL.ALLOW', 'api', 'rs:io');
        assertDecision(reply, 1, 3, 2);
        assert.equal(ioReady, 2);
        assert.equal(r.status, 'ready');
    });
    await test('restart: node-redis reconnects and its commands succeed', async () => {
        let reply;
        // The first command may meet the dead socket before node-redis notices it closed.
        for (let i = 0; i < 100; i++) {
            try {
                reply = await c.sendCommand(['SL.ALLOW', 'api', 'rs:nr']);
                break;
            } catch (err) {
                if (i === 99) throw err;
                await sleep(100);
            }
        }
        assertDecision(reply, 1, 3, 2);
        assert.ok(nrReconnects >= 1, 'node-redis never reconnected');
        assert.equal(await c.ping(), 'PONG');
    });
    await r.quit().catch(() => {});
    await c.close().catch(() => {});
}

async function main() {
    for (const [name, v] of Object.entries({ PORT, AUTH_PORT, PASSWORD, RESTART_PORT, RESTART_DIR })) {
        if (v === undefined || Number.isNaN(v)) {
            console.error(`clients.js: ${name} is not set (run it through tests/integration/test_node.sh)`);
            process.exit(2);
        }
    }
    console.log(`node ${process.version}, ioredis ${require('ioredis/package.json').version}, ` +
        `redis ${require('redis/package.json').version}`);
    await ioredisCases();
    await nodeRedisCases();
    await authCases();
    await restartCases();
    for (const close of closers) {
        try {
            close();
        } catch {
            // already closed
        }
    }
    console.log(`${cases - failures}/${cases} node cases passed`);
    process.exit(failures === 0 ? 0 : 1);
}

main().catch((err) => {
    console.error(err);
    process.exit(1);
});
