/*
 * sliding_log.c - the exact sliding window: one entry per admission, its time and its units.
 *
 * A request of cost c admitted at t is one entry (t, c); a settle's charge past the limit is one
 * too. The key admits c at now iff (units of the entries with t > now - W) + c <= N: the window
 * excludes exactly now - W (seed 003). A key's state therefore grows with the admissions it
 * made, never with the limit N or the costs a client names: a key that made one request of
 * cost 10^6 holds one entry.
 *
 * State: a 32-byte header, then a ring of 16-byte entries, oldest at `head`:
 *
 *   header   u32 head     ring index of the oldest entry (< the ring's capacity)
 *            u32 count    entries in use
 *            u32 cap      entries the buffer holds; 0: N, the sl_state_size() buffer
 *            u32 zero     0
 *            u64 base     the running total of units before the oldest entry (mod 2^64)
 *            i64 latest   the latest time recorded, ns: no earlier than the newest stamp; 0 for
 *                         a key that never recorded one. An earlier now is clamped to it.
 *   entry    i64 stamp    ns, strictly increasing from the oldest
 *            u64 total    the running total of units through this entry (mod 2^64): the entry
 *                         holds total - (the previous entry's total, or base) >= 1 units
 *
 * Running totals make the units of any run of entries one subtraction, so counting the window is
 * a binary search over the stamps and a peek or a rejection (which must not write) costs
 * O(log entries); so does finding the entry that has to leave before a cost fits (retry_after).
 * An admission drops the expired entries (amortized O(1) each: head moves, base takes the last
 * dropped total) and appends (now, cost), or adds cost to the newest entry when it is at now:
 * two admissions at the same clamped now share one entry. The units in the ring never exceed
 * SL_COUNT_MAX, so every total - previous total is exact in 64 bits.
 *
 * At most N entries, each >= 1 unit. Without debt the window never holds more than N units, so
 * an admission always finds room. A debt charge (a settle past the limit) appends (now, d) even
 * past the limit; when the ring already holds N entries, the oldest entry's units join the next
 * entry (its stamp goes: head moves, base stays). That merge is exact in admissions:
 *
 *   Let the oldest entry hold u units at t0, the rest R units at t1 < ... (R counts the new
 *   charge). N entries of >= 1 unit each, plus the charge, give R >= N. While the entry at t1 is
 *   in the window, both logs hold >= R >= N units, so neither admits a cost >= 1; from t1 + W
 *   on, the u units have left both. A cost c >= 1 needs inside + c - N units to leave: at least
 *   u + c units of the exact log (u + R + c - N with R >= N), so the one that has to leave is
 *   past the oldest entry, at the same place in both logs: retry_after is equal too. A peek
 *   (c = 0) may differ only when R = N, in [t0 + W, t1 + W): the exact log then holds N units
 *   and allows a peek, the merged log refuses it, as both refuse a cost of 1.
 *
 * Units in debt saturate at SL_COUNT_MAX: a charge that would pass it drops the oldest units
 * first, keeping the newest SL_COUNT_MAX; exact in admissions, peeks included, as the units kept
 * are > N and no dropped unit is newer than a kept one (while one is inside, all kept ones are).
 *
 * Refund of c units charged at t_c: expiry is judged at the latest time recorded L (kept: a later
 * now would drop entries the state does not record), and none go when t_c <= L - W (the charge's
 * may have left). Otherwise, in unit order (oldest first), the c units starting at the first
 * unit stamped >= t_c go -- the charge's own when it was charged then (they are its newest, or
 * it shares the newest entry), older ones when t_c is only a lower bound of the charge's time (a
 * safe choice: a unit that stays leaves later) -- and when fewer units follow it, the newest
 * before it too. A merged log's units are each no older than the same unit of the exact log, and
 * this rule, applied to both, keeps that so: after a merge a refund leaves the log at least as
 * strict as the exact log.
 *
 * Convert to another limit or window: the entries inside the new window at L; when more than the
 * new N, the older ones join the oldest of the newest N (merged as above: exact in admissions,
 * each merge leaving >= N entries after it). L stays the latest time. Exact when the window does
 * not grow; a longer window cannot count the units the log already let go.
 *
 * Variable size (core.h): a state in a buffer of H + 16 * cap bytes holds cap entries; a fresh key
 * needs one (48 bytes), the next operation at most one more than it holds, never more than N.
 * A zeroed sl_state_size() buffer is a fresh state with room for N.
 *
 * Packed form (sl_state_pack(), for stores that keep each key's state as its own value):
 *
 *   byte 0   e, 0..9: every time is a multiple of 10^e ns, and is written in units of 10^e;
 *            plus 64 (ENTRIES: this format), plus 32 with LATEST: the latest time is later than
 *            the newest stamp (a refund took the newest units back) and follows the entries
 *   varint   count, 0..N
 *   varint   per entry: its stamp minus the one before (the first: the stamp) / 10^e, > 0 after
 *            the first, shifted left once, plus 1 when its units are more than one; then
 *   varint   only then, its units, >= 2
 *   varint   with LATEST: the latest time minus the newest stamp (or 0) / 10^e, > 0
 *
 * Varints are LEB128 (7 bits a byte, low first). Stamps taken from a microsecond clock pack with
 * e = 3: a request of cost 1 whose delta is below 8 ms takes 2 bytes, below 1 s 3 bytes; a cost
 * above 1 adds its count, one byte below 128. (The bit for a single unit keeps a log of requests
 * of cost 1 within a bit per entry of the older form's one stamp per unit.)
 *
 * The older form, one stamp per unit, is still read (values of older builds): byte 0 is e plus
 * 16 with DROPPED (a debt kept the newest N stamps; the count is then N) plus 32 with LATEST,
 * then the count of stamps, the oldest stamp and each later one's delta (>= 0) / 10^e, and with
 * LATEST the latest time's delta (> 0). Equal stamps become one entry of their number of units.
 * DROPPED said that some stamps no newer than the oldest were dropped, and made the oldest count
 * one unit more while it was in the window: the oldest entry gets that unit, which decides
 * alike (the old ring's N stamps plus one at the oldest's time). sliding_log_from_legacy() reads
 * the older unpacked ring, 8 + 8 * N bytes, the same way.
 */
#include <string.h>

#include "core/core.h"
#include "core/varint.h"

#define HEADER 32 /* bytes before the first entry */
#define ENTRY  16 /* bytes per entry */

/* The header's fields, by byte offset. They are read and written one by one: a copy of the
 * whole header through a struct made the compiler store fields one by one and load them back as
 * one vector, a store-forwarding stall that doubled a decision's time. */
#define AT_HEAD   0  /* u32: ring index of the oldest entry */
#define AT_COUNT  4  /* u32: entries in use */
#define AT_ROOM   8  /* u32: entries the buffer holds; 0 = N */
#define AT_ZERO   12 /* u32: 0 */
#define AT_BASE   16 /* u64: running total before the oldest entry, units mod 2^64 */
#define AT_LATEST 24 /* i64: the latest time recorded, ns */

/* A state opened for reading or writing: its header's fields and where its entries are. */
typedef struct log {
    uint32_t head, count, room, zero; /* as in the header */
    uint64_t base;                    /* as in the header */
    int64_t latest_ns;                /* as in the header */
    unsigned char *e;                 /* entries */
    uint32_t cap;                     /* entries the buffer holds (room, or N for 0) */
} log_t;

static inline uint32_t load_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline void store_u32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, sizeof(v));
}

static inline log_t log_open(const sl_rule_t *rule, const void *state)
{
    const unsigned char *p = state;
    log_t l;
    l.head = load_u32(p + AT_HEAD);
    l.count = load_u32(p + AT_COUNT);
    l.room = load_u32(p + AT_ROOM);
    l.zero = load_u32(p + AT_ZERO);
    l.base = (uint64_t)load_i64(p + AT_BASE);
    l.latest_ns = load_i64(p + AT_LATEST);
    l.e = (unsigned char *)state + HEADER;
    l.cap = l.room != 0 ? l.room : (uint32_t)rule->limit;
    return l;
}

static inline void log_put(void *state, const log_t *l)
{
    unsigned char *p = state;
    store_u32(p + AT_HEAD, l->head);
    store_u32(p + AT_COUNT, l->count);
    store_u32(p + AT_ROOM, l->room);
    store_u32(p + AT_ZERO, l->zero);
    store_i64(p + AT_BASE, (int64_t)l->base);
    store_i64(p + AT_LATEST, l->latest_ns);
}

/* Bytes of the i-th oldest entry's slot (0 <= i <= count, count <= cap). */
static inline unsigned char *slot(const log_t *l, uint32_t i)
{
    uint64_t at = (uint64_t)l->head + i;
    return l->e + ENTRY * (size_t)(at >= l->cap ? at - l->cap : at);
}

static inline int64_t stamp(const log_t *l, uint32_t i)
{
    return load_i64(slot(l, i));
}

static inline uint64_t total(const log_t *l, uint32_t i)
{
    return (uint64_t)load_i64(slot(l, i) + 8);
}

/* The running total before the i-th oldest entry. */
static inline uint64_t before(const log_t *l, uint32_t i)
{
    return i == 0 ? l->base : total(l, i - 1);
}

static inline void entry_put(const log_t *l, uint32_t i, int64_t t, uint64_t tot)
{
    unsigned char *p = slot(l, i);
    store_i64(p, t);
    store_i64(p + 8, (int64_t)tot);
}

/* Units in entries [i, count). */
static inline int64_t units_from(const log_t *l, uint32_t i)
{
    return i < l->count ? (int64_t)(total(l, l->count - 1) - before(l, i)) : 0;
}

/* Index of the first entry stamped later than cutoff_ns: with now - W, the expired entries. They
 * are the oldest few as a rule (none, or the one an admission at the limit replaces), so the
 * search gallops from the front, probing entries 0, 1, 3, 7, ..., then bisects: O(log k) for k
 * expired entries. */
static uint32_t first_after(const log_t *l, int64_t cutoff_ns)
{
    uint32_t lo = 0, hi = 0, step = 1;
    while (hi < l->count && stamp(l, hi) <= cutoff_ns) {
        lo = hi + 1;
        hi = lo + step > l->count ? l->count : lo + step;
        step *= 2;
    }
    while (lo < hi) { /* stamp(lo - 1) <= cutoff_ns (or lo == 0); stamp(hi) > it (or hi == count) */
        uint32_t mid = lo + (hi - lo) / 2;
        if (stamp(l, mid) > cutoff_ns)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Index of the first entry j >= from whose units from entry `from` through j reach `units`
 * (1 <= units <= units_from(l, from)). The entry that has to leave for a request to fit is one of
 * the oldest as a rule, so this gallops from `from` too. */
static uint32_t entry_reaching(const log_t *l, uint32_t from, uint64_t units)
{
    const uint64_t b = before(l, from);
    const uint32_t last = l->count - 1;
    uint32_t lo = from, hi = from, step = 1;
    while (hi < last && total(l, hi) - b < units) {
        lo = hi + 1;
        hi = lo + step > last ? last : lo + step;
        step *= 2;
    }
    while (lo < hi) { /* entry lo - 1 falls short (or lo == from); hi reaches (or hi == last) */
        uint32_t mid = lo + (hi - lo) / 2;
        if (total(l, mid) - b >= units)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Drops the k oldest entries. */
static inline void drop_oldest(log_t *l, uint32_t k)
{
    if (k == 0)
        return;
    l->base = total(l, k - 1);
    l->head = (uint32_t)(slot(l, k) - l->e) / ENTRY; /* head + k < 2 cap: no division */
    l->count -= k;
}

/* Drops the oldest `units` units (< the units in the ring): whole entries, then part of one. */
static void drop_units(log_t *l, uint64_t units)
{
    const uint64_t b = l->base;
    uint32_t j = entry_reaching(l, 0, units);
    drop_oldest(l, j + (total(l, j) - b == units));
    l->base = b + units;
}

/* Appends (now_ns, units): to the newest entry when it is at now_ns. The ring has room. */
static inline void append(log_t *l, int64_t now_ns, uint64_t units)
{
    const uint32_t n = l->count;
    if (n > 0 && stamp(l, n - 1) == now_ns) {
        entry_put(l, n - 1, now_ns, total(l, n - 1) + units);
        return;
    }
    assert(n < l->cap);
    entry_put(l, n, now_ns, before(l, n) + units);
    l->count++;
}

static void sliding_log_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                               sl_decision_t *out)
{
    log_t l = log_open(rule, state);
    const int64_t n = rule->limit;
    assert(l.count <= l.cap && l.cap <= (uint64_t)n);

    now_ns = max_i64(now_ns, l.latest_ns); /* clamp */
    uint32_t expired = first_after(&l, now_ns - rule->window_ns);
    int64_t inside = units_from(&l, expired); /* may pass N in debt */

    if (cost <= n - inside) {
        decision_admit(out);
        if (cost > 0) { /* inside <= N - 1: fewer than N entries stay, so there is room */
            drop_oldest(&l, expired);
            append(&l, now_ns, (uint64_t)cost);
            l.latest_ns = now_ns;
            log_put(state, &l);
        }
        inside += cost;
    } else if (cost > n) {
        decision_reject(out, -1);
    } else {
        /* inside + cost - N units have to leave: the last of them sets the time */
        uint32_t j = entry_reaching(&l, expired, (uint64_t)(inside + cost - n));
        decision_reject(out, stamp(&l, j) + rule->window_ns - now_ns);
    }
    out->remaining = max_i64(n - inside, 0);
    /* l is the stored log now, so its newest stamp is now_ns after an admission */
    out->reset_after_ns = inside > 0 ? stamp(&l, l.count - 1) + rule->window_ns - now_ns : 0;
}

static void sliding_log_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns)
{
    log_t l = log_open(rule, state);
    const uint32_t n = (uint32_t)rule->limit;
    now_ns = max_i64(now_ns, l.latest_ns); /* clamp */
    drop_oldest(&l, first_after(&l, now_ns - rule->window_ns));
    const int64_t held = units_from(&l, 0);
    if (cost >= SL_COUNT_MAX) { /* the newest SL_COUNT_MAX units: the charge's own */
        drop_oldest(&l, l.count);
        cost = SL_COUNT_MAX;
    } else if (held > SL_COUNT_MAX - cost) {
        drop_units(&l, (uint64_t)(held - (SL_COUNT_MAX - cost)));
    }
    const bool shares = l.count > 0 && stamp(&l, l.count - 1) == now_ns;
    if (!shares && l.count == n) { /* full: the oldest entry joins the next (see the top) */
        if (n == 1) {
            entry_put(&l, 0, now_ns, total(&l, 0)); /* the next is the charge's own */
        } else {
            l.head = (uint32_t)(slot(&l, 1) - l.e) / ENTRY;
            l.count--; /* base stays: the next entry's units take the oldest's */
        }
    }
    append(&l, now_ns, (uint64_t)cost);
    l.latest_ns = now_ns;
    log_put(state, &l);
}

static int64_t sliding_log_debt(const sl_rule_t *rule, const void *state, int64_t cost,
                                int64_t now_ns)
{
    log_t l = log_open(rule, state);
    now_ns = max_i64(now_ns, l.latest_ns); /* clamp */
    int64_t inside = units_from(&l, first_after(&l, now_ns - rule->window_ns));
    return max_i64(sat_count(inside, cost) - rule->limit, 0); /* the window's units past N */
}

/* Removes the units at positions [from, from + k) of the ring (0: the oldest unit), k >= 1:
 * entries left without a unit go, those after move down, totals follow. O(entries after). */
static void remove_units(log_t *l, uint64_t from, uint64_t k)
{
    const uint64_t b = l->base, end = from + k;
    uint32_t j = entry_reaching(l, 0, from + 1); /* holds the first unit that goes */
    uint32_t w = j;
    uint64_t lo = before(l, j) - b, run = before(l, j);
    for (; j < l->count; j++) {
        const int64_t t = stamp(l, j);
        const uint64_t hi = total(l, j) - b; /* the entry holds units [lo, hi) */
        const uint64_t cut_lo = lo > from ? lo : from, cut_hi = hi < end ? hi : end;
        const uint64_t keep = hi - lo - (cut_hi > cut_lo ? cut_hi - cut_lo : 0);
        lo = hi;
        if (keep > 0) {
            run += keep;
            entry_put(l, w++, t, run);
        }
    }
    l->count = w;
}

static void sliding_log_refund(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,
                               int64_t now_ns)
{
    (void)now_ns; /* entries carry their own time; expiry is judged at the latest time recorded,
                   * which the refund keeps (a later now would drop entries it does not record) */
    log_t l = log_open(rule, state);
    const int64_t latest = l.latest_ns;
    drop_oldest(&l, first_after(&l, latest - rule->window_ns));
    if (l.count > 0 && charged_ns > latest - rule->window_ns) {
        const uint64_t held = (uint64_t)units_from(&l, 0);
        const uint64_t k = (uint64_t)cost < held ? (uint64_t)cost : held;
        /* the units from the first one stamped >= charged_ns, or the newest k */
        uint64_t at = before(&l, first_after(&l, charged_ns - 1)) - l.base;
        remove_units(&l, at + k <= held ? at : held - k, k);
    }
    log_put(state, &l);
}

/* Writes a fresh state's header for a buffer of `bytes` (>= HEADER + ENTRY). */
static log_t log_fresh(const sl_rule_t *rule, void *buf, size_t bytes)
{
    const uint64_t n = (uint64_t)rule->limit, room = (bytes - HEADER) / ENTRY;
    log_t l = {.room = room >= n ? 0 : (uint32_t)room, .e = (unsigned char *)buf + HEADER};
    l.cap = room >= n ? (uint32_t)n : (uint32_t)room;
    return l;
}

static void sliding_log_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                                void *to_state, size_t to_bytes, int64_t now_ns)
{
    (void)now_ns; /* entries carry their own time; expiry is judged at the latest time recorded */
    const log_t f = log_open(from, from_state);
    const uint32_t n_to = (uint32_t)to->limit;
    const uint32_t expired = first_after(&f, f.latest_ns - to->window_ns);
    /* the newest N entries inside the new window; older ones join the oldest of them */
    const uint32_t first = f.count - expired > n_to ? f.count - n_to : expired;
    const uint64_t b = before(&f, expired);

    memset(to_state, 0, HEADER);
    log_t t = log_fresh(to, to_state, to_bytes);
    assert(f.count - first <= t.cap);
    for (uint32_t i = first; i < f.count; i++)
        entry_put(&t, i - first, stamp(&f, i), total(&f, i) - b);
    t.count = f.count - first;
    t.latest_ns = f.latest_ns;
    log_put(to_state, &t);
}

static bool sliding_log_valid(const sl_rule_t *rule, const void *state)
{
    const log_t l = log_open(rule, state);
    if (l.zero != 0 || l.room > (uint64_t)rule->limit || l.count > l.cap || l.head >= l.cap ||
        l.latest_ns < 0 || l.latest_ns > SL_NOW_MAX_NS)
        return false;
    int64_t prev = -1;
    uint64_t units = 0, run = l.base;
    for (uint32_t i = 0; i < l.count; i++) { /* stamps increasing, each entry >= 1 unit */
        int64_t t = stamp(&l, i);
        uint64_t u = total(&l, i) - run;
        if (t <= prev || t > l.latest_ns || u < 1 || u > (uint64_t)SL_COUNT_MAX - units)
            return false;
        prev = t;
        units += u;
        run += u;
    }
    return true;
}

static bool sliding_log_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    const log_t l = log_open(rule, state);
    return l.count == 0 || stamp(&l, l.count - 1) <= now_ns - rule->window_ns;
}

/* ---- variable size -----------------------------------------------------------------------------
 */

/* Bytes of a buffer of `entries` entries. */
static inline size_t bytes_for(uint64_t entries)
{
    return HEADER + ENTRY * (size_t)entries;
}

static size_t sliding_log_state_min(const sl_rule_t *rule)
{
    (void)rule; /* N >= 1 */
    return bytes_for(1);
}

static void sliding_log_state_init(const sl_rule_t *rule, void *buf, size_t bytes)
{
    assert(bytes >= bytes_for(1));
    memset(buf, 0, bytes);
    log_t l = log_fresh(rule, buf, bytes);
    log_put(buf, &l);
}

static size_t sliding_log_state_bytes(const sl_rule_t *rule, const void *state)
{
    uint32_t room = load_u32((const unsigned char *)state + AT_ROOM);
    return bytes_for(room != 0 ? room : (uint64_t)rule->limit);
}

static size_t sliding_log_state_need(const sl_rule_t *rule, const void *state)
{
    uint32_t count = load_u32((const unsigned char *)state + AT_COUNT);
    return bytes_for(min_i64((int64_t)count + 1, rule->limit));
}

static size_t sliding_log_convert_need(const sl_rule_t *from, const void *from_state,
                                       const sl_rule_t *to)
{
    (void)from;
    uint32_t count = load_u32((const unsigned char *)from_state + AT_COUNT);
    return bytes_for(min_i64((int64_t)count + 1, to->limit));
}

static void sliding_log_state_move(const sl_rule_t *rule, const void *from, void *to,
                                   size_t to_bytes)
{
    const log_t f = log_open(rule, from);
    log_t t = log_fresh(rule, to, to_bytes);
    assert(f.count <= t.cap);
    for (uint32_t i = 0; i < f.count; i++)
        entry_put(&t, i, stamp(&f, i), total(&f, i));
    t.count = f.count;
    t.base = f.base;
    t.latest_ns = f.latest_ns;
    log_put(to, &t);
}

/* ---- packed form ----------------------------------------------------------------------------- */

#define PACKED_DROPPED 16 /* older form: added to byte 0 with DROPPED */
#define PACKED_LATEST  32 /* added to byte 0 with LATEST */
#define PACKED_ENTRIES 64 /* added to byte 0 in this form: entries with their units */

static const int64_t pow10_ns[10] = {1,      10,      100,      1000,      10000,
                                     100000, 1000000, 10000000, 100000000, 1000000000};

static size_t sliding_log_packed_max(const sl_rule_t *rule)
{
    /* e, the count, N entries of two varints, LATEST's time */
    return 1 + VARINT_MAX + 2 * VARINT_MAX * (size_t)rule->limit + VARINT_MAX;
}

static size_t sliding_log_packed_need(const sl_rule_t *rule, const void *state)
{
    (void)rule;
    uint32_t count = load_u32((const unsigned char *)state + AT_COUNT);
    return 1 + VARINT_MAX + 2 * VARINT_MAX * (size_t)count + VARINT_MAX;
}

static size_t sliding_log_pack(const sl_rule_t *rule, const void *state, void *out)
{
    const log_t l = log_open(rule, state);
    const int64_t newest = l.count > 0 ? stamp(&l, l.count - 1) : 0;
    const bool latest = l.latest_ns > newest;

    unsigned e = 9; /* the largest power of ten dividing every time */
    for (uint32_t i = 0; i < l.count && e > 0; i++)
        while (e > 0 && stamp(&l, i) % pow10_ns[e] != 0)
            e--;
    while (latest && e > 0 && l.latest_ns % pow10_ns[e] != 0)
        e--;
    unsigned char *p = out;
    *p++ = (unsigned char)(e + PACKED_ENTRIES + (latest ? PACKED_LATEST : 0));
    p = varint_put(p, l.count);
    int64_t prev = 0;
    for (uint32_t i = 0; i < l.count; i++) {
        int64_t t = stamp(&l, i);
        const uint64_t units = total(&l, i) - before(&l, i);
        p = varint_put(p, (uint64_t)((t - prev) / pow10_ns[e]) << 1 | (units > 1));
        if (units > 1)
            p = varint_put(p, units);
        prev = t;
    }
    if (latest)
        p = varint_put(p, (uint64_t)((l.latest_ns - prev) / pow10_ns[e]));
    return (size_t)(p - (unsigned char *)out);
}

/* A packed form being read: where, its scale, its flags, and the entries it says it has. */
typedef struct packed_reader {
    const unsigned char *p, *end;
    int64_t unit;   /* 10^e ns */
    unsigned flags; /* PACKED_* of byte 0 */
    uint64_t count; /* entries (stamps in the older form) */
} packed_reader_t;

/* Reads byte 0 and the count; false when they are no packed sliding_log under rule. */
static bool packed_open(const sl_rule_t *rule, const void *in, size_t len, packed_reader_t *r)
{
    const unsigned char *p = in;
    if (len < 2)
        return false;
    const unsigned b = p[0], e = b % PACKED_DROPPED, flags = b - e;
    if (e > 9 || (flags != 0 && flags != PACKED_DROPPED && flags != PACKED_LATEST &&
                  flags != PACKED_ENTRIES && flags != PACKED_ENTRIES + PACKED_LATEST))
        return false; /* e above 9, an unknown flag, or DROPPED with another */
    *r = (packed_reader_t){.p = p + 1, .end = p + len, .unit = pow10_ns[e], .flags = flags};
    if (!varint_get(&r->p, r->end, &r->count, false) || r->count > (uint64_t)rule->limit)
        return false;
    if (flags & PACKED_ENTRIES)
        return true;
    /* the older form: DROPPED with N stamps, LATEST with fewer */
    return ((flags & PACKED_DROPPED) == 0 || r->count == (uint64_t)rule->limit) &&
           ((flags & PACKED_LATEST) == 0 || r->count < (uint64_t)rule->limit);
}

/* Adds a delta d (in units of 10^e) to *t; false past SL_NOW_MAX_NS, or when it is 0 and must
 * not be. */
static bool add_delta(const packed_reader_t *r, int64_t *t, uint64_t d, bool positive)
{
    int64_t dt; /* a multiplication checked for overflow: a division per entry took a third of
                 * an unpack's time */
    if (d > (uint64_t)SL_NOW_MAX_NS || __builtin_mul_overflow((int64_t)d, r->unit, &dt) ||
        dt > SL_NOW_MAX_NS - *t || (positive && d == 0))
        return false;
    *t += dt;
    return true;
}

/* Reads a time delta (in units of 10^e) after *t; false past SL_NOW_MAX_NS, or when it is 0 and
 * must not be. */
static bool read_delta(packed_reader_t *r, int64_t *t, bool positive)
{
    uint64_t d;
    return varint_get(&r->p, r->end, &d, false) && add_delta(r, t, d, positive);
}

/* Reads an entry of this form: its delta, shifted left once, with the low bit set when a count
 * of units (>= 2) follows; a single unit otherwise. */
static bool read_entry(packed_reader_t *r, int64_t *t, uint64_t *units, bool positive)
{
    uint64_t d;
    *units = 1;
    return varint_get(&r->p, r->end, &d, false) && add_delta(r, t, d >> 1, positive) &&
           (!(d & 1) || (varint_get(&r->p, r->end, units, false) && *units >= 2));
}

/* Reads the entries (or stamps) into l, whose buffer holds r->count entries. */
static bool packed_entries(packed_reader_t *r, log_t *l)
{
    const bool entries = r->flags & PACKED_ENTRIES;
    int64_t t = 0;
    uint64_t run = 0;
    for (uint64_t i = 0; i < r->count; i++) {
        uint64_t u = 1;
        if (!(entries ? read_entry(r, &t, &u, i > 0) : read_delta(r, &t, false)) ||
            u > (uint64_t)SL_COUNT_MAX - run)
            return false; /* truncated, out of range, a stamp not later, a count not above 1 */
        run += u;
        /* the ring starts at slot 0: entry i is slot i; the older form's equal stamps share */
        const bool shares =
            !entries && l->count > 0 && load_i64(l->e + ENTRY * (l->count - 1)) == t;
        unsigned char *at = l->e + ENTRY * (size_t)(l->count - shares);
        store_i64(at, t);
        store_i64(at + 8, (int64_t)run);
        l->count += !shares;
    }
    l->latest_ns = t;
    if ((r->flags & PACKED_LATEST) && !read_delta(r, &l->latest_ns, true))
        return false;
    if ((r->flags & PACKED_DROPPED) && l->count > 0) /* one more unit at the oldest's time */
        for (uint32_t i = 0; i < l->count; i++)
            entry_put(l, i, stamp(l, i), total(l, i) + 1);
    return r->p == r->end; /* nothing may follow */
}

static size_t sliding_log_unpack_need(const sl_rule_t *rule, const void *in, size_t len)
{
    packed_reader_t r;
    if (!packed_open(rule, in, len, &r))
        return 0;
    return bytes_for(min_i64((int64_t)r.count + 1, rule->limit));
}

static bool sliding_log_unpack(const sl_rule_t *rule, const void *in, size_t len, void *state,
                               size_t bytes)
{
    packed_reader_t r;
    if (!packed_open(rule, in, len, &r) || bytes < bytes_for(1))
        return false;
    memset(state, 0, HEADER);
    log_t l = log_fresh(rule, state, bytes);
    if (r.count > l.cap)
        return false;
    bool ok = packed_entries(&r, &l);
    log_put(state, &l);
    return ok; /* sorted and in range by construction */
}

/* ---- the older unpacked ring --------------------------------------------------------------- */

#define LEGACY_DROPPED 0x80000000u /* in the older ring's head */
#define LEGACY_LATEST  0x40000000u

static size_t sliding_log_legacy_size(const sl_rule_t *rule)
{
    return 8 + 8 * (size_t)rule->limit;
}

/* The older ring's head (flags apart), count and flags; false when they are out of range. */
static bool legacy_header(const sl_rule_t *rule, const void *ring, uint32_t *head, uint32_t *count,
                          uint32_t *flags)
{
    uint32_t w[2];
    memcpy(w, ring, sizeof(w));
    const uint32_t n = (uint32_t)rule->limit;
    *flags = w[0] & (LEGACY_DROPPED | LEGACY_LATEST);
    *head = w[0] & ~(LEGACY_DROPPED | LEGACY_LATEST);
    *count = w[1];
    return *count <= n && *head < n && *flags != (LEGACY_DROPPED | LEGACY_LATEST) &&
           (!(*flags & LEGACY_DROPPED) || *count == n) && (!(*flags & LEGACY_LATEST) || *count < n);
}

static size_t sliding_log_legacy_need(const sl_rule_t *rule, const void *ring, size_t ring_len)
{
    uint32_t head, count, flags;
    if (ring_len != sliding_log_legacy_size(rule) ||
        !legacy_header(rule, ring, &head, &count, &flags))
        return 0;
    return bytes_for(min_i64((int64_t)count + 1, rule->limit));
}

static bool sliding_log_from_legacy(const sl_rule_t *rule, const void *ring, size_t ring_len,
                                    void *state, size_t bytes)
{
    uint32_t head, count, flags;
    if (ring_len != sliding_log_legacy_size(rule) ||
        !legacy_header(rule, ring, &head, &count, &flags) || bytes < bytes_for(1))
        return false;
    const unsigned char *stamps = (const unsigned char *)ring + 8;
    const uint32_t n = (uint32_t)rule->limit;
    memset(state, 0, HEADER);
    log_t l = log_fresh(rule, state, bytes);
    int64_t prev = 0;
    uint32_t last = count + ((flags & LEGACY_LATEST) != 0); /* LATEST's slot follows */
    for (uint32_t i = 0; i < last; i++) {                   /* sorted, in [0, SL_NOW_MAX_NS] */
        int64_t t = load_i64(stamps + 8 * (size_t)(((uint64_t)head + i) % n));
        if (t < prev || t > SL_NOW_MAX_NS || (i == count && t == prev))
            return false;
        prev = t;
        if (i == count)
            break;
        bool shares = l.count > 0 && stamp(&l, l.count - 1) == t;
        if (!shares && l.count == l.cap)
            return false; /* no room in `bytes` */
        append(&l, t, 1);
    }
    l.latest_ns = prev;
    if (flags & LEGACY_DROPPED) /* the stamps it dropped: one more unit at the oldest's time */
        for (uint32_t i = 0; i < l.count; i++)
            entry_put(&l, i, stamp(&l, i), total(&l, i) + 1);
    log_put(state, &l);
    return true;
}

static uint32_t sliding_log_state_size(const sl_rule_t *rule)
{
    return (uint32_t)bytes_for((uint64_t)rule->limit); /* header, room for N entries */
}

/* The entries' meaning depends on the limit (how many) and the window. */
static bool sliding_log_same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->limit == b->limit && a->window_ns == b->window_ns;
}

static const algorithm_variable_t sliding_log_variable = {
    .state_min = sliding_log_state_min,
    .state_init = sliding_log_state_init,
    .state_bytes = sliding_log_state_bytes,
    .state_need = sliding_log_state_need,
    .state_move = sliding_log_state_move,
    .convert_need = sliding_log_convert_need,
    .packed_max = sliding_log_packed_max,
    .packed_need = sliding_log_packed_need,
    .pack = sliding_log_pack,
    .unpack_need = sliding_log_unpack_need,
    .unpack = sliding_log_unpack,
    .legacy_size = sliding_log_legacy_size,
    .legacy_need = sliding_log_legacy_need,
    .from_legacy = sliding_log_from_legacy,
};

/* sliding_log's functions, for its row in algorithms.c. */
const algorithm_ops_t sliding_log_ops = {
    .decide = sliding_log_decide,
    .is_fresh = sliding_log_is_fresh,
    .valid = sliding_log_valid,
    .refund = sliding_log_refund,
    .charge = sliding_log_charge,
    .debt = sliding_log_debt,
    .convert = sliding_log_convert,
    .state_size = sliding_log_state_size,
    .same_meaning = sliding_log_same_meaning,
    .variable = &sliding_log_variable,
};
