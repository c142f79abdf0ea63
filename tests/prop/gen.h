/*
 * gen.h - shared by the property tests and tools in tests/prop/: a seeded generator
 * (splitmix64), the seed from SLUICE_SEED, random rules and random arrival times.
 *
 * Every case (one rule and one arrival sequence) draws from its own generator, seeded from the
 * run's seed, the algorithm and the case number, so one failing case can be replayed alone
 * (SLUICE_SEED=<seed> SLUICE_CASE=<algorithm>:<case>) without running the others.
 *
 * Header-only (static functions) so each prop program stays one translation unit.
 */
#ifndef SLUICE_TESTS_PROP_GEN_H
#define SLUICE_TESTS_PROP_GEN_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define PROP_DEFAULT_SEED UINT64_C(0x5117ce2024)
#define PROP_START        INT64_C(1700000000000000000) /* 2023-11-14, ns since the epoch */
#define PROP_STATE_WORDS  64   /* 512 bytes: enough for every rule made here */
#define PROP_PACKED_BYTES 1024 /* sl_state_packed_max() of every rule made here */

typedef struct prng {
    uint64_t s;
} prng_t;

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit word of state, full period. */
static inline uint64_t prng_next(prng_t *r)
{
    uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (hi >= lo, hi - lo < 2^63); the modulo bias is irrelevant here. */
static inline int64_t prng_range(prng_t *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(prng_next(r) % span);
}

static inline bool prng_chance(prng_t *r, int percent)
{
    return prng_range(r, 0, 99) < percent;
}

/* The run's seed: SLUICE_SEED (decimal or 0x hex) or the fixed default. */
static inline uint64_t prop_seed(void)
{
    const char *env = getenv("SLUICE_SEED");
    if (env != NULL && *env != '\0') {
        return strtoull(env, NULL, 0);
    }
    return PROP_DEFAULT_SEED;
}

/* An environment variable as a positive number, or `def`. */
static inline long prop_env_long(const char *name, long def)
{
    const char *env = getenv(name);
    if (env != NULL && *env != '\0') {
        long v = strtol(env, NULL, 0);
        if (v > 0) {
            return v;
        }
    }
    return def;
}

/* Prints each claim's line ("name ok|FAIL: N cases, F failed — claim", the names padded to the
 * longest) and returns the failures of them all. */
static inline long prop_report(int n, const char *const *names, const char *const *claims,
                               const long *checked, const long *failed)
{
    int width = 0;
    for (int p = 0; p < n; p++) {
        int len = (int)strlen(names[p]);
        width = len > width ? len : width;
    }
    long total = 0;
    for (int p = 0; p < n; p++) {
        printf("%-*s %s: %ld cases, %ld failed — %s\n", width, names[p], failed[p] ? "FAIL" : "ok",
               checked[p], failed[p], claims[p]);
        total += failed[p];
    }
    return total;
}

/* The generator of one case. */
static inline prng_t prop_case_prng(uint64_t seed, int algorithm, long case_idx)
{
    prng_t r = {seed ^ ((uint64_t)algorithm << 56) ^
                ((uint64_t)case_idx * UINT64_C(0x2545f4914f6cdd1d))};
    (void)prng_next(&r);
    return r;
}

/* A window of a few ms up to a few seconds, sometimes a round number, sometimes any ns. */
static inline int64_t gen_window(prng_t *r)
{
    switch (prng_range(r, 0, 3)) {
    case 0:
        return prng_range(r, 1, 5) * SL_NS_PER_MS;
    case 1:
        return prng_range(r, 1, 999) * SL_NS_PER_MS;
    case 2:
        return prng_range(r, SL_NS_PER_MS, 3 * SL_NS_PER_SEC);
    default:
        return prng_range(r, 1, 5) * SL_NS_PER_SEC;
    }
}

/*
 * A random valid rule for `alg`: limit 1..20, a window from gen_window(), buckets dividing the
 * window, burst at its default or random, max_delay 0 or random (when allow_delay), and debt
 * unbounded (max_debt SL_COUNT_MAX: the properties of debt hold whatever a settle charges; the
 * bound has a property of its own). Aborts the program if sl_rule_prepare() refuses it, since
 * every rule made here is valid by the contract.
 */
static inline sl_rule_t gen_rule(prng_t *r, sl_algorithm_t alg, bool allow_delay)
{
    sl_rule_t rule;
    memset(&rule, 0, sizeof(rule));
    rule.algorithm = alg;
    rule.limit = prng_range(r, 1, 20);
    rule.window_ns = gen_window(r);
    rule.burst = SL_DEFAULT;
    rule.buckets = SL_DEFAULT;
    rule.max_delay_ns = 0;
    rule.max_debt = SL_COUNT_MAX;
    if (alg == SL_SLIDING_BUCKETS) {
        int64_t k = prng_chance(r, 20) ? SL_BUCKETS_DEFAULT : prng_range(r, 1, 16);
        int64_t g = (rule.window_ns + k - 1) / k;
        rule.window_ns = g * k;
        rule.buckets = prng_chance(r, 50) && k == SL_BUCKETS_DEFAULT ? SL_DEFAULT : k;
    }
    if (alg == SL_TOKEN_BUCKET || alg == SL_GCRA) {
        if (prng_chance(r, 70)) {
            rule.burst = prng_range(r, alg == SL_TOKEN_BUCKET ? 1 : 0, 20);
        }
        if (allow_delay && prng_chance(r, 50)) {
            rule.max_delay_ns = prng_range(r, 1, 2 * rule.window_ns);
        }
    }
    int rc = sl_rule_prepare(&rule);
    if (rc != SL_OK) {
        fprintf(stderr,
                "gen_rule: sl_rule_prepare refused a valid rule: %s (alg %d limit %" PRId64
                " window %" PRId64 " burst %" PRId64 " buckets %" PRId64 " max_delay %" PRId64
                ")\n",
                sl_strerror(rc), (int)alg, rule.limit, rule.window_ns, rule.burst, rule.buckets,
                rule.max_delay_ns);
        exit(2);
    }
    return rule;
}

/* A time quantum for one case: 1 ns (any time) or a coarse step so that equal times and exact
 * window / interval boundaries happen often. */
static inline int64_t gen_quantum(prng_t *r, const sl_rule_t *rule)
{
    int64_t q;
    switch (prng_range(r, 0, 4)) {
    case 0:
        q = 1;
        break;
    case 1:
        q = rule->window_ns / prng_range(r, 1, 40);
        break;
    case 2:
        q = rule->window_ns / rule->limit;
        break;
    case 3:
        q = rule->bucket_ns > 0 ? rule->bucket_ns : rule->interval_ns;
        break;
    default:
        q = SL_NS_PER_MS;
        break;
    }
    return q > 0 ? q : 1;
}

/* The gap to the next arrival: often 0 (a burst at one instant), often a few quanta, sometimes
 * most of a window, now and then long enough for the key to go fresh. */
static inline int64_t gen_gap(prng_t *r, const sl_rule_t *rule, int64_t q)
{
    int64_t w = rule->window_ns;
    int p = (int)prng_range(r, 0, 99);
    if (p < 25) {
        return 0;
    }
    if (p < 65) {
        return q * prng_range(r, 1, 4);
    }
    if (p < 88) {
        return prng_range(r, 1, w / 3 + 1);
    }
    if (p < 97) {
        return prng_range(r, w / 2, 2 * w);
    }
    return prng_range(r, 2 * w, 6 * w);
}

/* A cost: mostly 1, sometimes a peek, otherwise anything up to capacity + 2. */
static inline int64_t gen_cost(prng_t *r, const sl_rule_t *rule)
{
    int p = (int)prng_range(r, 0, 99);
    if (p < 45) {
        return 1;
    }
    if (p < 55) {
        return 0;
    }
    return prng_range(r, 0, rule->capacity + 2);
}

static inline void print_rule(FILE *f, const sl_rule_t *rule)
{
    fprintf(f,
            "rule: %s limit=%" PRId64 " window_ns=%" PRId64 " burst=%" PRId64 " buckets=%" PRId64
            " max_delay_ns=%" PRId64 " | interval_ns=%" PRId64 " tolerance_ns=%" PRId64
            " bucket_ns=%" PRId64 " capacity=%" PRId64 "\n",
            sl_algorithm_name(rule->algorithm), rule->limit, rule->window_ns, rule->burst,
            rule->buckets, rule->max_delay_ns, rule->interval_ns, rule->tolerance_ns,
            rule->bucket_ns, rule->capacity);
}

static inline void print_decision(FILE *f, const sl_decision_t *d)
{
    fprintf(f,
            "allowed=%d limit=%" PRId64 " remaining=%" PRId64 " retry_after=%" PRId64
            " reset_after=%" PRId64 " delay=%" PRId64,
            d->allowed ? 1 : 0, d->limit, d->remaining, d->retry_after_ns, d->reset_after_ns,
            d->delay_ns);
}

/* token_bucket and gcra: the algorithms that meter (a TAT against a tolerance) rather than
 * count. */
static inline bool prop_is_meter(const sl_rule_t *rule)
{
    return rule->algorithm == SL_TOKEN_BUCKET || rule->algorithm == SL_GCRA;
}

#define PROP_COPY_WORDS 1024 /* 8 KiB: the largest state prop_decide_copy() takes */

/* What sl_decide() answers for `cost` at `now` on the key's state, leaving the state as it is
 * (the decision runs on a copy of rule->state_size bytes). */
static inline sl_decision_t prop_decide_copy(const sl_rule_t *rule, const void *state, int64_t cost,
                                             int64_t now)
{
    uint64_t copy[PROP_COPY_WORDS];
    sl_decision_t d;
    if (rule->state_size > sizeof copy) {
        fprintf(stderr, "prop_decide_copy: a state of %u bytes\n", (unsigned)rule->state_size);
        abort();
    }
    memcpy(copy, state, rule->state_size);
    sl_decide(rule, copy, cost, now, &d);
    return d;
}

/*
 * Reports a failed check: counts it in *failed and prints the first max_prints of each
 * property, as "FAIL <prop>: <algorithm> case <idx>: <message>"; the first time a case fails
 * (*printed false), also the seed and its rule (and `to`, a second rule, unless NULL).
 */
static inline void prop_vfail(long *failed, long max_prints, const char *prop,
                              const sl_rule_t *rule, const sl_rule_t *to, long idx, uint64_t seed,
                              bool *printed, const char *fmt, va_list ap)
{
    if (++*failed > max_prints) {
        return;
    }
    fprintf(stderr, "FAIL %s: %s case %ld: ", prop, sl_algorithm_name(rule->algorithm), idx);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    if (!*printed) {
        fprintf(stderr, "  seed 0x%" PRIx64 "; %s", seed, to != NULL ? "from " : "");
        print_rule(stderr, rule);
        if (to != NULL) {
            fprintf(stderr, "  to ");
            print_rule(stderr, to);
        }
        *printed = true;
    }
}

static inline bool decision_eq(const sl_decision_t *a, const sl_decision_t *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after_ns == b->retry_after_ns && a->reset_after_ns == b->reset_after_ns &&
           a->delay_ns == b->delay_ns;
}

typedef struct prop_admission {
    int64_t t;    /* ns */
    int64_t cost; /* units */
} prop_admission_t;

typedef struct worst {
    int64_t units; /* most units in one window (t - W, t] */
    int64_t end;   /* t of that window */
    int64_t max_c; /* largest single cost admitted in it */
    long over_n;   /* windows (ending at an admission) holding more than N */
    long windows;  /* windows looked at */
} worst_t;

/* The window (t - W, t] with the most units, t at an admission; admissions sorted by t. Shared
 * by prop_sliding_window (the 2N - 1 bound) and tool_sw_error (the figures). */
static inline worst_t worst_window(const prop_admission_t *adm, int n, int64_t w, int64_t limit)
{
    worst_t out = {0, 0, 0, 0, 0};
    int64_t sum = 0;
    int lo = 0;
    for (int i = 0; i < n; i++) {
        sum += adm[i].cost;
        while (adm[lo].t <= adm[i].t - w) {
            sum -= adm[lo].cost;
            lo++;
        }
        if (i + 1 < n && adm[i + 1].t == adm[i].t) {
            continue; /* the window ending at t takes every admission at t */
        }
        out.windows++;
        if (sum > limit) {
            out.over_n++;
        }
        if (sum > out.units) {
            out.units = sum;
            out.end = adm[i].t;
            out.max_c = 0;
            for (int j = lo; j <= i; j++) {
                if (adm[j].cost > out.max_c) {
                    out.max_c = adm[j].cost;
                }
            }
        }
    }
    return out;
}

/* The checker must see a breach when there is one. */
#endif /* SLUICE_TESTS_PROP_GEN_H */
