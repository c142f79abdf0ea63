/*
 * loop_stats.c - the loops' counters (see server.h): the request latency histogram, and sums
 * over the loops for /metrics and INFO.
 */
#include "server/loop.h"

const int64_t loop_latency_bounds_ns[LATENCY_BUCKETS] = {
    1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 10000000};

void loop_record_batch(loop_t *l, uint64_t n, int64_t latency_ns)
{
    const int64_t *bounds_ns = loop_latency_bounds_ns;
    if (n == 0) {
        return;
    }
    if (latency_ns < 0) {
        latency_ns = 0;
    }
    size_t b = 0;
    while (b < LATENCY_BUCKETS && latency_ns > bounds_ns[b]) {
        b++;
    }
    loop_stats_t *s = &l->stats;
    atomic_fetch_add_explicit(&s->latency[b], n, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->latency_sum_ns, n * (uint64_t)latency_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->latency_count, n, memory_order_relaxed);
}

uint64_t server_stat_sum(server_t *srv, size_t offset)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < srv->nloops; i++) {
        const _Atomic uint64_t *p =
            (const _Atomic uint64_t *)((const char *)&srv->loops[i].stats + offset);
        total += atomic_load_explicit(p, memory_order_relaxed);
    }
    return total;
}
