/*
 * lease_size.c - a lease's size and its end on the node's clock (lease_size.h).
 */
#include "store/lease_size.h"

double lease_rate_update(double rate_per_s, int64_t units, int64_t elapsed_ns, int64_t horizon_ns)
{
    if (elapsed_ns <= 0 || units < 0) {
        return rate_per_s;
    }
    double sample = (double)units * 1e9 / (double)elapsed_ns;
    if (rate_per_s <= 0.0) {
        return sample;
    }
    double w =
        (double)elapsed_ns / ((double)elapsed_ns + (double)(horizon_ns > 0 ? horizon_ns : 1));
    return rate_per_s + w * (sample - rate_per_s);
}

int64_t lease_want(double rate_per_s, int64_t lease_ns, int64_t remaining, int64_t cost)
{
    double units = LEASE_HEADROOM * rate_per_s * (double)lease_ns / 1e9;
    int64_t want = units >= (double)SL_COUNT_MAX ? SL_COUNT_MAX : (int64_t)units;
    if ((double)want < units) {
        want++; /* the ceiling */
    }
    if (remaining >= 0 && want > remaining / LEASE_SHARE) {
        want = remaining / LEASE_SHARE;
    }
    int64_t least = cost > 1 ? cost : 1;
    return want > least ? want : least;
}

int64_t lease_local_end(int64_t sent_ns, const sl_lease_t *lease)
{
    return sent_ns + (lease->until_ns - lease->at_ns);
}
