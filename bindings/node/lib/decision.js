'use strict';
// decision.js - sluiced's replies as records, and the fallback decisions. Pure.

class SluiceError extends Error {
  // A refusal by sluiced (its error reply, exactly as sent), or a reply of the wrong shape.
  constructor(message) {
    super(message);
    this.name = 'SluiceError';
  }
}

class UnreachableError extends Error {
  // sluiced could not be asked: refused connection, lost connection, timeout.
  constructor(message, cause) {
    super(`sluiced unreachable: ${message}`, { cause });
    this.name = 'UnreachableError';
  }
}

function isInt(v) {
  return Number.isSafeInteger(v);
}

// [allowed 1|0, limit, remaining, retry_after_ms, reset_after_ms] (SL.ALLOW, SL.PEEK, SL.SETTLE,
// SL.THROTTLE), as the C client's slc_decision_from_reply checks it; SL.ACQUIRE adds hold_id.
function decisionFromReply(reply, withHold = false) {
  const n = withHold ? 6 : 5;
  if (!Array.isArray(reply) || reply.length !== n || !reply.every(isInt)) {
    throw new SluiceError(`unexpected reply: ${JSON.stringify(reply)}`);
  }
  const [allowed, limit, remaining, retryAfterMs, resetAfterMs] = reply;
  if ((allowed !== 0 && allowed !== 1) || limit < 0 || remaining < 0 || resetAfterMs < 0 || retryAfterMs < -1) {
    throw new SluiceError(`unexpected reply: ${JSON.stringify(reply)}`);
  }
  const d = { allowed: allowed === 1, limit, remaining, retryAfterMs, resetAfterMs, fromCache: false, fallback: false };
  if (withHold) d.holdId = reply[5] > 0 ? reply[5] : null;
  return d;
}

// What a call answers when sluiced cannot be reached and onUnreachable is 'allow' or 'deny'.
function fallbackDecision(allowed, retryAfterMs) {
  return { allowed, limit: 0, remaining: 0, retryAfterMs: allowed ? 0 : retryAfterMs, resetAfterMs: 0, fromCache: false, fallback: true };
}

module.exports = { SluiceError, UnreachableError, decisionFromReply, fallbackDecision };
