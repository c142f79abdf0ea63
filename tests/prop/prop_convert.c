/*
 * prop_convert.c - seeded property tests of sl_state_convert() for the six algorithms
 * (include/sluice/sluice.h, docs/algorithms.md), through the public functions.
 *
 * Each case draws two rules of one algorithm: `from`, and `to` either random or `from` with one
 * parameter changed (the limit, the window, the burst, the bucket count; some keep the state's
 * meaning, so that every exact path is met). A random history H runs on a fresh key under
 * `from` at non-decreasing times: decisions, reservations settled past the limit later (debt),
 * and, in half the cases, reservations settled below their cost at their own time. The key is
 * converted at a time `now` no earlier than H.
 *
 *   check  sl_state_check(to) accepts the converted state, and its packed form unpacks to a state
 *          that packs to the same bytes; a state fresh at now converts to one fresh at now (but
 *          sliding_log's and sliding_buckets', which a longer window or coarser buckets may
 *          count still).
 *   safe   The reference is a fresh key under `to` charged (sl_settle from 0) with the units of H
 *          the old state still records, at their times: for fixed_window those of the current
 *          window at now; sliding_window the current and the previous one; sliding_buckets the
 *          K + 1 buckets of the ring; sliding_log the units in (L - W, L], L the latest time;
 *          token_bucket and gcra all of H when T does not grow, else the units not refilled at
 *          now (ceil(reset_after / T_from) of a peek), taken at now. At many times >= now, for
 *          costs 0, 1, random and capacity: what the converted key admits the reference admits
 *          too (with no longer a delay), and a peek reports no more remaining. sliding_log's peek
 *          is held to the unbounded log of those units (a log in debt that merged entries
 *          refuses peeks the whole log would allow: the reference's log is no measure there).
 *   whole  Where the new rule counts nothing the old state can have forgotten (the new window of
 *          now, or its previous one, or its ring, starts no earlier than the old one's; a
 *          sliding_log window that does not grow; a T that does not grow), the same against all of
 *          H charged under `to`.
 *   exact  Where docs/algorithms.md says so, the converted key decides as the reference (every
 *          field for costs >= 1; remaining and reset_after for peeks, and for all but sliding_log
 *          allowed): a state both rules read alike (also byte for byte); fixed_window when the
 *          new window starts no later than the old one; sliding_buckets when the new bucket
 *          length is a multiple of the old; sliding_log when the window does not grow, in
 *          histories without refunds, unless a debt merged entries under the old limit and the
 *          new one is larger (a merge is exact under the limit it was made for); token_bucket
 *          and gcra with a T that grows (the units owed at now, as defined).
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm,
 * default 20000). Exit status 0 when every property held, 1 otherwise.
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

#include "prop/gen.h"

#define HISTORY_MAX     60
#define STATE_WORDS     256  /* 2 KiB: a sliding_log of up to 80 entries (a limit of 20 times 4) */
#define PACKED_BYTES    2048 /* its packed form at most */
#define PROBES          12
#define MAX_FAIL_PRINTS 5

enum prop { P_CHECK, P_SAFE, P_WHOLE, P_EXACT, P_COUNT };

static const char *const prop_names[P_COUNT] = {"check", "safe", "whole", "exact"};

static const char *const prop_claims[P_COUNT] = {
    "the converted state checks and survives its packed form",
    "the converted key is never laxer than the recorded units charged under the new rule",
    "nor, where the new rule counts nothing the old state can have forgotten, than all of them",
    "where documented, it decides as those units charged under the new rule",
};

static const sl_algorithm_t algorithms[] = {
    SL_FIXED_WINDOW,    SL_SLIDING_LOG,  SL_SLIDING_WINDOW,
    SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA,
};

typedef struct run {
    uint64_t seed;
    long checked[P_COUNT];
    long failed[P_COUNT];
    long copies; /* cases where the state means the same under both rules */
} run_t;

typedef struct pcase {
    run_t *run;
    enum prop prop;
    sl_rule_t from, to;
    long idx;
    bool printed;
} pcase_t;

static void failf(pcase_t *c, enum prop prop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void failf(pcase_t *c, enum prop prop, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    prop_vfail(&c->run->failed[prop], MAX_FAIL_PRINTS, prop_names[prop], &c->from, &c->to, c->idx,
               c->run->seed, &c->printed, fmt, ap);
    va_end(ap);
}

/* ---- rules ------------------------------------------------------------------------------- */

/* `from` with one parameter changed, or a random rule; always valid. */
static sl_rule_t gen_to(prng_t *r, const sl_rule_t *from)
{
    if (prng_chance(r, 35)) {
        return gen_rule(r, from->algorithm, true);
    }
    sl_rule_t to = *from;
    int64_t a = prng_range(r, 2, 4);
    switch (prng_range(r, 0, 3)) {
    case 0: /* the limit only */
        to.limit = prng_range(r, 1, 20);
        break;
    case 1: /* a longer or shorter window */
        to.window_ns = prng_chance(r, 50) ? from->window_ns * a : from->window_ns / a;
        break;
    case 2: /* the parameter of the algorithm */
        if (prop_is_meter(from)) {
            to.burst = prng_range(r, from->algorithm == SL_TOKEN_BUCKET ? 1 : 0, 20);
        } else if (from->algorithm == SL_SLIDING_BUCKETS) {
            to.buckets = prng_range(r, 1, 16); /* buckets a multiple of the old ones */
            to.window_ns = from->bucket_ns * prng_range(r, 1, 3) * to.buckets;
        } else {
            to.window_ns = from->window_ns - prng_range(r, 0, from->window_ns / 2);
            to.limit = prng_range(r, 1, 20);
        }
        break;
    default: /* the same rate in other units: token_bucket and gcra keep T */
        to.limit = from->limit * a;
        to.window_ns = from->window_ns * a;
        if (from->algorithm == SL_SLIDING_BUCKETS) {
            to.window_ns = from->window_ns; /* the same window in other buckets */
            to.buckets = prng_range(r, 1, 16);
        }
        break;
    }
    sl_rule_t prepared = to;
    if (sl_rule_prepare(&prepared) != SL_OK) {
        return gen_rule(r, from->algorithm, true);
    }
    return prepared;
}

/* Whether the state means the same under both rules (what sl_state_convert() copies). */
static bool same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    switch (a->algorithm) {
    case SL_FIXED_WINDOW:
    case SL_SLIDING_WINDOW:
        return a->window_ns == b->window_ns;
    case SL_SLIDING_LOG:
        return a->limit == b->limit && a->window_ns == b->window_ns;
    case SL_CONCURRENCY: /* not in algorithms[]: holds keep their own expiry (prop_holds.c) */
        return a->limit == b->limit;
    case SL_SLIDING_BUCKETS:
        return a->window_ns == b->window_ns && a->buckets == b->buckets;
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
        return a->interval_ns == b->interval_ns;
    }
    return false; /* not an algorithm */
}

/* ---- histories --------------------------------------------------------------------------- */

typedef struct charge {
    int64_t t; /* ns */
    int64_t c; /* units, >= 0 */
} charge_t;

typedef struct history {
    charge_t h[2 * HISTORY_MAX];
    int n;
    int64_t latest; /* time of the latest charge of units (0: none) */
    int64_t end;    /* the latest time the history used */
    bool refunds;   /* some reservation was settled below its cost */
} history_t;

/* A random history on `state` (all zero), recording every unit charged at its time. */
static void run_history(const sl_rule_t *rule, prng_t *rng, uint64_t *state, int64_t start,
                        bool refunds, history_t *out)
{
    int64_t q = gen_quantum(rng, rule), now = start;
    int steps = (int)prng_range(rng, 0, HISTORY_MAX);
    int open = -1; /* the latest admission, while its reservation is not settled */
    sl_decision_t d;
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < steps; i++) {
        now += gen_gap(rng, rule, q);
        if (open < 0 || prng_chance(rng, 70)) {
            int64_t cost = gen_cost(rng, rule);
            sl_decide(rule, state, cost, now, &d);
            if (!d.allowed || cost == 0) {
                continue;
            }
            out->h[out->n] = (charge_t){now, cost};
            open = out->n++;
            out->latest = now;
            if (refunds && prng_chance(rng, 25)) { /* used less, settled at once */
                int64_t actual = prng_range(rng, 0, cost - 1);
                sl_settle(rule, state, cost, actual, now, now, &d);
                out->h[open].c = actual;
                out->refunds = true;
                open = -1;
            }
        } else { /* used more, settled now: the rest is charged at now, past the limit */
            int64_t extra = prng_range(rng, 1, 2 * rule->capacity + 2);
            sl_settle(rule, state, out->h[open].c, out->h[open].c + extra, out->h[open].t, now, &d);
            out->h[out->n++] = (charge_t){now, extra};
            out->latest = now;
            open = -1;
        }
    }
    out->end = now;
}

/* The first time of H the old state still records at `now` (see the top of the file); for
 * token_bucket and gcra 0 (all of it; the reference for a T that grows is made apart). */
static int64_t recorded_from(const sl_rule_t *from, const history_t *h, int64_t now)
{
    switch (from->algorithm) {
    case SL_FIXED_WINDOW:
        return now / from->window_ns * from->window_ns;
    case SL_SLIDING_WINDOW:
        return (now / from->window_ns - 1) * from->window_ns;
    case SL_SLIDING_BUCKETS:
        return (h->latest / from->bucket_ns - from->buckets) * from->bucket_ns;
    case SL_SLIDING_LOG:
    case SL_CONCURRENCY:
        return h->latest - from->window_ns + 1;
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
        return 0;
    }
    return 0; /* not an algorithm */
}

/* Units of H at times >= since inside (t - W, t] (sliding_log's unbounded log). */
static int64_t log_inside(const history_t *h, int64_t since, int64_t w, int64_t t)
{
    int64_t n = 0;
    for (int i = 0; i < h->n; i++) {
        if (h->h[i].t >= since && h->h[i].t > t - w && h->h[i].t <= t) {
            n += h->h[i].c;
        }
    }
    return n;
}

/* ---- one case ---------------------------------------------------------------------------- */

static bool packs_back(const sl_rule_t *rule, const uint64_t *state)
{
    unsigned char packed[PACKED_BYTES], again[PACKED_BYTES];
    uint64_t back[STATE_WORDS] = {0};
    size_t len = sl_state_pack(rule, state, packed);
    return sl_state_unpack(rule, packed, len, back) == SL_OK &&
           sl_state_pack(rule, back, again) == len && memcmp(packed, again, len) == 0;
}

/*
 * Whether a debt merged sliding_log entries under `from` (the oldest entry's units joined the
 * next, sliding_log.c): the state's units in (L - W, L] are not H's, time for time. Such a merge
 * is exact in admissions under the old limit, not under a larger one. The state: u32 head,
 * count, cap, 0; u64 base; i64 latest; entries of (i64 stamp, u64 running total).
 */
static bool log_merged(const pcase_t *c, const uint64_t *state, const history_t *h)
{
    uint32_t w[3];
    memcpy(w, state, sizeof(w));
    const uint32_t cap = w[2] != 0 ? w[2] : (uint32_t)c->from.limit;
    const int64_t cutoff = h->latest - c->from.window_ns;
    uint64_t prev = state[2];
    for (uint32_t i = 0; i < w[1]; i++) {
        const uint64_t *e = &state[4 + 2 * ((w[0] + i) % cap)];
        int64_t t = (int64_t)e[0], units = (int64_t)(e[1] - prev), in_h = 0;
        prev = e[1];
        for (int k = 0; k < h->n; k++) {
            in_h += h->h[k].t == t ? h->h[k].c : 0;
        }
        if (t > cutoff && units != in_h) {
            return true;
        }
    }
    return false;
}

/* Whether the docs promise that the converted key decides as the reference. */
static bool promised_exact(const pcase_t *c, const uint64_t *state, const history_t *h, int64_t now)
{
    const sl_rule_t *from = &c->from, *to = &c->to;
    if (same_meaning(from, to)) {
        return true;
    }
    switch (from->algorithm) {
    case SL_FIXED_WINDOW:
        return now / to->window_ns * to->window_ns <= now / from->window_ns * from->window_ns;
    case SL_SLIDING_BUCKETS:
        return to->bucket_ns % from->bucket_ns == 0;
    case SL_SLIDING_LOG:
        return to->window_ns <= from->window_ns && !h->refunds &&
               (to->limit <= from->limit || !log_merged(c, state, h));
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
        return to->interval_ns > from->interval_ns;
    case SL_SLIDING_WINDOW:
    case SL_CONCURRENCY:
        return false;
    }
    return false; /* not an algorithm */
}

/* Whether the new rule counts nothing the old state can have forgotten, so that the converted
 * key is held to all of H (docs/algorithms.md). */
static bool keeps_whole(const sl_rule_t *from, const sl_rule_t *to, const history_t *h, int64_t now)
{
    switch (from->algorithm) {
    case SL_FIXED_WINDOW:
        return now / to->window_ns * to->window_ns >= now / from->window_ns * from->window_ns;
    case SL_SLIDING_WINDOW:
        return (now / to->window_ns - 1) * to->window_ns >=
               (now / from->window_ns - 1) * from->window_ns;
    case SL_SLIDING_BUCKETS:
        return (h->latest / to->bucket_ns - to->buckets) * to->bucket_ns >=
               (h->latest / from->bucket_ns - from->buckets) * from->bucket_ns;
    case SL_SLIDING_LOG:
        return to->window_ns <= from->window_ns;
    case SL_CONCURRENCY:
        return false;
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
        return to->interval_ns <= from->interval_ns;
    }
    return false; /* not an algorithm */
}

/* A fresh key under `to` charged with the units of H from `since` on, at their times. */
static void charge_history(const sl_rule_t *to, const history_t *h, int64_t since, uint64_t *ref)
{
    sl_decision_t d;
    for (int i = 0; i < h->n; i++) {
        if (h->h[i].c > 0 && h->h[i].t >= since) {
            sl_settle(to, ref, 0, h->h[i].c, h->h[i].t, h->h[i].t, &d);
        }
    }
}

/*
 * Probes the converted key against the reference `ref` (the units of H from `since` on, or for
 * P_SAFE with `owed` the units owed at now) at random times >= now: never laxer, and for `exact`
 * deciding alike. Returns false after a failure.
 */
static bool probe(pcase_t *c, prng_t *rng, enum prop prop, const uint64_t *conv,
                  const uint64_t *ref, const history_t *h, int64_t since, int64_t now, bool exact)
{
    const sl_rule_t *to = &c->to;
    const bool log = to->algorithm == SL_SLIDING_LOG;
    const int64_t horizon = 3 * to->window_ns + to->tolerance_ns + to->max_delay_ns;
    for (int k = 0; k < PROBES; k++) {
        int64_t at = now + (k == 0 ? 0 : prng_range(rng, 0, horizon));
        int64_t costs[4] = {0, 1, prng_range(rng, 0, to->capacity), to->capacity};
        for (int j = 0; j < 4; j++) {
            sl_decision_t x = prop_decide_copy(to, conv, costs[j], at);
            sl_decision_t y = prop_decide_copy(to, ref, costs[j], at);
            bool y_allowed = y.allowed;
            if (log && costs[j] == 0) { /* the unbounded log of those stamps */
                y_allowed = log_inside(h, since, to->window_ns, at) <= to->limit;
            }
            if ((x.allowed && (!y_allowed || x.delay_ns < y.delay_ns)) ||
                (costs[j] == 0 && x.remaining > y.remaining)) {
                failf(c, prop,
                      "converted at end + %" PRId64 "; at now + %" PRId64 " cost %" PRId64
                      ": converted allowed=%d delay=%" PRId64 " rem=%" PRId64
                      ", reference allowed=%d delay=%" PRId64 " rem=%" PRId64,
                      now - h->end, at - now, costs[j], x.allowed, x.delay_ns, x.remaining,
                      y_allowed, y.delay_ns, y.remaining);
                return false;
            }
            bool eq = costs[j] > 0
                          ? decision_eq(&x, &y)
                          : x.remaining == y.remaining && x.reset_after_ns == y.reset_after_ns &&
                                (log || x.allowed == y.allowed);
            if (exact && !eq) {
                failf(c, P_EXACT,
                      "at now + %" PRId64 " cost %" PRId64 ": converted allowed=%d rem=%" PRId64
                      " retry=%" PRId64 " reset=%" PRId64 ", reference allowed=%d rem=%" PRId64
                      " retry=%" PRId64 " reset=%" PRId64,
                      at - now, costs[j], x.allowed, x.remaining, x.retry_after_ns,
                      x.reset_after_ns, y.allowed, y.remaining, y.retry_after_ns, y.reset_after_ns);
                return false;
            }
        }
    }
    return true;
}

static void run_case(run_t *run, sl_algorithm_t alg, long idx)
{
    prng_t rng = prop_case_prng(run->seed, (int)alg, idx);
    pcase_t c = {run, P_SAFE, gen_rule(&rng, alg, true), {0}, idx, false};
    c.to = gen_to(&rng, &c.from);
    const sl_rule_t *from = &c.from, *to = &c.to;
    uint64_t s[STATE_WORDS] = {0}, conv[STATE_WORDS] = {0}, ref[STATE_WORDS] = {0};
    static history_t h;
    run_history(from, &rng, s, PROP_START + prng_range(&rng, 0, from->window_ns),
                prng_chance(&rng, 50), &h);
    int64_t now = h.end + (prng_chance(&rng, 30) ? 0 : gen_gap(&rng, from, from->window_ns / 4));

    run->checked[P_CHECK]++;
    if (sl_state_convert(from, s, to, conv, now) != SL_OK || sl_state_check(to, conv) != SL_OK ||
        !packs_back(to, conv)) {
        failf(&c, P_CHECK, "the converted state fails, or fails its check or its packed form");
        return;
    }
    if (alg != SL_SLIDING_LOG && alg != SL_SLIDING_BUCKETS && sl_state_is_fresh(from, s, now) &&
        !sl_state_is_fresh(to, conv, now)) {
        failf(&c, P_CHECK, "a state fresh at now was converted to one that is not");
    }
    bool same = same_meaning(from, to);
    if (same) {
        run->copies++;
        if (memcmp(s, conv, sl_state_size(to)) != 0) {
            failf(&c, P_EXACT, "the state means the same, but was not copied");
        }
    }

    /* the units the old state records, or for a T that grows the units owed at now */
    int64_t since = recorded_from(from, &h, now);
    if (prop_is_meter(from) && to->interval_ns > from->interval_ns) {
        int64_t reset = prop_decide_copy(from, s, 0, now).reset_after_ns;
        int64_t units = reset / from->interval_ns + (reset % from->interval_ns != 0);
        sl_decision_t d;
        if (units > 0) {
            sl_settle(to, ref, 0, units, now, now, &d);
        }
    } else {
        charge_history(to, &h, since, ref);
    }
    run->checked[P_SAFE]++;
    bool exact = !same && promised_exact(&c, s, &h, now);
    run->checked[P_EXACT] += exact;
    if (!probe(&c, &rng, P_SAFE, conv, ref, &h, since, now, exact)) {
        return;
    }
    if (keeps_whole(from, to, &h, now)) { /* all of H */
        memset(ref, 0, sizeof(ref));
        charge_history(to, &h, INT64_MIN, ref);
        run->checked[P_WHOLE]++;
        probe(&c, &rng, P_WHOLE, conv, ref, &h, INT64_MIN, now, false);
    }
}

int main(void)
{
    run_t run;
    memset(&run, 0, sizeof(run));
    run.seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 20000);
    clock_t t0 = clock();
    printf("prop_convert: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases per algorithm\n",
           run.seed, cases);
    for (size_t a = 0; a < sizeof(algorithms) / sizeof(algorithms[0]); a++) {
        for (long i = 0; i < cases; i++) {
            run_case(&run, algorithms[a], i);
        }
    }
    long total = prop_report(P_COUNT, prop_names, prop_claims, run.checked, run.failed);
    printf("%ld cases copied the state\n", run.copies);
    printf("prop_convert: %s in %.1f s cpu (seed 0x%" PRIx64 ")\n", total ? "FAILED" : "passed",
           (double)(clock() - t0) / CLOCKS_PER_SEC, run.seed);
    return total ? 1 : 0;
}
