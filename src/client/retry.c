/*
 * retry.c - exponential backoff with full jitter, and the retry delay that prefers the
 * server's answer.
 *
 * The generator is SplitMix64 (Steele, Lea, Flood 2014): any 64-bit state is a valid seed, one
 * addition and a mix per draw. A uniform draw from [0, n] uses Lemire's multiply-and-reject
 * (no modulo bias, no division in the common case).
 */
#include "sluice/client.h"

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [0, max], max <= INT64_MAX. */
static uint64_t uniform_upto(uint64_t max, uint64_t *state)
{
    uint64_t range = max + 1; /* <= 2^63: no wrap */
    unsigned __int128 m = (unsigned __int128)splitmix64(state) * range;
    uint64_t low = (uint64_t)m;
    if (low < range) {
        uint64_t threshold = -range % range; /* 2^64 mod range */
        while (low < threshold) {
            m = (unsigned __int128)splitmix64(state) * range;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

int64_t slc_backoff_ms(int attempt, int64_t base_ms, int64_t cap_ms, uint64_t *rng_state)
{
    if (base_ms < 0)
        base_ms = 0;
    if (cap_ms < 0)
        cap_ms = 0;
    if (attempt < 0)
        attempt = 0;
    /* ceiling = min(cap, base * 2^attempt), computed without overflow: base * 2^attempt > cap
     * iff base > cap >> attempt (for attempt < 63; beyond, any base > 0 exceeds the cap). */
    int64_t ceiling;
    if (base_ms == 0)
        ceiling = 0;
    else if (attempt >= 63 || base_ms > (cap_ms >> attempt))
        ceiling = cap_ms;
    else
        ceiling = base_ms << attempt;
    return (int64_t)uniform_upto((uint64_t)ceiling, rng_state);
}

int64_t slc_retry_delay_ms(const slc_decision_t *d, int attempt, int64_t base_ms, int64_t cap_ms,
                           uint64_t *rng_state)
{
    if (d != NULL && (d->allowed || d->retry_after_ms > 0 || d->retry_after_ms == -1))
        return d->retry_after_ms;
    return slc_backoff_ms(attempt, base_ms, cap_ms, rng_state);
}
