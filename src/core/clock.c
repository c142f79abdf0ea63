/*
 * clock.c - the one place in the library that reads a clock.
 *
 * sl_now_ns() reads CLOCK_REALTIME and never returns less than a value it returned before in
 * this process: the newest value handed out is kept in an atomic, raised with a CAS. The
 * algorithms never call it; callers pass the time in (once per batch, in the server).
 */
#include <stdatomic.h>
#include <time.h>

#include "sluice/sluice.h"

static _Atomic int64_t last_now_ns;

int64_t sl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * SL_NS_PER_SEC + ts.tv_nsec;
    int64_t last = atomic_load_explicit(&last_now_ns, memory_order_relaxed);
    while (now > last) {
        if (atomic_compare_exchange_weak_explicit(&last_now_ns, &last, now, memory_order_relaxed,
                                                  memory_order_relaxed))
            return now;
    }
    return last > now ? last : now;
}

int64_t sl_ns_to_units_ceil(int64_t ns, int64_t unit_ns)
{
    if (ns < 0)
        return -1;
    if (unit_ns <= 0)
        return ns;
    return ns / unit_ns + (ns % unit_ns != 0);
}
