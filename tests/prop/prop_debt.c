/*
 * prop_debt.c - seeded property tests of max_debt (sl_settle(), include/sluice/sluice.h), for the
 * six algorithms: a key's debt is bounded by its rule's max_debt, and "debt" means what the
 * decisions say it means.
 *
 * Each case: a random rule (max_debt the default, 0, or random up to twice the capacity) and a
 * random history on one key at times that sometimes step back: decisions of random costs, settles
 * that give back and settles that charge past the limit (up to INT64_MAX now and then).
 *
 *   bound   a settle that charges is refused (SL_EDEBT) exactly when the debt it would leave,
 *           as predicted before it (the algorithm's debt of the charge), passes max_debt; a
 *           refused settle leaves the state byte for byte and reports a peek; an accepted one
 *           leaves the key owing what was predicted, never more than max_debt.
 *   meaning the debt is what a decision sees: at random later times the key owes nothing
 *           exactly when a peek is allowed (rules without max_delay, which admits a peek within
 *           its delay), and the debt of a larger charge is no smaller.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm,
 * default 10000). Exit status 0 when every property held, 1 otherwise.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "sluice/sluice.h"

#include "prop/gen.h"

#define STEPS           80
#define MAX_FAIL_PRINTS 5

enum prop { P_BOUND, P_MEANING, P_COUNT };

static const char *const prop_names[P_COUNT] = {"bound", "meaning"};

static const char *const prop_claims[P_COUNT] = {
    "a settle is refused exactly when it would leave the key owing more than max_debt, and then "
    "changes nothing",
    "a key owes nothing exactly when a peek is allowed; a larger charge owes no less",
};

static const sl_algorithm_t algorithms[] = {
    SL_FIXED_WINDOW, SL_SLIDING_LOG, SL_SLIDING_WINDOW, SL_SLIDING_BUCKETS,
    SL_TOKEN_BUCKET, SL_GCRA,        SL_CONCURRENCY,
};

typedef struct run {
    uint64_t seed;
    long checked[P_COUNT];
    long failed[P_COUNT];
    long refused, taken, at_bound, owing;
} run_t;

typedef struct pcase {
    run_t *run;
    sl_rule_t rule;
    long idx;
    bool printed;
} pcase_t;

static void failf(pcase_t *c, enum prop p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void failf(pcase_t *c, enum prop p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    prop_vfail(&c->run->failed[p], MAX_FAIL_PRINTS, prop_names[p], &c->rule, NULL, c->idx,
               c->run->seed, &c->printed, fmt, ap);
    va_end(ap);
}

/* The key's debt after a charge of cost at now (the algorithm's own measure). */
static int64_t debt(const sl_rule_t *rule, const void *state, int64_t cost, int64_t now)
{
    return core_ops(rule)->debt(rule, state, cost, core_clamp_now(now));
}

/* A settle that charges: checked against its prediction. False after a failure. */
static bool charge(pcase_t *c, unsigned char *state, int64_t reserved, int64_t actual, int64_t now,
                   int step)
{
    const sl_rule_t *rule = &c->rule;
    static unsigned char before[PROP_STATE_WORDS * 8];
    memcpy(before, state, rule->state_size);
    const int64_t predicted = debt(rule, state, actual - reserved, now);
    sl_decision_t d, peek;
    int rc = sl_settle(rule, state, reserved, actual, now, now, &d);
    if ((rc == SL_EDEBT) != (predicted > rule->max_debt)) {
        failf(c, P_BOUND,
              "step %d: charge %" PRId64 " predicted a debt of %" PRId64 " (max_debt %" PRId64
              ") but the settle returned %d",
              step, actual - reserved, predicted, rule->max_debt, rc);
        return false;
    }
    if (rc == SL_EDEBT) {
        c->run->refused++;
        peek = prop_decide_copy(rule, state, 0, now);
        if (memcmp(before, state, rule->state_size) != 0 || !decision_eq(&d, &peek)) {
            failf(c, P_BOUND,
                  "step %d: a refused settle changed the state or did not report "
                  "a peek",
                  step);
            return false;
        }
        return true;
    }
    c->run->taken++;
    c->run->at_bound += predicted == rule->max_debt && predicted > 0;
    int64_t after = debt(rule, state, 0, now);
    if (rc != SL_OK || after != predicted || after > rule->max_debt) {
        failf(c, P_BOUND,
              "step %d: a charge predicted to owe %" PRId64 " owes %" PRId64 " (max_debt %" PRId64
              ", rc %d)",
              step, predicted, after, rule->max_debt, rc);
        return false;
    }
    return true;
}

/* At random times from now on: owing nothing is a peek allowed; more charge, no less debt. */
static bool meaning(pcase_t *c, prng_t *rng, const unsigned char *state, int64_t now, int step)
{
    const sl_rule_t *rule = &c->rule;
    for (int k = 0; k < 4; k++) {
        int64_t at = now + (k == 0 ? 0 : prng_range(rng, 0, 2 * rule->window_ns));
        int64_t owed = debt(rule, state, 0, at), more = prng_range(rng, 1, rule->capacity + 2);
        c->run->owing += owed > 0;
        if (debt(rule, state, more, at) < owed) {
            failf(c, P_MEANING, "step %d: a charge of %" PRId64 " owes less than none", step, more);
            return false;
        }
        if (rule->max_delay_ns == 0 &&
            (owed == 0) != prop_decide_copy(rule, state, 0, at).allowed) {
            failf(c, P_MEANING,
                  "step %d: at now + %" PRId64 " the key owes %" PRId64 " but a peek is %s", step,
                  at - now, owed, owed == 0 ? "refused" : "allowed");
            return false;
        }
    }
    return true;
}

static void run_case(run_t *run, sl_algorithm_t alg, long idx)
{
    prng_t rng = prop_case_prng(run->seed, (int)alg, idx);
    pcase_t c = {run, gen_rule(&rng, alg, true), idx, false};
    int p = (int)prng_range(&rng, 0, 2);
    c.rule.max_debt = p == 0 ? SL_DEFAULT : p == 1 ? 0 : prng_range(&rng, 0, 2 * c.rule.capacity);
    if (sl_rule_prepare(&c.rule) != SL_OK) {
        abort();
    }
    const sl_rule_t *rule = &c.rule;
    uint64_t state[PROP_STATE_WORDS] = {0};
    const int64_t q = gen_quantum(&rng, rule);
    int64_t now = PROP_START, max_now = now;
    run->checked[P_BOUND]++;
    run->checked[P_MEANING]++;
    for (int i = 0; i < STEPS; i++) {
        now = prng_chance(&rng, 5) ? max_now - prng_range(&rng, 0, rule->window_ns)
                                   : max_now + gen_gap(&rng, rule, q);
        max_now = now > max_now ? now : max_now;
        int r = (int)prng_range(&rng, 0, 99);
        sl_decision_t d;
        if (r < 50) {
            sl_decide(rule, state, gen_cost(&rng, rule), now, &d);
        } else if (r < 65) {
            sl_settle(rule, state, prng_range(&rng, 1, rule->capacity), 0, now, now, &d);
        } else {
            int64_t reserved = prng_range(&rng, 0, rule->capacity);
            int64_t actual = prng_chance(&rng, 5)
                                 ? INT64_MAX
                                 : reserved + prng_range(&rng, 1, 2 * rule->capacity + 2);
            if (!charge(&c, (unsigned char *)state, reserved, actual, now, i)) {
                return;
            }
        }
        if (!meaning(&c, &rng, (const unsigned char *)state, max_now, i)) {
            return;
        }
    }
}

int main(void)
{
    run_t run;
    memset(&run, 0, sizeof(run));
    run.seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 10000);
    clock_t t0 = clock();
    printf("prop_debt: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases per algorithm\n",
           run.seed, cases);
    for (size_t a = 0; a < sizeof(algorithms) / sizeof(algorithms[0]); a++) {
        for (long i = 0; i < cases; i++) {
            run_case(&run, algorithms[a], i);
        }
    }
    long total = prop_report(P_COUNT, prop_names, prop_claims, run.checked, run.failed);
    printf("charges refused %ld, taken %ld (%ld exactly at max_debt); keys seen owing %ld "
           "times\n",
           run.refused, run.taken, run.at_bound, run.owing);
    if (cases >= 1000 && (run.refused == 0 || run.at_bound == 0 || run.owing == 0)) {
        printf("the charges never met the bound, or never reached it exactly\n");
        total++;
    }
    printf("prop_debt: %s in %.1f s cpu (seed 0x%" PRIx64 ")\n", total ? "FAILED" : "passed",
           (double)(clock() - t0) / CLOCKS_PER_SEC, run.seed);
    return total ? 1 : 0;
}
