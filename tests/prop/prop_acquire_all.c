/*
 * prop_acquire_all.c - seeded property tests of sl_table_decide_all() with acquires
 * (include/sluice/sluice.h): several holds are made all or none.
 *
 * Each case makes two or three tables: one or two of in-flight rules (concurrency, limits 1 to
 * 12, so states are inline and out of line) and at most one of another algorithm. A few keys
 * get a random history (acquires of random timeouts at times up to now, some released). One call
 * of 1..8 requests follows: on an in-flight table an acquire of cost 0, 1, random, the limit or
 * past it, with its own timeout (0: the rule's) or, now and then, one past the rule's; on the
 * other table a decision. The oracle copies every state (sl_table_get) and decides the requests
 * in order on the copies (sl_acquire(), sl_decide()).
 *
 *   admitted  when the oracle admits every request: every decision is the oracle's; every acquire
 *             of a cost > 0 reports a hold, of an id no other hold of its key has, expiring at
 *             now + its timeout; each key holds in flight what the copies hold; releasing each
 *             hold succeeds once (a second release is SL_EHOLD), and afterwards each key holds in
 *             flight what it held before the call.
 *   refused   otherwise: the oracle's first refused request is reported with its refusal, every
 *             other as it stands alone (as prop_decide_all.c says), no hold is reported, and
 *             every key's state is byte for byte what it was.
 *   invalid   a timeout past a rule's hold timeout: SL_EHOLDTIME for that request, nothing
 *             changed, no hold reported.
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

enum prop { P_ADMITTED, P_REFUSED, P_INVALID, P_COUNT };

static const char *const prop_names[P_COUNT] = {"admitted", "refused", "invalid"};

static const char *const prop_claims[P_COUNT] = {
    "an admitted call decides one by one, each acquire's hold released exactly once",
    "a refused call makes no hold, charges nothing, and reports as prop_decide_all's",
    "a timeout past the rule's is an error of its request, and nothing changes"};

static long checked[P_COUNT], failed[P_COUNT];

static void fail(tcase_t *c, enum prop p, const char *what, size_t i)
{
    multi_fail(c, prop_names[p], &failed[p], what, i);
}

static bool holds(const tcase_t *c, int t)
{
    return sl_rule_holds(&c->rules[t]);
}

/* A random history on some keys, at times up to c->now_ns. */
static void make_history(tcase_t *c, prng_t *r)
{
    for (int t = 0; t < c->ntables; t++) {
        const sl_rule_t *rule = &c->rules[t];
        for (int k = 0; k < KEYS - 1; k++) { /* the last key is never touched */
            int steps = (int)prng_range(r, 0, 10);
            int64_t at = c->now_ns - prng_range(r, 0, 2 * rule->window_ns);
            for (int s = 0; s < steps; s++) {
                sl_decision_t d;
                sl_hold_t h;
                size_t len = strlen(c->keys[k]);
                int64_t cost = prng_range(r, 0, rule->capacity / 2 + 1);
                if (!holds(c, t)) {
                    sl_table_decide(c->tables[t], c->keys[k], len, cost, at, &d);
                } else if (sl_table_acquire(c->tables[t], c->keys[k], len, cost,
                                            prng_range(r, 0, rule->window_ns), at, &d,
                                            &h) == SL_OK &&
                           h.id != 0 && prng_chance(r, 30)) {
                    sl_table_release(c->tables[t], c->keys[k], len, h.id, at, &d, NULL);
                }
                at += prng_range(r, 0, rule->window_ns / 4 + 1);
                at = at > c->now_ns ? c->now_ns : at;
            }
        }
    }
}

/* Units in flight on key k of in-flight table t, as its state stands in s. */
static int64_t in_flight(const tcase_t *c, int t, const kstate_t *s)
{
    return sl_in_flight(&c->rules[t], s->w, c->now_ns);
}

static bool no_holds(const tcase_t *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->q[i].hold.id != 0 || c->q[i].hold.until_ns != 0)
            return false;
    return true;
}

/* An admitted call's holds: each made as asked, of an id its key has once; each released once;
 * afterwards every key in flight as before the call. Returns what failed, or NULL. */
static const char *check_holds(tcase_t *c, const sl_decision_t *want)
{
    for (size_t i = 0; i < c->n; i++) {
        const sl_multi_request_t *q = &c->q[i];
        if (!q->acquire)
            continue;
        if ((q->cost > 0) != (q->hold.id != 0))
            return "an acquire's hold missing, or one made for a peek";
        int64_t timeout = q->hold_ns != 0 ? q->hold_ns : c->rules[c->qt[i]].window_ns;
        if (q->hold.id != 0 && q->hold.until_ns != c->now_ns + timeout)
            return "a hold expires other than at now + its timeout";
        for (size_t j = 0; j < i; j++)
            if (q->hold.id != 0 && c->q[j].hold.id == q->hold.id && c->qt[j] == c->qt[i] &&
                c->qk[j] == c->qk[i])
                return "two holds of one key have one id";
        (void)want;
    }
    for (size_t i = 0; i < c->n; i++) {
        const sl_multi_request_t *q = &c->q[i];
        sl_decision_t d;
        if (q->hold.id == 0)
            continue;
        if (sl_table_release(q->table, q->key, q->key_len, q->hold.id, c->now_ns, &d, NULL) !=
            SL_OK)
            return "a hold made could not be released";
        if (sl_table_release(q->table, q->key, q->key_len, q->hold.id, c->now_ns, &d, NULL) !=
            SL_EHOLD)
            return "a hold was released twice";
    }
    kstate_t after[TABLES_MAX][KEYS];
    snapshot(c, after);
    for (int t = 0; t < c->ntables; t++)
        for (int k = 0; k < KEYS && holds(c, t); k++)
            if (in_flight(c, t, &after[t][k]) != in_flight(c, t, &c->before[t][k]))
                return "released, a key does not hold what it held before the call";
    return NULL;
}

/* long because: one case is made, decided by the oracle and by the call, and checked by each
 * property in turn, which read best in one place */
static void run_case(uint64_t seed, long idx)
{
    static const sl_algorithm_t others[] = {SL_FIXED_WINDOW, SL_SLIDING_LOG, SL_TOKEN_BUCKET,
                                            SL_GCRA};
    tcase_t *c = calloc(1, sizeof(*c));
    prng_t r = prop_case_prng(seed, 0, idx);
    c->seed = seed;
    c->idx = idx;
    c->ntables = (int)prng_range(&r, 2, TABLES_MAX);
    c->now_ns = PROP_START + prng_range(&r, 0, 10 * SL_NS_PER_SEC);
    for (int t = 0; t < c->ntables; t++) {
        if (t == 0 || (t == 1 && prng_chance(&r, 60))) {
            sl_rule_init(&c->rules[t], SL_CONCURRENCY, prng_range(&r, 1, 12),
                         prng_range(&r, 1, 60) * SL_NS_PER_SEC);
        } else {
            c->rules[t] = gen_rule(&r, others[prng_range(&r, 0, 3)], true);
        }
        if (sl_table_create(&c->rules[t], NULL, &c->tables[t]) != SL_OK) {
            fprintf(stderr, "sl_table_create failed\n");
            exit(2);
        }
    }
    for (int k = 0; k < KEYS; k++)
        snprintf(c->keys[k], sizeof(c->keys[k]), "key-%d", k);
    make_history(c, &r);
    c->n = (size_t)prng_range(&r, 1, REQS_MAX);
    size_t invalid = c->n;
    for (size_t i = 0; i < c->n; i++) {
        int t = c->qt[i] = (int)prng_range(&r, 0, c->ntables - 1);
        c->qk[i] = (int)prng_range(&r, 0, KEYS - 1);
        const sl_rule_t *rule = &c->rules[t];
        c->q[i] = (sl_multi_request_t){.table = c->tables[t],
                                       .key = c->keys[c->qk[i]],
                                       .key_len = strlen(c->keys[c->qk[i]]),
                                       .cost = pick_cost(&r, rule),
                                       .acquire = holds(c, t),
                                       .hold = {99, 99, 99}}; /* overwritten by the call */
        if (holds(c, t) && prng_chance(&r, 50))
            c->q[i].hold_ns = prng_range(&r, SL_NS_PER_MS, rule->window_ns);
        if (holds(c, t) && invalid == c->n && prng_chance(&r, 3)) {
            c->q[i].hold_ns = rule->window_ns + 1;
            invalid = i;
        }
    }
    snapshot(c, c->before);

    size_t refused = REQS_MAX + 1;
    int rc = sl_table_decide_all(c->q, c->n, c->now_ns, &refused);
    kstate_t after[TABLES_MAX][KEYS];
    snapshot(c, after);
    if (invalid < c->n) {
        checked[P_INVALID]++;
        if (rc != SL_EHOLDTIME || refused != invalid || c->q[invalid].status != SL_EHOLDTIME)
            fail(c, P_INVALID, "not SL_EHOLDTIME for the request past its timeout", refused);
        else if (memcmp(after, c->before, sizeof(after)) != 0 || !no_holds(c))
            fail(c, P_INVALID, "a key changed, or a hold was reported", c->n);
        goto done;
    }

    /* the oracle: in order on copies (ids differ from the table's: only decisions compared) */
    kstate_t seq[TABLES_MAX][KEYS];
    memcpy(seq, c->before, sizeof(seq));
    sl_decision_t want[REQS_MAX];
    size_t first = c->n;
    for (size_t i = 0; i < c->n && first == c->n; i++) {
        int t = c->qt[i], k = c->qk[i];
        sl_hold_t h;
        if (c->q[i].acquire)
            sl_acquire(&c->rules[t], seq[t][k].w, c->q[i].cost, c->q[i].hold_ns, c->now_ns, i + 1,
                       &want[i], &h);
        else
            sl_decide(&c->rules[t], seq[t][k].w, c->q[i].cost, c->now_ns, &want[i]);
        if (!want[i].allowed)
            first = i;
    }
    enum prop p = first == c->n ? P_ADMITTED : P_REFUSED;
    checked[p]++;
    if (rc != SL_OK || refused != first) {
        fail(c, p, rc != SL_OK ? "an error" : "another request refused", refused);
    } else if (p == P_ADMITTED) {
        const char *why = NULL;
        for (size_t i = 0; i < c->n && why == NULL; i++)
            if (!same_decision(&c->q[i].decision, &want[i]))
                why = "a decision differs from the one by one";
        for (int t = 0; t < c->ntables && why == NULL; t++)
            for (int k = 0; k < KEYS && holds(c, t); k++)
                if (in_flight(c, t, &after[t][k]) != in_flight(c, t, &seq[t][k]))
                    why = "a key holds in flight other than the one by one";
        if (why == NULL)
            why = check_holds(c, want);
        if (why != NULL)
            fail(c, p, why, c->n);
    } else {
        size_t at;
        const char *why = refused_why(c, want, first, &at);
        if (why != NULL)
            fail(c, p, why, at);
        if (!no_holds(c))
            fail(c, p, "a refused call reported a hold", c->n);
        if (memcmp(after, c->before, sizeof(after)) != 0)
            fail(c, p, "a refused call changed a key", c->n);
    }
done:
    for (int t = 0; t < c->ntables; t++)
        sl_table_free(c->tables[t]);
    free(c);
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 20000);
    printf("prop_acquire_all: seed 0x%" PRIx64 ", %ld cases\n", seed, cases);
    for (long i = 0; i < cases; i++)
        run_case(seed, i);
    return prop_report(P_COUNT, prop_names, prop_claims, checked, failed) == 0 ? 0 : 1;
}
