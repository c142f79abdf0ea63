/*
 * multi_case.h - what the property tests of sl_table_decide_all() share (prop_decide_all.c,
 * prop_acquire_all.c): one case's tables, keys and requests, its failure report, the costs it
 * picks, the keys' states copied out, and a request's answer alone on its key as stored.
 */
#ifndef SLUICE_TESTS_PROP_MULTI_CASE_H
#define SLUICE_TESTS_PROP_MULTI_CASE_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sluice/sluice.h"

#include "prop/gen.h"

#define TABLES_MAX      3
#define KEYS            4 /* per table; the last one no history touches */
#define REQS_MAX        8
#define MAX_FAIL_PRINTS 5

typedef struct kstate {
    uint64_t w[PROP_STATE_WORDS];
} kstate_t;

typedef struct tcase {
    uint64_t seed;
    long idx;
    int ntables;
    sl_rule_t rules[TABLES_MAX];
    sl_table_t *tables[TABLES_MAX];
    char keys[KEYS][16];
    sl_multi_request_t q[REQS_MAX];
    int qt[REQS_MAX], qk[REQS_MAX]; /* request i's table and key */
    size_t n;
    int64_t now_ns;
    kstate_t before[TABLES_MAX][KEYS];
} tcase_t;

/* Counts a failure of property `name` and prints the first few, with how to replay the case. */
static inline void multi_fail(const tcase_t *c, const char *name, long *failed, const char *what,
                              size_t i)
{
    if ((*failed)++ < MAX_FAIL_PRINTS)
        fprintf(stderr,
                "%s FAIL: %s (request %zu of %zu); replay: SLUICE_SEED=0x%" PRIx64
                " SLUICE_PROP_CASES=%ld\n",
                name, what, i, c->n, c->seed, c->idx + 1);
}

static inline bool same_decision(const sl_decision_t *a, const sl_decision_t *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after_ns == b->retry_after_ns && a->reset_after_ns == b->reset_after_ns &&
           a->delay_ns == b->delay_ns;
}

/* A request's cost: 0, 1, random, the capacity or past it. */
static inline int64_t pick_cost(prng_t *r, const sl_rule_t *rule)
{
    switch (prng_range(r, 0, 5)) {
    case 0:
        return 0;
    case 1:
    case 2:
        return 1;
    case 3:
        return rule->capacity;
    case 4:
        return rule->capacity + 1;
    default:
        return prng_range(r, 1, rule->capacity);
    }
}

/* Every key's state as its table holds it (zero for an absent key). */
static inline void snapshot(tcase_t *c, kstate_t out[TABLES_MAX][KEYS])
{
    memset(out, 0, sizeof(kstate_t) * TABLES_MAX * KEYS);
    for (int t = 0; t < c->ntables; t++)
        for (int k = 0; k < KEYS; k++)
            sl_table_get(c->tables[t], c->keys[k], strlen(c->keys[k]), out[t][k].w);
}

/* Request i's cost alone on its key as stored: a peek when it fits, else its refusal. */
static inline sl_decision_t alone(tcase_t *c, size_t i)
{
    int t = c->qt[i], k = c->qk[i];
    kstate_t a = c->before[t][k], b = c->before[t][k];
    sl_decision_t peek, d;
    sl_decide(&c->rules[t], a.w, 0, c->now_ns, &peek);
    sl_decide(&c->rules[t], b.w, c->q[i].cost, c->now_ns, &d);
    return c->q[i].cost == 0 || d.allowed ? peek : d;
}

/* A refused call's answers: the first refused request (`first`) with the oracle's refusal
 * (want[first]), every other as it stands alone, each with status SL_OK. Returns what differs,
 * with *at the request, or NULL. */
static inline const char *refused_why(tcase_t *c, const sl_decision_t *want, size_t first,
                                      size_t *at)
{
    for (size_t i = 0; i < c->n; i++) {
        sl_decision_t w = i == first ? want[i] : alone(c, i);
        if (!same_decision(&c->q[i].decision, &w) || c->q[i].status != SL_OK) {
            *at = i;
            return i == first ? "the refusal differs" : "not as it stands alone";
        }
    }
    return NULL;
}

#endif /* SLUICE_TESTS_PROP_MULTI_CASE_H */
