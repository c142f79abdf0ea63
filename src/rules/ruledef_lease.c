/*
 * ruledef_lease.c - a rule's mode: leased, where it is sound and can grant something, and its
 * leases' time; approximate's sync interval; strict's replicas (ruledef.h).
 */
#include <stdio.h>

#include "rules/ruledef_impl.h"

int64_t ruledef_lease_room_ns(const sl_rule_t *rule)
{
    const core_algorithm_t *row = core_algorithm(rule->algorithm);
    if (row == NULL || !(row->caps & CORE_CAP_TOKENS))
        return SL_WINDOW_MAX_NS / SL_NS_PER_MS * SL_NS_PER_MS;
    int64_t room = rule->tolerance_ns - rule->interval_ns;
    return room > 0 ? room / SL_NS_PER_MS * SL_NS_PER_MS : 0;
}

int64_t ruledef_lease_ns(const ruledef_t *def)
{
    if (def->mode != RULE_MODE_LEASED)
        return 0;
    if (def->lease_ns > 0)
        return def->lease_ns;
    int64_t ns =
        def->rule.window_ns / 10 < SL_NS_PER_SEC ? def->rule.window_ns / 10 : SL_NS_PER_SEC;
    int64_t room = ruledef_lease_room_ns(&def->rule);
    ns = (ns < room ? ns : room) / SL_NS_PER_MS * SL_NS_PER_MS;
    return ns >= SL_NS_PER_MS ? ns : SL_NS_PER_MS;
}

int64_t ruledef_sync_ns(const ruledef_t *def)
{
    if (def->mode != RULE_MODE_APPROXIMATE)
        return 0;
    return def->sync_ns > 0 ? def->sync_ns : RULE_SYNC_DEFAULT_NS;
}

int64_t ruledef_replica_wait_ns(const ruledef_t *def)
{
    if (def->replicas == 0)
        return 0;
    return def->replica_wait_ns > 0 ? def->replica_wait_ns : RULE_REPLICA_WAIT_DEFAULT_NS;
}

bool rd_replicas_problem(const ruledef_t *def, bool replica_wait_given, rd_mode_field_t *at,
                         char *why, size_t cap)
{
    *at = RD_AT_REPLICAS;
    if (def->replicas > RULE_REPLICAS_MAX) {
        snprintf(why, cap, "must be at most %d", RULE_REPLICAS_MAX);
        return true;
    }
    *at = RD_AT_REPLICA_WAIT;
    if (replica_wait_given && def->replicas == 0) {
        snprintf(why, cap, "only applies to a rule with replicas");
        return true;
    }
    int64_t w = def->replica_wait_ns;
    if (replica_wait_given &&
        (w < SL_NS_PER_MS || w % SL_NS_PER_MS != 0 || w > RULE_REPLICA_WAIT_MAX_NS)) {
        snprintf(why, cap, "must be whole milliseconds, 1ms .. 1s");
        return true;
    }
    *at = RD_AT_REPLICAS;
    if (def->replicas > 0 && def->mode != RULE_MODE_STRICT) {
        snprintf(why, cap,
                 "only applies to a strict rule: a %s rule decides locally from what it was "
                 "granted",
                 rule_mode_names[def->mode]);
        return true;
    }
    return false;
}

/* mode: leased where a lease is sound (the row is CORE_CAP_LEASABLE) and can grant something;
 * lease_time only with it, and within the bucket's room for a lease; mode: approximate where
 * the row is CORE_CAP_APPROXIMATE (it promises a bound, not exactness), sync_interval only with
 * it. */
bool rd_mode_problem(const ruledef_t *def, bool lease_time_given, bool sync_interval_given,
                     rd_mode_field_t *at, char *why, size_t cap)
{
    char a[32], b[32];
    const sl_rule_t *r = &def->rule;
    *at = RD_AT_SYNC_INTERVAL;
    if (sync_interval_given && def->mode != RULE_MODE_APPROXIMATE) {
        snprintf(why, cap, "only applies to a rule with mode: approximate");
        return true;
    }
    *at = RD_AT_LEASE_TIME;
    if (lease_time_given && def->mode != RULE_MODE_LEASED) {
        snprintf(why, cap, "only applies to a rule with mode: leased");
        return true;
    }
    const core_algorithm_t *row = core_algorithm(r->algorithm);
    *at = RD_AT_MODE;
    if (def->mode == RULE_MODE_APPROXIMATE && row != NULL && !(row->caps & CORE_CAP_APPROXIMATE)) {
        snprintf(why, cap, "%s cannot be approximate: a count of what remains is no bound on it",
                 row->name);
        return true;
    }
    if (def->mode != RULE_MODE_LEASED)
        return false;
    int64_t room = ruledef_lease_room_ns(r);
    if (row != NULL && !(row->caps & CORE_CAP_LEASABLE)) {
        snprintf(why, cap, "%s cannot lease: %s", row->name, row->lease_refusal);
        return true;
    }
    if (room < SL_NS_PER_MS) {
        snprintf(why, cap,
                 "%s cannot lease with burst %lld: a lease's time is held in the bucket, "
                 "and its capacity less one interval is under 1ms",
                 sl_algorithm_name(r->algorithm), (long long)r->burst);
        return true;
    }
    *at = RD_AT_LEASE_TIME;
    if (def->lease_ns > room) {
        snprintf(why, cap,
                 "%s is longer than the bucket's room for a lease, %s (its capacity less one "
                 "interval)",
                 ruledef_format_duration(def->lease_ns, a), ruledef_format_duration(room, b));
        return true;
    }
    return false;
}

int rd_hold_timeout_problem(const ruledef_t *def, bool window_given, char *why, size_t cap)
{
    const core_algorithm_t *row = core_algorithm(def->rule.algorithm);
    if (row == NULL || !core_algorithm_holds(row)) {
        char names[256];
        core_algorithm_join(names, sizeof names, core_algorithm_holds, ", ", " and ");
        snprintf(why, cap, "only applies to %s (the window elsewhere)", names);
        return 1;
    }
    if (window_given) {
        snprintf(why, cap, "give hold_timeout or window, not both: they are one value");
        return 2;
    }
    return 0;
}
