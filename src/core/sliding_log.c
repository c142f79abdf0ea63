/*
 * sliding_log.c - the exact sliding window: one timestamp per admitted unit.
 *
 * State (8 + 8 * N bytes): a ring of up to N stamps, oldest at `head`, `count` in use, sorted
 * non-decreasing (times are clamped to the newest stamp, so appends keep the order). A stamp t
 * is inside the window at `now` iff t > now - W: the window excludes exactly now - W (seed 003).
 * Counting the window is a binary search over the sorted ring, so peeks and rejections (which
 * must not write) cost O(log N); an admission drops the expired stamps it found, amortized O(1)
 * per stamp, and appends `cost` copies of now.
 *
 * Packed form (sl_state_pack(), for stores that keep each key's state as its own value): the
 * stamps in use and nothing else, so a key weighs what it holds rather than N stamps.
 *
 *   byte 0   e, 0..9: every stamp is a multiple of 10^e ns, and is written in units of 10^e
 *   varint   count, 0..N
 *   varint   the oldest stamp / 10^e                      (when count > 0)
 *   varint   each later stamp minus the one before / 10^e  (count - 1 of them, >= 0)
 *
 * Varints are LEB128 (7 bits a byte, low first). Stamps taken from a microsecond clock pack with
 * e = 3: a delta below 16 ms takes 2 bytes, below 2 s 3 bytes.
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

/* ---- packed form ----------------------------------------------------------------------------- */

#define VARINT_MAX 10 /* bytes of a 64-bit LEB128 */

static const int64_t pow10_ns[10] = {1,      10,      100,      1000,      10000,
                                     100000, 1000000, 10000000, 100000000, 1000000000};

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Reads one varint from [*p, end); false when it is truncated or longer than 64 bits. */
static bool get_varint(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;
        if (shift == 63 && b > 1)
            return false;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = v;
            return true;
        }
    }
    return false;
}

size_t sliding_log_packed_max(const sl_rule_t *rule)
{
    return 1 + VARINT_MAX + VARINT_MAX * (size_t)rule->limit;
}

size_t sliding_log_pack(const sl_rule_t *rule, const void *state, void *out)
{
    sliding_log_header_t h;
    memcpy(&h, state, sizeof(h));
    const unsigned char *ring = (const unsigned char *)state + sizeof(h);
    const uint32_t n = (uint32_t)rule->limit;

    unsigned e = 9; /* the largest power of ten dividing every stamp */
    for (uint32_t i = 0; i < h.count && e > 0; i++) {
        int64_t t = stamp_at(ring, n, &h, i);
        while (e > 0 && t % pow10_ns[e] != 0)
            e--;
    }
    unsigned char *p = out;
    *p++ = (unsigned char)e;
    p = put_varint(p, h.count);
    int64_t prev = 0;
    for (uint32_t i = 0; i < h.count; i++) {
        int64_t t = stamp_at(ring, n, &h, i);
        p = put_varint(p, (uint64_t)((t - prev) / pow10_ns[e]));
        prev = t;
    }
    return (size_t)(p - (unsigned char *)out);
}

bool sliding_log_unpack(const sl_rule_t *rule, const void *in, size_t len, void *state)
{
    const unsigned char *p = in, *end = p + len;
    uint64_t count = 0;
    if (len < 2 || *p > 9)
        return false;
    const int64_t unit = pow10_ns[*p++];
    if (!get_varint(&p, end, &count) || count > (uint64_t)rule->limit)
        return false;
    sliding_log_header_t h = {.head = 0, .count = (uint32_t)count};
    unsigned char *ring = (unsigned char *)state + sizeof(h);
    int64_t t = 0;
    for (uint32_t i = 0; i < h.count; i++) {
        uint64_t d = 0;
        if (!get_varint(&p, end, &d) || d > (uint64_t)(SL_NOW_MAX_NS - t) / (uint64_t)unit)
            return false; /* truncated, or past SL_NOW_MAX_NS */
        t += (int64_t)d * unit;
        store_i64(ring + 8 * (size_t)i, t);
    }
    memcpy(state, &h, sizeof(h));
    return p == end; /* sorted and in range by construction; nothing may follow */
}
