/*
 * core.h - internal interface between the rule dispatcher (rule.c) and the algorithms.
 *
 * Each algorithm file implements these functions over a state of the size rule.c computes:
 *
 *   <alg>_decide(rule, state, cost, now_ns, out)  cost >= 0, now_ns >= 0, state any alignment.
 *   <alg>_is_fresh(rule, state, now_ns)           true when state decides as all-zero would.
 *   <alg>_valid(rule, state)                      true when state is one the functions here can
 *                                                 have written (bytes from a snapshot are checked).
 *   <alg>_refund(rule, state, cost, charged_ns, now_ns)
 *                                                 gives back cost > 0 units charged at charged_ns,
 *                                                 0 <= charged_ns <= now_ns (sl_refund()).
 *   <alg>_charge(rule, state, cost, now_ns)       adds cost > 0 units at now_ns even past the
 *                                                 limit: debt (sl_settle()).
 *   <alg>_convert(from, from_state, to, to_state, now_ns)
 *                                                 writes to_state (to->state_size bytes, not
 *                                                 overlapping) with the usage of a valid from_state
 *                                                 carried to `to`, a rule of the same algorithm
 *                                                 whose state means something else
 *                                                 (sl_state_convert()).
 *
 * The dispatcher (rule.c) has already validated the arguments, so these functions do not
 * check them again: core_decide() and core_settle(), through which every decision, refund and
 * charge enters, assert the preconditions above (a prepared rule, costs >= 0; core_settle()
 * itself makes charged_ns <= now_ns), and an algorithm asserts only its own state's
 * invariants (sliding_log's ring). They read no clock, allocate nothing, lock nothing. Helpers
 * for overflow-free arithmetic are here so every algorithm uses the same ones.
 */
#ifndef SLUICE_CORE_H
#define SLUICE_CORE_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "sluice/sluice.h"

#define SL_DECIDE_FN(name)                                                                         \
    void name##_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,           \
                       sl_decision_t *out);                                                        \
    bool name##_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns);                \
    bool name##_valid(const sl_rule_t *rule, const void *state);                                   \
    void name##_refund(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,       \
                       int64_t now_ns);                                                            \
    void name##_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns);          \
    void name##_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,        \
                        void *to_state, int64_t now_ns)

SL_DECIDE_FN(fixed_window);
SL_DECIDE_FN(sliding_log);
SL_DECIDE_FN(sliding_window);
SL_DECIDE_FN(sliding_buckets);
SL_DECIDE_FN(gcra); /* token_bucket too: the same GCRA with its own tolerance */

/*
 * Leases (lease.c). For the counting algorithms, <alg>_span() gives the span of time the state
 * cannot tell apart around now_ns (clamped as a decision clamps it, written to *at_ns): its end,
 * the first ns of the next window (fixed_window, sliding_window) or bucket (sliding_buckets).
 * Units admitted at *at_ns and spent at any time in [*at_ns, end) leave the state as they would
 * have had they arrived when spent.
 */
int64_t fixed_window_span(const sl_rule_t *rule, const void *state, int64_t now_ns, int64_t *at_ns);
int64_t sliding_window_span(const sl_rule_t *rule, const void *state, int64_t now_ns,
                            int64_t *at_ns);
int64_t sliding_buckets_span(const sl_rule_t *rule, const void *state, int64_t now_ns,
                             int64_t *at_ns);

/* token_bucket and gcra: grants up to want units held for lease_ns (n * T + lease_ns of TAT,
 * admitted without delay), returns the units granted; and gives back `unused` units of a lease
 * granted at at_ns, with the lease time not yet run (gcra.c). now_ns >= at_ns. */
int64_t gcra_lease(const sl_rule_t *rule, void *state, int64_t want, int64_t lease_ns,
                   int64_t now_ns);
void gcra_lease_return(const sl_rule_t *rule, void *state, int64_t unused, int64_t at_ns,
                       int64_t until_ns, int64_t now_ns);

/* sliding_log's packed form (the others pack to their state as is): see sl_state_pack(). */
size_t sliding_log_packed_max(const sl_rule_t *rule);
size_t sliding_log_pack(const sl_rule_t *rule, const void *state, void *out);
bool sliding_log_unpack(const sl_rule_t *rule, const void *in, size_t len, void *state);

/* States have no alignment requirement: every access goes through these (a mov on x86-64). */
static inline int64_t load_i64(const void *p)
{
    int64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline void store_i64(void *p, int64_t v)
{
    memcpy(p, &v, sizeof(v));
}

/* a + b, saturating at INT64_MAX (both non-negative). */
static inline int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* a * b, saturating at INT64_MAX (both non-negative). */
static inline int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* A count plus a cost in debt, saturating at SL_COUNT_MAX (count <= SL_COUNT_MAX, cost >= 0). */
static inline int64_t sat_count(int64_t count, int64_t cost)
{
    return cost > SL_COUNT_MAX - count ? SL_COUNT_MAX : count + cost;
}

static inline int64_t max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static inline int64_t min_i64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Fills the parts of a decision common to every algorithm's rejection. */
static inline void decision_reject(sl_decision_t *out, int64_t retry_after_ns)
{
    out->allowed = false;
    out->retry_after_ns = retry_after_ns;
    out->delay_ns = 0;
}

static inline void decision_admit(sl_decision_t *out)
{
    out->allowed = true;
    out->retry_after_ns = 0;
    out->delay_ns = 0;
}

/* The last sl_algorithm_t value, and the size of an array indexed by sl_algorithm_t (index 0,
 * no algorithm, unused). */
#define CORE_ALGORITHM_LAST  SL_GCRA
#define CORE_ALGORITHM_SLOTS (CORE_ALGORITHM_LAST + 1)

/* One algorithm's functions; core_algorithms[] (rule.c) holds them by sl_algorithm_t. */
typedef struct algorithm_ops {
    void (*decide)(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                   sl_decision_t *out);
    bool (*is_fresh)(const sl_rule_t *rule, const void *state, int64_t now_ns);
    bool (*valid)(const sl_rule_t *rule, const void *state);
    void (*refund)(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,
                   int64_t now_ns);
    void (*charge)(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns);
    void (*convert)(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                    void *to_state, int64_t now_ns);
} algorithm_ops_t;

extern const algorithm_ops_t core_algorithms[CORE_ALGORITHM_SLOTS];

/* Treats times outside [0, SL_NOW_MAX_NS] as its ends (now + window + tolerance stay far from
 * INT64_MAX). */
static inline int64_t core_clamp_now(int64_t now_ns)
{
    return now_ns < 0 ? 0 : now_ns > SL_NOW_MAX_NS ? SL_NOW_MAX_NS : now_ns;
}

/*
 * The dispatch behind sl_decide(), for callers that have already validated their arguments
 * (cost >= 0, a prepared rule, a state of rule->state_size bytes): the table's hot path. The
 * algorithms with a hot-key target get direct calls; an indirect call through
 * core_algorithms[] measured 0.5 ns more per hot-key decision (bench_core hot), a third of
 * the target's margin. The others go through the table.
 */
static inline void core_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                               sl_decision_t *out)
{
    assert(rule->algorithm >= SL_FIXED_WINDOW && rule->algorithm <= CORE_ALGORITHM_LAST);
    assert(rule->state_size > 0 && cost >= 0);
    out->limit = rule->capacity;
    now_ns = core_clamp_now(now_ns);
    switch (rule->algorithm) {
    case SL_TOKEN_BUCKET:
    case SL_GCRA:
        gcra_decide(rule, state, cost, now_ns, out);
        break;
    case SL_FIXED_WINDOW:
        fixed_window_decide(rule, state, cost, now_ns, out);
        break;
    default:
        core_algorithms[rule->algorithm].decide(rule, state, cost, now_ns, out);
        break;
    }
}

/*
 * The settle behind sl_settle() and sl_refund() (a refund is a settle with actual 0), for
 * validated arguments (0 <= reserved, 0 <= actual): gives back reserved - actual, or charges
 * actual - reserved past the limit, then fills *out with a peek. Times are clamped as
 * sl_decide() clamps them, and now_ns to no earlier than charged_ns. Returns the now_ns it used.
 */
int64_t core_settle(const sl_rule_t *rule, void *state, int64_t reserved, int64_t actual,
                    int64_t charged_ns, int64_t now_ns, sl_decision_t *out);

#endif /* SLUICE_CORE_H */
