/*
 * reserve.c - priorities: a request that must leave part of a key's limit to higher priorities
 * (docs/algorithms.md, "Priorities"). The one check every algorithm's decisions and acquires
 * pass through when a request carries a reserve, over the algorithm's own peek: pure, like every
 * core file, and the same for all of them (no algorithm knows of priorities).
 */
#include "core/core.h"

/* A shed request's answer: what a request of cost + reserve units gets (a refusal: the state
 * cannot take that many, so the algorithm writes nothing), judged without max_delay (a delayed
 * admission leaves nothing: it never serves a request that must leave a reserve). */
static void shed(const sl_rule_t *rule, void *state, int64_t need, int64_t remaining,
                 int64_t now_ns, sl_decision_t *out)
{
    if (need > rule->capacity) {
        core_decide(rule, state, 0, now_ns, out); /* a peek, for reset_after */
        decision_reject(out, -1);                 /* never: more than the priority may use */
    } else {
        sl_rule_t strict = *rule;
        strict.max_delay_ns = 0;
        core_decide(&strict, state, need, now_ns, out);
        assert(!out->allowed); /* need > a peek's remaining: every algorithm refuses it */
    }
    out->limit = rule->capacity;
    out->remaining = remaining;
}

bool core_reserve_admits(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                         int64_t now_ns, sl_decision_t *out)
{
    assert(cost >= 0 && reserve >= 0);
    if (reserve == 0)
        return true;
    sl_decision_t peek;
    core_decide(rule, state, 0, now_ns, &peek); /* a peek writes nothing */
    const int64_t need = sat_add(cost, reserve);
    if (peek.allowed && peek.remaining >= need)
        return true;
    shed(rule, state, need, max_i64(peek.remaining - reserve, 0), now_ns, out);
    return false;
}

void core_reserve_view(sl_decision_t *out, int64_t reserve)
{
    out->remaining = max_i64(out->remaining - reserve, 0);
}

void core_decide_reserved(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                          int64_t now_ns, sl_decision_t *out)
{
    if (!core_reserve_admits(rule, state, cost, reserve, now_ns, out))
        return;
    core_decide(rule, state, cost, now_ns, out);
    core_reserve_view(out, reserve);
}

int sl_decide_reserved(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                       int64_t now_ns, sl_decision_t *out)
{
    if (rule == NULL || state == NULL || out == NULL || core_algorithm(rule->algorithm) == NULL ||
        rule->state_size == 0)
        return SL_EINVAL;
    if (cost < 0 || reserve < 0)
        return SL_ECOST;
    core_decide_reserved(rule, state, cost, reserve, now_ns, out);
    return SL_OK;
}
