/*
 * rule.c - rule validation and preparation, and the dispatch from sl_decide(), sl_refund(),
 * sl_settle(), sl_state_convert() and sl_state_saturate() to the six algorithms.
 *
 * sl_rule_prepare() is the only place that checks rule parameters: once a rule is prepared,
 * every algorithm may rely on limit > 0, a window within [SL_WINDOW_MIN_NS, SL_WINDOW_MAX_NS],
 * buckets dividing the window, and derived values (interval, tolerance) that fit in 64 bits.
 */
#include <string.h>

#include "core/core.h"

static const char *const algorithm_names[] = {
    [SL_FIXED_WINDOW] = "fixed_window",     [SL_SLIDING_LOG] = "sliding_log",
    [SL_SLIDING_WINDOW] = "sliding_window", [SL_SLIDING_BUCKETS] = "sliding_buckets",
    [SL_TOKEN_BUCKET] = "token_bucket",     [SL_GCRA] = "gcra",
};

/* ---- the size of a fixed-size state: rule->state_size bytes ---------------------------------- */

static size_t fixed_state_min(const sl_rule_t *rule)
{
    return rule->state_size;
}

static void fixed_state_init(const sl_rule_t *rule, void *buf, size_t bytes)
{
    (void)rule;
    memset(buf, 0, bytes);
}

static size_t fixed_state_bytes(const sl_rule_t *rule, const void *state)
{
    (void)state;
    return rule->state_size;
}

static void fixed_state_move(const sl_rule_t *rule, const void *from, void *to, size_t to_bytes)
{
    memcpy(to, from, rule->state_size);
    memset((unsigned char *)to + rule->state_size, 0, to_bytes - rule->state_size);
}

static size_t fixed_convert_need(const sl_rule_t *from, const void *from_state, const sl_rule_t *to)
{
    (void)from;
    (void)from_state;
    return to->state_size;
}

#define OPS(name, size)                                                                            \
    {                                                                                              \
        name##_decide, name##_is_fresh, name##_valid, name##_refund, name##_charge, name##_debt,   \
            name##_convert, size##_state_min, size##_state_init, size##_state_bytes,               \
            size##_state_bytes, size##_state_move, size##_convert_need                             \
    }
#define VARIABLE_OPS(name)                                                                         \
    {                                                                                              \
        name##_decide, name##_is_fresh, name##_valid, name##_refund, name##_charge, name##_debt,   \
            name##_convert, name##_state_min, name##_state_init, name##_state_bytes,               \
            name##_state_need, name##_state_move, name##_convert_need                              \
    }
const algorithm_ops_t core_algorithms[CORE_ALGORITHM_SLOTS] = {
    [SL_FIXED_WINDOW] = OPS(fixed_window, fixed),
    [SL_SLIDING_LOG] = VARIABLE_OPS(sliding_log),
    [SL_SLIDING_WINDOW] = OPS(sliding_window, fixed),
    [SL_SLIDING_BUCKETS] = OPS(sliding_buckets, fixed),
    [SL_TOKEN_BUCKET] = OPS(gcra, fixed), /* the same GCRA, its own tolerance */
    [SL_GCRA] = OPS(gcra, fixed),
};

const char *sl_algorithm_name(sl_algorithm_t algorithm)
{
    if (algorithm < SL_FIXED_WINDOW || algorithm > CORE_ALGORITHM_LAST)
        return NULL;
    return algorithm_names[algorithm];
}

int sl_algorithm_parse(const char *name, size_t len, sl_algorithm_t *out)
{
    if (name == NULL || out == NULL)
        return SL_EINVAL;
    for (int a = SL_FIXED_WINDOW; a <= CORE_ALGORITHM_LAST; a++) {
        if (strlen(algorithm_names[a]) == len && memcmp(algorithm_names[a], name, len) == 0) {
            *out = (sl_algorithm_t)a;
            return SL_OK;
        }
    }
    return SL_EALGORITHM;
}

static bool uses_tokens(sl_algorithm_t a)
{
    return a == SL_TOKEN_BUCKET || a == SL_GCRA;
}

/* An optional parameter that does not apply may only be left unset. */
static bool unset(int64_t v)
{
    return v == SL_DEFAULT || v == 0;
}

static uint32_t state_size_of(const sl_rule_t *r)
{
    switch (r->algorithm) {
    case SL_FIXED_WINDOW:
        return 16; /* window index, count */
    case SL_SLIDING_WINDOW:
        return 24; /* window index, current, previous */
    case SL_SLIDING_LOG:
        return (uint32_t)(32 + 16 * r->limit); /* header, room for N entries (sliding_log.c) */
    case SL_SLIDING_BUCKETS:
        return (uint32_t)(16 + 8 * (r->buckets + 1)); /* newest, total, K + 1 counts */
    default:
        return 8; /* TAT */
    }
}

/* Applies defaults and computes the derived fields of r, whose fields are valid. */
static int derive(sl_rule_t *r)
{
    r->capacity = r->limit;
    r->interval_ns = 0;
    r->tolerance_ns = 0;
    r->bucket_ns = r->algorithm == SL_SLIDING_BUCKETS ? r->window_ns / r->buckets : 0;
    if (uses_tokens(r->algorithm)) {
        /* T rounded up: N * T >= W, so the rate is never above N per W. */
        r->interval_ns = r->window_ns / r->limit + (r->window_ns % r->limit != 0);
        r->capacity = r->burst;
        if (r->algorithm == SL_GCRA && __builtin_add_overflow(r->burst, 1, &r->capacity))
            return SL_EOVERFLOW;
        /* headroom below INT64_MAX: TAT - tolerance - max_delay and TAT' + T*c stay in range */
        if (__builtin_mul_overflow(r->interval_ns, r->capacity, &r->tolerance_ns) ||
            r->tolerance_ns > SL_TOLERANCE_MAX_NS)
            return SL_EOVERFLOW;
    }
    r->state_size = state_size_of(r);
    return SL_OK;
}

int sl_rule_prepare(sl_rule_t *rule)
{
    if (rule == NULL)
        return SL_EINVAL;
    sl_rule_t r = *rule;
    if (sl_algorithm_name(r.algorithm) == NULL)
        return SL_EALGORITHM;
    const bool tokens = uses_tokens(r.algorithm);
    if (r.limit <= 0 || (r.algorithm == SL_SLIDING_LOG && r.limit > SL_LOG_LIMIT_MAX))
        return SL_ELIMIT;
    if (r.window_ns < SL_WINDOW_MIN_NS || r.window_ns > SL_WINDOW_MAX_NS)
        return SL_EWINDOW;

    if (tokens) {
        if (r.burst == SL_DEFAULT)
            r.burst = r.limit;
        if (r.algorithm == SL_TOKEN_BUCKET ? r.burst < 1 : r.burst < 0)
            return SL_EBURST;
    } else if (unset(r.burst)) {
        r.burst = 0;
    } else {
        return SL_EBURST;
    }

    if (r.algorithm == SL_SLIDING_BUCKETS) {
        if (r.buckets == SL_DEFAULT)
            r.buckets = SL_BUCKETS_DEFAULT;
        if (r.buckets < 1 || r.buckets > SL_BUCKETS_MAX || r.window_ns % r.buckets != 0)
            return SL_EBUCKETS;
    } else if (unset(r.buckets)) {
        r.buckets = 0;
    } else {
        return SL_EBUCKETS;
    }

    if (tokens ? r.max_delay_ns < 0 || r.max_delay_ns > SL_WINDOW_MAX_NS : !unset(r.max_delay_ns))
        return SL_EDELAY;
    if (!tokens)
        r.max_delay_ns = 0;

    int rc = derive(&r);
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
           sl_algorithm_name(rule->algorithm) == NULL || rule->state_size == 0;
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
    assert(rule->algorithm >= SL_FIXED_WINDOW && rule->algorithm <= CORE_ALGORITHM_LAST);
    assert(rule->state_size > 0 && reserved >= 0 && actual >= 0);
    charged_ns = core_clamp_now(charged_ns);
    now_ns = max_i64(core_clamp_now(now_ns), charged_ns);
    const algorithm_ops_t *ops = &core_algorithms[rule->algorithm];
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
    return rule != NULL && sl_algorithm_name(rule->algorithm) != NULL && rule->state_size != 0;
}

size_t core_state_min(const sl_rule_t *rule)
{
    return core_algorithms[rule->algorithm].state_min(rule);
}

void core_state_init(const sl_rule_t *rule, void *buf, size_t bytes)
{
    core_algorithms[rule->algorithm].state_init(rule, buf, bytes);
}

size_t core_state_bytes(const sl_rule_t *rule, const void *state)
{
    return core_algorithms[rule->algorithm].state_bytes(rule, state);
}

size_t core_state_need(const sl_rule_t *rule, const void *state)
{
    return core_algorithms[rule->algorithm].state_need(rule, state);
}

void core_state_move(const sl_rule_t *rule, const void *from, void *to, size_t to_bytes)
{
    core_algorithms[rule->algorithm].state_move(rule, from, to, to_bytes);
}

int core_state_check(const sl_rule_t *rule, const void *state, size_t len)
{
    const algorithm_ops_t *ops = &core_algorithms[rule->algorithm];
    if (len < ops->state_min(rule) || ops->state_bytes(rule, state) > len)
        return SL_ESTATE; /* no header, or a header promising more than there is */
    return ops->valid(rule, state) ? SL_OK : SL_ESTATE;
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
    return core_algorithms[rule->algorithm].is_fresh(rule, state, core_clamp_now(now_ns));
}

size_t sl_state_packed_max(const sl_rule_t *rule)
{
    if (rule == NULL || rule->state_size == 0)
        return 0;
    return rule->algorithm == SL_SLIDING_LOG ? sliding_log_packed_max(rule) : rule->state_size;
}

size_t core_state_packed_need(const sl_rule_t *rule, const void *state)
{
    return rule->algorithm == SL_SLIDING_LOG ? sliding_log_packed_need(rule, state)
                                             : rule->state_size;
}

size_t sl_state_pack(const sl_rule_t *rule, const void *state, void *out)
{
    if (rule->algorithm == SL_SLIDING_LOG)
        return sliding_log_pack(rule, state, out);
    memcpy(out, state, rule->state_size);
    return rule->state_size;
}

size_t core_state_unpack_need(const sl_rule_t *rule, const void *packed, size_t len)
{
    if (rule->algorithm == SL_SLIDING_LOG)
        return sliding_log_unpack_need(rule, packed, len);
    return len == rule->state_size ? rule->state_size : 0;
}

int core_state_unpack(const sl_rule_t *rule, const void *packed, size_t len, void *state,
                      size_t bytes)
{
    if (rule->algorithm == SL_SLIDING_LOG)
        return sliding_log_unpack(rule, packed, len, state, bytes) ? SL_OK : SL_ESTATE;
    if (len != rule->state_size || bytes < len)
        return SL_ESTATE;
    core_state_move(rule, packed, state, bytes);
    return core_algorithms[rule->algorithm].valid(rule, state) ? SL_OK : SL_ESTATE;
}

int sl_state_unpack(const sl_rule_t *rule, const void *packed, size_t len, void *state)
{
    if (!prepared(rule) || (packed == NULL && len > 0) || state == NULL)
        return SL_EINVAL;
    return core_state_unpack(rule, packed, len, state, rule->state_size);
}

size_t core_state_legacy_size(const sl_rule_t *rule)
{
    return rule->algorithm == SL_SLIDING_LOG ? sliding_log_legacy_size(rule) : rule->state_size;
}

size_t core_state_legacy_need(const sl_rule_t *rule, const void *legacy, size_t len)
{
    if (rule->algorithm == SL_SLIDING_LOG)
        return sliding_log_legacy_need(rule, legacy, len);
    return len == rule->state_size ? rule->state_size : 0;
}

int core_state_from_legacy(const sl_rule_t *rule, const void *legacy, size_t len, void *state,
                           size_t bytes)
{
    if (rule->algorithm == SL_SLIDING_LOG)
        return sliding_log_from_legacy(rule, legacy, len, state, bytes) ? SL_OK : SL_ESTATE;
    return core_state_unpack(rule, legacy, len, state, bytes); /* the same bytes as today's */
}

/* Whether a state means the same usage under both rules (same algorithm): then it is copied. */
static bool same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    switch (a->algorithm) {
    case SL_FIXED_WINDOW:
    case SL_SLIDING_WINDOW:
        return a->window_ns == b->window_ns; /* counts per window, whatever the limit */
    case SL_SLIDING_LOG:
        return a->limit == b->limit && a->window_ns == b->window_ns; /* the entries' meaning */
    case SL_SLIDING_BUCKETS:
        return a->window_ns == b->window_ns && a->buckets == b->buckets;
    default:
        return a->interval_ns == b->interval_ns; /* TAT, whatever the tolerance */
    }
}

size_t core_state_convert_need(const sl_rule_t *from, const void *from_state, const sl_rule_t *to)
{
    return core_algorithms[from->algorithm].convert_need(from, from_state, to);
}

int core_state_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                       void *to_state, size_t to_bytes, int64_t now_ns)
{
    if (from->algorithm != to->algorithm)
        return SL_EALGORITHM;
    const algorithm_ops_t *ops = &core_algorithms[from->algorithm];
    if (core_state_check(from, from_state, ops->state_bytes(from, from_state)) != SL_OK)
        return SL_ESTATE; /* the caller's buffer holds what the header says (the contract) */
    const size_t from_bytes = ops->state_bytes(from, from_state);
    if (same_meaning(from, to) && to_bytes == from_bytes)
        memcpy(to_state, from_state, to_bytes); /* byte for byte (sl_state_convert()) */
    else if (same_meaning(from, to))
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
