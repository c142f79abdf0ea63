'use strict';
// common.js - what the package's tests share: the servers test_node_sdk.sh started (from the
// environment), the handshake that asks it to stop or start sluiced, bounded polling.

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');

const env = (name) => {
  const v = process.env[name];
  if (v === undefined || v === '') throw new Error(`${name} is not set (run through tests/integration/test_node_sdk.sh)`);
  return v;
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// cond() until it returns a truthy value, every 50 ms, at most `tries` times; the last value.
async function poll(cond, tries = 200) {
  let v;
  for (let i = 0; i < tries; i++) {
    v = await cond();
    if (v) return v;
    await sleep(50);
  }
  return v;
}

// Asks the shell to stop or start the sluiced named `name` (its handshake directory), and waits
// until it has (at most 60 s).
let seq = 0;
async function serverCtl(op, name) {
  const dir = env('SDK_HANDSHAKE');
  const n = ++seq;
  const base = path.join(dir, `${process.pid}-${n}`);
  fs.writeFileSync(`${base}.${op}.${name}`, '');
  const ok = await poll(() => fs.existsSync(`${base}.done`), 1200);
  if (!ok) throw new Error(`the shell did not ${op} ${name}`);
}

// A fresh prefix per run, so a rerun against the same server starts from empty keys.
const runPrefix = () => `t${crypto.randomBytes(4).toString('hex')}:`;

// Client options for a server that answers: timeouts no loaded machine reaches (a test asserts
// what is answered, never how fast).
const patient = { timeoutMs: 20000, connectTimeoutMs: 20000 };

module.exports = { env, sleep, poll, serverCtl, runPrefix, patient };
