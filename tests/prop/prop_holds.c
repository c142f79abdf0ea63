/*
 * prop_holds.c - seeded property tests of in-flight limits (sl_acquire(), sl_release(),
 * src/core/concurrency.c) against a model: a plain list of holds (id, units, expiry), over
 * random sequences of acquires (random costs, timeouts, times; some times earlier than the
 * latest, which both clamp), releases (of live, released, expired and made-up ids) and peeks.
 *
 *   model     every decision is the model's: admitted exactly when cost fits in the limit less
 *             the live units; remaining, reset_after; retry_after the time until enough holds
 *             expire (-1 above the limit); the state always checks.
 *   limit     never more than the limit held (sl_in_flight() <= limit at every step).
 *   expiry    a hold that expires frees exactly its units: sl_in_flight() is the model's sum
 *             of live holds at any later time.
 *   release   releasing a live id frees exactly its units, once: a second release of it, or
 *             of an expired or unknown id, is SL_EHOLD and leaves the state's bytes as they
 *             were.
 *
 * Environment: SLUICE_SEED, SLUICE_PROP_CASES (default 3000). Exit 0 when every property held.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/sluice.h"

#include "prop/gen.h"

#define STEPS     120
#define HOLDS_MAX 64 /* holds one case can make */

enum prop { P_MODEL, P_LIMIT, P_EXPIRY, P_RELEASE, P_COUNT };
static const char *const names[P_COUNT] = {"model", "limit", "expiry", "release"};
static const char *const claims[P_COUNT] = {
    "every acquire decides as the model of live holds (remaining, retry_after an expiry)",
    "never more than the limit held",
    "an expired hold frees exactly its units",
    "a release frees exactly its hold's units once; any other release changes nothing",
};

typedef struct mhold {
    uint64_t id;
    int64_t cost, until;
    bool released;
} mhold_t;

typedef struct model {
    mhold_t h[STEPS];
    int n;
    int64_t latest;
} model_t;

static long checked[P_COUNT], failed[P_COUNT];

static int64_t live_units(const model_t *m, int64_t t)
{
    int64_t u = 0;
    for (int i = 0; i < m->n; i++)
        u += !m->h[i].released && m->h[i].until > t ? m->h[i].cost : 0;
    return u;
}

/* The model's retry_after for cost at t: the least expiry after which it fits. */
static int64_t model_retry(const model_t *m, const sl_rule_t *r, int64_t cost, int64_t t)
{
    if (cost > r->limit)
        return -1;
    int64_t best = INT64_MAX;
    for (int i = 0; i < m->n; i++) {
        int64_t e = m->h[i].until;
        if (!m->h[i].released && e > t && e < best && live_units(m, e) + cost <= r->limit)
            best = e;
    }
    return best - t;
}

static bool fail(int p, uint64_t seed, long idx, int step, const char *what)
{
    if (failed[p]++ < 5)
        fprintf(stderr, "FAIL %s: case %ld step %d: %s (SLUICE_SEED=0x%" PRIx64 ")\n", names[p],
                idx, step, what, seed);
    return false;
}

static bool acquire_step(const sl_rule_t *r, unsigned char *st, model_t *m, prng_t *g, int64_t now,
                         uint64_t seed, long idx, int step)
{
    int64_t cost = prng_range(g, 0, r->limit + 1);
    int64_t timeout = prng_chance(g, 30) ? 0 : prng_range(g, SL_NS_PER_MS, r->window_ns);
    sl_decision_t d;
    sl_hold_t h;
    int64_t t = now > m->latest ? now : m->latest, u = live_units(m, t);
    checked[P_MODEL]++;
    if (sl_acquire(r, st, cost, timeout, now, prng_next(g), &d, &h) != SL_OK ||
        sl_state_check(r, st) != SL_OK)
        return fail(P_MODEL, seed, idx, step, "acquire failed or left a state that fails");
    bool fits = cost <= r->limit - u;
    if (d.allowed != fits || (fits && cost > 0) != (h.id != 0))
        return fail(P_MODEL, seed, idx, step, "admitted otherwise than the model");
    if (!fits && d.retry_after_ns != model_retry(m, r, cost, t))
        return fail(P_MODEL, seed, idx, step, "retry_after is not the model's expiry");
    if (fits && cost > 0) {
        m->h[m->n++] = (mhold_t){h.id, cost, t + (timeout ? timeout : r->window_ns), false};
        m->latest = t;
        if (h.until_ns != m->h[m->n - 1].until)
            return fail(P_MODEL, seed, idx, step, "the hold's expiry is not now + timeout");
    }
    if (d.remaining != r->limit - live_units(m, t))
        return fail(P_MODEL, seed, idx, step, "remaining is not the model's");
    return true;
}

static bool release_step(const sl_rule_t *r, unsigned char *st, model_t *m, prng_t *g, int64_t now,
                         uint64_t seed, long idx, int step)
{
    static unsigned char before[PROP_STATE_WORDS * 8];
    int pick = m->n > 0 && prng_chance(g, 80) ? (int)prng_range(g, 0, m->n - 1) : -1;
    uint64_t id = pick >= 0 ? m->h[pick].id : prng_next(g) & ((UINT64_C(1) << 48) - 1);
    int64_t t = now > m->latest ? now : m->latest;
    bool live = pick >= 0 && !m->h[pick].released && m->h[pick].until > t;
    int64_t u = live_units(m, t);
    memcpy(before, st, r->state_size);
    sl_decision_t d;
    int rc = sl_release(r, st, id, now, &d, NULL);
    checked[P_RELEASE]++;
    if (pick < 0 && rc == SL_OK)
        return fail(P_RELEASE, seed, idx, step, "a made-up id released a hold");
    if (pick < 0)
        live = false;
    if ((rc == SL_OK) != live)
        return fail(P_RELEASE, seed, idx, step, "released otherwise than the model");
    if (!live && (rc != SL_EHOLD || memcmp(before, st, r->state_size) != 0))
        return fail(P_RELEASE, seed, idx, step, "a refused release changed the state");
    if (live) {
        m->h[pick].released = true;
        m->latest = t;
        if (sl_in_flight(r, st, t) != u - m->h[pick].cost)
            return fail(P_RELEASE, seed, idx, step, "a release freed other than its units");
    }
    return true;
}

static void run_case(uint64_t seed, long idx)
{
    prng_t g = prop_case_prng(seed, 0, idx);
    sl_rule_t r = gen_rule(&g, SL_CONCURRENCY, false);
    unsigned char st[PROP_STATE_WORDS * 8] = {0};
    model_t m = {.n = 0, .latest = 0};
    int64_t now = PROP_START, q = gen_quantum(&g, &r);
    for (int i = 0; i < STEPS && m.n < STEPS; i++) {
        now = prng_chance(&g, 10) ? now - prng_range(&g, 0, r.window_ns) : now + gen_gap(&g, &r, q);
        bool ok = prng_chance(&g, 60) ? acquire_step(&r, st, &m, &g, now, seed, idx, i)
                                      : release_step(&r, st, &m, &g, now, seed, idx, i);
        if (!ok)
            return;
        int64_t t = now > m.latest ? now : m.latest;
        int64_t later = t + prng_range(&g, 0, 2 * r.window_ns);
        checked[P_LIMIT]++;
        if (sl_in_flight(&r, st, t) > r.limit) {
            fail(P_LIMIT, seed, idx, i, "more than the limit held");
            return;
        }
        checked[P_EXPIRY]++;
        if (sl_in_flight(&r, st, later) != live_units(&m, later)) {
            fail(P_EXPIRY, seed, idx, i, "units held later are not the model's live holds");
            return;
        }
    }
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 3000);
    clock_t t0 = clock();
    printf("prop_holds: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases\n", seed, cases);
    for (long i = 0; i < cases; i++)
        run_case(seed, i);
    long total = prop_report(P_COUNT, names, claims, checked, failed);
    printf("prop_holds: %s in %.1f s cpu\n", total ? "FAILED" : "passed",
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    return total ? 1 : 0;
}
