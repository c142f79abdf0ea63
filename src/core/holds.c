/*
 * holds.c - sl_acquire(), sl_release() and sl_in_flight(): the public entry to an algorithm that
 * holds units (CORE_CAP_HOLDS, its ops' holds), checking the arguments once so the algorithm
 * need not. Pure over state and time, like every core file.
 */
#include <string.h>

#include "core/adaptive.h"
#include "core/core.h"

/* The holds of a prepared rule's algorithm; SL_EINVAL or SL_ENOHOLDS through *rc when none. */
static const algorithm_holds_t *holds_of(const sl_rule_t *rule, const void *state, const void *out,
                                         int *rc)
{
    const core_algorithm_t *row = rule != NULL ? core_algorithm(rule->algorithm) : NULL;
    if (row == NULL || rule->state_size == 0 || state == NULL || out == NULL) {
        *rc = SL_EINVAL;
        return NULL;
    }
    *rc = row->ops->holds != NULL ? SL_OK : SL_ENOHOLDS;
    return row->ops->holds;
}

int core_hold_time(const sl_rule_t *rule, int64_t hold_ns, int64_t *out_ns)
{
    if (hold_ns == 0)
        hold_ns = rule->window_ns;
    if (hold_ns < SL_WINDOW_MIN_NS || hold_ns > rule->window_ns)
        return SL_EHOLDTIME;
    *out_ns = hold_ns;
    return SL_OK;
}

int sl_acquire(const sl_rule_t *rule, void *state, int64_t cost, int64_t hold_ns, int64_t now_ns,
               uint64_t entropy, sl_decision_t *out, sl_hold_t *hold)
{
    return sl_acquire_reserved(rule, state, cost, 0, hold_ns, now_ns, entropy, out, hold);
}

int sl_acquire_reserved(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                        int64_t hold_ns, int64_t now_ns, uint64_t entropy, sl_decision_t *out,
                        sl_hold_t *hold)
{
    int rc;
    const algorithm_holds_t *h = holds_of(rule, state, out, &rc);
    if (h == NULL || hold == NULL)
        return h == NULL ? rc : SL_EINVAL;
    if (cost < 0 || reserve < 0)
        return SL_ECOST;
    if ((rc = core_hold_time(rule, hold_ns, &hold_ns)) != SL_OK)
        return rc;
    *hold = (sl_hold_t){0, 0, 0};
    now_ns = core_clamp_now(now_ns);
    if (!core_reserve_admits(rule, state, cost, reserve, now_ns, out))
        return SL_OK; /* shed: no hold */
    out->limit = rule->capacity;
    h->acquire(rule, state, cost, hold_ns, now_ns, entropy, out, hold);
    core_reserve_view(out, reserve);
    return SL_OK;
}

int sl_release(const sl_rule_t *rule, void *state, uint64_t id, int64_t now_ns, sl_decision_t *out,
               sl_hold_t *released)
{
    return sl_release_sample(rule, state, id, now_ns, NULL, out, released);
}

int sl_release_sample(const sl_rule_t *rule, void *state, uint64_t id, int64_t now_ns,
                      const sl_sample_t *sample, sl_decision_t *out, sl_hold_t *released)
{
    int rc;
    const algorithm_holds_t *h = holds_of(rule, state, out, &rc);
    if (h == NULL)
        return rc;
    if (sample != NULL && sample->latency_ns > SL_ADAPTIVE_LATENCY_MAX_NS)
        return SL_EINVAL;
    int64_t expired = 0;
    out->limit = rule->capacity;
    rc = h->release(rule, state, id, core_clamp_now(now_ns), sample, out, &expired);
    if (released != NULL)
        *released = (sl_hold_t){id, 0, expired};
    return rc;
}

int64_t sl_in_flight(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    int rc;
    const algorithm_holds_t *h = holds_of(rule, state, state, &rc);
    return h == NULL ? 0 : h->in_flight(rule, state, core_clamp_now(now_ns));
}

bool sl_rule_holds(const sl_rule_t *rule)
{
    const core_algorithm_t *row = rule != NULL ? core_algorithm(rule->algorithm) : NULL;
    return row != NULL && row->ops->holds != NULL;
}

int64_t sl_limit_now(const sl_rule_t *rule, const void *state)
{
    if (rule == NULL)
        return 0;
    if (state == NULL || !sl_rule_holds(rule))
        return rule->capacity;
    unsigned char bytes[ADAPTIVE_BYTES];
    memcpy(bytes, (const unsigned char *)state + CORE_HOLDS_ADAPTIVE_AT, sizeof bytes);
    return adaptive_limit(rule, bytes);
}
