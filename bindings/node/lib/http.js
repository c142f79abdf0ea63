'use strict';
// http.js - what a decision looks like over HTTP, as sluiced's own HTTP API writes it: the IETF
// RateLimit-Policy / RateLimit fields (draft-10), Retry-After in whole seconds rounded up, and
// the 429's application/problem+json body. Pure: decisions in, header values and bodies out.

const UNIT_NS = { ns: 1n, us: 1000n, ms: 1000000n, s: 1000000000n, m: 60000000000n, h: 3600000000000n, d: 86400000000000n };

// A duration as sluiced writes it in a rule ("250ms", "1h30m", "30d"; or a number of ms) in
// whole seconds, rounded up; null when it cannot be read.
function durationSeconds(text) {
  if (typeof text === 'number' && Number.isFinite(text) && text >= 0) return Math.ceil(text / 1000);
  if (typeof text !== 'string' || !/^(\d+(ns|us|ms|s|m|h|d))+$/.test(text)) return null;
  let ns = 0n;
  for (const [, n, unit] of text.matchAll(/(\d+)(ns|us|ms|s|m|h|d)/g)) ns += BigInt(n) * UNIT_NS[unit];
  return Number((ns + 999999999n) / 1000000000n);
}

// An sf-string as sluiced writes one: quotes and backslashes escaped, other bytes outside
// printable ASCII as '?'.
function sfString(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else out += c >= 0x20 && c < 0x7f ? ch : '?';
  }
  return `${out}"`;
}

function secondsCeil(ms) {
  return Math.ceil(Math.max(0, ms) / 1000);
}

// The response headers of decision d under policy (the rule's name) with a window of windowS
// seconds (null: unknown, no RateLimit-Policy). A fallback decision (sluiced unreachable) has no
// limit to report: only a denial's Retry-After.
function decisionHeaders(policy, windowS, d) {
  const h = {};
  if (!d.fallback) {
    if (windowS !== null) h['RateLimit-Policy'] = `${sfString(policy)};q=${d.limit};w=${windowS}`;
    h.RateLimit = `${sfString(policy)};r=${d.remaining};t=${secondsCeil(d.resetAfterMs)}`;
  }
  if (!d.allowed && d.retryAfterMs >= 0) h['Retry-After'] = String(secondsCeil(d.retryAfterMs));
  return h;
}

// The 429's body: the shape of sluiced's problem documents.
function tooManyBody(rule, windowS, d) {
  const detail = d.fallback
    ? `rule '${rule}' could not be checked: the rate limiter is unreachable`
    : `rule '${rule}' allows ${d.limit} per ${windowS === null ? '?' : windowS}s`;
  return JSON.stringify({ type: 'about:blank', title: 'Too Many Requests', status: 429, detail });
}

const PROBLEM_TYPE = 'application/problem+json';

module.exports = { durationSeconds, sfString, decisionHeaders, tooManyBody, PROBLEM_TYPE };
