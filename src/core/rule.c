/*
 * rule.c - rule validation and preparation, and the dispatch from sl_decide(), sl_refund(),
 * sl_settle(), sl_state_convert() and sl_state_saturate() to the algorithms, through their rows
 * (algorithms.c).
 *
 * sl_rule_prepare() is the only place that checks rule parameters, against the bounds the
 * algorithm's row gives: once a rule is prepared,
 * every algorithm may rely on limit > 0, a window within [SL_WINDOW_MIN_NS, SL_WINDOW_MAX_NS],
 * buckets dividing the window, and derived values (interval, tolerance) that fit in 64 bits.
 */
#include <string.h>

#include "core/adaptive.h"
#include "core/core.h"

/* Checks an optional parameter (burst, buckets, max_delay) against what the algorithm takes,
 * and replaces SL_DEFAULT by its default: SL_OK, or `err`. */
static int check_param(int64_t *v, const core_param_t *p, const sl_rule_t *r, int err)
{
    if (!p->taken) {
        if (*v != SL_DEFAULT && *v != 0)
            return err; /* what does not apply may only be left unset */
        *v = 0;
        return SL_OK;
    }
    if (*v == SL_DEFAULT)
        *v = core_param_default(p, r->limit); /* CORE_DEFAULT_NONE: below min, refused */
    if (*v < p->min || *v > p->max || (p->divides_window && r->window_ns % *v != 0))
        return err;
    return SL_OK;
}

/* Applies the row's capacity and computes the derived fields of r, whose fields are valid. */
static int derive(sl_rule_t *r, const core_algorithm_t *row)
{
    r->capacity = r->limit;
    r->interval_ns = 0;
    r->tolerance_ns = 0;
    r->bucket_ns = row->buckets.taken ? r->window_ns / r->buckets : 0;
    if (row->caps & CORE_CAP_TOKENS) {
        /* T rounded up: N * T >= W, so the rate is never above N per W. */
        r->interval_ns = r->window_ns / r->limit + (r->window_ns % r->limit != 0);
        if (__builtin_add_overflow(r->burst, row->capacity_extra, &r->capacity))
            return SL_EOVERFLOW;
        /* headroom below INT64_MAX: TAT - tolerance - max_delay and TAT' + T*c stay in range */
        if (__builtin_mul_overflow(r->interval_ns, r->capacity, &r->tolerance_ns) ||
            r->tolerance_ns > SL_TOLERANCE_MAX_NS)
            return SL_EOVERFLOW;
    }
    r->state_size = row->ops->state_size(r);
    return SL_OK;
}

int sl_rule_prepare(sl_rule_t *rule)
{
    if (rule == NULL)
        return SL_EINVAL;
    sl_rule_t r = *rule;
    const core_algorithm_t *row = core_algorithm(r.algorithm);
    if (row == NULL)
        return SL_EALGORITHM;
    if (r.limit <= 0 || r.limit > row->limit_max)
        return SL_ELIMIT;
    if (r.window_ns < SL_WINDOW_MIN_NS || r.window_ns > SL_WINDOW_MAX_NS)
        return SL_EWINDOW;
    int rc = check_param(&r.burst, &row->burst, &r, SL_EBURST);
    if (rc == SL_OK)
        rc = check_param(&r.buckets, &row->buckets, &r, SL_EBUCKETS);
    if (rc == SL_OK)
        rc = check_param(&r.max_delay_ns, &row->max_delay, &r, SL_EDELAY);
    if (rc == SL_OK)
        rc = adaptive_prepare(&r, row->ops->holds != NULL);
    if (rc == SL_OK)
        rc = derive(&r, row);
    if (rc != SL_OK)
        return rc;
    if (r.max_debt == SL_DEFAULT)
        r.max_debt = r.capacity; /* one window's worth */
    if (r.max_debt < 0 || r.max_debt > SL_COUNT_MAX)
        return SL_EMAXDEBT;
    *rule = r;
    return SL_OK;
}

int sl_rule_init(sl_rule_t *rule, sl_algorithm_t algorithm, int64_t limit, int64_t window_ns)
{
    if (rule == NULL)
        return SL_EINVAL;
    memset(rule, 0, sizeof(*rule));
    rule->algorithm = algorithm;
    rule->limit = limit;
    rule->window_ns = window_ns;
    rule->burst = SL_DEFAULT;
    rule->buckets = SL_DEFAULT;
    rule->max_delay_ns = 0;
    rule->max_debt = SL_DEFAULT;
    return sl_rule_prepare(rule);
}

size_t sl_state_size(const sl_rule_t *rule)
{
    return rule == NULL ? 0 : rule->state_size;
}

bool sl_rule_same(const sl_rule_t *a, const sl_rule_t *b)
{
    return a != NULL && b != NULL && a->algorithm == b->algorithm && a->limit == b->limit &&
           a->window_ns == b->window_ns && a->burst == b->burst && a->buckets == b->buckets &&
           a->max_delay_ns == b->max_delay_ns && a->max_debt == b->max_debt;
}

/* NULL arguments, or a rule that was never prepared. */
static bool bad_arguments(const sl_rule_t *rule, const void *state, const sl_decision_t *out)
{
    return rule == NULL || state == NULL || out == NULL ||
           core_algorithm(rule->algorithm) == NULL || rule->state_size == 0;
}

int sl_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns, sl_decision_t *out)
{
    if (bad_arguments(rule, state, out))
        return SL_EINVAL;
    if (cost < 0)
        return SL_ECOST;
    core_decide(rule, state, cost, now_ns, out);
    return SL_OK;
}

int64_t core_settle(const sl_rule_t *rule, void *state, int64_t reserved, int64_t actual,
                    int64_t charged_ns, int64_t now_ns, sl_decision_t *out)
{
    assert(core_algorithm(rule->algorithm) != NULL);
    assert(rule->state_size > 0 && reserved >= 0 && actual >= 0);
    charged_ns = core_clamp_now(charged_ns);
    now_ns = max_i64(core_clamp_now(now_ns), charged_ns);
    const algorithm_ops_t *ops = core_ops(rule);
    int64_t result = now_ns;
    if (actual < reserved)
        ops->refund(rule, state, reserved - actual, charged_ns, now_ns);
    else if (actual > reserved &&
             ops->debt(rule, state, actual - reserved, now_ns) > rule->max_debt)
        result = SL_EDEBT; /* nothing charged */
    else if (actual > reserved)
        ops->charge(rule, state, actual - reserved, now_ns);
    core_decide(rule, state, 0, now_ns, out);
    return result;
}

int sl_refund(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns, int64_t now_ns,
              sl_decision_t *out)
{
    if (bad_arguments(rule, state, out))
        return SL_EINVAL;
    if (cost < 0)
        return SL_ECOST;
    core_settle(rule, state, cost, 0, charged_ns, now_ns, out);
    return SL_OK;
}

int sl_settle(const sl_rule_t *rule, void *state, int64_t reserved, int64_t actual,
              int64_t charged_ns, int64_t now_ns, sl_decision_t *out)
{
    if (bad_arguments(rule, state, out))
        return SL_EINVAL;
    if (reserved < 0 || actual < 0)
        return SL_ECOST;
    return core_settle(rule, state, reserved, actual, charged_ns, now_ns, out) < 0 ? SL_EDEBT
                                                                                   : SL_OK;
}

/* A prepared rule of a known algorithm. */
static bool prepared(const sl_rule_t *rule)
{
    return rule != NULL && core_algorithm(rule->algorithm) != NULL && rule->state_size != 0;
}

/* ---- the size of a state: rule->state_size bytes, or what a variable one says ------------- */

void core_state_init(const sl_rule_t *rule, void *buf, size_t bytes)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    if (v != NULL)
        v->state_init(rule, buf, bytes);
    else
        memset(buf, 0, bytes);
}

void core_state_move(const sl_rule_t *rule, const void *from, void *to, size_t to_bytes)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    if (v != NULL) {
        v->state_move(rule, from, to, to_bytes);
        return;
    }
    memcpy(to, from, rule->state_size);
    memset((unsigned char *)to + rule->state_size, 0, to_bytes - rule->state_size);
}

int core_state_check(const sl_rule_t *rule, const void *state, size_t len)
{
    if (len < core_state_min(rule) || core_state_bytes(rule, state) > len)
        return SL_ESTATE; /* no header, or a header promising more than there is */
    return core_ops(rule)->valid(rule, state) ? SL_OK : SL_ESTATE;
}

int sl_state_check(const sl_rule_t *rule, const void *state)
{
    if (!prepared(rule) || state == NULL)
        return SL_EINVAL;
    return core_state_check(rule, state, rule->state_size);
}

int sl_state_check_len(const sl_rule_t *rule, const void *state, size_t len)
{
    if (!prepared(rule) || state == NULL)
        return SL_EINVAL;
    return core_state_check(rule, state, len);
}

bool sl_state_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    return core_ops(rule)->is_fresh(rule, state, core_clamp_now(now_ns));
}

/* ---- packed forms: a fixed-size state packs to its bytes ------------------------------------ */

size_t sl_state_packed_max(const sl_rule_t *rule)
{
    if (rule == NULL || rule->state_size == 0)
        return 0;
    const algorithm_variable_t *v = core_ops(rule)->variable;
    return v != NULL ? v->packed_max(rule) : rule->state_size;
}

size_t core_state_packed_need(const sl_rule_t *rule, const void *state)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    return v != NULL ? v->packed_need(rule, state) : rule->state_size;
}

size_t sl_state_pack(const sl_rule_t *rule, const void *state, void *out)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    if (v != NULL)
        return v->pack(rule, state, out);
    memcpy(out, state, rule->state_size);
    return rule->state_size;
}

size_t core_state_unpack_need(const sl_rule_t *rule, const void *packed, size_t len)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    if (v != NULL)
        return v->unpack_need(rule, packed, len);
    return len == rule->state_size ? rule->state_size : 0;
}

int core_state_unpack(const sl_rule_t *rule, const void *packed, size_t len, void *state,
                      size_t bytes)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    if (v != NULL)
        return v->unpack(rule, packed, len, state, bytes) ? SL_OK : SL_ESTATE;
    if (len != rule->state_size || bytes < len)
        return SL_ESTATE;
    core_state_move(rule, packed, state, bytes);
    return core_ops(rule)->valid(rule, state) ? SL_OK : SL_ESTATE;
}

int sl_state_unpack(const sl_rule_t *rule, const void *packed, size_t len, void *state)
{
    if (!prepared(rule) || (packed == NULL && len > 0) || state == NULL)
        return SL_EINVAL;
    return core_state_unpack(rule, packed, len, state, rule->state_size);
}

/* ---- older layouts: a fixed-size state's are today's ----------------------------------------- */

size_t core_state_legacy_size(const sl_rule_t *rule)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    return v != NULL ? v->legacy_size(rule) : rule->state_size;
}

size_t core_state_legacy_need(const sl_rule_t *rule, const void *legacy, size_t len)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    if (v != NULL)
        return v->legacy_need(rule, legacy, len);
    return len == rule->state_size ? rule->state_size : 0;
}

int core_state_from_legacy(const sl_rule_t *rule, const void *legacy, size_t len, void *state,
                           size_t bytes)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    if (v != NULL)
        return v->from_legacy(rule, legacy, len, state, bytes) ? SL_OK : SL_ESTATE;
    return core_state_unpack(rule, legacy, len, state, bytes); /* the same bytes as today's */
}

/* ---- conversion -------------------------------------------------------------------------------
 */

size_t core_state_convert_need(const sl_rule_t *from, const void *from_state, const sl_rule_t *to)
{
    const algorithm_variable_t *v = core_ops(from)->variable;
    return v != NULL ? v->convert_need(from, from_state, to) : to->state_size;
}

int core_state_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                       void *to_state, size_t to_bytes, int64_t now_ns)
{
    if (from->algorithm != to->algorithm)
        return SL_EALGORITHM;
    const algorithm_ops_t *ops = core_ops(from);
    const size_t from_bytes = core_state_bytes(from, from_state);
    if (core_state_check(from, from_state, from_bytes) != SL_OK)
        return SL_ESTATE; /* the caller's buffer holds what the header says (the contract) */
    const bool same = ops->same_meaning(from, to);
    if (same && to_bytes == from_bytes)
        memcpy(to_state, from_state, to_bytes); /* byte for byte (sl_state_convert()) */
    else if (same)
        core_state_move(to, from_state, to_state, to_bytes);
    else
        ops->convert(from, from_state, to, to_state, to_bytes, core_clamp_now(now_ns));
    return SL_OK;
}

int sl_state_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                     void *to_state, int64_t now_ns)
{
    if (!prepared(from) || !prepared(to) || from_state == NULL || to_state == NULL)
        return SL_EINVAL;
    if (from->algorithm != to->algorithm)
        return SL_EALGORITHM;
    if (core_state_check(from, from_state, from->state_size) != SL_OK)
        return SL_ESTATE;
    return core_state_convert(from, from_state, to, to_state, to->state_size, now_ns);
}

void core_state_saturate(const sl_rule_t *rule, void *state, size_t bytes, int64_t at_ns)
{
    sl_decision_t d;
    core_state_init(rule, state, bytes);
    core_decide(rule, state, rule->capacity, at_ns, &d);
    assert(d.allowed); /* a fresh state admits its capacity */
}

int sl_state_saturate(const sl_rule_t *rule, void *state, int64_t at_ns)
{
    sl_decision_t d = {0};
    if (bad_arguments(rule, state, &d))
        return SL_EINVAL;
    core_state_saturate(rule, state, rule->state_size, at_ns);
    return SL_OK;
}
