'use strict';
// cluster.js - ioredis's Cluster client calling sluice.so's commands on a Redis Cluster directly,
// as an application would. Run by tests/integration/test_node_cluster.sh, which starts the
// cluster (3 primaries + 3 replicas, the module in every node) and passes one node's port in
// SLUICE_CLUSTER_PORT. Prints "ok - name" / "not ok - name: why"; exits 1 if any failed.
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { ReplyError } = Redis;

const PORT = Number(process.env.SLUICE_CLUSTER_PORT);
let failures = 0;

async function test(name, fn) {
    try {
        await Promise.race([
            fn(),
            new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), 20000)),
        ]);
        console.log(`ok - ${name}`);
    } catch (e) {
        failures++;
        console.log(`not ok - ${name}: ${e.message}`);
    }
}

(async () => {
    const cluster = new Redis.Cluster([{ host: '127.0.0.1', port: PORT }], {
        redisOptions: { connectTimeout: 5000 },
    });
    await test('keys over every shard, each decided by its owner', async () => {
        for (let i = 0; i < 120; i++) {
            const r = await cluster.call('SL.THROTTLE', `user:${i}`, 'gcra', '10', '1000');
            assert.deepEqual(r.slice(0, 4), [1, 11, 10, 0]);
        }
        const primaries = cluster.nodes('master');
        assert.equal(primaries.length, 3);
        for (const node of primaries) {
            assert.ok((await node.dbsize()) > 0, `a primary holds no key`);
        }
    });
    await test('the same key counts on its shard', async () => {
        let last;
        for (let i = 0; i < 11; i++) {
            last = await cluster.call('SL.THROTTLE', 'hot', 'sliding_log', '10', '3600000');
        }
        assert.equal(last[0], 0, 'the 11th of 10 per hour is refused');
        assert.ok(last[3] > 0, 'with a retry time');
    });
    await test('CL.THROTTLE as redis-cell answers it', async () => {
        const r = await cluster.call('CL.THROTTLE', 'cell', '5', '10', '60');
        assert.deepEqual(r, [0, 6, 5, -1, 6]);
    });
    await test('a pipeline of hash-tagged keys on one shard', async () => {
        const p = cluster.pipeline();
        for (let i = 0; i < 20; i++) {
            p.call('SL.THROTTLE', '{tenant:7}:api', 'sliding_log', '15', '3600000');
        }
        const replies = await p.exec();
        const allowed = replies.map(([err, r]) => (err ? -1 : r[0]));
        assert.deepEqual(allowed, [...Array(15).fill(1), ...Array(5).fill(0)]);
    });
    await test('errors surface as ReplyError with the exact text', async () => {
        await assert.rejects(cluster.call('SL.THROTTLE', 'k', 'leaky', '1', '1000'), (e) => {
            assert.ok(e instanceof ReplyError);
            assert.equal(e.message, "ERR unknown algorithm 'leaky' (fixed_window, sliding_log, " +
                'sliding_window, sliding_buckets, token_bucket, gcra, concurrency)');
            return true;
        });
    });
    cluster.disconnect();
    process.exit(failures ? 1 : 0);
})();
