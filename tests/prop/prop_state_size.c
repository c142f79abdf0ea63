/*
 * prop_state_size.c - seeded property test of the variable-size contract (src/core/core.h):
 * a state kept in a buffer that grows and shrinks with what it holds decides exactly as the same
 * state in a full sl_state_size() buffer.
 *
 * Each case runs one random sequence on two keys of one rule: `full`, a zeroed sl_state_size()
 * buffer driven through the public functions (sl_decide, sl_settle, sl_refund,
 * sl_state_convert), and `var`, a buffer of core_state_min() bytes driven as a table drives it:
 * before each operation it is moved (core_state_move) to a buffer of core_state_need() bytes when
 * its own is smaller, and now and then after one to a buffer of a random size from what it needs
 * up to twice that (shrinking or growing). The sequence: decisions of random costs (peeks, more
 * than the limit), settles past the limit (debt, which merges sliding_log entries on a full
 * ring) and below it, refunds of earlier admissions (as of their time or a time before), a clock
 * that steps back, and conversions to another rule of the algorithm and back (`var` through
 * core_state_convert into core_state_convert_need() bytes). After each step:
 *
 *   same   both report the same decision (every field); a peek at a random later time does too,
 *          and both are fresh at it or neither; both pack to the same bytes;
 *   size   core_state_bytes() is the buffer's size, or for a buffer of a size between two of a
 *          state's sizes the one below it (the move uses what whole entries it can);
 *          core_state_check() accepts var in a buffer of that length and refuses it in one byte
 *          less; core_state_need() <= sl_state_size(), and for sliding_log at most one entry
 *          more than the admissions and charges so far.
 *
 * sliding_log also runs with large limits (up to SL_LOG_LIMIT_MAX, costs up to the limit), where
 * a key holding a few requests must need a few entries' bytes, not the limit's.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm,
 * default 4000). Exit status 0 when every property held, 1 otherwise.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "sluice/sluice.h"

#include "prop/gen.h"

#define STEPS           150
#define ADMISSIONS_MAX  STEPS
#define PACKED_MAX      (1 << 14) /* packed bytes of every state made here */
#define MAX_FAIL_PRINTS 5

enum prop { P_SAME, P_SIZE, P_COUNT };

static const char *const prop_names[P_COUNT] = {"same", "size"};

static const char *const prop_claims[P_COUNT] = {
    "a state in a buffer of its own size decides as in a full one",
    "the buffer is what the state says, checked against its length, never above the full size",
};

static const sl_algorithm_t algorithms[] = {
    SL_SLIDING_LOG,     SL_FIXED_WINDOW, SL_SLIDING_WINDOW,
    SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA,
};

typedef struct run {
    uint64_t seed;
    long checked[P_COUNT];
    long failed[P_COUNT];
    long grown, shrunk, converted, stepped_back, merged_rings, big_rules;
} run_t;

typedef struct pcase {
    run_t *run;
    sl_rule_t rule;
    long idx;
    bool printed;
} pcase_t;

static void failf(pcase_t *c, enum prop p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void failf(pcase_t *c, enum prop p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    prop_vfail(&c->run->failed[p], MAX_FAIL_PRINTS, prop_names[p], &c->rule, NULL, c->idx,
               c->run->seed, &c->printed, fmt, ap);
    va_end(ap);
}

/* A key in a buffer of its own size. */
typedef struct var_key {
    unsigned char *buf;
    size_t bytes;
} var_key_t;

/* Moves the key's state to a new buffer of `bytes` under rule. */
static void var_move(const sl_rule_t *rule, var_key_t *k, size_t bytes)
{
    unsigned char *to = malloc(bytes);
    if (to == NULL) {
        abort();
    }
    memset(to, 0xa5, bytes); /* nothing may read what the move does not write */
    core_state_move(rule, k->buf, to, bytes);
    free(k->buf);
    k->buf = to;
    k->bytes = bytes;
}

/* Room for the next operation, as a table makes it. */
static void var_room(run_t *run, const sl_rule_t *rule, var_key_t *k)
{
    size_t need = core_state_need(rule, k->buf);
    if (core_state_bytes(rule, k->buf) < need) {
        var_move(rule, k, need);
        run->grown++;
    }
}

/* After an operation: sometimes a buffer of another size, from what it needs to twice that. */
static void var_resize(run_t *run, prng_t *rng, const sl_rule_t *rule, var_key_t *k)
{
    if (!prng_chance(rng, 30)) {
        return;
    }
    size_t need = core_state_need(rule, k->buf), full = sl_state_size(rule);
    size_t bytes = need + (size_t)prng_range(rng, 0, (int64_t)need);
    bytes = bytes < full ? bytes : full;
    if (bytes != k->bytes) {
        run->shrunk += bytes < k->bytes;
        run->grown += bytes > k->bytes;
        var_move(rule, k, bytes);
    }
}

/* A rule of the algorithm: gen_rule()'s, or for sliding_log now and then a large limit. */
static sl_rule_t case_rule(run_t *run, prng_t *rng, sl_algorithm_t alg)
{
    sl_rule_t r = gen_rule(rng, alg, true);
    if (alg == SL_SLIDING_LOG && prng_chance(rng, 3)) {
        r.limit = prng_chance(rng, 50) ? SL_LOG_LIMIT_MAX : prng_range(rng, 1000, 100000);
        r.burst = SL_DEFAULT;
        r.buckets = SL_DEFAULT;
        if (sl_rule_prepare(&r) != SL_OK) {
            abort();
        }
        run->big_rules++;
    }
    return r;
}

/* Another rule of the same algorithm (a changed limit or window), for a conversion. */
static sl_rule_t other_rule(prng_t *rng, const sl_rule_t *rule)
{
    sl_rule_t r = *rule;
    if (prng_chance(rng, 50)) {
        r.limit = prng_range(rng, 1, rule->limit > 20 ? rule->limit : 20);
    } else {
        r = gen_rule(rng, rule->algorithm, true);
        r.limit = rule->limit; /* keeps the big rules' buffers small enough to copy */
    }
    if (sl_rule_prepare(&r) != SL_OK) {
        return *rule;
    }
    return r;
}

/* Compares the two keys at `at` (a peek), their freshness and their packed forms. */
static bool compare(pcase_t *c, const unsigned char *full, const var_key_t *v, int64_t at, int step)
{
    const sl_rule_t *rule = &c->rule;
    static unsigned char a[PACKED_MAX], b[PACKED_MAX];
    sl_decision_t x, y;
    size_t packed_full = core_state_packed_need(rule, full);
    if (packed_full > PACKED_MAX || core_state_packed_need(rule, v->buf) > PACKED_MAX) {
        abort();
    }
    size_t n = sl_state_pack(rule, full, a), m = sl_state_pack(rule, v->buf, b);
    if (n != m || memcmp(a, b, n) != 0) {
        failf(c, P_SAME, "step %d: the packed forms differ (%zu and %zu bytes)", step, n, m);
        return false;
    }
    /* a peek writes nothing: the full one through the public call, the other in its buffer */
    sl_decide(rule, (void *)full, 0, at, &x);
    core_decide(rule, v->buf, 0, at, &y);
    if (!decision_eq(&x, &y) ||
        sl_state_is_fresh(rule, full, at) != sl_state_is_fresh(rule, v->buf, at)) {
        failf(c, P_SAME, "step %d: a peek differs, or freshness", step);
        return false;
    }
    return true;
}

/* The size properties of the key in its own buffer. */
static bool check_size(pcase_t *c, const var_key_t *v, int step, long writes)
{
    const sl_rule_t *rule = &c->rule;
    size_t full = sl_state_size(rule), says = core_state_bytes(rule, v->buf);
    bool log = rule->algorithm == SL_SLIDING_LOG; /* 16-byte entries */
    if (says > v->bytes || (log && says + 16 <= v->bytes) || core_state_need(rule, v->buf) > full ||
        core_state_check(rule, v->buf, v->bytes) != SL_OK ||
        sl_state_check_len(rule, v->buf, v->bytes) != SL_OK ||
        core_state_check(rule, v->buf, says - 1) != SL_ESTATE) {
        failf(c, P_SIZE,
              "step %d: a buffer of %zu bytes, the state says %zu, needs %zu (full %zu), "
              "check %d",
              step, v->bytes, core_state_bytes(rule, v->buf), core_state_need(rule, v->buf), full,
              core_state_check(rule, v->buf, v->bytes));
        return false;
    }
    /* one entry per admission or charge at most, whatever the limit and the costs */
    if (log && core_state_need(rule, v->buf) > 32 + 16 * (size_t)(writes + 1)) {
        failf(c, P_SIZE, "step %d: needs %zu bytes after %ld admissions and charges", step,
              core_state_need(rule, v->buf), writes);
        return false;
    }
    return true;
}

/* One operation on both keys at now; false after a failure. */
typedef struct history {
    int64_t t[ADMISSIONS_MAX], cost[ADMISSIONS_MAX];
    int n;
} history_t;

static bool step_both(pcase_t *c, prng_t *rng, unsigned char *full, var_key_t *v, history_t *h,
                      int64_t now, int step, long *writes)
{
    const sl_rule_t *rule = &c->rule;
    sl_decision_t x, y;
    int p = (int)prng_range(rng, 0, 99);
    var_room(c->run, rule, v);
    if (p < 70 || h->n == 0) {
        int64_t cost =
            prng_chance(rng, 10) ? prng_range(rng, 0, rule->capacity + 2) : gen_cost(rng, rule);
        sl_decide(rule, full, cost, now, &x);
        core_decide(rule, v->buf, cost, now, &y);
        *writes += x.allowed && cost > 0;
        if (x.allowed && cost > 0 && h->n < ADMISSIONS_MAX) {
            h->t[h->n] = now;
            h->cost[h->n++] = cost;
        }
    } else if (p < 85) { /* past the limit: debt */
        int64_t debt = prng_range(rng, 1, prng_chance(rng, 50) ? 3 : 2 * rule->capacity + 3);
        (*writes)++;
        sl_settle(rule, full, 0, debt, now, now, &x);
        core_settle(rule, v->buf, 0, debt, now, now, &y);
    } else { /* a refund of part of an earlier admission, as of its time or before */
        int j = (int)prng_range(rng, 0, h->n - 1);
        int64_t cost = prng_range(rng, 1, h->cost[j] > 0 ? h->cost[j] : 1);
        int64_t at = h->t[j] - (prng_chance(rng, 25) ? prng_range(rng, 0, rule->window_ns) : 0);
        sl_refund(rule, full, cost, at, now, &x);
        core_settle(rule, v->buf, cost, 0, at, now, &y);
        h->cost[j] -= h->cost[j] < cost ? h->cost[j] : cost;
    }
    if (!decision_eq(&x, &y)) {
        failf(c, P_SAME,
              "step %d: full allowed=%d rem=%" PRId64 " retry=%" PRId64
              ", own size allowed=%d rem=%" PRId64 " retry=%" PRId64,
              step, x.allowed, x.remaining, x.retry_after_ns, y.allowed, y.remaining,
              y.retry_after_ns);
        return false;
    }
    return true;
}

/* Converts both keys to `to` at now; the case's rule becomes `to`. */
static bool convert_both(pcase_t *c, const sl_rule_t *to, unsigned char **full, var_key_t *v,
                         int64_t now, int step)
{
    const sl_rule_t from = c->rule;
    unsigned char *nf = calloc(1, sl_state_size(to));
    size_t bytes = core_state_convert_need(&from, v->buf, to);
    unsigned char *nv = malloc(bytes);
    if (nf == NULL || nv == NULL) {
        abort();
    }
    int a = sl_state_convert(&from, *full, to, nf, now);
    int b = core_state_convert(&from, v->buf, to, nv, bytes, now);
    free(*full);
    free(v->buf);
    *full = nf;
    v->buf = nv;
    v->bytes = bytes;
    c->rule = *to;
    c->run->converted++;
    if (a != SL_OK || b != SL_OK || bytes > sl_state_size(to)) {
        failf(c, P_SIZE, "step %d: a conversion failed (%d, %d) or needs %zu bytes", step, a, b,
              bytes);
        return false;
    }
    return true;
}

/* Entries a sliding_log holds (the header's count). */
static uint32_t log_entries(const unsigned char *state)
{
    uint32_t count;
    memcpy(&count, state + 4, sizeof(count));
    return count;
}

static void run_case(run_t *run, sl_algorithm_t alg, long idx)
{
    prng_t rng = prop_case_prng(run->seed, (int)alg, idx);
    pcase_t c = {run, case_rule(run, &rng, alg), idx, false};
    unsigned char *full = calloc(1, sl_state_size(&c.rule));
    var_key_t v = {malloc(core_state_min(&c.rule)), core_state_min(&c.rule)};
    history_t h = {.n = 0};
    if (full == NULL || v.buf == NULL) {
        abort();
    }
    core_state_init(&c.rule, v.buf, v.bytes);
    const int64_t q = gen_quantum(&rng, &c.rule);
    int64_t now = PROP_START + prng_range(&rng, 0, c.rule.window_ns), max_now = now;
    bool merged = false;
    long writes = 0; /* admissions and charges: entries a sliding_log may hold */
    run->checked[P_SAME]++;
    run->checked[P_SIZE]++;
    for (int i = 0; i < STEPS; i++) {
        now = prng_chance(&rng, 5) ? max_now - prng_range(&rng, 0, c.rule.window_ns)
                                   : max_now + gen_gap(&rng, &c.rule, q);
        run->stepped_back += now < max_now;
        max_now = now > max_now ? now : max_now;
        if (prng_chance(&rng, 2)) {
            sl_rule_t to = other_rule(&rng, &c.rule);
            if (!convert_both(&c, &to, &full, &v, now, i)) {
                break;
            }
            h.n = 0; /* admissions under the old rule are not refunded under the new one */
        } else if (!step_both(&c, &rng, full, &v, &h, now, i, &writes)) {
            break;
        }
        if (!check_size(&c, &v, i, writes) ||
            !compare(&c, full, &v, max_now + prng_range(&rng, 0, 2 * c.rule.window_ns), i)) {
            break;
        }
        if (alg == SL_SLIDING_LOG && !merged && log_entries(v.buf) == c.rule.limit) {
            merged = true; /* full of entries: the next debt merges */
            run->merged_rings++;
        }
        var_resize(run, &rng, &c.rule, &v);
    }
    free(v.buf);
    free(full);
}

int main(void)
{
    run_t run;
    memset(&run, 0, sizeof(run));
    run.seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 4000);
    clock_t t0 = clock();
    printf("prop_state_size: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases per algorithm\n",
           run.seed, cases);
    for (size_t a = 0; a < sizeof(algorithms) / sizeof(algorithms[0]); a++) {
        for (long i = 0; i < cases; i++) {
            run_case(&run, algorithms[a], i);
        }
    }
    long total = prop_report(P_COUNT, prop_names, prop_claims, run.checked, run.failed);
    printf("buffers grown %ld, shrunk %ld; %ld conversions; %ld steps back; %ld sliding_log keys "
           "full of entries; %ld large limits\n",
           run.grown, run.shrunk, run.converted, run.stepped_back, run.merged_rings, run.big_rules);
    if (cases >= 1000 &&
        (run.shrunk == 0 || run.converted == 0 || run.merged_rings == 0 || run.big_rules == 0)) {
        printf("the sequences never shrank a buffer, converted, filled a log or used a large "
               "limit\n");
        total++;
    }
    printf("prop_state_size: %s in %.1f s cpu (seed 0x%" PRIx64 ")\n", total ? "FAILED" : "passed",
           (double)(clock() - t0) / CLOCKS_PER_SEC, run.seed);
    return total ? 1 : 0;
}
