/*
 * prop_lease_node.c - seeded property tests of how a node of the Redis request store leases
 * (src/store/lease_size.h): the size it asks for and the end of its copy of a lease, run as
 * sluiced runs them against a shared key, with the clocks and delays of real networks.
 *
 *   size   lease_want() is at least max(cost, 1), at most max(cost, remaining / 4) when the
 *          remaining is known, and grows with the rate; lease_rate_update() of a steady rate
 *          converges to it, and a first sample is taken as it is.
 *   nodes  2 to 4 nodes share one key's state (Redis). Each node's clock is off Redis's by up to
 *          a second either way, and each request reaches Redis after a random delay and its
 *          answer comes back after another. A node spends from a lease only while its own clock
 *          is before its end (lease_local_end: its clock when it sent the request + until - at),
 *          sizes each lease from its arrival rate (lease_rate_update, lease_want, capped by the
 *          remaining of the last reply), gives back what is unused when the lease has ended,
 *          and decides strictly (a decision on the shared state) when a lease grants nothing.
 *          Then: every unit spent from a lease was spent before the lease's end on Redis's clock,
 *          and a strict key given every admitted unit at its time admits each one (no window
 *          sees more than the limit), for every exact algorithm that leases.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm,
 * default 3000). Exit status 0 when every property held, 1 otherwise.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "prop/gen.h"
#include "store/lease_size.h"

#define NODES_MAX 4
#define STEPS_MAX 400
#define UNITS_MAX (STEPS_MAX * 2)

static long failures;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (failures++ < 5) {                                                                      \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

/* ---- size -------------------------------------------------------------------------------- */

static void run_size(prng_t *rng)
{
    double rate = (double)prng_range(rng, 0, 1000000) / (double)prng_range(rng, 1, 1000);
    int64_t lease_ns = prng_range(rng, 1, 2000) * 1000000;
    int64_t remaining = prng_chance(rng, 20) ? -1 : prng_range(rng, 0, 100000);
    int64_t cost = prng_range(rng, 0, 50);
    int64_t want = lease_want(rate, lease_ns, remaining, cost);
    int64_t least = cost > 1 ? cost : 1;
    if (want < least) {
        FAIL("want %" PRId64 " below cost %" PRId64, want, cost);
    }
    if (remaining >= 0 && want > least && want > remaining / LEASE_SHARE) {
        FAIL("want %" PRId64 " above a quarter of %" PRId64, want, remaining);
    }
    if (lease_want(rate * 2, lease_ns, remaining, cost) < want) {
        FAIL("want fell as the rate grew (%f)", rate);
    }
    double headroom = ceil(LEASE_HEADROOM * rate * (double)lease_ns / 1e9);
    if (remaining < 0 && (double)want < headroom && want < SL_COUNT_MAX) {
        FAIL("want %" PRId64 " below 1.25 r L = %f", want, headroom);
    }
    /* a steady rate: the mean converges to it */
    double r = 0, steady = (double)prng_range(rng, 1, 100000);
    int64_t step = prng_range(rng, 1, 1000) * 1000000;
    for (int i = 0; i < 200; i++) {
        r = lease_rate_update(r, (int64_t)(steady * (double)step / 1e9), step, 4 * step);
    }
    double exact = floor(steady * (double)step / 1e9) * 1e9 / (double)step;
    if (fabs(r - exact) > 1e-6 * exact + 1e-9) {
        FAIL("rate %f after a steady %f", r, exact);
    }
    if (lease_rate_update(0, 10, 1000000000, 1) != 10.0) {
        FAIL("a first sample is not taken as it is");
    }
}

/* ---- nodes ------------------------------------------------------------------------------- */

typedef struct node {
    int64_t offset_ns; /* its clock less Redis's */
    sl_lease_t lease;  /* in hand when granted > 0 */
    int64_t left, local_end_ns, sent_local_ns;
    int64_t remaining; /* at the last reply; -1 unknown */
    double rate;
    int64_t since_ns, arrivals; /* Redis time, for the rate: a node measures on its own clock,
                                   whose rate is Redis's */
    int64_t ready_ns;           /* its last answer came then: what arrives before waits for it */
} node_t;

typedef struct sim {
    sl_rule_t rule;
    uint64_t state[PROP_STATE_WORDS];
    int64_t redis_now; /* Redis's clock never steps back */
    int64_t spent[UNITS_MAX];
    int nspent;
    long granted;
} sim_t;

static int64_t at_redis(sim_t *s, int64_t t)
{
    if (t > s->redis_now) {
        s->redis_now = t;
    }
    return s->redis_now;
}

static void spend(sim_t *s, int64_t t)
{
    if (s->nspent < UNITS_MAX) {
        s->spent[s->nspent++] = t;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One arrival of a unit at node n at Redis time t. */
static void arrive(prng_t *rng, sim_t *s, node_t *n, int64_t t, int64_t lease_ns, int64_t lat_max)
{
    if (t < n->ready_ns) {
        t = n->ready_ns; /* it waited for the node's request in flight */
    }
    n->arrivals++;
    if (n->lease.granted > 0 && n->left > 0 && t + n->offset_ns < n->local_end_ns) {
        if (t >= n->lease.until_ns) {
            FAIL("a unit spent at %" PRId64 ", after its lease's end %" PRId64, t,
                 n->lease.until_ns);
        }
        n->left--;
        spend(s, t);
        return;
    }
    sl_decision_t d;
    if (n->lease.granted > 0 && n->left > 0) { /* ended: the unused part goes back */
        sl_lease_return(&s->rule, s->state, &n->lease, n->left, at_redis(s, t), &d);
    }
    n->lease.granted = n->left = 0;
    n->rate = lease_rate_update(n->rate, n->arrivals, t - n->since_ns, 4 * lease_ns);
    n->arrivals = 0;
    n->since_ns = t;
    int64_t want = lease_want(n->rate, lease_ns, n->remaining, 1);
    int64_t sent = t;
    int64_t at = at_redis(s, sent + prng_range(rng, 0, lat_max));
    sl_lease_t l;
    if (sl_lease(&s->rule, s->state, want, lease_ns, at, &l) != SL_OK) {
        FAIL("sl_lease refused");
        return;
    }
    int64_t back = at + prng_range(rng, 0, lat_max); /* the answer arrives */
    n->ready_ns = back;
    n->remaining = l.remaining;
    if (l.granted == 0) { /* strict: a decision at Redis */
        sl_decide(&s->rule, s->state, 1, at_redis(s, back + prng_range(rng, 0, lat_max)), &d);
        if (d.allowed) {
            spend(s, s->redis_now);
        }
        return;
    }
    s->granted += l.granted;
    n->lease = l;
    n->left = l.granted;
    n->sent_local_ns = sent + n->offset_ns;
    n->local_end_ns = lease_local_end(n->sent_local_ns, &l);
    if (back + n->offset_ns < n->local_end_ns) { /* the waiting decision, when the answer came */
        if (back >= l.until_ns) {
            FAIL("a waiting unit spent at %" PRId64 ", after its lease's end %" PRId64, back,
                 l.until_ns);
        }
        n->left--;
        spend(s, back);
    }
}

static void run_nodes(prng_t *rng, sl_algorithm_t alg)
{
    sim_t s = {0};
    s.rule = gen_rule(rng, alg, false);
    int64_t room = (alg == SL_TOKEN_BUCKET || alg == SL_GCRA)
                       ? s.rule.tolerance_ns - s.rule.interval_ns
                       : s.rule.window_ns;
    if (room < 1) {
        return;
    }
    int64_t lease_ns = prng_range(rng, 1, room / 4 + 1 < room ? room / 4 + 1 : room);
    int64_t lat_max = prng_range(rng, 0, lease_ns / 2 + 1);
    node_t nodes[NODES_MAX];
    int nn = (int)prng_range(rng, 2, NODES_MAX);
    int64_t t = PROP_START + prng_range(rng, 0, 1000000000);
    s.redis_now = t;
    for (int i = 0; i < nn; i++) {
        nodes[i] = (node_t){
            .offset_ns = prng_range(rng, -1000000000, 1000000000), .remaining = -1, .since_ns = t};
    }
    int64_t q = gen_quantum(rng, &s.rule);
    int steps = (int)prng_range(rng, 10, STEPS_MAX);
    for (int i = 0; i < steps; i++) {
        t += gen_gap(rng, &s.rule, q);
        if (t < s.redis_now - lat_max) {
            t = s.redis_now - lat_max; /* arrivals stay near Redis's clock */
        }
        arrive(rng, &s, &nodes[prng_range(rng, 0, nn - 1)], t, lease_ns, lat_max);
    }
    /* a strict key given exactly the spent units at their times admits every one */
    qsort(s.spent, (size_t)s.nspent, sizeof s.spent[0], cmp_i64);
    uint64_t strict[PROP_STATE_WORDS] = {0};
    for (int i = 0; i < s.nspent; i++) {
        sl_decision_t d;
        sl_decide(&s.rule, strict, 1, s.spent[i], &d);
        if (!d.allowed) {
            FAIL("%s: unit %d of %d (at %" PRId64 ") over the limit; lease %" PRId64
                 " ns, %d nodes",
                 sl_algorithm_name(alg), i, s.nspent, s.spent[i], lease_ns, nn);
            print_rule(stderr, &s.rule);
            return;
        }
    }
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 3000);
    static const sl_algorithm_t algs[] = {SL_FIXED_WINDOW, SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET,
                                          SL_GCRA};
    for (long c = 0; c < cases; c++) {
        prng_t rng = prop_case_prng(seed, 99, c);
        run_size(&rng);
        for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
            prng_t r2 = prop_case_prng(seed, (int)algs[a], c);
            run_nodes(&r2, algs[a]);
        }
    }
    printf("prop_lease_node: seed 0x%" PRIx64 ", %ld cases per algorithm: %s\n", seed, cases,
           failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
}
