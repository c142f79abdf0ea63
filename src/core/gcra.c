/*
 * gcra.c - token_bucket and gcra: one algorithm, the generic cell rate algorithm.
 *
 * State (8 bytes): TAT, the theoretical arrival time in ns; 0 for a fresh key. A bucket that
 * refills N tokens per W and holds up to `capacity` tokens is full when TAT <= now and empty
 * when TAT - now >= tolerance. Emission interval T = ceil(W / N) (rule.c), so
 *
 *   token_bucket: capacity B,     tolerance = T * B
 *   gcra:         capacity B + 1, tolerance = T * (B + 1)   (redis-cell's CL.THROTTLE)
 *
 * A request of cost c: TAT0 = max(TAT, now), TAT' = TAT0 + c*T, admitted iff TAT' - tol <= now.
 * Storing a time instead of a token count keeps the state at 8 bytes and the arithmetic exact
 * in integers. Invariant: an admitted request leaves TAT' - tol <= now + delay <= now +
 * max_delay, so TAT - tol - max_delay is a lower bound of the last admission's time, and the
 * clamp of a stepped-back clock uses it.
 */
#include <string.h>

#include "core/core.h"

/* Units that could still be taken with the bucket's level at `tat_ns`: floor(headroom / T). */
static int64_t remaining_at(const sl_rule_t *rule, int64_t tat_ns, int64_t now_ns)
{
    int64_t headroom = rule->tolerance_ns - (tat_ns - now_ns);
    return headroom > 0 ? headroom / rule->interval_ns : 0;
}

void gcra_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                 sl_decision_t *out)
{
    int64_t tat;
    memcpy(&tat, state, sizeof(tat));
    /* clamp to the earliest time the last admission can have happened */
    now_ns = max_i64(now_ns, tat - rule->tolerance_ns - rule->max_delay_ns);
    int64_t tat0 = max_i64(tat, now_ns);
    int64_t increment = sat_mul(cost, rule->interval_ns);
    int64_t tat1 = sat_add(tat0, increment);
    int64_t wait = tat1 - rule->tolerance_ns - now_ns;

    if (wait > 0 && increment > rule->tolerance_ns) {
        decision_reject(out, -1);
    } else if (wait > 0 && wait > rule->max_delay_ns) {
        decision_reject(out, wait);
    } else {
        decision_admit(out);
        out->delay_ns = cost > 0 ? max_i64(wait, 0) : 0; /* a peek is never delayed */
        if (cost > 0)
            memcpy(state, &tat1, sizeof(tat1));
        out->remaining = remaining_at(rule, tat1, now_ns);
        out->reset_after_ns = tat1 - now_ns;
        return;
    }
    out->remaining = remaining_at(rule, tat0, now_ns);
    out->reset_after_ns = tat0 - now_ns;
}

bool gcra_valid(const sl_rule_t *rule, const void *state)
{
    int64_t tat = load_i64(state);
    return tat >= 0 && tat - rule->tolerance_ns - rule->max_delay_ns <= SL_NOW_MAX_NS;
}

bool gcra_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    int64_t tat;
    memcpy(&tat, state, sizeof(tat));
    return tat <= now_ns;
}
