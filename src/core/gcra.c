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
 * in integers.
 *
 * Time that steps back needs no clamp here: the decision is monotone in now (an earlier now sees
 * less refilled, so it admits no more than a later one would), and retry_after and reset_after
 * are measured from the caller's own now. (A clamp to a lower bound of the last admission's
 * time, TAT - tol - max_delay, would also be wrong for a key in debt, whose TAT is beyond it.)
 *
 * Debt (sl_settle past the limit): TAT = max(TAT, now) + d*T, saturating at INT64_MAX; the
 * decision reads it as a bucket emptier than empty, refusing everything until TAT - tol <= now.
 *
 * Refund of c units charged at t_c, at now: the bucket refills by itself, so of the c*T the
 * charge added, only the part not yet refilled, c*T - (now - t_c), may come off TAT (and TAT
 * not below now: that is already a full bucket). Giving back all of it later could over-admit:
 * a charge at 0 on a full bucket, then a request at c*T - 1 that would have found the bucket
 * full anyway; a refund of c*T would then leave room that never existed. An admission at t
 * leaves TAT' - tol - max_delay <= t, so a refund's now earlier than that is treated as that.
 *
 * Lease of n units for L ns at now (lease.c): TAT = max(TAT, now) + n*T + L, granted only as far
 * as that is admitted without delay. The holder may spend every unit as late as now + L, so the
 * state must be at least max(TAT, now + L) + n*T; the lease time is charged too. Its return
 * gives back, as a refund, what of unused*T + L has not refilled by itself.
 *
 * Convert to another emission interval (the same T is a copy: TAT does not depend on the
 * tolerance): the units the bucket has not refilled at now, u = ceil((TAT - now) / T_from), are
 * taken again at now, TAT_to = now + u * T_to (saturating); a bucket full at now stays fresh.
 * With T_to <= T_from this is never laxer than the whole history: a unit set j (C_j units from
 * t_j on) leaves TAT >= t_j + C_j * T_from, so under `to` it asks t_j + C_j * T_to <=
 * now + (TAT - now) * T_to / T_from, the difference being (now - t_j) * (1 - T_to / T_from)
 * >= 0. With a longer T the units the faster bucket already refilled stay refilled: the history
 * cannot be told apart from u units at now.
 */
#include <string.h>

#include "core/core.h"

/* Units that could still be taken with the bucket's level at `tat_ns`: floor(headroom / T). */
static int64_t remaining_at(const sl_rule_t *rule, int64_t tat_ns, int64_t now_ns)
{
    int64_t headroom = rule->tolerance_ns - (tat_ns - now_ns);
    return headroom > 0 ? headroom / rule->interval_ns : 0;
}

static void gcra_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                        sl_decision_t *out)
{
    int64_t tat;
    memcpy(&tat, state, sizeof(tat));
    int64_t tat0 = max_i64(tat, now_ns);
    int64_t increment = sat_mul(cost, rule->interval_ns);
    int64_t tat1 = sat_add(tat0, increment);
    int64_t wait = tat1 - rule->tolerance_ns - now_ns;

    if (wait > 0 && increment > rule->tolerance_ns) {
        decision_reject(out, -1);
    } else if (wait > 0 && wait > rule->max_delay_ns) {
        /* a cost is admitted without delay after `wait`; a peek, never delayed, as soon as the
         * wait is down to max_delay (only a clock that stepped back, or a debt, refuses one) */
        decision_reject(out, cost > 0 ? wait : wait - rule->max_delay_ns);
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

static void gcra_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns)
{
    int64_t tat = sat_add(max_i64(load_i64(state), now_ns), sat_mul(cost, rule->interval_ns));
    store_i64(state, tat);
}

static int64_t gcra_debt(const sl_rule_t *rule, const void *state, int64_t cost, int64_t now_ns)
{
    int64_t tat = sat_add(max_i64(load_i64(state), now_ns), sat_mul(cost, rule->interval_ns));
    int64_t owed_ns = tat - now_ns - rule->tolerance_ns; /* time owed past a bucket emptied */
    if (owed_ns <= 0)
        return 0;
    return min_i64(owed_ns / rule->interval_ns + (owed_ns % rule->interval_ns != 0), SL_COUNT_MAX);
}

/* Gives back what is left of charge_ns of TAT charged at charged_ns, at now_ns: the part the
 * bucket has not refilled by itself, charge_ns - (now - charged), TAT not below now. */
static void give_back(const sl_rule_t *rule, void *state, int64_t charge_ns, int64_t charged_ns,
                      int64_t now_ns)
{
    int64_t tat = load_i64(state);
    now_ns = max_i64(now_ns, tat - rule->tolerance_ns - rule->max_delay_ns);
    int64_t back = charge_ns - (now_ns - charged_ns); /* not refilled */
    if (back <= 0 || tat <= now_ns)
        return;
    store_i64(state, max_i64(tat - back, now_ns));
}

static void gcra_refund(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,
                        int64_t now_ns)
{
    give_back(rule, state, sat_mul(cost, rule->interval_ns), charged_ns, now_ns);
}

static int64_t gcra_lease(const sl_rule_t *rule, void *state, int64_t want, int64_t lease_ns,
                          int64_t now_ns)
{
    int64_t tat0 = max_i64(load_i64(state), now_ns);
    int64_t room_ns = rule->tolerance_ns - lease_ns; /* what a full bucket could lease */
    if (tat0 - now_ns >= room_ns)
        return 0;
    int64_t n = min_i64(want, (room_ns - (tat0 - now_ns)) / rule->interval_ns);
    if (n > 0) /* n * T <= tolerance: no overflow */
        store_i64(state, tat0 + n * rule->interval_ns + lease_ns);
    return n;
}

static void gcra_lease_return(const sl_rule_t *rule, void *state, int64_t unused, int64_t at_ns,
                              int64_t until_ns, int64_t now_ns)
{
    give_back(rule, state, sat_add(sat_mul(unused, rule->interval_ns), until_ns - at_ns), at_ns,
              now_ns);
}

static void gcra_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                         void *to_state, size_t to_bytes, int64_t now_ns)
{
    (void)to_bytes; /* rule->state_size: a fixed size */
    int64_t tat = load_i64(from_state), out = 0;
    if (tat > now_ns) {
        int64_t owed_ns = tat - now_ns; /* > 0: now_ns >= 0 */
        int64_t units = owed_ns / from->interval_ns + (owed_ns % from->interval_ns != 0);
        out = sat_add(now_ns, sat_mul(units, to->interval_ns));
    }
    store_i64(to_state, out);
}

static bool gcra_valid(const sl_rule_t *rule, const void *state)
{
    (void)rule; /* every TAT >= 0 is reachable: a debt can push it to INT64_MAX */
    return load_i64(state) >= 0;
}

static bool gcra_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    (void)rule;
    int64_t tat;
    memcpy(&tat, state, sizeof(tat));
    return tat <= now_ns;
}

static uint32_t gcra_state_size(const sl_rule_t *rule)
{
    (void)rule;
    return sizeof(int64_t); /* TAT */
}

/* TAT, whatever the tolerance: the same emission interval means the same. */
static bool gcra_same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->interval_ns == b->interval_ns;
}

/* The functions of token_bucket and gcra, for their rows in algorithms.c. */
const algorithm_ops_t gcra_ops = {
    .decide = gcra_decide,
    .is_fresh = gcra_is_fresh,
    .valid = gcra_valid,
    .refund = gcra_refund,
    .charge = gcra_charge,
    .debt = gcra_debt,
    .convert = gcra_convert,
    .state_size = gcra_state_size,
    .same_meaning = gcra_same_meaning,
    .lease = gcra_lease,
    .lease_return = gcra_lease_return,
};
