'use strict';
// sluice - the Node package of the sluice rate limiter: a client of sluiced, middleware for
// Express and Fastify, a drop-in for rate-limiter-flexible, and libsluice in-process.

const { version } = require('./package.json');
const { Client } = require('./lib/client');
const { SluiceError, UnreachableError } = require('./lib/decision');
const { SplitMix64, backoffMs, retryDelayMs } = require('./lib/backoff');
const { OverLimitCache } = require('./lib/cache');
const middleware = require('./lib/middleware');
const { RateLimiterSluice, RateLimiterRes } = require('./lib/flexible');

module.exports = {
  version,
  Client,
  SluiceError,
  UnreachableError,
  SplitMix64,
  backoffMs,
  retryDelayMs,
  OverLimitCache,
  express: middleware.express,
  fastify: middleware.fastify,
  keys: middleware.keys,
  RateLimiterSluice,
  RateLimiterRes,
  // libsluice in-process (koffi): loaded on first use, so the rest never needs the library.
  loadNative: (options) => require('./lib/native').load(options),
};
