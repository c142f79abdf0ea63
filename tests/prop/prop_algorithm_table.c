/*
 * prop_algorithm_table.c - seeded property tests that every row of the table of algorithms
 * (src/core/algorithms.h) says what its algorithm does: for every row, whatever it is (a row
 * added is tested with no change here), each capability it claims holds in every case, and each
 * one it does not claim is refused (leasing, a delay, a size that varies) or, where not claiming
 * it is a statement about behaviour, is seen to fail in some case of the run. Rules are made
 * from the row's own parameters and bounds.
 *
 *   refundable   From a random history, at t no earlier than it: a cost c <= a peek's remaining
 *                is admitted, then sl_refund(c, t, t) makes a peek report the remaining of
 *                before (denied: the remaining of after, nothing given back).
 *   leasable     sl_lease() at t grants at most a peek's remaining, the key then reports no more
 *                than that less what was granted, and sl_lease_return() of it all succeeds; some
 *                case grants units (denied: both refuse with SL_ELEASE, the state unchanged).
 *   exact        Random costs at random times: every decision is the true sliding window's (a
 *                cost admitted exactly when it and the units admitted in (t - W, t] are at most
 *                N) (denied: some case decides otherwise).
 *   aligned      A fresh key that takes its capacity at any time of window k refuses a unit at
 *                the window's last ns and admits its capacity again at window k + 1's first
 *                (denied: some case does otherwise).
 *   tokens       interval_ns is T = ceil(W / N), the capacity burst + capacity_extra; a key
 *                emptied at t refuses a unit at t + T - 1 and admits one at t + T (denied: some
 *                case does otherwise).
 *   delay        (max_delay taken) with max_delay = W, an emptied key admits a unit with a delay
 *                > 0 (not taken: sl_rule_prepare() refuses a max_delay with SL_EDELAY).
 *   approximate  A peek's remaining at s less the units admitted in (s, t] is at most a peek's
 *                remaining at t (the count never overstates what remains), and a settle may
 *                charge past the limit: the key then refuses a peek.
 *   variable     A fresh key needs fewer bytes than the rule's largest state and packs to fewer
 *                (denied: every state is rule->state_size bytes, packed as such).
 *
 * `prop_algorithm_table --lies` shows that the properties can fail: for each row and property
 * (but approximate) it takes the row's claim as its opposite, and some case must then fail.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per row and
 * property, default 3000; --lies: at most 500). Exit status 0 when every property held (--lies:
 * every lie was caught), 1 otherwise.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/algorithms.h"
#include "core/core.h"
#include "sluice/sluice.h"

#include "prop/gen.h"

#define STEPS           40 /* decisions of one history or schedule */
#define MAX_FAIL_PRINTS 5

enum prop {
    P_REFUNDABLE,
    P_LEASABLE,
    P_EXACT,
    P_ALIGNED,
    P_TOKENS,
    P_DELAY,
    P_APPROXIMATE,
    P_VARIABLE,
    P_COUNT
};

static const char *const prop_names[P_COUNT] = {
    "refundable", "leasable", "exact", "aligned", "tokens", "delay", "approximate", "variable",
};

static const char *const prop_claims[P_COUNT] = {
    "a refund at the decision's time gives its units back (claimed) or nothing (not)",
    "a lease grants within a peek and returns (claimed), or is refused (not)",
    "decides as the true sliding window (claimed), or differs in some case (not)",
    "the next aligned window admits the capacity again (claimed), or not in some case",
    "refills one unit per T = ceil(W / N) from empty (claimed), or not in some case",
    "max_delay admits an emptied key's unit after a delay (taken), or is refused (not)",
    "a count never overstates what remains later, and debt can be charged",
    "a fresh key takes and packs to fewer bytes than the largest state (claimed), or not",
};

/* The capability of each property (0: a parameter's, max_delay). */
static const uint32_t prop_caps[P_COUNT] = {
    CORE_CAP_REFUNDABLE,  CORE_CAP_LEASABLE, CORE_CAP_EXACT, CORE_CAP_ALIGNED, CORE_CAP_TOKENS, 0,
    CORE_CAP_APPROXIMATE, CORE_CAP_VARIABLE,
};

typedef struct run {
    uint64_t seed;
    long checked[P_COUNT];
    long failed[P_COUNT];
    long counter[CORE_ALGORITHM_SLOTS][P_COUNT]; /* cases showing a denied behaviour's absence */
    long granted[CORE_ALGORITHM_SLOTS];          /* leasable cases that granted units */
    long skipped;
} run_t;

typedef struct pcase {
    run_t *run;
    enum prop prop;
    sl_rule_t rule;
    long idx;
    bool printed;
} pcase_t;

static long max_prints = MAX_FAIL_PRINTS; /* 0 under --lies: the failures are the point */

static void failf(pcase_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void failf(pcase_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    prop_vfail(&c->run->failed[c->prop], max_prints, prop_names[c->prop], &c->rule, NULL, c->idx,
               c->run->seed, &c->printed, fmt, ap);
    va_end(ap);
}

/* --lies: the row and property whose claim the test takes as the opposite of the table's. */
static const core_algorithm_t *lie_row;
static enum prop lie_prop;

static bool claims(const core_algorithm_t *row, enum prop p)
{
    bool claimed = p == P_DELAY ? row->max_delay.taken : (row->caps & prop_caps[p]) != 0;
    return row == lie_row && p == lie_prop ? !claimed : claimed;
}

/* A random valid rule of the row, from its own parameters: limit 1..20 (within its bound), a
 * window from gen_window() (a multiple of the buckets when it takes them), burst and buckets
 * within their bounds or at their defaults, max_delay random when `delay` and it takes one. */
static sl_rule_t gen_row_rule(prng_t *rng, const core_algorithm_t *row, bool delay)
{
    sl_rule_t r = {.algorithm = core_algorithm_id(row),
                   .limit = prng_range(rng, 1, 20 < row->limit_max ? 20 : row->limit_max),
                   .window_ns = gen_window(rng),
                   .burst = SL_DEFAULT,
                   .buckets = SL_DEFAULT,
                   .max_debt = SL_COUNT_MAX};
    if (row->buckets.taken) {
        int64_t hi = row->buckets.max < 16 ? row->buckets.max : 16;
        int64_t k = prng_range(rng, row->buckets.min, hi);
        r.window_ns = (r.window_ns + k - 1) / k * k;
        r.buckets = prng_chance(rng, 30) && r.window_ns % row->buckets.def == 0 ? SL_DEFAULT : k;
    }
    if (row->burst.taken && prng_chance(rng, 70))
        r.burst = prng_range(rng, row->burst.min, 20);
    if (row->max_delay.taken && delay && prng_chance(rng, 50))
        r.max_delay_ns = prng_range(rng, 1, 2 * r.window_ns);
    int rc = sl_rule_prepare(&r);
    if (rc != SL_OK) {
        fprintf(stderr, "gen_row_rule: %s refused a rule within its row: %s\n", row->name,
                sl_strerror(rc));
        exit(2);
    }
    return r;
}

/* Random decisions on `state` from `start` on, times never going back; returns the last. */
static int64_t history(const sl_rule_t *rule, prng_t *rng, uint64_t *state, int64_t start)
{
    int64_t q = gen_quantum(rng, rule), now = start;
    sl_decision_t d;
    for (int i = (int)prng_range(rng, 0, STEPS); i > 0; i--) {
        now += gen_gap(rng, rule, q);
        sl_decide(rule, state, gen_cost(rng, rule), now, &d);
    }
    return now;
}

static int64_t remaining_at(const sl_rule_t *rule, const uint64_t *state, int64_t t)
{
    return prop_decide_copy(rule, state, 0, t).remaining;
}

/* ---- the properties ------------------------------------------------------------------------ */

static void run_refundable(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    uint64_t s[PROP_STATE_WORDS] = {0};
    int64_t t = history(&c->rule, rng, s, PROP_START);
    t += gen_gap(rng, &c->rule, gen_quantum(rng, &c->rule));
    int64_t before = remaining_at(&c->rule, s, t);
    if (before < 1) {
        c->run->skipped++;
        return;
    }
    int64_t cost = prng_range(rng, 1, before);
    sl_decision_t d;
    sl_decide(&c->rule, s, cost, t, &d);
    if (!d.allowed) {
        failf(c, "a cost of %" PRId64 " within a peek's remaining %" PRId64 " was refused", cost,
              before);
        return;
    }
    int64_t after = d.remaining;
    sl_refund(&c->rule, s, cost, t, t, &d);
    int64_t want = claims(row, P_REFUNDABLE) ? before : after;
    if (d.remaining != want)
        failf(c, "after a refund of %" PRId64 ": remaining %" PRId64 ", expected %" PRId64, cost,
              d.remaining, want);
}

static void run_leasable(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    uint64_t s[PROP_STATE_WORDS] = {0}, was[PROP_STATE_WORDS];
    int64_t t = history(&c->rule, rng, s, PROP_START) + prng_range(rng, 0, c->rule.window_ns);
    int64_t room = row->caps & CORE_CAP_TOKENS ? c->rule.tolerance_ns - c->rule.interval_ns
                                               : c->rule.window_ns;
    if (room < 1) { /* a bucket of one unit has no room for a lease's time */
        c->run->skipped++;
        return;
    }
    int64_t lease_ns = prng_range(rng, 1, room < c->rule.window_ns ? room : c->rule.window_ns);
    int64_t before = remaining_at(&c->rule, s, t), want = prng_range(rng, 0, c->rule.capacity);
    memcpy(was, s, sizeof(s));
    sl_lease_t lease;
    sl_decision_t d;
    int rc = sl_lease(&c->rule, s, want, lease_ns, t, &lease);
    if (!claims(row, P_LEASABLE)) {
        sl_lease_t any = {.granted = 1, .at_ns = t, .until_ns = t + 1};
        int rc2 = sl_lease_return(&c->rule, s, &any, 1, t, &d);
        if (rc != SL_ELEASE || rc2 != SL_ELEASE || memcmp(was, s, sizeof(s)) != 0)
            failf(c, "claims no lease, yet lease: %s, return: %s, state changed: %d",
                  sl_strerror(rc), sl_strerror(rc2), memcmp(was, s, sizeof(s)) != 0);
        return;
    }
    if (rc != SL_OK || lease.granted < 0 || lease.granted > want || lease.granted > before) {
        failf(c,
              "lease of %" PRId64 " for %" PRId64 " ns with %" PRId64 " remaining: %s, "
              "granted %" PRId64,
              want, lease_ns, before, sl_strerror(rc), lease.granted);
        return;
    }
    c->run->granted[core_algorithm_id(row)] += lease.granted > 0;
    int64_t left = remaining_at(&c->rule, s, t);
    if (left > before - lease.granted)
        failf(c, "granted %" PRId64 " of %" PRId64 ", yet %" PRId64 " remain", lease.granted,
              before, left);
    rc = sl_lease_return(&c->rule, s, &lease, lease.granted, t, &d);
    if (rc != SL_OK)
        failf(c, "the return of the whole lease: %s", sl_strerror(rc));
}

/* The true sliding window's decision of cost at t, over the admissions (at[], units[]). */
static bool window_admits(const sl_rule_t *rule, const int64_t *at, const int64_t *units, int n,
                          int64_t cost, int64_t t)
{
    int64_t in = 0;
    for (int i = 0; i < n; i++)
        in += at[i] > t - rule->window_ns && at[i] <= t ? units[i] : 0;
    return in + cost <= rule->limit;
}

static void run_exact(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    uint64_t s[PROP_STATE_WORDS] = {0};
    int64_t at[STEPS], units[STEPS], q = gen_quantum(rng, &c->rule), t = PROP_START;
    int n = 0;
    for (int i = 0; i < STEPS; i++) {
        t += gen_gap(rng, &c->rule, q);
        int64_t cost = prng_range(rng, 1, c->rule.limit + 1);
        bool want = window_admits(&c->rule, at, units, n, cost, t);
        sl_decision_t d;
        sl_decide(&c->rule, s, cost, t, &d);
        if (d.allowed != want) {
            if (claims(row, P_EXACT))
                failf(c,
                      "step %d: a cost of %" PRId64 " at +%" PRId64 " ns %s, the sliding "
                      "window %s it",
                      i, cost, t - PROP_START, d.allowed ? "admitted" : "refused",
                      want ? "admits" : "refuses");
            c->run->counter[core_algorithm_id(row)][P_EXACT]++;
            return;
        }
        if (d.allowed) {
            at[n] = t;
            units[n++] = cost;
        }
    }
}

/* Whether a fresh key emptied at t refuses `probe` units at t1 and admits `again` at t2. */
static bool empties_then(const sl_rule_t *rule, int64_t t, int64_t t1, int64_t probe, int64_t t2,
                         int64_t again, bool *emptied)
{
    uint64_t s[PROP_STATE_WORDS] = {0};
    sl_decision_t d;
    sl_decide(rule, s, rule->capacity, t, &d);
    *emptied = d.allowed;
    bool refused = !prop_decide_copy(rule, s, probe, t1).allowed;
    return refused && prop_decide_copy(rule, s, again, t2).allowed;
}

static void run_aligned(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    const int64_t w = c->rule.window_ns;
    int64_t k = PROP_START / w + prng_range(rng, 0, 1000);
    int64_t t = k * w + (prng_chance(rng, 20) ? 0 : prng_range(rng, 0, w - 1));
    bool emptied;
    bool holds =
        empties_then(&c->rule, t, (k + 1) * w - 1, 1, (k + 1) * w, c->rule.capacity, &emptied);
    if (!emptied)
        failf(c, "a fresh key refused its capacity %" PRId64, c->rule.capacity);
    else if (!holds && claims(row, P_ALIGNED))
        failf(c,
              "taken at window %" PRId64 " + %" PRId64 " ns: not refused at its end, or not "
              "admitted at the next",
              k, t - k * w);
    if (!holds)
        c->run->counter[core_algorithm_id(row)][P_ALIGNED]++;
}

static void run_tokens(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    const sl_rule_t *r = &c->rule;
    int64_t tee = r->window_ns / r->limit + (r->window_ns % r->limit != 0);
    int64_t t = PROP_START + prng_range(rng, 0, 10 * r->window_ns);
    bool emptied;
    bool holds = empties_then(r, t, t + tee - 1, 1, t + tee, 1, &emptied);
    if (claims(row, P_TOKENS) &&
        (r->interval_ns != tee || r->capacity != r->burst + row->capacity_extra))
        failf(c, "interval %" PRId64 " (T %" PRId64 "), capacity %" PRId64 " of burst %" PRId64,
              r->interval_ns, tee, r->capacity, r->burst);
    if (!emptied)
        failf(c, "a fresh key refused its capacity %" PRId64, r->capacity);
    else if (!holds && claims(row, P_TOKENS))
        failf(c, "emptied at t: not refused at t + T - 1 or not admitted at t + T (T %" PRId64 ")",
              tee);
    if (!holds)
        c->run->counter[core_algorithm_id(row)][P_TOKENS]++;
}

static void run_delay(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    sl_rule_t r = c->rule;
    r.max_delay_ns = claims(row, P_DELAY) ? r.window_ns : SL_NS_PER_MS;
    int rc = sl_rule_prepare(&r);
    if (!claims(row, P_DELAY)) {
        if (rc != SL_EDELAY)
            failf(c, "takes no max_delay, yet a rule with one: %s", sl_strerror(rc));
        return;
    }
    if (rc != SL_OK) {
        failf(c, "max_delay = the window refused: %s", sl_strerror(rc));
        return;
    }
    uint64_t s[PROP_STATE_WORDS] = {0};
    int64_t t = PROP_START + prng_range(rng, 0, 10 * r.window_ns);
    sl_decision_t d;
    sl_decide(&r, s, r.capacity, t, &d);
    sl_decide(&r, s, 1, t, &d);
    if (!d.allowed || d.delay_ns <= 0 || d.delay_ns > r.max_delay_ns)
        failf(c, "an emptied key with max_delay %" PRId64 ": allowed %d, delay %" PRId64,
              r.max_delay_ns, d.allowed, d.delay_ns);
}

static void run_approximate(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    if (!claims(row, P_APPROXIMATE))
        return; /* nothing to see: sluiced refuses mode: approximate for it (ruledef_lease.c) */
    uint64_t s[PROP_STATE_WORDS] = {0};
    int64_t at = history(&c->rule, rng, s, PROP_START), q = gen_quantum(rng, &c->rule);
    int64_t count = remaining_at(&c->rule, s, at), admitted = 0, t = at;
    sl_decision_t d;
    for (int i = (int)prng_range(rng, 0, STEPS / 2); i > 0; i--) {
        t += gen_gap(rng, &c->rule, q);
        int64_t cost = gen_cost(rng, &c->rule);
        sl_decide(&c->rule, s, cost, t, &d);
        admitted += d.allowed ? cost : 0;
    }
    int64_t later = remaining_at(&c->rule, s, t);
    if (count - admitted > later)
        failf(c, "remaining %" PRId64 " at s, %" PRId64 " admitted since, %" PRId64 " at t", count,
              admitted, later);
    int rc = sl_settle(&c->rule, s, 0, c->rule.capacity + 1, t, t, &d);
    if (rc != SL_OK || d.allowed)
        failf(c, "a charge past the limit: %s, then a peek allowed %d", sl_strerror(rc), d.allowed);
}

static void run_variable(pcase_t *c, const core_algorithm_t *row, prng_t *rng)
{
    (void)rng;
    uint64_t s[PROP_STATE_WORDS] = {0};
    unsigned char packed[PROP_PACKED_BYTES];
    size_t size = c->rule.state_size, min = core_state_min(&c->rule);
    size_t pack = sl_state_pack(&c->rule, s, packed);
    if (claims(row, P_VARIABLE)) {
        if (c->rule.limit >= 2 && (min >= size || pack >= size))
            failf(c, "a fresh key: %zu bytes at least, packed %zu, of %zu", min, pack, size);
    } else if (min != size || pack != size || sl_state_packed_max(&c->rule) != size) {
        failf(c, "a fixed size of %zu, yet %zu at least, packed %zu", size, min, pack);
    }
}

typedef void (*prop_fn)(pcase_t *c, const core_algorithm_t *row, prng_t *rng);

static const prop_fn prop_fns[P_COUNT] = {
    run_refundable, run_leasable, run_exact,       run_aligned,
    run_tokens,     run_delay,    run_approximate, run_variable,
};

/* A row that denies a capability whose absence shows only in behaviour must show it once. */
static long denials_unseen(const run_t *run, const core_algorithm_t *only, long cases, bool quiet)
{
    long bad = 0;
    CORE_ALGORITHM_EACH(row)
    {
        if (only != NULL && row != only)
            continue;
        const enum prop shown[] = {P_EXACT, P_ALIGNED, P_TOKENS};
        for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
            if (!claims(row, shown[i]) && run->counter[core_algorithm_id(row)][shown[i]] == 0) {
                if (!quiet)
                    printf("%s claims not %s, yet behaved so in all %ld cases\n", row->name,
                           prop_names[shown[i]], cases);
                bad++;
            }
        }
        if (claims(row, P_LEASABLE) && run->granted[core_algorithm_id(row)] == 0 && cases >= 100) {
            if (!quiet)
                printf("%s claims leases, yet no case granted a unit\n", row->name);
            bad++;
        }
    }
    return bad;
}

/* Runs `cases` cases of every property on every row (only: that row), counting into *run. */
static void run_rows(run_t *run, const core_algorithm_t *only, long cases)
{
    CORE_ALGORITHM_EACH(row)
    {
        if (only != NULL && row != only)
            continue;
        for (int p = 0; p < P_COUNT; p++) {
            for (long i = 0; i < cases; i++) {
                prng_t rng = prop_case_prng(run->seed, (int)core_algorithm_id(row) * 16 + p, i);
                pcase_t c = {run, (enum prop)p, gen_row_rule(&rng, row, false), i, false};
                run->checked[p]++;
                prop_fns[p](&c, row, &rng);
            }
        }
    }
}

/*
 * --lies: that the properties can fail. For every row and property (but approximate, which a
 * row could deny only for the rules to refuse), the test takes the row's claim as its opposite
 * and runs that row's cases: some must fail. Returns the lies not caught.
 */
static long lies(uint64_t seed, long cases)
{
    long missed = 0, caught = 0;
    CORE_ALGORITHM_EACH(row)
    {
        for (int p = 0; p < P_COUNT; p++) {
            if (p == P_APPROXIMATE)
                continue;
            static run_t run;
            memset(&run, 0, sizeof(run));
            run.seed = seed;
            lie_row = row;
            lie_prop = (enum prop)p;
            max_prints = 0;
            run_rows(&run, row, cases);
            max_prints = MAX_FAIL_PRINTS;
            long failed = run.failed[p] + denials_unseen(&run, row, cases, true);
            if (failed == 0) {
                printf("lie not caught: %s %s %s\n", row->name,
                       claims(row, (enum prop)p) ? "claims" : "denies", prop_names[p]);
                missed++;
            } else {
                caught++;
            }
        }
    }
    lie_row = NULL;
    printf("prop_algorithm_table --lies: %ld lies caught, %ld not\n", caught, missed);
    return missed;
}

int main(int argc, char **argv)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 3000);
    if (argc == 2 && strcmp(argv[1], "--lies") == 0)
        return lies(seed, cases < 500 ? cases : 500) == 0 ? 0 : 1;
    run_t run;
    memset(&run, 0, sizeof(run));
    run.seed = seed;
    clock_t t0 = clock();
    printf("prop_algorithm_table: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases per row "
           "and property\n",
           run.seed, cases);
    run_rows(&run, NULL, cases);
    long total = prop_report(P_COUNT, prop_names, prop_claims, run.checked, run.failed);
    total += denials_unseen(&run, NULL, cases, false);
    printf("%ld cases skipped (no room for what they test)\n", run.skipped);
    printf("prop_algorithm_table: %s in %.1f s cpu (seed 0x%" PRIx64 ")\n",
           total ? "FAILED" : "passed", (double)(clock() - t0) / CLOCKS_PER_SEC, run.seed);
    return total ? 1 : 0;
}
