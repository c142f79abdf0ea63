/*
 * sliding_log.c - the exact sliding window: one timestamp per admitted unit.
 *
 * State (8 + 8 * N bytes): a ring of up to N stamps, oldest at `head`, `count` in use, sorted
 * non-decreasing (times are clamped to the latest time recorded, so appends keep the order). A
 * stamp t is inside the window at `now` iff t > now - W: the window excludes exactly now - W
 * (seed 003). Counting the window is a binary search over the sorted ring, so peeks and
 * rejections (which must not write) cost O(log N); an admission drops the expired stamps it
 * found, amortized O(1) per stamp, and appends `cost` copies of now. The head's two top bits are
 * flags, set only by settles and refunds (a state sl_decide() alone wrote has neither):
 *
 *   DROPPED  Debt (a settle charging d units past the limit) appends d stamps at the clamped now
 *            and, as the ring holds N, drops the oldest: of the whole log's N + x stamps it keeps
 *            the newest N. That is exact for every cost c >= 1: stamps leave in order, so both
 *            logs admit c once x + c stamps have left, and report the same remaining (0 until
 *            then). What the ring no longer knows is when the dropped stamps leave, only that
 *            they are no newer than its oldest; DROPPED says some were dropped. While it is set
 *            the ring is full, and a peek counts one more stamp at the oldest's time, so it is
 *            refused until the oldest stamp leaves the window (as a cost of 1 is). An admission
 *            needs the oldest stamp gone, which takes every dropped one with it: it clears the
 *            flag.
 *   LATEST   The slot after the newest stamp holds the latest time recorded, later than the
 *            newest stamp: a refund took the newest stamps back, and a clock that steps back
 *            must still be clamped to their time (stamps that expired before it are gone, and
 *            would otherwise seem to come back). The ring is then not full. The next append
 *            writes that slot, at the clamped now, and clears the flag.
 *
 * Refund of c units charged at t_c: the newest c stamps no newer than t_c are removed (the
 * charge's own are at t_c, or later if it was clamped: a removed stamp is never newer than the
 * charge's). Right after the charge these are its own stamps, at the tail. With DROPPED set the
 * dropped stamps would move up into the window: each removed stamp is replaced by a copy of the
 * oldest, no older than the stamp it stands for; and the newest stamp stays (there is no free
 * slot to record its time in).
 *
 * Convert to another limit or window: of the stamps inside the new window at the latest time
 * recorded L, the newest up to the new N; DROPPED when some had to be left out, which is exact
 * in admissions as debt is. When the old ring had DROPPED and its oldest stamp is still inside
 * the new window, the stamps it dropped may be too, and how many is unknown: the new ring is
 * filled up to its N with copies of that oldest stamp (no older than any dropped one) and keeps
 * DROPPED. L stays the latest time (LATEST, when the new ring has room and no stamp at L). Exact
 * when the window does not grow, unless that filling happened; a longer window cannot count the
 * stamps the ring already let go.
 *
 * Packed form (sl_state_pack(), for stores that keep each key's state as its own value): the
 * stamps in use and nothing else, so a key weighs what it holds rather than N stamps.
 *
 *   byte 0   e, 0..9: every stamp is a multiple of 10^e ns, and is written in units of 10^e;
 *            plus 16 with DROPPED (the count is then N), plus 32 with LATEST
 *   varint   count, 0..N
 *   varint   the oldest stamp / 10^e                      (when count > 0)
 *   varint   each later stamp minus the one before / 10^e  (count - 1 of them, >= 0)
 *   varint   with LATEST: the latest time minus the newest stamp (or 0) / 10^e, > 0
 *
 * Varints are LEB128 (7 bits a byte, low first). Stamps taken from a microsecond clock pack with
 * e = 3: a delta below 16 ms takes 2 bytes, below 2 s 3 bytes.
 */
#include <string.h>

#include "core/core.h"

typedef struct sliding_log_header {
    uint32_t head;  /* ring index of the oldest stamp, | DROPPED | LATEST */
    uint32_t count; /* stamps in use, <= N; N with DROPPED, < N with LATEST */
} sliding_log_header_t;

#define DROPPED 0x80000000u /* in head: debt dropped stamps no newer than the oldest */
#define LATEST  0x40000000u /* in head: the slot after the newest holds the latest time */
#define FLAGS   (DROPPED | LATEST)

/* Ring index of the i-th oldest stamp (0 <= i <= count), for a head without flags. */
static inline size_t slot_of(uint32_t n, const sliding_log_header_t *h, uint32_t i)
{
    uint64_t at = (uint64_t)h->head + i;
    return 8 * (size_t)(at >= n ? at - n : at);
}

/* The i-th oldest stamp (0 <= i < count); i = count is LATEST's slot. */
static inline int64_t stamp_at(const unsigned char *ring, uint32_t n, const sliding_log_header_t *h,
                               uint32_t i)
{
    return load_i64(ring + slot_of(n, h, i));
}

static inline void stamp_put(unsigned char *ring, uint32_t n, const sliding_log_header_t *h,
                             uint32_t i, int64_t t)
{
    store_i64(ring + slot_of(n, h, i), t);
}

/* Index of the first stamp newer than cutoff_ns: with now - W, the number of expired stamps. */
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

/* Reads the header, splitting the flags off the head. */
static inline sliding_log_header_t header_of(const void *state, uint32_t *flags)
{
    sliding_log_header_t h;
    memcpy(&h, state, sizeof(h));
    *flags = h.head & FLAGS;
    h.head &= ~FLAGS;
    return h;
}

static void header_put(void *state, sliding_log_header_t h, uint32_t flags)
{
    h.head |= flags;
    memcpy(state, &h, sizeof(h));
}

/* The latest time the ring records (0 when empty): what an earlier now is clamped to. */
static inline int64_t latest_of(const unsigned char *ring, uint32_t n,
                                const sliding_log_header_t *h, uint32_t flags)
{
    if (flags & LATEST)
        return stamp_at(ring, n, h, h->count);
    return h->count > 0 ? stamp_at(ring, n, h, h->count - 1) : 0;
}

/* Drops the first `expired` stamps. */
static inline void drop_oldest(uint32_t n, sliding_log_header_t *h, uint32_t expired)
{
    h->head = (uint32_t)(((uint64_t)h->head + expired) % n);
    h->count -= expired;
}

/* Appends `cost` copies of now_ns to a ring with room for them. */
static inline void append(unsigned char *ring, uint32_t n, sliding_log_header_t *h, int64_t cost,
                          int64_t now_ns)
{
    for (int64_t i = 0; i < cost; i++) {
        stamp_put(ring, n, h, h->count, now_ns);
        h->count++;
    }
}

/* Appends `cost` (> 0) copies of now_ns, dropping the oldest stamps beyond N; true if it did. */
static bool append_over(unsigned char *ring, uint32_t n, sliding_log_header_t *h, int64_t cost,
                        int64_t now_ns)
{
    bool over = cost > (int64_t)(n - h->count);
    if (over)
        drop_oldest(n, h, cost >= n ? h->count : (uint32_t)(h->count + cost - n));
    append(ring, n, h, min_i64(cost, n), now_ns);
    return over;
}

void sliding_log_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                        sl_decision_t *out)
{
    uint32_t flags;
    sliding_log_header_t h = header_of(state, &flags);
    unsigned char *ring = (unsigned char *)state + sizeof(h);
    const uint32_t n = (uint32_t)rule->limit;
    assert(h.count <= n && h.head < n);

    now_ns = max_i64(now_ns, latest_of(ring, n, &h, flags)); /* clamp */
    uint32_t expired = first_inside(ring, n, &h, now_ns - rule->window_ns);
    int64_t inside = h.count - expired;
    /* dropped stamps are in the window until the oldest kept one leaves: at least one more */
    int64_t unseen = (flags >> 31) & (expired == 0); /* DROPPED is the top bit */

    if (cost <= rule->limit - inside - unseen) {
        decision_admit(out);
        if (cost > 0) {
            drop_oldest(n, &h, expired); /* expired > 0 with DROPPED */
            append(ring, n, &h, cost, now_ns);
            memcpy(state, &h, sizeof(h)); /* no flags: see the top of the file */
        }
        inside += cost;
    } else if (cost > rule->limit) {
        decision_reject(out, -1);
    } else {
        /* the (inside + unseen + cost - N)-th oldest stamp in the window has to leave it; the
         * unseen ones are no newer than the oldest kept, which stands for them */
        uint32_t j = expired + (uint32_t)max_i64(inside + cost - rule->limit - 1, 0);
        decision_reject(out, stamp_at(ring, n, &h, j) + rule->window_ns - now_ns);
    }
    out->remaining = rule->limit - inside;
    /* h is the stored header now, so its newest stamp is now_ns after an admission */
    out->reset_after_ns =
        inside > 0 ? stamp_at(ring, n, &h, h.count - 1) + rule->window_ns - now_ns : 0;
}

void sliding_log_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns)
{
    uint32_t flags;
    sliding_log_header_t h = header_of(state, &flags);
    unsigned char *ring = (unsigned char *)state + sizeof(h);
    const uint32_t n = (uint32_t)rule->limit;
    now_ns = max_i64(now_ns, latest_of(ring, n, &h, flags)); /* clamp */
    uint32_t expired = first_inside(ring, n, &h, now_ns - rule->window_ns);
    if (expired > 0)
        flags &= ~DROPPED; /* the dropped stamps left before the oldest kept one */
    drop_oldest(n, &h, expired);
    bool dropped = append_over(ring, n, &h, cost, now_ns);
    header_put(state, h, (flags & DROPPED) || dropped ? DROPPED : 0);
}

void sliding_log_refund(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,
                        int64_t now_ns)
{
    uint32_t flags;
    sliding_log_header_t h = header_of(state, &flags);
    unsigned char *ring = (unsigned char *)state + sizeof(h);
    const uint32_t n = (uint32_t)rule->limit;
    if (h.count == 0)
        return;
    (void)now_ns; /* stamps carry their own time; expiry is judged at the latest time recorded,
                   * which the refund keeps (a later now would drop stamps it does not record) */
    const int64_t latest = latest_of(ring, n, &h, flags);
    uint32_t expired = first_inside(ring, n, &h, latest - rule->window_ns);
    if (expired > 0)
        flags &= ~DROPPED;
    drop_oldest(n, &h, expired);
    /* stamps [i - k, i) go. With none dropped, the charge's stamps are in the ring unless they
     * left the window: the oldest k at or after charged_ns go (the charge's own when charged
     * then; older ones, a safe choice, when charged_ns is a lower bound of the charge's time),
     * and when there are fewer, the newest before it too (a charge dated later, as `now` is:
     * the newest); none when charged_ns is outside the window (the charge's may have left it).
     * When a debt dropped stamps, the charge's may be among them: the newest k no newer than
     * charged_ns go, and the newest stays (it records the latest time). */
    uint32_t i = 0, k = 0;
    if (flags & DROPPED) {
        i = (uint32_t)min_i64(first_inside(ring, n, &h, charged_ns), h.count - 1);
        k = (uint32_t)min_i64(cost, i);
    } else if (charged_ns > latest - rule->window_ns) {
        k = (uint32_t)min_i64(cost, h.count);
        i = (uint32_t)min_i64((int64_t)first_inside(ring, n, &h, charged_ns - 1) + k, h.count);
    }
    if (flags & DROPPED) {
        int64_t oldest = stamp_at(ring, n, &h, 0);
        for (uint32_t j = i; j-- > k;)
            stamp_put(ring, n, &h, j, stamp_at(ring, n, &h, j - k));
        for (uint32_t j = 0; j < k; j++)
            stamp_put(ring, n, &h, j, oldest);
    } else {
        for (uint32_t j = i; j < h.count; j++) /* none when they are the newest, as usual */
            stamp_put(ring, n, &h, j - k, stamp_at(ring, n, &h, j));
        h.count -= k;
        flags &= ~LATEST;
        if (latest > (h.count > 0 ? stamp_at(ring, n, &h, h.count - 1) : 0)) {
            stamp_put(ring, n, &h, h.count, latest); /* a free slot: k > 0 or it was set */
            flags |= LATEST;
        }
    }
    header_put(state, h, flags);
}

void sliding_log_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                         void *to_state, int64_t now_ns)
{
    (void)now_ns; /* stamps carry their own time; expiry is judged at the latest time recorded */
    uint32_t flags;
    sliding_log_header_t h = header_of(from_state, &flags);
    const unsigned char *ring = (const unsigned char *)from_state + sizeof(h);
    const uint32_t n = (uint32_t)from->limit, n_to = (uint32_t)to->limit;
    const int64_t latest = latest_of(ring, n, &h, flags);
    const uint32_t expired = first_inside(ring, n, &h, latest - to->window_ns);
    const uint32_t inside = h.count - expired;
    const uint32_t first = inside > n_to ? h.count - n_to : expired; /* oldest kept */
    /* the old ring's dropped stamps are no newer than its oldest, which is inside */
    const bool dropped = inside > n_to || ((flags & DROPPED) && expired == 0);

    sliding_log_header_t out = {.head = 0, .count = 0};
    unsigned char *to_ring = (unsigned char *)to_state + sizeof(out);
    memset(to_state, 0, to->state_size);
    /* with room left, copies of the oldest stand for the dropped stamps */
    out.count = dropped ? n_to : h.count - first;
    const uint32_t copies = out.count - (h.count - first);
    for (uint32_t i = 0; i < out.count; i++)
        stamp_put(to_ring, n_to, &out, i,
                  stamp_at(ring, n, &h, i < copies ? first : first + i - copies));
    int64_t newest = out.count > 0 ? stamp_at(to_ring, n_to, &out, out.count - 1) : 0;
    /* a full ring records its newest stamp as the latest time: an earlier now then counts at
     * least the stamps it counts at L, so it admits no more than L would */
    if (out.count < n_to && latest > newest) {
        stamp_put(to_ring, n_to, &out, out.count, latest);
        header_put(to_state, out, LATEST);
    } else {
        header_put(to_state, out, dropped ? DROPPED : 0);
    }
}

bool sliding_log_valid(const sl_rule_t *rule, const void *state)
{
    uint32_t flags;
    sliding_log_header_t h = header_of(state, &flags);
    const uint32_t n = (uint32_t)rule->limit;
    if (h.count > n || h.head >= n || flags == FLAGS || ((flags & DROPPED) && h.count != n) ||
        ((flags & LATEST) && h.count == n))
        return false;
    const unsigned char *ring = (const unsigned char *)state + sizeof(h);
    int64_t prev = 0;
    uint32_t last = h.count + ((flags & LATEST) != 0); /* LATEST's slot is after the newest */
    for (uint32_t i = 0; i < last; i++) {              /* sorted, within [0, SL_NOW_MAX_NS] */
        int64_t t = stamp_at(ring, n, &h, i);
        if (t < prev || t > SL_NOW_MAX_NS || (i == h.count && t == prev))
            return false;
        prev = t;
    }
    return true;
}

bool sliding_log_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    uint32_t flags; /* no unit is newer than the newest stamp: the flags do not matter here */
    sliding_log_header_t h = header_of(state, &flags);
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
    /* e, the count, N times; LATEST's time only when fewer than N stamps */
    return 1 + VARINT_MAX + VARINT_MAX * (size_t)rule->limit;
}

#define PACKED_DROPPED 16 /* added to byte 0 with DROPPED */
#define PACKED_LATEST  32 /* added to byte 0 with LATEST */

size_t sliding_log_pack(const sl_rule_t *rule, const void *state, void *out)
{
    uint32_t flags;
    sliding_log_header_t h = header_of(state, &flags);
    const unsigned char *ring = (const unsigned char *)state + sizeof(h);
    const uint32_t n = (uint32_t)rule->limit;
    const uint32_t last = h.count + ((flags & LATEST) != 0); /* the times to write */

    unsigned e = 9; /* the largest power of ten dividing every time */
    for (uint32_t i = 0; i < last && e > 0; i++) {
        int64_t t = stamp_at(ring, n, &h, i);
        while (e > 0 && t % pow10_ns[e] != 0)
            e--;
    }
    unsigned char *p = out;
    *p++ = (unsigned char)(e + (flags & DROPPED ? PACKED_DROPPED : 0) +
                           (flags & LATEST ? PACKED_LATEST : 0));
    p = put_varint(p, h.count);
    int64_t prev = 0;
    for (uint32_t i = 0; i < last; i++) {
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
    if (len < 2 || *p % PACKED_DROPPED > 9 || *p >= PACKED_DROPPED + PACKED_LATEST)
        return false; /* e above 9, an unknown flag, or both flags */
    const uint32_t flags = (*p & PACKED_DROPPED ? DROPPED : 0) | (*p & PACKED_LATEST ? LATEST : 0);
    const int64_t unit = pow10_ns[*p++ % PACKED_DROPPED];
    if (!get_varint(&p, end, &count) || count > (uint64_t)rule->limit ||
        ((flags & DROPPED) && count != (uint64_t)rule->limit) ||
        ((flags & LATEST) && count == (uint64_t)rule->limit))
        return false;
    sliding_log_header_t h = {.head = 0, .count = (uint32_t)count};
    unsigned char *ring = (unsigned char *)state + sizeof(h);
    const uint32_t last = h.count + ((flags & LATEST) != 0);
    int64_t t = 0;
    for (uint32_t i = 0; i < last; i++) {
        uint64_t d = 0;
        if (!get_varint(&p, end, &d) || d > (uint64_t)(SL_NOW_MAX_NS - t) / (uint64_t)unit ||
            (i == h.count && d == 0))
            return false; /* truncated, past SL_NOW_MAX_NS, or a latest time not later */
        t += (int64_t)d * unit;
        store_i64(ring + 8 * (size_t)i, t);
    }
    header_put(state, h, flags);
    return p == end; /* sorted and in range by construction; nothing may follow */
}
