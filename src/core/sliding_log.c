/*
 * sliding_log.c - the exact sliding window: one timestamp per admitted unit.
 *
 * State (8 + 8 * N bytes): a ring of up to N stamps, oldest at `head`, `count` in use, sorted
 * non-decreasing (times are clamped to the newest stamp, so appends keep the order). A stamp t
 * is inside the window at `now` iff t > now - W: the window excludes exactly now - W (seed 003).
 * Counting the window is a binary search over the sorted ring, so peeks and rejections (which
 * must not write) cost O(log N); an admission drops the expired stamps it found, amortized O(1)
 * per stamp, and appends `cost` copies of now.
 */
#include <string.h>

#include "core/core.h"

typedef struct sliding_log_header {
    uint32_t head;  /* ring index of the oldest stamp */
    uint32_t count; /* stamps in use, <= N */
} sliding_log_header_t;

/* The i-th oldest stamp (0 <= i < count). */
static int64_t stamp_at(const unsigned char *ring, uint32_t n, const sliding_log_header_t *h,
                        uint32_t i)
{
    uint64_t at = (uint64_t)h->head + i;
    return load_i64(ring + 8 * (at >= n ? at - n : at));
}

/* Index of the oldest stamp inside the window, i.e. the number of expired stamps. */
static uint32_t first_inside(const unsigned char *ring, uint32_t n, const sliding_log_header_t *h,
                             int64_t cutoff_ns)
{
    uint32_t lo = 0, hi = h->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (stamp_at(ring, n, h, mid) > cutoff_ns)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void sliding_log_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                        sl_decision_t *out)
{
    sliding_log_header_t h;
    memcpy(&h, state, sizeof(h));
    unsigned char *ring = (unsigned char *)state + sizeof(h);
    const uint32_t n = (uint32_t)rule->limit;
    assert(h.count <= n && h.head < n);

    if (h.count > 0)
        now_ns = max_i64(now_ns, stamp_at(ring, n, &h, h.count - 1)); /* clamp */
    uint32_t expired = first_inside(ring, n, &h, now_ns - rule->window_ns);
    int64_t inside = h.count - expired;

    if (cost <= rule->limit - inside) {
        decision_admit(out);
        if (cost > 0) {
            h.head = (uint32_t)(((uint64_t)h.head + expired) % n);
            h.count -= expired;
            for (int64_t i = 0; i < cost; i++) {
                store_i64(ring + 8 * (((uint64_t)h.head + h.count) % n), now_ns);
                h.count++;
            }
            memcpy(state, &h, sizeof(h));
        }
        inside += cost;
    } else if (cost > rule->limit) {
        decision_reject(out, -1);
    } else {
        /* the (inside + cost - N)-th oldest stamp in the window has to leave it */
        uint32_t j = expired + (uint32_t)(inside + cost - rule->limit) - 1;
        decision_reject(out, stamp_at(ring, n, &h, j) + rule->window_ns - now_ns);
    }
    out->remaining = rule->limit - inside;
    /* h is the stored header now, so its newest stamp is now_ns after an admission */
    out->reset_after_ns =
        inside > 0 ? stamp_at(ring, n, &h, h.count - 1) + rule->window_ns - now_ns : 0;
}

bool sliding_log_valid(const sl_rule_t *rule, const void *state)
{
    sliding_log_header_t h;
    memcpy(&h, state, sizeof(h));
    const uint32_t n = (uint32_t)rule->limit;
    if (h.count > n || h.head >= n)
        return false;
    const unsigned char *ring = (const unsigned char *)state + sizeof(h);
    int64_t prev = 0;
    for (uint32_t i = 0; i < h.count; i++) { /* sorted, within [0, SL_NOW_MAX_NS] */
        int64_t t = stamp_at(ring, n, &h, i);
        if (t < prev || t > SL_NOW_MAX_NS)
            return false;
        prev = t;
    }
    return true;
}

bool sliding_log_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    sliding_log_header_t h;
    memcpy(&h, state, sizeof(h));
    if (h.count == 0)
        return true;
    const unsigned char *ring = (const unsigned char *)state + sizeof(h);
    return stamp_at(ring, (uint32_t)rule->limit, &h, h.count - 1) <= now_ns - rule->window_ns;
}
