/*
 * prop_lease.c - seeded property tests of sl_lease() and sl_lease_return()
 * (include/sluice/sluice.h, docs/algorithms.md "Leases"), through the public functions.
 *
 *   exact  S is a state from a random history of decisions at times that never step back; at t
 *          no earlier than the history, sl_lease(S, want, L, t) grants n units and writes S'.
 *          A grant of 0 leaves S byte for byte. Otherwise sl_lease_return(S', all n, t) decides
 *          as S for costs 0, 1, random and capacity at random times >= t, is fresh exactly when S
 *          is, and is S byte for byte where sl_refund() is exact: fixed_window, token_bucket and
 *          gcra when S is not fresh at t, sliding_window when S's window is t's, sliding_buckets
 *          when S's latest admission was at t.
 *   nodes  2 to 5 nodes share one key's state (the store). Each is strict (every request a
 *          decision on the shared state) or leased (requests spend a local lease; an expired or
 *          used-up lease is returned and a new one of random size and time is asked for; now and
 *          then one is returned early). Nodes die at random: a dead node never returns its lease,
 *          and spends what it holds at random times before the lease ends (the worst a node cut
 *          off from the store can do); a dead node comes back later, with no lease. Every unit
 *          admitted anywhere is recorded at the time it was spent. Then:
 *            - exact algorithms: a strict key given exactly those units at those times admits
 *              every one (for fixed_window: no window holds more than N; for sliding_buckets: no
 *              window (t - W, t] holds more than N; for token_bucket and gcra: the units conform
 *              to the bucket);
 *            - sliding_window: no window (t - W, t] holds more than 2N - 1, its bound when strict;
 *            - after every lease has ended and every live node returned its own, the shared key
 *              is never laxer than a strict twin that was charged each spent unit at the latest
 *              time it could have been spent (its lease's end, or the return), and each strict
 *              admission at its time: at random later times, for costs 0, 1, random and
 *              capacity, what the shared key admits the twin admits, and a peek reports no more
 *              remaining.
 *   refuse sliding_log refuses to lease (SL_ELEASE) and a return on it too; a lease time of 0 or
 *          above SL_WINDOW_MAX_NS, and for token_bucket and gcra above tolerance - T, is
 *          SL_ELEASE; a return of more units than granted, or fewer than 0, is SL_ECOST; none of
 *          them changes the state.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm
 * and property, default 20000). Exit status 0 when every property held, 1 otherwise.
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

#define HISTORY_MAX     40
#define PROBES          12
#define NODES_MAX       5
#define STEPS_MAX       300
#define UNITS_MAX       (STEPS_MAX * 2 + NODES_MAX * 64)
#define MAX_FAIL_PRINTS 5

enum prop { P_EXACT, P_NODES, P_REFUSE, P_COUNT };

static const char *const prop_names[P_COUNT] = {"exact", "nodes", "refuse"};

static const char *const prop_claims[P_COUNT] = {
    "returning a whole lease at its grant's time undoes it (decisions, freshness, bytes)",
    "leases shared by nodes that die never over-admit, and leave the key no laxer than strict",
    "sliding_log, bad lease times and bad returns are refused and change nothing",
};

static const sl_algorithm_t algorithms[] = {
    SL_FIXED_WINDOW,    SL_SLIDING_LOG,  SL_SLIDING_WINDOW,
    SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA,
};

typedef struct run {
    uint64_t seed;
    long checked[P_COUNT];
    long failed[P_COUNT];
    long bytes;    /* exact cases whose bytes were compared */
    long granted;  /* units granted over all nodes cases */
    long local;    /* units spent from leases */
    long zombie;   /* units spent by dead nodes */
    long returned; /* units given back */
} run_t;

typedef struct pcase {
    run_t *run;
    enum prop prop;
    sl_rule_t rule;
    long idx;
    bool printed;
} pcase_t;

static void failf(pcase_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void failf(pcase_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    prop_vfail(&c->run->failed[c->prop], MAX_FAIL_PRINTS, prop_names[c->prop], &c->rule, NULL,
               c->idx, c->run->seed, &c->printed, fmt, ap);
    va_end(ap);
}

/* The longest lease time sl_lease() takes under the rule (< 1: none). */
static int64_t lease_max(const sl_rule_t *rule)
{
    return prop_is_meter(rule) ? rule->tolerance_ns - rule->interval_ns : SL_WINDOW_MAX_NS;
}

/* A lease time: mostly within a window (or the bucket's tolerance), sometimes a whole one. */
static int64_t gen_lease(prng_t *rng, const sl_rule_t *rule)
{
    int64_t hi = prop_is_meter(rule) ? lease_max(rule) : rule->window_ns;
    return prng_chance(rng, 80) ? prng_range(rng, 1, hi / 4 + 1 < hi ? hi / 4 + 1 : hi)
                                : prng_range(rng, 1, hi);
}

/* ---- exact ------------------------------------------------------------------------------- */

/* Whether sl_refund() promises S byte for byte after a charge at t and its refund at t. */
static bool promised_exact(const sl_rule_t *rule, const uint64_t *s, int64_t t)
{
    int64_t first = (int64_t)s[0]; /* window index, or latest admission, or TAT */
    switch (rule->algorithm) {
    case SL_SLIDING_WINDOW:
        return first == t / rule->window_ns;
    case SL_SLIDING_BUCKETS:
        return first == t;
    case SL_FIXED_WINDOW:
    case SL_SLIDING_LOG:
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
        return !sl_state_is_fresh(rule, s, t);
    case SL_CONCURRENCY: /* not in this file's list: it cannot lease */
        return false;
    }
    return false; /* not an algorithm */
}

static void run_exact(run_t *run, sl_algorithm_t alg, long idx)
{
    if (alg == SL_SLIDING_LOG) {
        return;
    }
    pcase_t c = {run, P_EXACT, {0}, idx, false};
    prng_t rng = prop_case_prng(run->seed, (int)alg * 16 + P_EXACT, idx);
    c.rule = gen_rule(&rng, alg, false);
    if (lease_max(&c.rule) < 1) {
        return;
    }
    uint64_t s[PROP_STATE_WORDS] = {0}, s1[PROP_STATE_WORDS], s2[PROP_STATE_WORDS];
    int64_t q = gen_quantum(&rng, &c.rule), now = PROP_START + prng_range(&rng, 0, 1000000);
    sl_decision_t d;
    int steps = (int)prng_range(&rng, 0, HISTORY_MAX);
    for (int i = 0; i < steps; i++) {
        now += gen_gap(&rng, &c.rule, q);
        sl_decide(&c.rule, s, gen_cost(&rng, &c.rule), now, &d);
    }
    int64_t t = now + (prng_chance(&rng, 50) ? 0 : gen_gap(&rng, &c.rule, q));
    memcpy(s1, s, sizeof(s));
    sl_lease_t lease;
    int64_t want = prng_range(&rng, 0, c.rule.capacity + 2), lease_ns = gen_lease(&rng, &c.rule);
    int rc = sl_lease(&c.rule, s1, want, lease_ns, t, &lease);
    run->checked[P_EXACT]++;
    if (rc != SL_OK) {
        failf(&c, "sl_lease(want %" PRId64 ", %" PRId64 " ns) = %s", want, lease_ns,
              sl_strerror(rc));
        return;
    }
    if (lease.granted < 0 || lease.granted > want || lease.until_ns < lease.at_ns ||
        lease.until_ns > lease.at_ns + lease_ns || lease.at_ns < t ||
        (lease.granted > 0) != (lease.until_ns > lease.at_ns)) {
        failf(&c,
              "lease out of contract: want %" PRId64 " granted %" PRId64 " at %" PRId64
              " until %" PRId64 " (t %" PRId64 ", %" PRId64 " ns)",
              want, lease.granted, lease.at_ns, lease.until_ns, t, lease_ns);
        return;
    }
    if (lease.granted == 0) {
        if (memcmp(s, s1, c.rule.state_size) != 0) {
            failf(&c, "a grant of 0 changed the state");
        }
        return;
    }
    /* what was granted is what a request of that cost at the grant's time would have taken */
    sl_decision_t asked = prop_decide_copy(&c.rule, s, lease.granted, lease.at_ns);
    if (!asked.allowed) {
        failf(&c, "granted %" PRId64 " that a request at the grant's time is refused",
              lease.granted);
    }
    memcpy(s2, s1, sizeof(s1));
    rc = sl_lease_return(&c.rule, s2, &lease, lease.granted, lease.at_ns, &d);
    if (rc != SL_OK) {
        failf(&c, "sl_lease_return = %s", sl_strerror(rc));
        return;
    }
    if (promised_exact(&c.rule, s, lease.at_ns)) {
        run->bytes++;
        if (memcmp(s, s2, c.rule.state_size) != 0) {
            failf(&c, "return at the grant's time did not restore the bytes (granted %" PRId64 ")",
                  lease.granted);
        }
    }
    for (int p = 0; p < PROBES; p++) {
        int64_t at = lease.at_ns + (p == 0 ? 0 : gen_gap(&rng, &c.rule, q));
        int64_t costs[4] = {0, 1, prng_range(&rng, 0, c.rule.capacity), c.rule.capacity};
        for (int k = 0; k < 4; k++) {
            sl_decision_t a = prop_decide_copy(&c.rule, s, costs[k], at);
            sl_decision_t b = prop_decide_copy(&c.rule, s2, costs[k], at);
            if (!decision_eq(&a, &b)) {
                failf(&c, "after the return, cost %" PRId64 " at +%" PRId64 " decides otherwise",
                      costs[k], at - lease.at_ns);
                return;
            }
        }
        if (sl_state_is_fresh(&c.rule, s, at) != sl_state_is_fresh(&c.rule, s2, at)) {
            failf(&c, "freshness differs at +%" PRId64, at - lease.at_ns);
            return;
        }
    }
}

/* ---- nodes ------------------------------------------------------------------------------- */

typedef struct node {
    bool leased;  /* mode: leases (true) or a decision per request */
    bool dead;    /* cut off: returns nothing */
    bool holding; /* holds `lease` */
    sl_lease_t lease;
    int64_t left;  /* units of the lease not spent yet */
    long lease_no; /* leases this node took */
} node_t;

typedef struct spend {
    int64_t t;      /* when the unit was admitted, ns */
    int64_t latest; /* the latest the store can know it was (the twin's time), ns */
    node_t *owner;  /* the node whose lease it came from, or NULL */
    long lease_no;  /* which of its leases */
} spend_t;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_spend_latest(const void *a, const void *b)
{
    return cmp_i64(&((const spend_t *)a)->latest, &((const spend_t *)b)->latest);
}

typedef struct world {
    pcase_t *c;
    prng_t *rng;
    uint64_t *shared;
    spend_t units[UNITS_MAX];
    int n;
    int64_t max_until; /* the end of the latest lease granted, ns */
} world_t;

static void record(world_t *w, int64_t t, int64_t latest, node_t *owner)
{
    if (w->n < UNITS_MAX) {
        w->units[w->n].t = t;
        w->units[w->n].latest = latest;
        w->units[w->n].owner = owner;
        w->units[w->n].lease_no = owner != NULL ? owner->lease_no : 0;
        w->n++;
    }
}

/* A node's lease given back at now (spent units can have come as late as now, or its end). */
static void give_back(world_t *w, node_t *nd, int64_t now)
{
    sl_decision_t d;
    int rc = sl_lease_return(&w->c->rule, w->shared, &nd->lease, nd->left, now, &d);
    if (rc != SL_OK) {
        failf(w->c, "sl_lease_return = %s", sl_strerror(rc));
    }
    w->c->run->returned += nd->left;
    for (int i = 0; i < w->n; i++) { /* the lease's units were all spent by now */
        spend_t *u = &w->units[i];
        if (u->owner == nd && u->lease_no == nd->lease_no && u->latest > now) {
            u->latest = now;
        }
    }
    nd->holding = false;
    nd->left = 0;
}

/* A dead node spends what it holds at random times before its lease ends. */
static void zombie_spends(world_t *w, node_t *nd, int64_t now)
{
    for (int64_t u = 0; u < nd->left && now < nd->lease.until_ns; u++) {
        if (prng_chance(w->rng, 70)) {
            int64_t t = prng_chance(w->rng, 50) ? nd->lease.until_ns - 1
                                                : prng_range(w->rng, now, nd->lease.until_ns - 1);
            record(w, t, nd->lease.until_ns - 1, NULL);
            w->c->run->zombie++;
        }
    }
    nd->holding = false;
    nd->left = 0;
}

/* One request at node nd at now. */
static void arrive(world_t *w, node_t *nd, int64_t now)
{
    const sl_rule_t *rule = &w->c->rule;
    sl_decision_t d;
    if (!nd->leased) {
        sl_decide(rule, w->shared, 1, now, &d);
        if (d.allowed) {
            record(w, now, now, NULL);
        }
        return;
    }
    if (nd->holding && (now >= nd->lease.until_ns || nd->left == 0)) {
        give_back(w, nd, now);
    }
    if (!nd->holding) {
        int64_t want = prng_range(w->rng, 1, rule->capacity + 2);
        int rc = sl_lease(rule, w->shared, want, gen_lease(w->rng, rule), now, &nd->lease);
        if (rc != SL_OK) {
            failf(w->c, "sl_lease = %s", sl_strerror(rc));
            return;
        }
        if (nd->lease.granted == 0) {
            return; /* refused */
        }
        nd->holding = true;
        nd->left = nd->lease.granted;
        nd->lease_no++;
        if (nd->lease.until_ns > w->max_until) {
            w->max_until = nd->lease.until_ns;
        }
        w->c->run->granted += nd->lease.granted;
    }
    if (now < nd->lease.until_ns && nd->left > 0) {
        nd->left--;
        record(w, now, nd->lease.until_ns - 1, nd);
        w->c->run->local++;
    }
}

/* The exact algorithms' oracle: a strict key admits every unit at its time. */
static void check_strict_replay(world_t *w, int64_t *times)
{
    const sl_rule_t *rule = &w->c->rule;
    uint64_t s[PROP_STATE_WORDS] = {0};
    sl_decision_t d;
    for (int i = 0; i < w->n; i++) {
        sl_decide(rule, s, 1, times[i], &d);
        if (!d.allowed) {
            failf(w->c, "over-admitted: a strict key refuses unit %d of %d, at %" PRId64, i, w->n,
                  times[i] - PROP_START);
            return;
        }
    }
}

/* No window (t - W, t] holds more than max_units. */
static void check_windows(world_t *w, const int64_t *times, int64_t max_units)
{
    prop_admission_t adm[UNITS_MAX];
    for (int i = 0; i < w->n; i++) {
        adm[i].t = times[i];
        adm[i].cost = 1;
    }
    worst_t worst = worst_window(adm, w->n, w->c->rule.window_ns, max_units);
    if (worst.over_n > 0) {
        failf(w->c, "a window ending at %" PRId64 " holds %" PRId64 " units (at most %" PRId64 ")",
              worst.end - PROP_START, worst.units, max_units);
    }
}

/* After every lease: the shared key is never laxer than the strict twin. */
static void check_twin(world_t *w, int64_t end, int64_t q)
{
    const sl_rule_t *rule = &w->c->rule;
    uint64_t twin[PROP_STATE_WORDS] = {0};
    sl_decision_t d;
    qsort(w->units, (size_t)w->n, sizeof(spend_t), cmp_spend_latest);
    for (int i = 0; i < w->n; i++) {
        sl_settle(rule, twin, 0, 1, w->units[i].latest, w->units[i].latest, &d);
    }
    for (int p = 0; p < PROBES; p++) {
        int64_t at = end + (p == 0 ? 0 : gen_gap(w->rng, rule, q));
        int64_t costs[4] = {0, 1, prng_range(w->rng, 0, rule->capacity), rule->capacity};
        for (int k = 0; k < 4; k++) {
            sl_decision_t a = prop_decide_copy(rule, w->shared, costs[k], at);
            sl_decision_t b = prop_decide_copy(rule, twin, costs[k], at);
            if ((a.allowed && !b.allowed) || (costs[k] == 0 && a.remaining > b.remaining)) {
                failf(w->c,
                      "laxer than strict at +%" PRId64 ", cost %" PRId64 ": shared allowed %d "
                      "remaining %" PRId64 ", twin allowed %d remaining %" PRId64,
                      at - end, costs[k], a.allowed, a.remaining, b.allowed, b.remaining);
                return;
            }
        }
    }
}

static void run_nodes(run_t *run, sl_algorithm_t alg, long idx)
{
    if (alg == SL_SLIDING_LOG) {
        return;
    }
    pcase_t c = {run, P_NODES, {0}, idx, false};
    prng_t rng = prop_case_prng(run->seed, (int)alg * 16 + P_NODES, idx);
    c.rule = gen_rule(&rng, alg, false);
    if (lease_max(&c.rule) < 1) {
        return;
    }
    static world_t w;
    uint64_t shared[PROP_STATE_WORDS] = {0};
    w.c = &c;
    w.rng = &rng;
    w.shared = shared;
    w.n = 0;
    w.max_until = 0;
    node_t nodes[NODES_MAX];
    memset(nodes, 0, sizeof(nodes));
    int nn = (int)prng_range(&rng, 2, NODES_MAX);
    int strict_pct = (int)prng_range(&rng, 0, 3) * 15; /* 0 .. 45 % of nodes strict */
    for (int i = 0; i < nn; i++) {
        nodes[i].leased = !prng_chance(&rng, strict_pct);
    }
    int64_t q = gen_quantum(&rng, &c.rule), now = PROP_START + prng_range(&rng, 0, 1000000);
    int steps = (int)prng_range(&rng, 20, STEPS_MAX);
    for (int i = 0; i < steps; i++) {
        now += prng_chance(&rng, 60) ? 0 : gen_gap(&rng, &c.rule, q) / 2;
        node_t *nd = &nodes[prng_range(&rng, 0, nn - 1)];
        int p = (int)prng_range(&rng, 0, 99);
        if (nd->dead) {
            nd->dead = p >= 10; /* back, with no lease */
        } else if (p < 3) {
            nd->dead = true;
            if (nd->holding) {
                zombie_spends(&w, nd, now);
            }
        } else if (p < 7 && nd->holding) {
            give_back(&w, nd, now); /* early: a shutdown */
        } else {
            arrive(&w, nd, now);
        }
    }
    /* every lease ends; live nodes give theirs back at the end */
    int64_t end = now > w.max_until ? now : w.max_until;
    for (int i = 0; i < nn; i++) {
        if (nodes[i].holding) {
            give_back(&w, &nodes[i], end);
        }
    }
    run->checked[P_NODES]++;
    int64_t times[UNITS_MAX];
    for (int i = 0; i < w.n; i++) {
        times[i] = w.units[i].t;
    }
    qsort(times, (size_t)w.n, sizeof(int64_t), cmp_i64);
    switch (alg) {
    case SL_SLIDING_WINDOW:
        check_windows(&w, times, 2 * c.rule.limit - 1);
        break;
    case SL_SLIDING_BUCKETS:
        check_windows(&w, times, c.rule.limit);
        check_strict_replay(&w, times);
        break;
    case SL_FIXED_WINDOW: /* its windows are the aligned ones, which the replay checks */
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
    case SL_SLIDING_LOG: /* never here: it cannot lease */
    case SL_CONCURRENCY: /* nor it */
        check_strict_replay(&w, times);
        break;
    }
    check_twin(&w, end, q);
}

/* ---- refuse ------------------------------------------------------------------------------ */

static void expect_refused(pcase_t *c, const uint64_t *before, const uint64_t *after, int rc,
                           int want_rc, const char *what)
{
    if (rc != want_rc) {
        failf(c, "%s: %s, expected %s", what, sl_strerror(rc), sl_strerror(want_rc));
    } else if (memcmp(before, after, c->rule.state_size) != 0) {
        failf(c, "%s changed the state", what);
    }
}

static void run_refuse(run_t *run, sl_algorithm_t alg, long idx)
{
    pcase_t c = {run, P_REFUSE, {0}, idx, false};
    prng_t rng = prop_case_prng(run->seed, (int)alg * 16 + P_REFUSE, idx);
    c.rule = gen_rule(&rng, alg, true);
    uint64_t s[PROP_STATE_WORDS] = {0}, s1[PROP_STATE_WORDS];
    int64_t now = PROP_START + prng_range(&rng, 0, c.rule.window_ns);
    sl_decision_t d;
    sl_decide(&c.rule, s, prng_range(&rng, 0, c.rule.capacity), now, &d);
    sl_lease_t lease = {0};
    run->checked[P_REFUSE]++;
    memcpy(s1, s, sizeof(s));
    if (alg == SL_SLIDING_LOG) {
        int rc = sl_lease(&c.rule, s1, 1, SL_NS_PER_MS, now, &lease);
        expect_refused(&c, s, s1, rc, SL_ELEASE, "sliding_log lease");
        lease.granted = 1;
        lease.at_ns = now;
        lease.until_ns = now + 1;
        rc = sl_lease_return(&c.rule, s1, &lease, 1, now, &d);
        expect_refused(&c, s, s1, rc, SL_ELEASE, "sliding_log return");
        return;
    }
    int64_t bad[3] = {0, -prng_range(&rng, 1, SL_NS_PER_SEC), SL_WINDOW_MAX_NS + 1};
    if (prop_is_meter(&c.rule)) {
        bad[2] = lease_max(&c.rule) + prng_range(&rng, 1, c.rule.interval_ns);
    }
    for (int k = 0; k < 3; k++) {
        int rc = sl_lease(&c.rule, s1, 1, bad[k], now, &lease);
        expect_refused(&c, s, s1, rc, SL_ELEASE, "a bad lease time");
    }
    if (lease_max(&c.rule) < 1) {
        return;
    }
    int rc = sl_lease(&c.rule, s1, -1, 1, now, &lease);
    expect_refused(&c, s, s1, rc, SL_ECOST, "a negative want");
    rc = sl_lease(&c.rule, s1, c.rule.capacity, gen_lease(&rng, &c.rule), now, &lease);
    memcpy(s, s1, sizeof(s));
    rc = sl_lease_return(&c.rule, s1, &lease, lease.granted + 1, now, &d);
    expect_refused(&c, s, s1, rc, SL_ECOST, "returning more than granted");
    rc = sl_lease_return(&c.rule, s1, &lease, -1, now, &d);
    expect_refused(&c, s, s1, rc, SL_ECOST, "returning fewer than 0");
    sl_lease_t backwards = lease;
    backwards.until_ns = lease.at_ns - 1;
    rc = sl_lease_return(&c.rule, s1, &backwards, 0, now, &d);
    expect_refused(&c, s, s1, rc, SL_EINVAL, "a lease ending before its grant");
}

int main(void)
{
    run_t run;
    memset(&run, 0, sizeof(run));
    run.seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 20000);
    clock_t t0 = clock();
    printf("prop_lease: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases per algorithm\n",
           run.seed, cases);
    for (size_t a = 0; a < sizeof(algorithms) / sizeof(algorithms[0]); a++) {
        for (long i = 0; i < cases; i++) {
            run_exact(&run, algorithms[a], i);
            run_nodes(&run, algorithms[a], i);
            run_refuse(&run, algorithms[a], i);
        }
    }
    long total = prop_report(P_COUNT, prop_names, prop_claims, run.checked, run.failed);
    printf("exact compared bytes in %ld cases; nodes: %ld units granted, %ld spent from leases, "
           "%ld spent by dead nodes, %ld given back\n",
           run.bytes, run.granted, run.local, run.zombie, run.returned);
    printf("prop_lease: %s in %.1f s cpu (seed 0x%" PRIx64 ")\n", total ? "FAILED" : "passed",
           (double)(clock() - t0) / CLOCKS_PER_SEC, run.seed);
    return total ? 1 : 0;
}
