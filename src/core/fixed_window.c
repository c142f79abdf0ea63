/*
 * fixed_window.c - a counter per window aligned to multiples of W since the epoch.
 *
 * State (16 bytes): the index k = floor(t / W) of the window the count belongs to, and the
 * count of units admitted in it. A stored index older than the current window means count 0.
 * Invariant: count <= N, except in debt (a settle charged past the limit): count <= SL_COUNT_MAX,
 * and every request, peeks included, is refused until the next window. A time in a window before
 * the stored one is clamped to the stored window's start.
 *
 * Refund: the count of the charge's window, if it is still the stored one, gives the units back
 * (never more than it holds); a charge in an older window has left with it.
 *
 * Convert to another window length: the count of the window current at now (clamped) goes to the
 * new rule's window holding now, the latest instant its units can have had. Those that came
 * before that window began would belong to an earlier one: counted here, they only over-count.
 * Units of older windows are forgotten, as the old rule forgot them.
 */
#include <string.h>

#include "core/core.h"

typedef struct fixed_window_state {
    int64_t window_index; /* floor(t / W) of the window `count` belongs to */
    int64_t count;        /* units admitted in that window */
} fixed_window_state_t;

static void fixed_window_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                                sl_decision_t *out)
{
    fixed_window_state_t st;
    memcpy(&st, state, sizeof(st));
    int64_t k = now_ns / rule->window_ns;
    if (k < st.window_index) { /* clamp */
        k = st.window_index;
        now_ns = k * rule->window_ns;
    }
    int64_t count = st.window_index == k ? st.count : 0;
    int64_t until_next_ns = sat_add(k * rule->window_ns, rule->window_ns) - now_ns;

    if (cost <= rule->limit - count) {
        decision_admit(out);
        if (cost > 0) {
            st.window_index = k;
            st.count = count + cost;
            memcpy(state, &st, sizeof(st));
        }
        count += cost;
    } else {
        decision_reject(out, cost > rule->limit ? -1 : until_next_ns);
        count = min_i64(count, rule->limit); /* in debt: remaining 0, not below */
    }
    out->remaining = rule->limit - count;
    out->reset_after_ns = count > 0 ? until_next_ns : 0;
}

static void fixed_window_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns)
{
    fixed_window_state_t st;
    memcpy(&st, state, sizeof(st));
    int64_t k = max_i64(now_ns / rule->window_ns, st.window_index); /* clamp */
    st.count = sat_count(st.window_index == k ? st.count : 0, cost);
    st.window_index = k;
    memcpy(state, &st, sizeof(st));
}

static int64_t fixed_window_debt(const sl_rule_t *rule, const void *state, int64_t cost,
                                 int64_t now_ns)
{
    fixed_window_state_t st;
    memcpy(&st, state, sizeof(st));
    int64_t k = max_i64(now_ns / rule->window_ns, st.window_index); /* clamp */
    int64_t count = st.window_index == k ? st.count : 0;
    return max_i64(sat_count(count, cost) - rule->limit, 0); /* the window's units past N */
}

static void fixed_window_refund(const sl_rule_t *rule, void *state, int64_t cost,
                                int64_t charged_ns, int64_t now_ns)
{
    (void)now_ns; /* a window's units leave all at once: when does not matter */
    fixed_window_state_t st;
    memcpy(&st, state, sizeof(st));
    if (st.window_index != charged_ns / rule->window_ns)
        return;
    st.count -= min_i64(cost, st.count);
    memcpy(state, &st, sizeof(st));
}

static void fixed_window_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                                 void *to_state, size_t to_bytes, int64_t now_ns)
{
    (void)to_bytes; /* rule->state_size: a fixed size */
    fixed_window_state_t st, out = {0, 0};
    memcpy(&st, from_state, sizeof(st));
    int64_t k = max_i64(now_ns / from->window_ns, st.window_index); /* clamp */
    if (st.window_index == k && st.count > 0) {
        out.window_index = max_i64(now_ns, k * from->window_ns) / to->window_ns;
        out.count = st.count;
    }
    memcpy(to_state, &out, sizeof(out));
}

static int64_t fixed_window_span(const sl_rule_t *rule, const void *state, int64_t now_ns,
                                 int64_t *at_ns)
{
    int64_t k = max_i64(now_ns / rule->window_ns, load_i64(state)); /* clamp */
    *at_ns = max_i64(now_ns, k * rule->window_ns);
    return (k + 1) * rule->window_ns;
}

static bool fixed_window_valid(const sl_rule_t *rule, const void *state)
{
    fixed_window_state_t st;
    memcpy(&st, state, sizeof(st));
    return st.count >= 0 && st.count <= SL_COUNT_MAX && st.window_index >= 0 &&
           st.window_index <= SL_NOW_MAX_NS / rule->window_ns;
}

static bool fixed_window_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    fixed_window_state_t st;
    memcpy(&st, state, sizeof(st));
    return st.count == 0 || st.window_index < now_ns / rule->window_ns;
}

static uint32_t fixed_window_state_size(const sl_rule_t *rule)
{
    (void)rule;
    return sizeof(fixed_window_state_t); /* window index, count */
}

/* A count per window, whatever the limit. */
static bool fixed_window_same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->window_ns == b->window_ns;
}

/* fixed_window's functions, for its row in algorithms.c. */
const algorithm_ops_t fixed_window_ops = {
    .decide = fixed_window_decide,
    .is_fresh = fixed_window_is_fresh,
    .valid = fixed_window_valid,
    .refund = fixed_window_refund,
    .charge = fixed_window_charge,
    .debt = fixed_window_debt,
    .convert = fixed_window_convert,
    .state_size = fixed_window_state_size,
    .same_meaning = fixed_window_same_meaning,
    .span = fixed_window_span,
};
