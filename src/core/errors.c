/* errors.c - names of the SL_E* codes. */
#include "sluice/sluice.h"

const char *sl_strerror(int code)
{
    switch (code) {
    case SL_OK:
        return "success";
    case SL_EALGORITHM:
        return "unknown algorithm (expected fixed_window, sliding_log, sliding_window, "
               "sliding_buckets, token_bucket or gcra)";
    case SL_ELIMIT:
        return "limit must be a positive integer (at most 1048576 for sliding_log)";
    case SL_EWINDOW:
        return "window must be between 1ms and 366d";
    case SL_EBURST:
        return "burst must be >= 1 for token_bucket, >= 0 for gcra, and only applies to them";
    case SL_EBUCKETS:
        return "buckets must be between 1 and 4096, divide the window, and only applies to "
               "sliding_buckets";
    case SL_EDELAY:
        return "max_delay must be between 0 and 366d and only applies to token_bucket and gcra";
    case SL_ECOST:
        return "cost must be a non-negative integer";
    case SL_EOVERFLOW:
        return "value out of range";
    case SL_EKEY:
        return "key too long";
    case SL_ENOMEM:
        return "out of memory";
    case SL_EFULL:
        return "table full: memory cap reached and no idle key to reclaim";
    case SL_ESTATE:
        return "state is corrupt or belongs to another rule";
    case SL_EDURATION:
        return "malformed duration (expected e.g. 250ms, 10s, 1m, 1h30m, 1d)";
    case SL_EINVAL:
        return "invalid argument";
    case SL_ELEASE:
        return "no lease possible: sliding_log cannot lease, and a lease time must be within "
               "[1ns, 366d] (token_bucket/gcra: at most the bucket's tolerance less one interval)";
    case SL_EDEBT:
        return "settle refused: it would leave the key owing more than the rule's max_debt "
               "(nothing was charged)";
    case SL_EMAXDEBT:
        return "max_debt must be an integer between 0 and 2^62 - 1 (units a key may owe beyond "
               "its limit)";
    }
    return "unknown error";
}
