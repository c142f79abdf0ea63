/*
 * prop_adaptive.c - seeded property tests of adaptive concurrency limits (src/core/adaptive.c,
 * sl_release_sample()), over the simulated service of bench/adaptive/sim.h (a latency that
 * grows past a capacity knee; the knee moved mid-run) and over random release sequences:
 *
 *   settles   the limit's mean over the last third of the first phase is within +-25 % of the
 *             knee (offered loads 1.5x to 4x the capacity; knees 40..200: Vegas keeps a queue
 *             of 3 to 6 units at these sizes, so a knee below about 30 settles higher)
 *   recovers  and over the last third of the second phase, after the knee moved (up or down,
 *             to 40..200), within +-25 % of the new knee
 *   bounds    every limit the simulation sees, and every limit after a random release, is
 *             within [min_limit, max_limit], and the state always checks
 *   silent    a release without a latency or a drop, one of a hold the key does not hold, and
 *             a release with no sample at all leave the limit and the adaptive bytes unchanged
 *   same      two states fed the same samples at the same times hold the same bytes
 *
 * Environment: SLUICE_SEED, SLUICE_PROP_CASES (default 16 simulations, 400 sequences).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "../../bench/adaptive/sim.h"
#include "prop/gen.h"

#define MS        SL_NS_PER_MS
#define STEPS     300
#define MAX_LIMIT 64 /* the random sequences' max_limit */

enum prop { P_SETTLES, P_RECOVERS, P_BOUNDS, P_SILENT, P_SAME, P_COUNT };
static const char *const names[P_COUNT] = {"settles", "recovers", "bounds", "silent", "same"};
static const char *const claims[P_COUNT] = {
    "the limit settles within +-25 % of the service's knee",
    "after the knee moves, it settles within +-25 % of the new knee",
    "the limit never leaves [min_limit, max_limit]; the state always checks",
    "a release without LATENCY or DROPPED (or of no live hold) leaves the limit unchanged",
    "the same samples at the same times give the same state",
};
static long checked[P_COUNT], failed[P_COUNT];

static void note(enum prop p, bool ok, const char *what, uint64_t seed, long c)
{
    checked[p]++;
    if (!ok) {
        failed[p]++;
        if (failed[p] <= 3)
            printf("  %s failed (SLUICE_SEED=%" PRIu64 " case %ld): %s\n", names[p], seed, c, what);
    }
}

typedef struct watch {
    int64_t min, max, phase_ns;
    int64_t sum[2], count[2];
    bool out_of_bounds;
} watch_t;

static void observe(const sim_obs_t *o, void *arg)
{
    watch_t *w = arg;
    w->out_of_bounds |= o->limit < w->min || o->limit > w->max;
    int ph = o->t_ns < w->phase_ns ? 0 : 1;
    if (o->t_ns - (int64_t)ph * w->phase_ns >= w->phase_ns * 2 / 3) {
        w->sum[ph] += o->limit;
        w->count[ph]++;
    }
}

static bool within(int64_t sum, int64_t count, int64_t knee)
{
    /* mean within 25 % of the knee: |sum / count - knee| <= knee / 4, in integers */
    int64_t d = sum - knee * count;
    return count > 0 && 4 * (d < 0 ? -d : d) <= knee * count;
}

static void simulation(uint64_t seed, long c)
{
    prng_t r = prop_case_prng(seed, 1, c);
    sl_adaptive_algorithm_t alg = c % 2 == 0 ? SL_ADAPTIVE_AIMD : SL_ADAPTIVE_VEGAS;
    sim_cfg_t cfg = {.knee = prng_range(&r, 40, 200), .knee2 = prng_range(&r, 40, 200)};
    cfg.base_ns = prng_range(&r, 2, 20) * MS;
    int64_t phase_ns = 1000 * cfg.base_ns; /* enough windows for AIMD's +1 from 20 to 200 */
    cfg.move_ns = phase_ns;
    cfg.end_ns = 2 * phase_ns;
    cfg.every_ns = cfg.base_ns * 5;
    cfg.seed = prng_next(&r);
    int64_t cap = cfg.knee > cfg.knee2 ? cfg.knee : cfg.knee2;
    int64_t load_pct = prng_range(&r, 150, 400);
    cfg.gap_ns = cfg.base_ns * 100 / (load_pct * cap);
    cfg.gap_ns = cfg.gap_ns < 1 ? 1 : cfg.gap_ns;
    cfg.deadline_ns = alg == SL_ADAPTIVE_AIMD ? cfg.base_ns * 12 / 10 : 0;
    sl_rule_init(&cfg.rule, SL_CONCURRENCY, 20, 600 * SL_NS_PER_SEC);
    cfg.rule.adaptive = (sl_adaptive_t){.algorithm = alg,
                                        .min_limit = prng_range(&r, 1, 20),
                                        .max_limit = prng_range(&r, 800, 1000),
                                        .timeout_ns = cfg.deadline_ns};
    if (sl_rule_prepare(&cfg.rule) != SL_OK) {
        note(P_BOUNDS, false, "the rule did not prepare", seed, c);
        return;
    }
    watch_t w = {.min = cfg.rule.adaptive.min_limit,
                 .max = cfg.rule.adaptive.max_limit,
                 .phase_ns = phase_ns};
    if (sim_run(&cfg, observe, &w) != 0) {
        note(P_BOUNDS, false, "a library call failed in the simulation", seed, c);
        return;
    }
    char what[160];
    snprintf(what, sizeof what, "%s knee %" PRId64 " mean %" PRId64 " (load %" PRId64 "%%)",
             alg == SL_ADAPTIVE_AIMD ? "aimd" : "vegas", cfg.knee,
             w.count[0] ? w.sum[0] / w.count[0] : -1, load_pct);
    note(P_SETTLES, within(w.sum[0], w.count[0], cfg.knee), what, seed, c);
    snprintf(what, sizeof what, "%s knee %" PRId64 " -> %" PRId64 " mean %" PRId64,
             alg == SL_ADAPTIVE_AIMD ? "aimd" : "vegas", cfg.knee, cfg.knee2,
             w.count[1] ? w.sum[1] / w.count[1] : -1);
    note(P_RECOVERS, within(w.sum[1], w.count[1], cfg.knee2), what, seed, c);
    note(P_BOUNDS, !w.out_of_bounds, "a limit outside [min_limit, max_limit]", seed, c);
}

/* A random sample: a latency (or none), sometimes dropped, sometimes nothing at all. */
static sl_sample_t gen_sample(prng_t *r)
{
    sl_sample_t s = {-1, false};
    if (prng_chance(r, 80))
        s.latency_ns =
            prng_range(r, 0, 3) == 0 ? prng_range(r, 0, 1000) : prng_range(r, 1, 200) * MS;
    s.dropped = prng_chance(r, 15);
    return s;
}

static void sequence(uint64_t seed, long c)
{
    prng_t r = prop_case_prng(seed, 2, c);
    sl_rule_t rule;
    sl_rule_init(&rule, SL_CONCURRENCY, prng_range(&r, 1, 32), 10 * SL_NS_PER_SEC);
    rule.adaptive =
        (sl_adaptive_t){.algorithm = prng_chance(&r, 50) ? SL_ADAPTIVE_AIMD : SL_ADAPTIVE_VEGAS,
                        .min_limit = prng_range(&r, 1, rule.limit),
                        .max_limit = prng_range(&r, rule.limit, MAX_LIMIT)};
    if (rule.adaptive.algorithm == SL_ADAPTIVE_VEGAS)
        rule.adaptive.probe = prng_range(&r, 5, 10);
    else
        rule.adaptive.timeout_ns = prng_range(&r, 1, 100) * MS;
    if (sl_rule_prepare(&rule) != SL_OK) {
        note(P_BOUNDS, false, "the rule did not prepare", seed, c);
        return;
    }
    static unsigned char a[48 + 16 * MAX_LIMIT], b[48 + 16 * MAX_LIMIT];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    uint64_t ids[MAX_LIMIT];
    int n = 0;
    int64_t t = SIM_T0;
    for (int step = 0; step < STEPS; step++) {
        t += prng_range(&r, 0, 20) * MS;
        sl_decision_t d, e;
        sl_hold_t h, g;
        if (n < MAX_LIMIT && (n == 0 || prng_chance(&r, 50))) {
            sl_acquire(&rule, a, 1, 0, t, 7, &d, &h);
            sl_acquire(&rule, b, 1, 0, t, 7, &e, &g);
            if (d.allowed)
                ids[n++] = h.id;
            note(P_BOUNDS, d.limit == sl_limit_now(&rule, a), "the decision's limit", seed, c);
            continue;
        }
        int kind = (int)prng_range(&r, 0, 3); /* 0, 1: a live hold with a sample; 2: none; 3:
                                                 a made-up id with a sample */
        int i = (int)prng_range(&r, 0, n - 1);
        uint64_t id = kind == 3 ? prng_next(&r) & ((UINT64_C(1) << 48) - 1) : ids[i];
        sl_sample_t s = kind == 2 ? (sl_sample_t){-1, false} : gen_sample(&r);
        const sl_sample_t *sp = kind == 2 && prng_chance(&r, 50) ? NULL : &s;
        unsigned char before[16];
        memcpy(before, a + 32, 16);
        int64_t limit_before = sl_limit_now(&rule, a);
        int rc = sl_release_sample(&rule, a, id, t, sp, &d, NULL);
        sl_release_sample(&rule, b, id, t, sp, &e, NULL);
        if (rc == SL_OK && kind != 3) {
            ids[i] = ids[--n];
        }
        bool silent = kind == 2 || rc != SL_OK || (s.latency_ns < 0 && !s.dropped);
        if (silent)
            note(P_SILENT,
                 memcmp(before, a + 32, 16) == 0 && sl_limit_now(&rule, a) == limit_before,
                 "a silent release moved the adaptive bytes", seed, c);
        int64_t lim = sl_limit_now(&rule, a);
        note(P_BOUNDS,
             lim >= rule.adaptive.min_limit && lim <= rule.adaptive.max_limit && d.limit == lim &&
                 sl_state_check(&rule, a) == SL_OK,
             "limit out of bounds, not the decision's, or a state that fails its check", seed, c);
        note(P_SAME, memcmp(a, b, sl_state_size(&rule)) == 0, "two states differ", seed, c);
    }
}

int main(void)
{
    uint64_t seed = prop_seed();
    long sims = prop_env_long("SLUICE_PROP_CASES", 16);
    long seqs = prop_env_long("SLUICE_PROP_CASES", 400);
    printf("prop_adaptive: seed %" PRIu64 "\n", seed);
    for (long c = 0; c < sims; c++)
        simulation(seed, c);
    for (long c = 0; c < seqs; c++)
        sequence(seed, c);
    return prop_report(P_COUNT, names, claims, checked, failed) == 0 ? 0 : 1;
}
