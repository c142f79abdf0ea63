// The ES module face of the same package (one implementation: index.js).
import sluice from './index.js';

export default sluice;
export const {
  version, Client, SluiceError, UnreachableError, SplitMix64, backoffMs, retryDelayMs,
  OverLimitCache, express, fastify, keys, RateLimiterSluice, RateLimiterRes, loadNative,
} = sluice;
