/*
 * prop_algorithms.c - seeded property tests of the six algorithms (docs/algorithms.md), black box
 * through sl_decide() and sl_state_is_fresh().
 *
 * For each algorithm: many random rules (limit 1..20, windows of a few ms to seconds, buckets
 * dividing the window, random burst and max_delay) and for each a random arrival sequence (gaps
 * of 0, a few quanta, most of a window, long idle; arrivals at a window / bucket / interval
 * boundary or 1-2 ns before it, or exactly one window after an earlier admission (+-1 ns);
 * costs 0..capacity + 2; now and then a time that goes backwards). Properties:
 *
 *   window     sliding_log and sliding_buckets admit at most N units in any window (t - W, t];
 *              fixed_window at most N per aligned window; token_bucket and gcra at most
 *              capacity + floor(t / T) units in any closed interval of length t, each admission
 *              counted at the time the caller acts on it (now + delay).
 *   retry      a rejected cost is admitted (with no delay) at now + retry_after and not at
 *              now + retry_after - 1, if nothing else arrives; with max_delay D it is admitted
 *              with delay exactly D at now + retry_after - D and rejected one ns earlier;
 *              retry_after -1 (cost > capacity) stays -1 later on.
 *   reset      at now + reset_after the state is fresh (sl_state_is_fresh) and decides exactly
 *              as an all-zero state; one ns earlier it is not fresh.
 *   nowrite    a peek (cost 0) and a rejected request leave the state bytes as they were.
 *   remaining  right after a decision, a request of cost `remaining` is admitted (with no delay)
 *              and one of `remaining + 1` is not.
 *   pack       the same sequence decided on states kept only in packed form (sl_state_unpack,
 *              sl_decide, sl_state_pack, as sluice.so does) gives the same decisions, and each
 *              packed form is the packed form of the state decided in place, within
 *              sl_state_packed_max() bytes.
 *   sanity     rc, limit = capacity, retry_after 0 when admitted / -1 exactly when cost >
 *              capacity / > 0 otherwise, 0 <= delay <= max_delay, reset_after >= 0, 0 <=
 *              remaining <= capacity, an admitted cost > 0 changes the state.
 *   debt       a settle (below) reports what a peek right after it reports, and a key it left
 *              refusing a peek (in debt) admits no cost at all until now + retry_after.
 *
 * Settles. Now and then the request right after an admission settles it (sl_settle: the actual
 * cost is below, equal to or above the reservation, up to three capacities above), at the same
 * time or a little later, so the states above include keys in debt: every property is checked
 * on them too, the settle's report taken as a peek's. The window property then allows, for every
 * window, the largest under-estimate (actual - reserved) among the admissions in it, with each
 * admission counted at its actual cost (docs/algorithms.md: the guarantee of settles).
 *
 * Time "going backwards": a step whose now is earlier than the latest admission is clamped by
 * the algorithm (docs: "latest time recorded"), so retry/reset/remaining, which are relative to
 * the clamped time, are only checked at steps where now >= the latest admission's time (a
 * refund that gives it back keeps that time: sliding_log's LATEST). An
 * admission is placed, for the window property, at max(now, the previous admission's time):
 * the bound must hold with time taken as never going back. Sequences for token_bucket/gcra
 * rules with max_delay > 0 never go back (an admission's time is then now + delay).
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm,
 * default 6000), SLUICE_CASE=<algorithm>:<case> (run that one case and print every step).
 * Exit status 0 when every property held, 1 otherwise.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/sluice.h"

#define ALGORITHM_IDS 16 /* room for every sl_algorithm_t value, as an index */
_Static_assert(SL_CONCURRENCY < ALGORITHM_IDS, "an algorithm's id indexes the counts below");

#include "prop/gen.h"

#define MAX_STEPS       200
#define MAX_FAIL_PRINTS 3

enum prop {
    P_WINDOW,
    P_RETRY,
    P_RESET,
    P_NOWRITE,
    P_REMAINING,
    P_PACK,
    P_SANITY,
    P_DEBT,
    P_COUNT,
};

static const char *const prop_names[P_COUNT] = {
    "window", "retry", "reset", "nowrite", "remaining", "pack", "sanity", "debt",
};

static const char *const prop_claims[P_COUNT] = {
    "never admits more than the algorithm promises in any window / interval",
    "retry_after is sufficient and not more than needed (and max_delay admits at its edge)",
    "at now + reset_after the state is fresh and decides as a zero state; 1 ns earlier not",
    "a peek or a rejected request never changes the state bytes",
    "a cost of `remaining` is admitted right after, `remaining + 1` is not",
    "states kept packed decide alike, and pack to the bytes of the state decided in place",
    "decision fields are consistent (limit, retry_after sign, delay range, remaining range)",
    "a settle reports a peek; a key in debt admits nothing until a peek is allowed again",
};

typedef struct step {
    int64_t now;
    int64_t cost; /* units; 0 for a settle, whose decision is a peek's */
    bool settle;  /* sl_settle(reserved, actual, charged) instead of sl_decide */
    int64_t reserved, actual, charged;
    int rc;
    sl_decision_t d;
} step_t;

typedef struct admission {
    int64_t t;    /* when it counts, ns */
    int64_t cost; /* units: the actual cost once settled */
    int64_t over; /* actual - reserved when settled above the reservation, else 0 */
    int step;     /* index into the case's steps */
} admission_t;

typedef struct run {
    uint64_t seed;
    long checked[P_COUNT];
    long failed[P_COUNT];
    long failed_by[P_COUNT][SL_CONCURRENCY + 1]
                  [2];               /* failures by property, algorithm, max_delay > 0 */
    long cases_by[ALGORITHM_IDS][2]; /* cases run by algorithm, max_delay > 0 */
    bool verbose;
} run_t;

typedef struct tcase {
    run_t *run;
    long idx;
    sl_rule_t rule;
    int64_t start;
    int64_t quantum;
    step_t steps[MAX_STEPS];
    int nsteps;
    admission_t adm[MAX_STEPS];
    int nadm;
    bool printed_history;
} tcase_t;

static const sl_algorithm_t algorithms[] = {
    SL_FIXED_WINDOW, SL_SLIDING_LOG, SL_SLIDING_WINDOW, SL_SLIDING_BUCKETS,
    SL_TOKEN_BUCKET, SL_GCRA,        SL_CONCURRENCY,
};

static void print_history(const tcase_t *c, int upto)
{
    fprintf(stderr, "  replay: SLUICE_SEED=0x%" PRIx64 " SLUICE_CASE=%s:%ld\n", c->run->seed,
            sl_algorithm_name(c->rule.algorithm), c->idx);
    fprintf(stderr, "  ");
    print_rule(stderr, &c->rule);
    fprintf(stderr, "  start=%" PRId64 " (times below are ns after start)\n", c->start);
    for (int i = 0; i <= upto && i < c->nsteps; i++) {
        fprintf(stderr, "  step %3d: now=+%" PRId64 " cost=%" PRId64 " -> ", i,
                c->steps[i].now - c->start, c->steps[i].cost);
        print_decision(stderr, &c->steps[i].d);
        fprintf(stderr, "\n");
    }
}

/* Records a failed check of property `p` at step `i` (-1: the whole case). */
static void failf(tcase_t *c, enum prop p, int i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void failf(tcase_t *c, enum prop p, int i, const char *fmt, ...)
{
    c->run->failed[p]++;
    c->run->failed_by[p][c->rule.algorithm][c->rule.max_delay_ns > 0]++;
    if (c->run->failed[p] > MAX_FAIL_PRINTS && !c->run->verbose) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: %s case %ld step %d: ", prop_names[p],
            sl_algorithm_name(c->rule.algorithm), c->idx, i);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (!c->printed_history) {
        print_history(c, i < 0 ? c->nsteps - 1 : i);
        c->printed_history = true;
    }
}

static int decide_copy(const tcase_t *c, const uint64_t *state, int64_t cost, int64_t now,
                       sl_decision_t *out)
{
    uint64_t copy[PROP_STATE_WORDS];
    memcpy(copy, state, sizeof(copy));
    return sl_decide(&c->rule, copy, cost, now, out);
}

/* Applies step s to state: sl_decide, or sl_settle for a settle step. */
static int apply_step(const tcase_t *c, const step_t *s, void *state, sl_decision_t *out)
{
    if (s->settle) {
        return sl_settle(&c->rule, state, s->reserved, s->actual, s->charged, s->now, out);
    }
    return sl_decide(&c->rule, state, s->cost, s->now, out);
}

static bool admitted_now(const sl_decision_t *d)
{
    return d->allowed && d->delay_ns == 0;
}

/* ---- per-step properties ----------------------------------------------------------------- */

static void check_sanity(tcase_t *c, int i, bool exact, const uint64_t *before,
                         const uint64_t *after, size_t size)
{
    const step_t *s = &c->steps[i];
    const sl_decision_t *d = &s->d;
    const sl_rule_t *rule = &c->rule;
    c->run->checked[P_SANITY]++;
    if (d->limit != rule->capacity) {
        failf(c, P_SANITY, i, "limit %" PRId64 " != capacity %" PRId64, d->limit, rule->capacity);
    }
    if (sl_state_check(rule, after) != SL_OK) {
        failf(c, P_SANITY, i, "sl_state_check refuses the state sl_decide wrote");
    }
    if (d->allowed) {
        if (d->retry_after_ns != 0) {
            failf(c, P_SANITY, i, "admitted with retry_after %" PRId64, d->retry_after_ns);
        }
        if (d->delay_ns < 0 || d->delay_ns > rule->max_delay_ns) {
            failf(c, P_SANITY, i, "delay %" PRId64 " outside [0, max_delay %" PRId64 "]",
                  d->delay_ns, rule->max_delay_ns);
        }
    } else {
        if (d->delay_ns != 0) {
            failf(c, P_SANITY, i, "rejected with delay %" PRId64, d->delay_ns);
        }
        if (s->cost > rule->capacity && d->retry_after_ns != -1) {
            failf(c, P_SANITY, i, "cost > capacity but retry_after %" PRId64 " (want -1)",
                  d->retry_after_ns);
        }
        if (s->cost <= rule->capacity && d->retry_after_ns <= 0) {
            failf(c, P_SANITY, i, "cost <= capacity rejected with retry_after %" PRId64,
                  d->retry_after_ns);
        }
    }
    if (s->cost > rule->capacity && d->allowed) {
        failf(c, P_SANITY, i, "cost > capacity admitted");
    }
    if (d->reset_after_ns < 0) {
        failf(c, P_SANITY, i, "reset_after %" PRId64 " < 0", d->reset_after_ns);
    }
    if (d->remaining > rule->capacity || d->remaining < 0) {
        failf(c, P_SANITY, i, "remaining %" PRId64 " outside [0, capacity]", d->remaining);
    }
    if (d->allowed && s->cost > 0 && memcmp(before, after, size) == 0) {
        failf(c, P_SANITY, i, "admitted cost %" PRId64 " left the state unchanged", s->cost);
    }
}

static void check_nowrite(tcase_t *c, int i, const uint64_t *before, const uint64_t *after,
                          size_t size)
{
    const step_t *s = &c->steps[i];
    if (s->cost != 0 && s->d.allowed) {
        return;
    }
    c->run->checked[P_NOWRITE]++;
    if (memcmp(before, after, size) != 0) {
        failf(c, P_NOWRITE, i, "%s changed the state bytes", s->cost == 0 ? "peek" : "rejection");
    }
}

static void check_retry(tcase_t *c, int i, const uint64_t *state)
{
    const step_t *s = &c->steps[i];
    const sl_decision_t *d = &s->d;
    int64_t r = d->retry_after_ns;
    int64_t dmax = c->rule.max_delay_ns;
    sl_decision_t x;
    if (d->allowed) {
        return;
    }
    c->run->checked[P_RETRY]++;
    if (r == -1) {
        int64_t later = s->now + 10 * c->rule.window_ns + c->rule.tolerance_ns + 1;
        decide_copy(c, state, s->cost, later, &x);
        if (x.allowed || x.retry_after_ns != -1) {
            failf(c, P_RETRY, i,
                  "retry_after -1, but at now+%" PRId64 ": allowed=%d retry=%" PRId64,
                  later - s->now, x.allowed, x.retry_after_ns);
        }
        return;
    }
    if (r <= 0) {
        return; /* reported by sanity */
    }
    decide_copy(c, state, s->cost, s->now + r, &x);
    if (!admitted_now(&x)) {
        failf(c, P_RETRY, i,
              "not enough: at now + retry_after (%" PRId64 ") cost %" PRId64 " got allowed=%d"
              " delay=%" PRId64 " retry=%" PRId64,
              r, s->cost, x.allowed, x.delay_ns, x.retry_after_ns);
    }
    decide_copy(c, state, s->cost, s->now + r - 1, &x);
    if (s->cost == 0 ? x.allowed : admitted_now(&x)) {
        failf(c, P_RETRY, i,
              "more than needed: at now + retry_after - 1 (%" PRId64 ") cost %" PRId64
              " is already admitted",
              r - 1, s->cost);
    }
    if (dmax > 0 && s->cost > 0) { /* a peek is never delayed: its retry_after counts D in */
        if (r <= dmax) {
            failf(c, P_RETRY, i, "rejected with retry_after %" PRId64 " <= max_delay %" PRId64, r,
                  dmax);
            return;
        }
        decide_copy(c, state, s->cost, s->now + r - dmax, &x);
        if (!x.allowed || x.delay_ns != dmax) {
            failf(c, P_RETRY, i,
                  "at now + retry_after - max_delay (+%" PRId64 ") want allowed with delay %" PRId64
                  ", got allowed=%d delay=%" PRId64 " retry=%" PRId64,
                  r - dmax, dmax, x.allowed, x.delay_ns, x.retry_after_ns);
        }
        decide_copy(c, state, s->cost, s->now + r - dmax - 1, &x);
        if (x.allowed) {
            failf(c, P_RETRY, i,
                  "at now + retry_after - max_delay - 1 (+%" PRId64 ") admitted with delay %" PRId64
                  ", want rejected",
                  r - dmax - 1, x.delay_ns);
        }
    }
}

static void check_reset(tcase_t *c, int i, const uint64_t *after, prng_t *rng)
{
    const step_t *s = &c->steps[i];
    int64_t r = s->d.reset_after_ns;
    uint64_t zero[PROP_STATE_WORDS];
    sl_decision_t x, y;
    if (r < 0) {
        return; /* reported by sanity */
    }
    c->run->checked[P_RESET]++;
    memset(zero, 0, sizeof(zero));
    if (!sl_state_is_fresh(&c->rule, after, s->now + r)) {
        failf(c, P_RESET, i, "not fresh at now + reset_after (%" PRId64 ")", r);
    }
    if (r > 0 && sl_state_is_fresh(&c->rule, after, s->now + r - 1)) {
        failf(c, P_RESET, i, "already fresh at now + reset_after - 1 (%" PRId64 ")", r - 1);
    }
    int64_t costs[2] = {c->rule.capacity, prng_range(rng, 0, c->rule.capacity + 1)};
    for (int k = 0; k < 2; k++) {
        decide_copy(c, after, costs[k], s->now + r, &x);
        decide_copy(c, zero, costs[k], s->now + r, &y);
        if (!decision_eq(&x, &y)) {
            failf(c, P_RESET, i,
                  "at now + reset_after (%" PRId64 ") cost %" PRId64
                  " decides unlike a fresh state: got allowed=%d rem=%" PRId64 " retry=%" PRId64
                  " reset=%" PRId64 " delay=%" PRId64 ", fresh allowed=%d rem=%" PRId64
                  " retry=%" PRId64 " reset=%" PRId64 " delay=%" PRId64,
                  r, costs[k], x.allowed, x.remaining, x.retry_after_ns, x.reset_after_ns,
                  x.delay_ns, y.allowed, y.remaining, y.retry_after_ns, y.reset_after_ns,
                  y.delay_ns);
        }
    }
}

static void check_remaining(tcase_t *c, int i, const uint64_t *after)
{
    const step_t *s = &c->steps[i];
    int64_t rem = s->d.remaining;
    sl_decision_t x;
    if (rem < 0 || rem > c->rule.capacity) {
        return; /* reported by sanity */
    }
    c->run->checked[P_REMAINING]++;
    if (rem > 0) {
        decide_copy(c, after, rem, s->now, &x);
        if (!admitted_now(&x)) {
            failf(c, P_REMAINING, i,
                  "remaining %" PRId64 " but that cost right after got allowed=%d delay=%" PRId64
                  " retry=%" PRId64,
                  rem, x.allowed, x.delay_ns, x.retry_after_ns);
        }
    }
    decide_copy(c, after, rem + 1, s->now, &x);
    if (admitted_now(&x)) {
        failf(c, P_REMAINING, i,
              "remaining %" PRId64 " but cost %" PRId64 " is admitted right after", rem, rem + 1);
    }
}

/* A settle reports a peek; after one that left the key refusing a peek, no cost is admitted
 * before now + retry_after (checked at its last ns and at random times before). */
static void check_debt(tcase_t *c, int i, const uint64_t *after, prng_t *rng)
{
    const step_t *s = &c->steps[i];
    sl_decision_t x;
    c->run->checked[P_DEBT]++;
    decide_copy(c, after, 0, s->now, &x);
    if (!decision_eq(&x, &s->d)) {
        failf(c, P_DEBT, i,
              "the settle reported allowed=%d rem=%" PRId64 " retry=%" PRId64 " reset=%" PRId64
              ", a peek right after reports allowed=%d rem=%" PRId64 " retry=%" PRId64
              " reset=%" PRId64,
              s->d.allowed, s->d.remaining, s->d.retry_after_ns, s->d.reset_after_ns, x.allowed,
              x.remaining, x.retry_after_ns, x.reset_after_ns);
    }
    int64_t r = s->d.retry_after_ns;
    if (s->d.allowed || r <= 0) {
        return;
    }
    for (int k = 0; k < 4; k++) {
        int64_t t = s->now + (k == 0 ? r - 1 : prng_range(rng, 0, r - 1));
        int64_t cost = prng_range(rng, 0, c->rule.capacity);
        decide_copy(c, after, cost, t, &x);
        if (x.allowed) {
            failf(c, P_DEBT, i,
                  "in debt for %" PRId64 " ns, but cost %" PRId64 " is admitted at now + %" PRId64,
                  r, cost, t - s->now);
        }
    }
}

/* The actual cost of a reservation: below it, equal, or up to three capacities above. */
static int64_t gen_actual(prng_t *r, const sl_rule_t *rule, int64_t reserved)
{
    int p = (int)prng_range(r, 0, 99);
    if (p < 35) {
        return prng_range(r, 0, reserved);
    }
    if (p < 45) {
        return reserved;
    }
    return reserved + prng_range(r, 1, 3 * rule->capacity + 2);
}

/* ---- the window property, over the admissions of a whole case ---------------------------- */

static int cmp_admission(const void *a, const void *b)
{
    const admission_t *x = a, *y = b;
    if (x->t != y->t) {
        return x->t < y->t ? -1 : 1;
    }
    return x->step - y->step;
}

/* The largest under-estimate among admissions [lo, end). */
static int64_t max_over(const admission_t *adm, int lo, int end)
{
    int64_t over = 0;
    for (int j = lo; j < end; j++) {
        if (adm[j].over > over) {
            over = adm[j].over;
        }
    }
    return over;
}

static void check_window_sliding(tcase_t *c)
{
    /* admissions are sorted by t; the worst window (t - W, t] ends at an admission */
    int64_t w = c->rule.window_ns;
    int64_t sum = 0;
    int lo = 0;
    for (int i = 0; i < c->nadm; i++) {
        sum += c->adm[i].cost;
        while (c->adm[lo].t <= c->adm[i].t - w) {
            sum -= c->adm[lo].cost;
            lo++;
        }
        /* include later admissions at the same t */
        int64_t extra = 0;
        int end = i + 1;
        for (; end < c->nadm && c->adm[end].t == c->adm[i].t; end++) {
            extra += c->adm[end].cost;
        }
        int64_t over = max_over(c->adm, lo, end);
        if (sum + extra > c->rule.limit + over) {
            failf(c, P_WINDOW, c->adm[i].step,
                  "%" PRId64 " units admitted in the window (t - W, t] with t = +%" PRId64
                  " (steps %d..%d), limit %" PRId64 " + largest under-estimate %" PRId64,
                  sum + extra, c->adm[i].t - c->start, c->adm[lo].step, c->adm[i].step,
                  c->rule.limit, over);
            return;
        }
    }
}

static void check_window_fixed(tcase_t *c)
{
    int64_t w = c->rule.window_ns;
    int64_t sum = 0;
    int first = 0; /* the window's first admission */
    for (int i = 0; i < c->nadm; i++) {
        if (i > 0 && c->adm[i].t / w != c->adm[i - 1].t / w) {
            sum = 0;
            first = i;
        }
        sum += c->adm[i].cost;
        int64_t over = max_over(c->adm, first, i + 1);
        if (sum > c->rule.limit + over) {
            failf(c, P_WINDOW, c->adm[i].step,
                  "%" PRId64 " units admitted in the aligned window starting at +%" PRId64
                  ", limit %" PRId64 " + largest under-estimate %" PRId64,
                  sum, c->adm[i].t / w * w - c->start, c->rule.limit, over);
            return;
        }
    }
}

static void check_window_meter(tcase_t *c)
{
    const admission_t *sorted = c->adm;
    int64_t t_ns = c->rule.interval_ns;
    for (int i = 0; i < c->nadm; i++) {
        int64_t sum = 0, over = 0;
        for (int j = i; j < c->nadm; j++) {
            sum += sorted[j].cost;
            over = sorted[j].over > over ? sorted[j].over : over;
            if (j + 1 < c->nadm && sorted[j + 1].t == sorted[j].t) {
                continue; /* take every admission at the interval's end */
            }
            int64_t bound = c->rule.capacity + (sorted[j].t - sorted[i].t) / t_ns + over;
            if (sum > bound) {
                failf(c, P_WINDOW, sorted[j].step,
                      "%" PRId64 " units act in [+%" PRId64 ", +%" PRId64 "] (steps %d..%d), bound"
                      " capacity + floor(t/T) + largest under-estimate = %" PRId64,
                      sum, sorted[i].t - c->start, sorted[j].t - c->start, sorted[i].step,
                      sorted[j].step, bound);
                return;
            }
        }
    }
}

static bool same_decision(const sl_decision_t *a, const sl_decision_t *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after_ns == b->retry_after_ns && a->reset_after_ns == b->reset_after_ns &&
           a->delay_ns == b->delay_ns;
}

/* The packed twin of a case's state: step i decided again on sl_state_unpack(*packed), which
 * is then replaced by the result's packed form; `state` is the state decided in place. */
static void check_pack(tcase_t *c, int i, uint8_t *packed, size_t *packed_len,
                       const uint64_t *state)
{
    const step_t *s = &c->steps[i];
    uint64_t twin[PROP_STATE_WORDS];
    uint8_t again[PROP_PACKED_BYTES];
    sl_decision_t d;
    c->run->checked[P_PACK]++;
    int rc = sl_state_unpack(&c->rule, packed, *packed_len, twin);
    if (rc != SL_OK) {
        failf(c, P_PACK, i, "sl_state_unpack refuses its own packed form (%d)", rc);
        return;
    }
    apply_step(c, s, twin, &d);
    if (!same_decision(&d, &s->d)) {
        failf(c, P_PACK, i,
              "decided on the unpacked state: allowed=%d remaining=%" PRId64 " retry=%" PRId64
              " reset=%" PRId64,
              d.allowed, d.remaining, d.retry_after_ns, d.reset_after_ns);
    }
    *packed_len = sl_state_pack(&c->rule, twin, packed);
    size_t n = sl_state_pack(&c->rule, state, again);
    if (n != *packed_len || memcmp(again, packed, n) != 0) {
        failf(c, P_PACK, i, "the packed twin (%zu bytes) differs from the state packed (%zu)",
              *packed_len, n);
    }
    if (n > sl_state_packed_max(&c->rule)) {
        failf(c, P_PACK, i, "packed %zu bytes, more than sl_state_packed_max %zu", n,
              sl_state_packed_max(&c->rule));
    }
}

/* ---- one case ---------------------------------------------------------------------------- */

static void run_case(run_t *run, sl_algorithm_t alg, long idx)
{
    static tcase_t c; /* large; one at a time */
    prng_t rng = prop_case_prng(run->seed, (int)alg, idx);
    uint64_t state[PROP_STATE_WORDS], before[PROP_STATE_WORDS];
    uint8_t packed[PROP_PACKED_BYTES];
    size_t packed_len;

    memset(&c, 0, sizeof(c));
    c.run = run;
    c.idx = idx;
    c.rule = gen_rule(&rng, alg, true);
    c.start = PROP_START + prng_range(&rng, 0, c.rule.window_ns);
    c.quantum = gen_quantum(&rng, &c.rule);
    c.nsteps = (int)prng_range(&rng, MAX_STEPS / 2, MAX_STEPS);
    size_t size = sl_state_size(&c.rule);
    if (size == 0 || size > sizeof(state)) {
        fprintf(stderr, "sl_state_size %zu out of range for this test\n", size);
        exit(2);
    }
    bool backwards_ok = !(prop_is_meter(&c.rule) && c.rule.max_delay_ns > 0);
    run->cases_by[alg][c.rule.max_delay_ns > 0]++;
    if (sl_state_packed_max(&c.rule) > sizeof(packed)) {
        fprintf(stderr, "sl_state_packed_max out of range for this test\n");
        exit(2);
    }
    memset(state, 0, sizeof(state));
    packed_len = sl_state_pack(&c.rule, state, packed);

    int64_t now = c.start;
    int64_t max_now = c.start;      /* latest now so far */
    int64_t latest_adm = INT64_MIN; /* max(now) over admissions (and debts) so far */
    int pending = -1;               /* the admission the step may settle, in c.adm */
    for (int i = 0; i < c.nsteps; i++) {
        step_t *s = &c.steps[i];
        s->settle = pending >= 0 && prng_chance(&rng, 35);
        if (s->settle) {
            const step_t *charge = &c.steps[c.adm[pending].step];
            now = charge->now + (prng_chance(&rng, 50) ? 0 : prng_range(&rng, 0, 3) * c.quantum);
            s->reserved = charge->cost;
            s->actual = gen_actual(&rng, &c.rule, charge->cost);
            s->charged = charge->now;
        } else if (i > 0) {
            if (backwards_ok && prng_chance(&rng, 4)) {
                now = max_now - prng_range(&rng, 1, c.rule.window_ns);
            } else if (prng_chance(&rng, 6)) {
                /* just before or at the next boundary of a window, bucket or interval */
                int64_t unit = c.rule.bucket_ns > 0 ? c.rule.bucket_ns : c.rule.window_ns;
                if (prop_is_meter(&c.rule) && prng_chance(&rng, 50)) {
                    unit = c.rule.interval_ns;
                }
                now = (max_now / unit + 1) * unit - prng_range(&rng, 0, 2);
                if (now < max_now) {
                    now = max_now;
                }
            } else if (c.nadm > 0 && prng_chance(&rng, 8)) {
                /* exactly one window after an earlier admission, or 1 ns around it */
                const admission_t *a = &c.adm[prng_range(&rng, 0, c.nadm - 1)];
                now = a->t + c.rule.window_ns + prng_range(&rng, -1, 1);
                if (now < max_now) {
                    now = max_now + gen_gap(&rng, &c.rule, c.quantum);
                }
            } else {
                now = max_now + gen_gap(&rng, &c.rule, c.quantum);
            }
        }
        if (now > max_now) {
            max_now = now;
        }
        s->now = now;
        s->cost = s->settle ? 0 : gen_cost(&rng, &c.rule);
        memcpy(before, state, sizeof(state));
        s->rc = apply_step(&c, s, state, &s->d);
        if (s->rc != SL_OK) {
            failf(&c, P_SANITY, i, "sl_decide/sl_settle returned %d (%s)", s->rc,
                  sl_strerror(s->rc));
            c.nsteps = i + 1;
            break;
        }
        if (run->verbose) {
            if (s->settle) {
                fprintf(stderr,
                        "step %3d: now=+%" PRId64 " settle reserved=%" PRId64 " actual=%" PRId64
                        " charged=+%" PRId64 " -> ",
                        i, now - c.start, s->reserved, s->actual, s->charged - c.start);
            } else {
                fprintf(stderr, "step %3d: now=+%" PRId64 " cost=%" PRId64 " -> ", i, now - c.start,
                        s->cost);
            }
            print_decision(stderr, &s->d);
            fprintf(stderr, "\n");
        }
        /* exact: the algorithm does not clamp this now, so relative times are exact */
        bool exact = now >= latest_adm;
        check_sanity(&c, i, exact, before, state, size);
        if (s->settle) {
            check_debt(&c, i, state, &rng);
        } else {
            check_nowrite(&c, i, before, state, size);
        }
        check_pack(&c, i, packed, &packed_len, state);
        if (exact) {
            check_retry(&c, i, state);
            check_reset(&c, i, state, &rng);
            check_remaining(&c, i, state);
        }
        if (s->settle) {
            admission_t *a = &c.adm[pending];
            a->cost = s->actual;
            a->over = s->actual > s->reserved ? s->actual - s->reserved : 0;
            if (s->actual > s->reserved && now > latest_adm) {
                latest_adm = now; /* the debt is charged at now */
            }
        }
        pending = -1;
        if (!s->settle && s->d.allowed && s->cost > 0) {
            int64_t t = latest_adm > now ? latest_adm : now;
            latest_adm = t;
            pending = c.nadm;
            admission_t *a = &c.adm[c.nadm++];
            a->t = t + s->d.delay_ns; /* the caller acts after the delay */
            a->cost = s->cost;
            a->over = 0;
            a->step = i;
        }
    }

    /* by time: with delays, an admission can count before an earlier one */
    qsort(c.adm, (size_t)c.nadm, sizeof(admission_t), cmp_admission);
    switch (alg) {
    case SL_SLIDING_LOG:
    case SL_SLIDING_BUCKETS:
    case SL_CONCURRENCY: /* a decision's hold lives W: a true sliding window */
        run->checked[P_WINDOW]++;
        check_window_sliding(&c);
        break;
    case SL_FIXED_WINDOW:
        run->checked[P_WINDOW]++;
        check_window_fixed(&c);
        break;
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
        run->checked[P_WINDOW]++;
        check_window_meter(&c);
        break;
    case SL_SLIDING_WINDOW:
        break; /* tests/prop/prop_sliding_window.c */
    }
}

int main(void)
{
    run_t run;
    memset(&run, 0, sizeof(run));
    run.seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 6000);
    const char *only = getenv("SLUICE_CASE");
    clock_t t0 = clock();

    printf("prop_algorithms: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases per algorithm\n",
           run.seed, cases);
    if (only != NULL && *only != '\0') {
        const char *colon = strchr(only, ':');
        sl_algorithm_t alg;
        if (colon == NULL || sl_algorithm_parse(only, (size_t)(colon - only), &alg) != SL_OK) {
            fprintf(stderr, "SLUICE_CASE must be <algorithm>:<case>\n");
            return 2;
        }
        run.verbose = true;
        run_case(&run, alg, strtol(colon + 1, NULL, 10));
    } else {
        for (size_t a = 0; a < sizeof(algorithms) / sizeof(algorithms[0]); a++) {
            for (long i = 0; i < cases; i++) {
                run_case(&run, algorithms[a], i);
            }
        }
    }

    long total_failed = 0;
    for (int p = 0; p < P_COUNT; p++) {
        printf("%-9s %s: %ld checks, %ld failed — %s\n", prop_names[p],
               run.failed[p] ? "FAIL" : "ok", run.checked[p], run.failed[p], prop_claims[p]);
        total_failed += run.failed[p];
        for (size_t a = 0; run.failed[p] && a < sizeof(algorithms) / sizeof(algorithms[0]); a++) {
            for (int dl = 0; dl < 2; dl++) {
                long f = run.failed_by[p][algorithms[a]][dl];
                if (f > 0) {
                    printf("          %ld failed checks in %s%s (%ld cases)\n", f,
                           sl_algorithm_name(algorithms[a]), dl ? " with max_delay > 0" : "",
                           run.cases_by[algorithms[a]][dl]);
                }
            }
        }
    }
    printf("prop_algorithms: %s in %.1f s cpu (seed 0x%" PRIx64 ")\n",
           total_failed ? "FAILED" : "passed", (double)(clock() - t0) / CLOCKS_PER_SEC, run.seed);
    return total_failed ? 1 : 0;
}
