'use strict';
// keys.js - key functions for the middleware: each takes the request's view {ip, headers,
// route, user, req} and returns the key (a string), or null when the request lacks what it needs
// (the middleware then answers 400 rather than share one key among such requests).

const net = require('node:net');

// The network of an IPv4 address at prefix bits, written as "a.b.c.d/prefix".
function v4Network(ip, prefix) {
  const n = ip.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  const keep = prefix === 0 ? 0 : n - (n % 2 ** (32 - prefix));
  const bytes = [24, 16, 8, 0].map((s) => Math.floor(keep / 2 ** s) % 256);
  return `${bytes.join('.')}/${prefix}`;
}

// The eight 16-bit groups of an IPv6 address (with "::" and an embedded IPv4 tail).
function v6Groups(ip) {
  let text = ip;
  const tail = text.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (tail) {
    const o = tail[1].split('.').map(Number);
    text = `${text.slice(0, -tail[1].length)}${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
  }
  const [head, rest] = text.split('::');
  const a = head ? head.split(':') : [];
  const b = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const fill = rest === undefined ? [] : new Array(8 - a.length - b.length).fill('0');
  return [...a, ...fill, ...b].map((g) => parseInt(g, 16));
}

function v6Network(ip, prefix) {
  const groups = v6Groups(ip).map((g, i) => {
    const bits = Math.min(16, Math.max(0, prefix - 16 * i));
    return bits === 0 ? 0 : g & (0xffff << (16 - bits)) & 0xffff;
  });
  return `${groups.map((g) => g.toString(16)).join(':')}/${prefix}`;
}

function checkPrefix(name, v, max) {
  if (!Number.isInteger(v) || v < 0 || v > max) throw new TypeError(`${name} must be an integer from 0 to ${max}`);
}

/** The client address (the framework's req.ip: set Express's "trust proxy" or Fastify's
 * trustProxy to believe X-Forwarded-For), optionally as its network: {v4: 24, v6: 64} keys
 * every address of a /24 or /64 alike; prefix is put before the key. */
function ip({ v4 = 32, v6 = 128, prefix = '' } = {}) {
  checkPrefix('v4', v4, 32);
  checkPrefix('v6', v6, 128);
  return ({ ip: addr }) => {
    if (typeof addr !== 'string') return null;
    const mapped = addr.startsWith('::ffff:') && net.isIPv4(addr.slice(7)) ? addr.slice(7) : addr;
    if (net.isIPv4(mapped)) return prefix + (v4 === 32 ? mapped : v4Network(mapped, v4));
    if (net.isIPv6(mapped)) return prefix + (v6 === 128 ? mapped : v6Network(mapped, v6));
    return null;
  };
}

/** A request header's value (name case-insensitive); null when the request has none. */
function header(name, { prefix = '' } = {}) {
  const lower = String(name).toLowerCase();
  return ({ headers }) => {
    const v = headers[lower];
    const s = Array.isArray(v) ? v[0] : v;
    return typeof s === 'string' && s !== '' ? prefix + s : null;
  };
}

/** The route: its pattern when the framework has matched one by the time the middleware runs
 * ("/users/:id": Express when the middleware is on the route, Fastify always), else the whole
 * path ("/users/7": Express under app.use). */
function route({ prefix = '' } = {}) {
  return ({ route: r }) => (typeof r === 'string' ? prefix + r : null);
}

/** The user: fn(req) returns who is asking (an id), or null/undefined when no one is signed in. */
function user(fn, { prefix = '' } = {}) {
  if (typeof fn !== 'function') throw new TypeError('keys.user takes a function of the request');
  return ({ req }) => {
    const u = fn(req);
    return u === null || u === undefined || u === '' ? null : prefix + String(u);
  };
}

module.exports = { ip, header, route, user, v4Network, v6Network };
