/*
 * redis_parse.c - Redis replies read as the store's answers: a decision (the module's five
 * integers in ms, or a script's six in us), a lease, and the error a node without sluice.so
 * gives. Pure functions over hiredis's reply objects: no connection, no state.
 */
#include <string.h>
#include <strings.h>

#include "store/redis_store_impl.h"

static int64_t to_ns(long long v, int64_t unit_ns)
{
    return v < 0 ? -1 : (int64_t)v * unit_ns;
}

/* The module's 5 integers in ms, or the scripts' 6 in µs, as a decision. */
bool rs_parse_decision(const redisReply *r, redis_mode_t mode, sl_decision_t *d)
{
    size_t want = mode == REDIS_MODE_MODULE ? 5 : 6;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != want) {
        return false;
    }
    for (size_t i = 0; i < want; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER) {
            return false;
        }
    }
    long long v[6] = {0};
    for (size_t i = 0; i < want; i++) {
        v[i] = r->element[i]->integer;
    }
    int64_t unit = mode == REDIS_MODE_MODULE ? SL_NS_PER_MS : SL_NS_PER_US;
    *d = (sl_decision_t){.allowed = v[0] == 1,
                         .limit = v[1],
                         .remaining = v[2],
                         .retry_after_ns = to_ns(v[3], unit),
                         .reset_after_ns = to_ns(v[4], unit),
                         .delay_ns = to_ns(v[5], unit)};
    if (mode == REDIS_MODE_MODULE && d->allowed && d->retry_after_ns > 0) {
        /* the module, like sluiced, reports a delayed admission's delay as retry_after */
        d->delay_ns = d->retry_after_ns;
        d->retry_after_ns = 0;
    }
    return true;
}

/* A reply to a lease, [granted, at_us, until_us, remaining, reset_after] (reset_after in ms
 * from the module, us from a script), into *lease and a peek after it into *d. */
bool rs_parse_lease(const redisReply *r, redis_mode_t mode, const sl_rule_t *rule,
                    sl_lease_t *lease, sl_decision_t *d)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
        return false;
    }
    long long v[5];
    for (size_t i = 0; i < 5; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0) {
            return false;
        }
        v[i] = r->element[i]->integer;
    }
    if (v[2] < v[1] || v[2] > INT64_MAX / SL_NS_PER_US) {
        return false;
    }
    *lease = (sl_lease_t){.granted = v[0],
                          .at_ns = v[1] * SL_NS_PER_US,
                          .until_ns = v[2] * SL_NS_PER_US,
                          .remaining = v[3],
                          .reset_after_ns =
                              to_ns(v[4], mode == REDIS_MODE_MODULE ? SL_NS_PER_MS : SL_NS_PER_US)};
    *d = (sl_decision_t){.allowed = v[0] > 0,
                         .limit = rule->capacity,
                         .remaining = v[3],
                         .reset_after_ns = lease->reset_after_ns};
    return true;
}

/* An acquire's six integers: a decision's five (times in the mode's unit) and the hold's id,
 * 0 when none was made, else below 2^48 - 1. */
bool rs_parse_acquire(const redisReply *r, redis_mode_t mode, sl_decision_t *d, uint64_t *id)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 6) {
        return false;
    }
    long long v[6];
    for (size_t i = 0; i < 6; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER) {
            return false;
        }
        v[i] = r->element[i]->integer;
    }
    if (v[5] < 0 || v[5] >= (1LL << 48) - 1) {
        return false;
    }
    int64_t unit = mode == REDIS_MODE_MODULE ? SL_NS_PER_MS : SL_NS_PER_US;
    *d = (sl_decision_t){.allowed = v[0] == 1,
                         .limit = v[1],
                         .remaining = v[2],
                         .retry_after_ns = to_ns(v[3], unit),
                         .reset_after_ns = to_ns(v[4], unit)};
    *id = (uint64_t)v[5];
    return true;
}

/* "ERR unknown command 'SL.THROTTLE', ...": the node has no sluice.so (any more). */
bool rs_is_unknown_command(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncasecmp(r->str, "ERR unknown command", 19) == 0;
}
