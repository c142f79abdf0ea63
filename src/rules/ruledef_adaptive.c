/*
 * ruledef_adaptive.c - a concurrency rule's adaptive limit in rules files and JSON rules: its
 * fields, checked on their own and together, and written back. The fields are flat, as every
 * other rule field (mode and its lease_time, sync_interval): docs/design.md says why.
 *
 *   adaptive          aimd | vegas (the table of adaptive algorithms, core/adaptive.h)
 *   min_limit         integer >= 1, at most the limit (where the limit starts)
 *   max_limit         integer, at least the limit, at most 4096
 *   backoff           aimd: percent of the limit kept on a drop, 1..99 (default 90)
 *   latency_timeout   aimd: a duration; a release slower than it counts as a drop (default 5s)
 *   probe             vegas: windows between probes of the least latency, 5..1000 (default 30)
 */
#include <stdio.h>
#include <string.h>

#include "core/adaptive.h"
#include "rules/ruledef_impl.h"

const char *const rd_adaptive_field_names[RD_ADAPTIVE_FIELDS] = {
    "adaptive", "min_limit", "max_limit", "backoff", "latency_timeout", "probe"};

/* The option bit of field i (ADAPTIVE_OPT_*), 0 for the ones every adaptive limit takes. */
static const uint32_t field_opt[RD_ADAPTIVE_FIELDS] = {
    0, 0, 0, ADAPTIVE_OPT_BACKOFF, ADAPTIVE_OPT_TIMEOUT, ADAPTIVE_OPT_PROBE};

int rd_adaptive_problem(const ruledef_t *def, const bool given[RD_ADAPTIVE_FIELDS], int *field,
                        char *why, size_t cap)
{
    const sl_rule_t *r = &def->rule;
    const sl_adaptive_t *a = &r->adaptive;
    const adaptive_algorithm_t *row = adaptive_row((uint64_t)(unsigned)a->algorithm);
    *field = 0;
    for (int i = 1; i < RD_ADAPTIVE_FIELDS && row == NULL; i++) {
        if (given[i]) {
            *field = i;
            return snprintf(why, cap, "only applies with 'adaptive' (aimd or vegas)"), 1;
        }
    }
    if (row == NULL)
        return 0;
    const core_algorithm_t *alg = core_algorithm(r->algorithm);
    if (alg == NULL || !(alg->caps & CORE_CAP_HOLDS))
        return snprintf(why, cap, "an adaptive limit needs an algorithm that holds units"), 1;
    for (int i = 1; i < 3; i++) {
        if (!given[i]) {
            *field = 0;
            return snprintf(why, cap, "needs '%s' beside it", rd_adaptive_field_names[i]), 1;
        }
    }
    for (int i = 3; i < RD_ADAPTIVE_FIELDS; i++) {
        if (given[i] && !(row->opts & field_opt[i])) {
            *field = i;
            return snprintf(why, cap, "does not apply to adaptive: %s", row->name), 1;
        }
    }
    *field = a->min_limit > r->limit ? 1 : 2;
    if (a->min_limit > r->limit || a->max_limit < r->limit)
        return snprintf(why, cap, "must be such that min_limit <= limit (%lld) <= max_limit",
                        (long long)r->limit),
               1;
    if (a->max_limit > SL_HOLDS_MAX)
        return snprintf(why, cap, "must be at most %lld", (long long)SL_HOLDS_MAX), 1;
    *field = a->backoff_pct != 0 && (a->backoff_pct < 1 || a->backoff_pct > 99) ? 3 : 5;
    if (*field == 3)
        return snprintf(why, cap, "must be a percent within 1..99"), 1;
    if (a->probe != 0 && (a->probe < 5 || a->probe > 1000))
        return snprintf(why, cap, "must be within 5..1000"), 1;
    *field = 4;
    if (a->timeout_ns != 0 &&
        (a->timeout_ns < SL_WINDOW_MIN_NS || a->timeout_ns > SL_ADAPTIVE_LATENCY_MAX_NS ||
         a->timeout_ns % SL_NS_PER_MS != 0))
        return snprintf(why, cap, "must be whole milliseconds within 1ms..1h"), 1;
    return 0;
}

bool rd_adaptive_fields(const sl_rule_t *r, rd_adaptive_put_fn put, void *arg)
{
    const sl_adaptive_t *a = &r->adaptive;
    const adaptive_algorithm_t *row = adaptive_row((uint64_t)(unsigned)a->algorithm);
    if (row == NULL)
        return true;
    bool ok = put(arg, "adaptive", RD_WORD, row->name, 0) &&
              put(arg, "min_limit", RD_INT, NULL, a->min_limit) &&
              put(arg, "max_limit", RD_INT, NULL, a->max_limit);
    if (ok && (row->opts & ADAPTIVE_OPT_BACKOFF))
        ok = put(arg, "backoff", RD_INT, NULL, a->backoff_pct);
    if (ok && (row->opts & ADAPTIVE_OPT_TIMEOUT))
        ok = put(arg, "latency_timeout", RD_DURATION, NULL, a->timeout_ns);
    if (ok && (row->opts & ADAPTIVE_OPT_PROBE))
        ok = put(arg, "probe", RD_INT, NULL, a->probe);
    return ok;
}
