/*
 * lease.c - leases: units of a key's quota granted at once to a holder that spends them itself,
 * locally, before the lease ends, and the unused part given back (sl_lease(), sl_lease_return()).
 *
 * The state records a lease as it records requests, so every other decision sees it. What must
 * hold: however the holder spends its units at times in [at, until), the key never admits more
 * in any window than the rule allows. A unit recorded at the grant but spent later must stay in
 * the state at least as long as if it had arrived when spent. Which way an algorithm does it is
 * its row's (algorithms.c): the counting ones give their ops a span, the buckets a lease and a
 * return, and a row that is not CORE_CAP_LEASABLE is refused. So:
 *
 *   fixed_window, sliding_window, sliding_buckets (span). The state knows only which window
 * (bucket) a unit came in, not when in it. A lease ends no later than the end of the current window
 *     (bucket): its units, wherever the holder spends them before, sit where requests at those
 *     times would have. The grant is a decision of its size at the grant's time (at most what a
 *     peek reports remaining), and a return is sl_refund() of the unused units charged then.
 *   token_bucket, gcra (lease, lease_return). A bucket refills continuously: units taken at the
 * grant but spent at the lease's end would come back too early. The grant charges n * T + L of TAT
 * (L the lease time) at now, at least what n units at now + L would leave (max(TAT, now) + L >=
 *     max(TAT, now + L)); since TAT only grows with later times and more units, any order of
 *     the holder's spends leaves a real TAT no later than the state's. The return gives back,
 *     as a refund does, what of unused * T + L the bucket has not refilled by itself.
 *   sliding_log (not leasable). Refused: a stamp at the grant leaves the window W after it, a unit
 * spent at until leaves W after that, and a stamp in the future would move the key's clock forward
 *     (times are clamped to the newest stamp), dropping older stamps from the window early.
 *
 * Pure over state and time, like every core file: no clock, no allocation, no lock.
 */
#include <string.h>

#include "core/core.h"

/* Grants up to want units on a counting algorithm (its ops have span); returns the units
 * granted. */
static int64_t lease_counted(const sl_rule_t *rule, void *state, int64_t want, int64_t lease_ns,
                             int64_t now_ns, sl_lease_t *out, sl_decision_t *d)
{
    int64_t end_ns = core_ops(rule)->span(rule, state, now_ns, &out->at_ns);
    core_decide(rule, state, 0, out->at_ns, d);
    int64_t n = min_i64(want, d->remaining);
    if (n <= 0)
        return 0;
    core_decide(rule, state, n, out->at_ns, d);
    assert(d->allowed); /* a peek's remaining is admitted */
    out->until_ns = min_i64(out->at_ns + lease_ns, end_ns);
    return n;
}

/* The algorithm of a prepared rule, or NULL for NULL or a rule never prepared. */
static const core_algorithm_t *prepared_row(const sl_rule_t *rule)
{
    if (rule == NULL || rule->state_size == 0)
        return NULL;
    return core_algorithm(rule->algorithm);
}

int sl_lease(const sl_rule_t *rule, void *state, int64_t want, int64_t lease_ns, int64_t now_ns,
             sl_lease_t *out)
{
    const core_algorithm_t *row = prepared_row(rule);
    if (row == NULL || state == NULL || out == NULL)
        return SL_EINVAL;
    if (want < 0)
        return SL_ECOST;
    const bool tokens = (row->caps & CORE_CAP_TOKENS) != 0;
    if (!(row->caps & CORE_CAP_LEASABLE) || lease_ns < 1 || lease_ns > SL_WINDOW_MAX_NS ||
        (tokens && lease_ns > rule->tolerance_ns - rule->interval_ns))
        return SL_ELEASE;
    now_ns = core_clamp_now(now_ns);
    memset(out, 0, sizeof(*out));
    sl_decision_t d;
    if (row->ops->lease != NULL) {
        out->at_ns = now_ns;
        out->granted = row->ops->lease(rule, state, want, lease_ns, now_ns);
        out->until_ns = out->granted > 0 ? now_ns + lease_ns : now_ns;
        core_decide(rule, state, 0, now_ns, &d);
    } else {
        out->granted = lease_counted(rule, state, want, lease_ns, now_ns, out, &d);
        if (out->granted == 0)
            out->until_ns = out->at_ns;
    }
    out->remaining = d.remaining;
    out->reset_after_ns = d.reset_after_ns;
    return SL_OK;
}

int sl_lease_return(const sl_rule_t *rule, void *state, const sl_lease_t *lease, int64_t unused,
                    int64_t now_ns, sl_decision_t *out)
{
    const core_algorithm_t *row = prepared_row(rule);
    if (row == NULL || state == NULL || lease == NULL || out == NULL)
        return SL_EINVAL;
    if (!(row->caps & CORE_CAP_LEASABLE))
        return SL_ELEASE;
    if (unused < 0 || unused > lease->granted)
        return SL_ECOST;
    if (lease->at_ns < 0 || lease->until_ns < lease->at_ns ||
        lease->until_ns - lease->at_ns > SL_WINDOW_MAX_NS)
        return SL_EINVAL;
    if (row->ops->lease_return == NULL) {
        core_settle(rule, state, unused, 0, lease->at_ns, now_ns, out);
        return SL_OK;
    }
    int64_t at_ns = core_clamp_now(lease->at_ns);
    now_ns = max_i64(core_clamp_now(now_ns), at_ns);
    row->ops->lease_return(rule, state, unused, at_ns, min_i64(lease->until_ns, SL_NOW_MAX_NS),
                           now_ns);
    core_decide(rule, state, 0, now_ns, out);
    return SL_OK;
}
