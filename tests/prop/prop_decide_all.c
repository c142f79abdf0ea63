/*
 * prop_decide_all.c - seeded property tests of sl_table_decide_all()'s answer
 * (include/sluice/sluice.h), checked against sl_decide() on copies of the keys' states.
 *
 * Each case makes two or three tables of random rules (gen_rule(): every algorithm, max_delay
 * sometimes; sliding_log states out of line when the limit is large enough), gives a few keys
 * a random history (decisions, charges past the limit into debt, refunds, at times up to now),
 * and makes one call of 1..8 requests on those keys (a key sometimes named twice, sometimes a
 * key no history touched) with costs 0, 1, random, the capacity and past it. The oracle
 * copies every state (sl_table_get) and decides the requests in order on the copies.
 *
 *   admitted  when the oracle admits every request: the call admits every one, each decision
 *             as the oracle's, and every key holds what the copies hold.
 *   refused   otherwise: the call reports the oracle's first refused request i with the oracle's
 *             refusal; every other request j reports its own cost decided alone on its key as
 *             stored (a copy of the state before the call), nothing charged: a peek of the key
 *             when that cost is admitted (or is 0), else that refusal; and every key's state is
 *             byte for byte what it was.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases, default
 * 20000). Exit status 0 when every property held, 1 otherwise.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "prop/multi_case.h"

enum prop { P_ADMITTED, P_REFUSED, P_COUNT };

static const char *const prop_names[P_COUNT] = {"admitted", "refused"};

static const char *const prop_claims[P_COUNT] = {
    "an admitted call decides as the requests one by one, and charges that",
    "a refused call charges nothing, reports the first refusal, and every other request alone "
    "on its key as stored (a peek when its cost fits)"};

static long checked[P_COUNT], failed[P_COUNT];

static void fail(tcase_t *c, enum prop p, const char *what, size_t i)
{
    multi_fail(c, prop_names[p], &failed[p], what, i);
}

/* A random history on some keys, at times up to c->now_ns. */
static void make_history(tcase_t *c, prng_t *r)
{
    for (int t = 0; t < c->ntables; t++) {
        const sl_rule_t *rule = &c->rules[t];
        for (int k = 0; k < KEYS - 1; k++) { /* the last key is never touched */
            int steps = (int)prng_range(r, 0, 12);
            int64_t at = c->now_ns - prng_range(r, 0, 2 * rule->window_ns);
            for (int s = 0; s < steps; s++) {
                sl_decision_t d;
                size_t len = strlen(c->keys[k]);
                int64_t cost = pick_cost(r, rule);
                if (prng_chance(r, 10))
                    sl_table_settle(c->tables[t], c->keys[k], len, 0, cost, at, at, &d);
                else if (sl_table_decide(c->tables[t], c->keys[k], len, cost, at, &d) == SL_OK &&
                         d.allowed && cost > 0 && prng_chance(r, 15))
                    sl_table_refund(c->tables[t], c->keys[k], len, cost, at, at, &d);
                at += prng_range(r, 0, rule->window_ns / 4 + 1);
                at = at > c->now_ns ? c->now_ns : at;
            }
        }
    }
}

/* The two states of a key under rule decide alike: costs 0, 1 and the capacity, now and later.
 * (Bytes may differ where they mean nothing: a sliding_log buffer's size, a fresh state.) */
static bool same_behaviour(const sl_rule_t *rule, const kstate_t *x, const kstate_t *y, int64_t now)
{
    const int64_t costs[] = {0, 1, rule->capacity};
    const int64_t later[] = {0, rule->window_ns / 3, rule->window_ns + 1};
    for (int c = 0; c < 3; c++)
        for (int l = 0; l < 3; l++) {
            kstate_t a = *x, b = *y;
            sl_decision_t da, db;
            sl_decide(rule, a.w, costs[c], now + later[l], &da);
            sl_decide(rule, b.w, costs[c], now + later[l], &db);
            if (!same_decision(&da, &db))
                return false;
        }
    return true;
}

static void run_case(uint64_t seed, long idx)
{
    static const sl_algorithm_t algs[] = {SL_FIXED_WINDOW, SL_SLIDING_WINDOW, SL_SLIDING_BUCKETS,
                                          SL_SLIDING_LOG,  SL_TOKEN_BUCKET,   SL_GCRA};
    tcase_t *c = calloc(1, sizeof(*c));
    prng_t r = prop_case_prng(seed, 0, idx);
    c->seed = seed;
    c->idx = idx;
    c->ntables = (int)prng_range(&r, 2, TABLES_MAX);
    c->now_ns = PROP_START + prng_range(&r, 0, 10 * SL_NS_PER_SEC);
    for (int t = 0; t < c->ntables; t++) {
        c->rules[t] = gen_rule(&r, algs[prng_range(&r, 0, 5)], true);
        if (sl_table_create(&c->rules[t], NULL, &c->tables[t]) != SL_OK) {
            fprintf(stderr, "sl_table_create failed\n");
            exit(2);
        }
    }
    for (int k = 0; k < KEYS; k++)
        snprintf(c->keys[k], sizeof(c->keys[k]), "key-%d", k);
    make_history(c, &r);
    c->n = (size_t)prng_range(&r, 1, REQS_MAX);
    for (size_t i = 0; i < c->n; i++) {
        c->qt[i] = (int)prng_range(&r, 0, c->ntables - 1);
        c->qk[i] = (int)prng_range(&r, 0, KEYS - 1);
        c->q[i] = (sl_multi_request_t){.table = c->tables[c->qt[i]],
                                       .key = c->keys[c->qk[i]],
                                       .key_len = strlen(c->keys[c->qk[i]]),
                                       .cost = pick_cost(&r, &c->rules[c->qt[i]])};
    }
    snapshot(c, c->before);

    /* the oracle: in order on copies */
    kstate_t seq[TABLES_MAX][KEYS];
    memcpy(seq, c->before, sizeof(seq));
    sl_decision_t want[REQS_MAX];
    size_t first = c->n;
    for (size_t i = 0; i < c->n && first == c->n; i++) {
        sl_decide(&c->rules[c->qt[i]], seq[c->qt[i]][c->qk[i]].w, c->q[i].cost, c->now_ns,
                  &want[i]);
        if (!want[i].allowed)
            first = i;
    }

    size_t refused = REQS_MAX + 1;
    int rc = sl_table_decide_all(c->q, c->n, c->now_ns, &refused);
    kstate_t after[TABLES_MAX][KEYS];
    snapshot(c, after);
    enum prop p = first == c->n ? P_ADMITTED : P_REFUSED;
    checked[p]++;
    if (rc != SL_OK || refused != first) {
        fail(c, p, rc != SL_OK ? "an error" : "another request refused", refused);
    } else if (p == P_ADMITTED) {
        for (size_t i = 0; i < c->n; i++)
            if (!same_decision(&c->q[i].decision, &want[i])) {
                fail(c, p, "a decision differs from the one by one", i);
                break;
            }
        for (int t = 0; t < c->ntables; t++)
            for (int k = 0; k < KEYS; k++)
                if (!same_behaviour(&c->rules[t], &after[t][k], &seq[t][k], c->now_ns)) {
                    fail(c, p, "a key holds other than the one by one charges", c->n);
                    t = c->ntables;
                    break;
                }
    } else {
        size_t at;
        const char *why = refused_why(c, want, first, &at);
        if (why != NULL)
            fail(c, p, why, at);
        if (memcmp(after, c->before, sizeof(after)) != 0)
            fail(c, p, "a refused call changed a key", c->n);
    }
    for (int t = 0; t < c->ntables; t++)
        sl_table_free(c->tables[t]);
    free(c);
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 20000);
    printf("prop_decide_all: seed 0x%" PRIx64 ", %ld cases\n", seed, cases);
    for (long i = 0; i < cases; i++)
        run_case(seed, i);
    return prop_report(P_COUNT, prop_names, prop_claims, checked, failed) == 0 ? 0 : 1;
}
