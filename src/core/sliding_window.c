/*
 * sliding_window.c - Cloudflare's weighted two-window estimate (seed 001).
 *
 * State (24 bytes): the index k of the current fixed window, the units admitted in it (curr)
 * and in the window before it (prev). With e the offset of now into window k, a cost c is
 * admitted iff prev * (W - e) + (curr + c) * W <= N * W: the previous window's count weighted
 * by the share of it still inside (now - W, now], assuming it was spread evenly. Products are
 * 128-bit. Invariant: curr <= N, prev <= N, except in debt (a settle charged past the limit):
 * counts up to SL_COUNT_MAX, and nothing is admitted, peeks included, until the weighted sum
 * falls to N again. A time before window k is clamped to its start.
 *
 * Refund: a charge in window k comes off curr, one in window k - 1 off prev (never more than the
 * count holds); an older charge has left the estimate already.
 *
 * Convert to another window length, at now (clamped) in window k: curr's units can have come as
 * late as now, prev's as late as k*W - 1; each count goes to the new rule's window holding that
 * instant, as its curr (the window of now) or its prev (the one before), or is dropped when that
 * window is older still. A unit counted in a later window than its own weighs at least as much at
 * every later time (W against W - e, or W - e against 0), so the estimate never falls below
 * the one the units' true times give. Older windows are forgotten, as the old rule forgot them.
 */
#include <string.h>

#include "core/core.h"

typedef struct sliding_window_state {
    int64_t window_index; /* k = floor(t / W) of `curr` */
    int64_t curr;         /* units admitted in window k */
    int64_t prev;         /* units admitted in window k - 1 */
} sliding_window_state_t;

typedef __int128 i128;

/* The counts as seen from window k (rolled forward, never backward). */
static void roll(const sliding_window_state_t *st, int64_t k, int64_t *prev, int64_t *curr)
{
    if (st->window_index == k) {
        *prev = st->prev;
        *curr = st->curr;
    } else if (st->window_index == k - 1) {
        *prev = st->curr;
        *curr = 0;
    } else {
        *prev = 0;
        *curr = 0;
    }
}

/* Wait until cost is admitted, for a rejected cost <= N, nothing else arriving (counts in debt
 * too: a curr above N waits into the next window, until curr * (W - e') <= (N - cost) * W). */
static int64_t retry_after(const sl_rule_t *rule, int64_t prev, int64_t curr, int64_t cost,
                           int64_t e)
{
    const int64_t w = rule->window_ns;
    int64_t room = rule->limit - curr - cost;
    if (room >= 0 && prev > 0) {
        /* first e' in this window with prev * (W - e') <= room * W */
        i128 e1 = (i128)w - (i128)room * w / prev;
        if (e1 < w)
            return (int64_t)e1 - e;
    }
    /* next window: prev' = curr, curr' = 0 */
    int64_t e2 = 0;
    if (curr > 0)
        e2 = (int64_t)max_i64(0, (int64_t)((i128)w - (i128)(rule->limit - cost) * w / curr));
    return (w - e) + e2;
}

static void sliding_window_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                                  sl_decision_t *out)
{
    sliding_window_state_t st;
    memcpy(&st, state, sizeof(st));
    const int64_t w = rule->window_ns;
    int64_t k = now_ns / w;
    if (k < st.window_index) { /* clamp */
        k = st.window_index;
        now_ns = k * w;
    }
    int64_t e = now_ns - k * w;
    int64_t prev, curr;
    roll(&st, k, &prev, &curr);

    i128 budget = (i128)rule->limit * w - (i128)prev * (w - e); /* >= 0: prev <= N */
    if (cost <= rule->limit - curr && (i128)(curr + cost) * w <= budget) {
        decision_admit(out);
        if (cost > 0) {
            st = (sliding_window_state_t){.window_index = k, .curr = curr + cost, .prev = prev};
            memcpy(state, &st, sizeof(st));
        }
        curr += cost;
    } else {
        decision_reject(out, cost > rule->limit ? -1 : retry_after(rule, prev, curr, cost, e));
    }
    /* in debt budget < 0 or curr > N: 0; with counts <= SL_COUNT_MAX no overflow */
    out->remaining = (int64_t)max_i64(0, (int64_t)(budget / w) - curr);
    out->reset_after_ns = curr > 0 ? 2 * w - e : prev > 0 ? w - e : 0;
}

static void sliding_window_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns)
{
    sliding_window_state_t st;
    memcpy(&st, state, sizeof(st));
    int64_t k = max_i64(now_ns / rule->window_ns, st.window_index); /* clamp */
    int64_t prev, curr;
    roll(&st, k, &prev, &curr);
    st = (sliding_window_state_t){.window_index = k, .curr = sat_count(curr, cost), .prev = prev};
    memcpy(state, &st, sizeof(st));
}

static int64_t sliding_window_debt(const sl_rule_t *rule, const void *state, int64_t cost,
                                   int64_t now_ns)
{
    sliding_window_state_t st;
    memcpy(&st, state, sizeof(st));
    const int64_t w = rule->window_ns;
    int64_t k = now_ns / w;
    if (k < st.window_index) { /* clamp */
        k = st.window_index;
        now_ns = k * w;
    }
    int64_t prev, curr;
    roll(&st, k, &prev, &curr);
    /* what a decision could admit: floor(budget / W) - curr, budget = N W - prev (W - e); the
     * debt is what the charge takes beyond it (budget < 0 in debt: floor toward -inf) */
    i128 budget = (i128)rule->limit * w - (i128)prev * (w - (now_ns - k * w));
    i128 room = budget >= 0 ? budget / w : -((-budget + w - 1) / w);
    i128 debt = (i128)sat_count(curr, cost) - room;
    return debt <= 0 ? 0 : debt > SL_COUNT_MAX ? SL_COUNT_MAX : (int64_t)debt;
}

static void sliding_window_refund(const sl_rule_t *rule, void *state, int64_t cost,
                                  int64_t charged_ns, int64_t now_ns)
{
    (void)now_ns; /* the counts carry no time within their windows */
    sliding_window_state_t st;
    memcpy(&st, state, sizeof(st));
    int64_t k = charged_ns / rule->window_ns;
    if (k == st.window_index)
        st.curr -= min_i64(cost, st.curr);
    else if (k == st.window_index - 1)
        st.prev -= min_i64(cost, st.prev);
    else
        return;
    memcpy(state, &st, sizeof(st));
}

static void sliding_window_convert(const sl_rule_t *from, const void *from_state,
                                   const sl_rule_t *to, void *to_state, size_t to_bytes,
                                   int64_t now_ns)
{
    (void)to_bytes; /* rule->state_size: a fixed size */
    sliding_window_state_t st, out = {0, 0, 0};
    memcpy(&st, from_state, sizeof(st));
    int64_t k = max_i64(now_ns / from->window_ns, st.window_index); /* clamp */
    int64_t prev, curr;
    roll(&st, k, &prev, &curr);
    if (prev > 0 || curr > 0) {
        const int64_t kt = max_i64(now_ns, k * from->window_ns) / to->window_ns;
        int64_t prev_to = max_i64(k * from->window_ns - 1, 0) / to->window_ns; /* <= kt */
        out.window_index = kt;
        out.curr = curr;
        if (prev_to == kt)
            out.curr = sat_count(curr, prev);
        else if (prev_to == kt - 1)
            out.prev = prev;
        if (out.curr == 0 && out.prev == 0)
            out.window_index = 0; /* prev dropped and nothing else: fresh */
    }
    memcpy(to_state, &out, sizeof(out));
}

static int64_t sliding_window_span(const sl_rule_t *rule, const void *state, int64_t now_ns,
                                   int64_t *at_ns)
{
    int64_t k = max_i64(now_ns / rule->window_ns, load_i64(state)); /* clamp */
    *at_ns = max_i64(now_ns, k * rule->window_ns);
    return (k + 1) * rule->window_ns;
}

static bool sliding_window_valid(const sl_rule_t *rule, const void *state)
{
    sliding_window_state_t st;
    memcpy(&st, state, sizeof(st));
    return st.curr >= 0 && st.curr <= SL_COUNT_MAX && st.prev >= 0 && st.prev <= SL_COUNT_MAX &&
           st.window_index >= 0 && st.window_index <= SL_NOW_MAX_NS / rule->window_ns;
}

static bool sliding_window_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    sliding_window_state_t st;
    memcpy(&st, state, sizeof(st));
    int64_t k = max_i64(now_ns / rule->window_ns, st.window_index);
    int64_t prev, curr;
    roll(&st, k, &prev, &curr);
    return prev == 0 && curr == 0;
}

static uint32_t sliding_window_state_size(const sl_rule_t *rule)
{
    (void)rule;
    return sizeof(sliding_window_state_t); /* window index, current, previous */
}

/* Counts per window, whatever the limit. */
static bool sliding_window_same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->window_ns == b->window_ns;
}

/* sliding_window's functions, for its row in algorithms.c. */
const algorithm_ops_t sliding_window_ops = {
    .decide = sliding_window_decide,
    .is_fresh = sliding_window_is_fresh,
    .valid = sliding_window_valid,
    .refund = sliding_window_refund,
    .charge = sliding_window_charge,
    .debt = sliding_window_debt,
    .convert = sliding_window_convert,
    .state_size = sliding_window_state_size,
    .same_meaning = sliding_window_same_meaning,
    .span = sliding_window_span,
};
