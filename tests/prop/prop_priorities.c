/*
 * prop_priorities.c - seeded property tests of priorities (sl_decide_reserved(),
 * sl_acquire_reserved(), the table's *_reserved; src/core/reserve.c) on every algorithm: random
 * rules, random reserves (a rule's priorities' reserves above each request's priority), costs
 * and times (some earlier than the latest, which clamp).
 *
 *   reserve   usage after an admitted request with reserve R never passes limit - R: a peek
 *             (no reserve) then still has at least R remaining.
 *   exact     a request with reserve R is admitted exactly when a peek's remaining is at least
 *             cost + R (the rule in docs/algorithms.md); R = 0 with max_delay may also be
 *             admitted with a delay, as ever.
 *   charge    an admitted request charges only its cost: the state is byte for byte what an
 *             ordinary decision (or acquire) of the cost would have written.
 *   shed      a refused request changes nothing (the state's bytes).
 *   critical  when a lower priority is shed for its reserve alone, a request of the same cost
 *             with no reserve (the top priority) still passes.
 *   retry     a shed request's retry_after_ns (>= 0) is enough: asked again that much later with
 *             nothing else arriving, it is admitted; -1 only when cost + R exceed the capacity.
 *   table     the table's sl_table_decide_reserved() / sl_table_acquire_reserved() decide as
 *             the state functions do (allowed, remaining, retry_after).
 *
 * Environment: SLUICE_SEED, SLUICE_PROP_CASES (default 1500). Exit 0 when every property held.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "prop/gen.h"

#define STEPS 150

enum prop { P_RESERVE, P_EXACT, P_CHARGE, P_SHED, P_CRITICAL, P_RETRY, P_TABLE, P_COUNT };
static const char *const names[P_COUNT] = {"reserve",  "exact", "charge", "shed",
                                           "critical", "retry", "table"};
static const char *const claims[P_COUNT] = {
    "usage after an admitted request never passes limit - its reserve",
    "admitted exactly when a peek's remaining >= cost + reserve",
    "an admission charges only its cost (state as an ordinary decision's)",
    "a refusal changes nothing",
    "when a lower priority is shed for its reserve, the top priority passes",
    "a shed request's retry_after is enough; -1 only past the capacity",
    "the table decides as the state functions",
};

static long checked[P_COUNT], failed[P_COUNT];
static int fail_prints;

static void note(int p, bool ok, const sl_rule_t *rule, int step, int64_t cost, int64_t reserve,
                 const sl_decision_t *d)
{
    checked[p]++;
    if (ok)
        return;
    failed[p]++;
    if (fail_prints++ < 10) {
        fprintf(stderr, "%s failed at step %d cost %" PRId64 " reserve %" PRId64 ": ", names[p],
                step, cost, reserve);
        print_decision(stderr, d);
        fprintf(stderr, "\n  ");
        print_rule(stderr, rule);
    }
}

/* The decision of cost with reserve on state: an acquire for a rule that holds. */
static void decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                   int64_t now_ns, sl_decision_t *out)
{
    sl_hold_t hold;
    int rc = sl_rule_holds(rule)
                 ? sl_acquire_reserved(rule, state, cost, reserve, 0, now_ns, 7, out, &hold)
                 : sl_decide_reserved(rule, state, cost, reserve, now_ns, out);
    if (rc != SL_OK) {
        fprintf(stderr, "decide: %s\n", sl_strerror(rc));
        exit(2);
    }
}

static void table_decide(sl_table_t *t, const sl_rule_t *rule, int64_t cost, int64_t reserve,
                         int64_t now_ns, sl_decision_t *out)
{
    sl_hold_t hold;
    int rc = sl_rule_holds(rule)
                 ? sl_table_acquire_reserved(t, "k", 1, cost, reserve, 0, now_ns, out, &hold)
                 : sl_table_decide_reserved(t, "k", 1, cost, reserve, now_ns, out);
    if (rc != SL_OK) {
        fprintf(stderr, "table: %s\n", sl_strerror(rc));
        exit(2);
    }
}

static bool same_answer(const sl_decision_t *a, const sl_decision_t *b)
{
    return a->allowed == b->allowed && a->remaining == b->remaining &&
           a->retry_after_ns == b->retry_after_ns;
}

/* The checks of one shed request (state unchanged by it). */
static void check_shed(const sl_rule_t *rule, const uint64_t *state, int64_t cost, int64_t reserve,
                       int64_t now, bool latest, const sl_decision_t *peek, const sl_decision_t *d,
                       int step)
{
    size_t size = sl_state_size(rule);
    uint64_t copy[PROP_STATE_WORDS];
    sl_decision_t top, later;
    if (peek->allowed && peek->remaining >= cost) { /* only the reserve stood in the way */
        memcpy(copy, state, size);
        decide(rule, copy, cost, 0, now, &top);
        note(P_CRITICAL, top.allowed, rule, step, cost, reserve, &top);
    }
    bool never = cost + reserve > rule->capacity;
    note(P_RETRY, never == (d->retry_after_ns == -1), rule, step, cost, reserve, d);
    if (d->retry_after_ns >= 0 && !never &&
        latest) { /* a time stepped back waits from the latest */
        memcpy(copy, state, size);
        decide(rule, copy, cost, reserve, now + d->retry_after_ns, &later);
        note(P_RETRY, later.allowed, rule, step, cost, reserve, &later);
    }
}

static void run_case(uint64_t seed, sl_algorithm_t alg, long c)
{
    prng_t r = prop_case_prng(seed, (int)alg, c);
    sl_rule_t rule = gen_rule(&r, alg, true);
    if (sl_rule_holds(&rule) && rule.window_ns < SL_NS_PER_MS)
        return;
    size_t size = sl_state_size(&rule);
    uint64_t state[PROP_STATE_WORDS] = {0}, before[PROP_STATE_WORDS], plain[PROP_STATE_WORDS];
    sl_table_t *t = NULL;
    if (sl_table_create(&rule, NULL, &t) != SL_OK)
        exit(2);
    int64_t reserves[3] = {0, prng_range(&r, 0, rule.capacity), prng_range(&r, 0, rule.capacity)};
    int64_t q = gen_quantum(&r, &rule), now = PROP_START;
    for (int step = 0; step < STEPS; step++) {
        now += gen_gap(&r, &rule, q);
        int64_t at = prng_chance(&r, 5) ? now - prng_range(&r, 0, rule.window_ns) : now;
        int64_t cost = gen_cost(&r, &rule), reserve = reserves[prng_range(&r, 0, 2)];
        sl_decision_t peek, d, td, after;
        memcpy(before, state, size);
        memcpy(plain, state, size);
        decide(&rule, plain, 0, 0, at, &peek);
        table_decide(t, &rule, cost, reserve, at, &td);
        decide(&rule, state, cost, reserve, at, &d);
        note(P_TABLE, same_answer(&d, &td), &rule, step, cost, reserve, &td);
        bool fits = peek.allowed && peek.remaining >= cost + reserve;
        /* reserve 0 is an ordinary decision, which max_delay may admit with a delay */
        note(P_EXACT, d.allowed == fits || (reserve == 0 && rule.max_delay_ns > 0), &rule, step,
             cost, reserve, &d);
        if (!d.allowed) {
            note(P_SHED, memcmp(before, state, size) == 0, &rule, step, cost, reserve, &d);
            check_shed(&rule, before, cost, reserve, at, at == now, &peek, &d, step);
            continue;
        }
        decide(&rule, plain, cost, 0, at, &after);
        note(P_CHARGE, memcmp(plain, state, size) == 0, &rule, step, cost, reserve, &d);
        decide(&rule, plain, 0, 0, at, &after); /* the key's own remaining */
        note(P_RESERVE, after.remaining >= reserve, &rule, step, cost, reserve, &after);
    }
    sl_table_free(t);
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 1500);
    printf("seed 0x%" PRIx64 ", %ld cases per algorithm\n", seed, cases);
    for (int alg = 1; alg < 16; alg++) {
        if (sl_algorithm_name((sl_algorithm_t)alg) == NULL)
            continue;
        for (long c = 0; c < cases; c++)
            run_case(seed, (sl_algorithm_t)alg, c);
    }
    return prop_report(P_COUNT, names, claims, checked, failed) == 0 ? 0 : 1;
}
