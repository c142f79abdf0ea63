/*
 * prop_table_skew.c - seeded property tests of sl_table_config_t.skew_ns: callers whose reads of
 * the clock race (a thread reads the time, is preempted, and calls after a thread that read it
 * later) against a table of one shard, with reclaims on other threads at the true time.
 *
 *   same     A table with skew S (any skew, or a random one) gets a random sequence of decisions,
 *            settles, refunds, acquires and releases at times that lag a rising true time by up to
 *            a few windows. A second table, skew 0, gets the same calls each at the time the
 *            first is documented to use: the call's own now when it is the latest so far or
 *            behind the latest by more than S, else the latest. Every reply is the same, field by
 *            field (hold ids aside: each table draws its own).
 *   bounded  token_bucket and gcra without debt, with any skew: every decision's reset_after is at
 *            most the rule's tolerance plus max_delay, and a refusal's retry_after at most the
 *            tolerance plus max_delay (what a bucket emptied at the latest time answers).
 *   control  The same sequences on a table of skew 0 with each call at its own lagging now do
 *            answer a reset_after over that bound in some case (the histories reach the race the
 *            skew is for; without it, the bounded claim would not hold).
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm,
 * default 3000). Exit status 0 when every claim held, 1 otherwise.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "prop/gen.h"

#define STEPS           80
#define KEYS            3
#define HOLDS_MAX       64
#define MAX_FAIL_PRINTS 5

enum { C_SAME, C_BOUNDED, C_CONTROL, N_CLAIMS };
static const char *const claim_names[N_CLAIMS] = {"same", "bounded", "control"};
static const char *const claim_texts[N_CLAIMS] = {
    "a call behind its shard's latest time by up to skew_ns is made at it, others at their own",
    "token_bucket and gcra answer reset_after and retry_after within tolerance + max_delay",
    "without skew, lagging callers are answered over that bound (the race is reached)",
};
static long checked[N_CLAIMS], failed[N_CLAIMS];
static long control_seen; /* replies of the control table over the bound */

static const sl_algorithm_t algorithms[] = {
    SL_FIXED_WINDOW, SL_SLIDING_LOG, SL_SLIDING_WINDOW, SL_SLIDING_BUCKETS,
    SL_TOKEN_BUCKET, SL_GCRA,        SL_CONCURRENCY,
};

static void fail(int claim, const sl_rule_t *rule, uint64_t seed, sl_algorithm_t alg, long idx,
                 int step, const char *what, const sl_decision_t *a, const sl_decision_t *b)
{
    failed[claim]++;
    if (failed[claim] > MAX_FAIL_PRINTS)
        return;
    fprintf(stderr, "%s FAIL: %s at step %d (SLUICE_SEED=%" PRIu64 " case %s:%ld)\n  ",
            claim_names[claim], what, step, seed, sl_algorithm_name(alg), idx);
    print_rule(stderr, rule);
    fprintf(stderr, "  got  ");
    print_decision(stderr, a);
    if (b != NULL) {
        fprintf(stderr, "\n  want ");
        print_decision(stderr, b);
    }
    fprintf(stderr, "\n");
}

static bool same_decision(const sl_decision_t *a, const sl_decision_t *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after_ns == b->retry_after_ns && a->reset_after_ns == b->reset_after_ns &&
           a->delay_ns == b->delay_ns;
}

static sl_table_t *table_new(const sl_rule_t *rule, int64_t skew_ns, uint64_t seed)
{
    sl_table_config_t cfg = {.shards = 1, .seed = seed | 1, .skew_ns = skew_ns};
    sl_table_t *t = NULL;
    if (sl_table_create(rule, &cfg, &t) != SL_OK) {
        fprintf(stderr, "sl_table_create failed\n");
        exit(2);
    }
    return t;
}

/* The time the skewed table is documented to decide a call at, given the latest so far. */
static int64_t documented_now(int64_t *latest, int64_t now, int64_t skew_ns)
{
    if (now >= *latest) {
        *latest = now;
        return now;
    }
    return *latest - now <= skew_ns ? *latest : now;
}

/* One live hold: its id in each table, and its key. */
typedef struct hold_pair {
    uint64_t id_skewed, id_ref;
    int key;
} hold_pair_t;

static void run_case(uint64_t seed, sl_algorithm_t alg, long idx)
{
    prng_t r = prop_case_prng(seed, (int)alg, idx);
    sl_rule_t rule = gen_rule(&r, alg, true);
    bool meter = prop_is_meter(&rule);
    int64_t skew_ns = prng_chance(&r, 50) ? INT64_MAX : prng_range(&r, 0, rule.window_ns);
    int64_t max_lag_ns = prng_range(&r, 1, 3 * rule.window_ns);
    bool debt = prng_chance(&r, 30); /* settles past the limit and refunds in this case */
    int64_t q = gen_quantum(&r, &rule);
    sl_table_t *skewed = table_new(&rule, skew_ns, seed ^ (uint64_t)idx);
    sl_table_t *ref = table_new(&rule, 0, seed ^ (uint64_t)idx);
    sl_table_t *raw = table_new(&rule, 0, seed ^ (uint64_t)idx); /* control: own nows */
    int64_t truth = PROP_START + prng_range(&r, 0, rule.window_ns), latest = 0;
    int64_t bound_ns = rule.tolerance_ns + rule.max_delay_ns;
    hold_pair_t holds[HOLDS_MAX];
    int nholds = 0;
    bool same_ok = true, bounded_ok = true;

    for (int step = 0; step < STEPS; step++) {
        truth += gen_gap(&r, &rule, q);
        int64_t now = truth - (prng_chance(&r, 40) ? prng_range(&r, 0, max_lag_ns) : 0);
        if (now < PROP_START)
            now = PROP_START;
        int op = (int)prng_range(&r, 0, 99);
        if (op >= 94) { /* a reclaim on another thread, at the true time: the shard saw it */
            sl_table_reclaim(skewed, truth);
            sl_table_reclaim(ref, truth);
            sl_table_reclaim(raw, truth);
            latest = truth > latest ? truth : latest;
            continue;
        }
        int64_t at = documented_now(&latest, now, skew_ns);
        char key[2] = {(char)('a' + prng_range(&r, 0, KEYS - 1)), 0};
        int64_t cost = gen_cost(&r, &rule);
        sl_decision_t a, b, c;
        int rc_a, rc_b;
        if (op >= 84 && alg != SL_CONCURRENCY) { /* a batch of two at one now */
            sl_request_t ra[2], rb[2];
            char key2[2] = {(char)('a' + prng_range(&r, 0, KEYS - 1)), 0};
            int64_t cost2 = gen_cost(&r, &rule);
            for (int i = 0; i < 2; i++) {
                ra[i] =
                    (sl_request_t){.key = i ? key2 : key, .key_len = 1, .cost = i ? cost2 : cost};
                rb[i] = ra[i];
            }
            sl_table_decide_batch(skewed, ra, 2, now);
            sl_table_decide_batch(ref, rb, 2, at);
            for (int i = 0; i < 2 && same_ok; i++) {
                if (ra[i].status != rb[i].status ||
                    (ra[i].status == SL_OK && !same_decision(&ra[i].decision, &rb[i].decision))) {
                    same_ok = false;
                    fail(C_SAME, &rule, seed, alg, idx, step, "a batch's reply", &ra[i].decision,
                         &rb[i].decision);
                }
            }
            continue;
        }
        if (alg == SL_CONCURRENCY && op < 40) { /* acquire, or release a live hold */
            if (nholds > 0 && prng_chance(&r, 50)) {
                int i = (int)prng_range(&r, 0, nholds - 1);
                char hk[2] = {(char)('a' + holds[i].key), 0};
                rc_a = sl_table_release(skewed, hk, 1, holds[i].id_skewed, now, &a, NULL);
                rc_b = sl_table_release(ref, hk, 1, holds[i].id_ref, at, &b, NULL);
                holds[i] = holds[--nholds];
            } else {
                sl_hold_t ha = {0, 0, 0}, hb = {0, 0, 0};
                /* a valid hold time: a call refused before it reaches the shard moves no time */
                int64_t hold_ns =
                    prng_chance(&r, 20) ? 0 : prng_range(&r, SL_WINDOW_MIN_NS, rule.window_ns);
                rc_a = sl_table_acquire(skewed, key, 1, cost, hold_ns, now, &a, &ha);
                rc_b = sl_table_acquire(ref, key, 1, cost, hold_ns, at, &b, &hb);
                if (rc_a == SL_OK && rc_b == SL_OK && ha.id != 0 && hb.id != 0 &&
                    nholds < HOLDS_MAX)
                    holds[nholds++] = (hold_pair_t){ha.id, hb.id, key[0] - 'a'};
                if ((ha.id != 0) != (hb.id != 0))
                    rc_a = -1000; /* one made a hold, the other not */
            }
        } else if (debt && op < 55) { /* a settle past the limit */
            int64_t actual = cost + prng_range(&r, 0, rule.capacity);
            rc_a = sl_table_settle(skewed, key, 1, cost, actual, now, now, &a);
            rc_b = sl_table_settle(ref, key, 1, cost, actual, now, at, &b);
        } else if (debt && op < 70) { /* a refund of a charge made a little earlier */
            int64_t charged = now - prng_range(&r, 0, rule.window_ns);
            rc_a = sl_table_refund(skewed, key, 1, cost, charged, now, &a);
            rc_b = sl_table_refund(ref, key, 1, cost, charged, at, &b);
        } else {
            rc_a = sl_table_decide(skewed, key, 1, cost, now, &a);
            rc_b = sl_table_decide(ref, key, 1, cost, at, &b);
            if (meter && !debt && cost <= rule.capacity &&
                sl_table_decide(raw, key, 1, cost, now, &c) == SL_OK &&
                (c.reset_after_ns > bound_ns || (!c.allowed && c.retry_after_ns > bound_ns)))
                control_seen++;
            if (meter && !debt && skew_ns == INT64_MAX && cost <= rule.capacity && rc_a == SL_OK &&
                bounded_ok &&
                (a.reset_after_ns > bound_ns || (!a.allowed && a.retry_after_ns > bound_ns))) {
                bounded_ok = false;
                fail(C_BOUNDED, &rule, seed, alg, idx, step, "over tolerance + max_delay", &a,
                     NULL);
            }
        }
        if (same_ok && (rc_a != rc_b || (rc_a == SL_OK && !same_decision(&a, &b)))) {
            same_ok = false;
            char what[96];
            snprintf(what, sizeof what, "op %d: status %d, want %d", op, rc_a, rc_b);
            fail(C_SAME, &rule, seed, alg, idx, step, what, &a, &b);
        }
    }
    checked[C_SAME]++;
    if (meter && !debt && skew_ns == INT64_MAX)
        checked[C_BOUNDED]++;
    sl_table_free(skewed);
    sl_table_free(ref);
    sl_table_free(raw);
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 3000);
    for (size_t a = 0; a < sizeof algorithms / sizeof algorithms[0]; a++)
        for (long i = 0; i < cases; i++)
            run_case(seed, algorithms[a], i);
    checked[C_CONTROL] = control_seen;
    if (control_seen == 0) {
        failed[C_CONTROL] = 1;
        fprintf(stderr, "control FAIL: no lagging caller was answered over the bound\n");
    }
    long total = prop_report(N_CLAIMS, claim_names, claim_texts, checked, failed);
    printf("seed %" PRIu64 "\n", seed);
    return total == 0 ? 0 : 1;
}
