/*
 * rules.h - test helper: a rule with every public field set, not yet prepared, so tests can
 * check sl_rule_prepare() on it or prepare it themselves.
 */
#ifndef SLUICE_TESTS_RULES_H
#define SLUICE_TESTS_RULES_H

#include <string.h>

#include "sluice/sluice.h"

static inline sl_rule_t rule_fields(sl_algorithm_t alg, int64_t limit, int64_t window_ns,
                                    int64_t burst, int64_t buckets, int64_t max_delay_ns)
{
    sl_rule_t rule;
    memset(&rule, 0, sizeof(rule));
    rule.algorithm = alg;
    rule.limit = limit;
    rule.window_ns = window_ns;
    rule.burst = burst;
    rule.buckets = buckets;
    rule.max_delay_ns = max_delay_ns;
    rule.max_debt = SL_DEFAULT;
    return rule;
}

#endif /* SLUICE_TESTS_RULES_H */
