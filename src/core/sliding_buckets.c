/*
 * sliding_buckets.c - the window split into K sub-windows of G = W / K ns (seeds 000, 002).
 *
 * State (16 + 8 * (K + 1) bytes): the time of the latest admission, the running total of the
 * ring, and a ring of K + 1 counts where bucket j (covering [j*G, (j+1)*G)) lives at slot
 * j mod (K + 1). With newest = floor(latest / G), the ring holds buckets newest - K .. newest.
 * Times are clamped to `latest` (not to its bucket's start: within one bucket the oldest
 * counted bucket depends on the offset, so an earlier offset could count a bucket that the
 * latest admission no longer counted).
 *
 * At now, in bucket b at offset e, the buckets intersecting (now - W, now] in integer ns are
 * b - K + 1 .. b, plus b - K while e <= G - 2. Counting all of them (not a weighted share)
 * means every admitted unit inside the window is counted: this never over-admits. Moving to a
 * newer bucket clears the slots it reuses, subtracting them from the total, so a decision is
 * O(1) amortized; a peek or rejection computes the same view without writing.
 *
 * Debt (a settle charged past the limit) adds to the current bucket as an admission does, the
 * total saturating at SL_COUNT_MAX; nothing is admitted, peeks included, until enough buckets
 * have dropped out. Refund takes units from the charge's bucket first, then from older buckets
 * still counted, never from a newer one: a unit given back is never newer than the charge's own,
 * so the key stays at least as restrictive as if the charge had not happened.
 *
 * Convert to another window or bucket count: each bucket the ring holds goes to the new rule's
 * bucket holding the latest instant its units can have had (the bucket's last ns, or `latest`
 * for the newest), dropped when that bucket is older than the new ring reaches; `latest` stays.
 * A unit counted in a bucket no older than its own is counted at least as long (bucket j is
 * counted from its start until (j + K + 1) * G - 1), so the key is never laxer than the units'
 * true times would make it. Exact when the new bucket length is a multiple of the old one (each
 * old bucket lies in one new bucket) and the new window reaches no further back than the ring.
 */
#include <string.h>

#include "core/core.h"

typedef struct sliding_buckets_header {
    int64_t latest_ns; /* time of the latest admission, ns */
    int64_t total;     /* sum of the ring's counts */
} sliding_buckets_header_t;

typedef struct view {
    int64_t b;        /* current bucket index */
    int64_t e;        /* offset of now into bucket b, ns */
    int64_t lo;       /* oldest bucket counted at now */
    int64_t inside;   /* units in buckets lo .. b */
    int64_t expiring; /* units in ring slots that moving to b clears */
    bool clear_all;   /* moving to b clears the whole ring */
} view_t;

/* Byte offset of bucket's count in the ring. */
static size_t slot(const sl_rule_t *rule, int64_t bucket)
{
    int64_t m = rule->buckets + 1;
    return 8 * (size_t)(((bucket % m) + m) % m);
}

static int64_t count_of(const unsigned char *counts, const sl_rule_t *rule, int64_t bucket)
{
    return load_i64(counts + slot(rule, bucket));
}

/* What the state looks like at now_ns (>= h->latest_ns, clamped by the caller), unwritten. */
static view_t look(const sl_rule_t *rule, const sliding_buckets_header_t *h,
                   const unsigned char *counts, int64_t now_ns)
{
    const int64_t g = rule->bucket_ns, k = rule->buckets;
    const int64_t newest = h->latest_ns / g;
    view_t v = {.b = now_ns / g};
    v.e = now_ns - v.b * g;
    v.lo = v.e <= g - 2 ? v.b - k : v.b - k + 1;
    v.clear_all = v.b - newest > k;
    if (v.clear_all) {
        v.expiring = h->total;
    } else {
        for (int64_t j = newest + 1; j <= v.b; j++)
            v.expiring += count_of(counts, rule, j);
    }
    v.inside = h->total - v.expiring;
    if (v.lo > v.b - k && v.b - k <= newest) /* b - K holds units no longer counted */
        v.inside -= count_of(counts, rule, v.b - k);
    return v;
}

/* Adds cost at now_ns (>= h->latest_ns) to the state whose view at now_ns is v: clears the slots
 * the move to bucket v->b reuses, saturating the total at SL_COUNT_MAX. */
static inline void add_at(const sl_rule_t *rule, sliding_buckets_header_t *h, unsigned char *counts,
                          const view_t *v, int64_t cost, int64_t now_ns)
{
    const int64_t newest = h->latest_ns / rule->bucket_ns;
    if (v->clear_all)
        memset(counts, 0, sizeof(int64_t) * (size_t)(rule->buckets + 1));
    else
        for (int64_t j = newest + 1; j <= v->b; j++)
            store_i64(counts + slot(rule, j), 0);
    int64_t kept = h->total - v->expiring;
    cost = sat_count(kept, cost) - kept;
    store_i64(counts + slot(rule, v->b), count_of(counts, rule, v->b) + cost);
    h->total = kept + cost;
    h->latest_ns = now_ns;
}

/* Bucket j stops being counted at (j + K + 1) * G - 1. */
static int64_t drop_time(const sl_rule_t *rule, int64_t j)
{
    return (j + rule->buckets + 1) * rule->bucket_ns - 1;
}

static void sliding_buckets_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                                   sl_decision_t *out)
{
    sliding_buckets_header_t h;
    memcpy(&h, state, sizeof(h));
    unsigned char *counts = (unsigned char *)state + sizeof(h);
    now_ns = max_i64(now_ns, h.latest_ns); /* clamp */
    const int64_t newest = h.latest_ns / rule->bucket_ns;
    view_t v = look(rule, &h, counts, now_ns);

    if (cost <= rule->limit - v.inside) {
        decision_admit(out);
        if (cost > 0) {
            add_at(rule, &h, counts, &v, cost, now_ns);
            memcpy(state, &h, sizeof(h));
        }
        v.inside += cost;
    } else if (cost > rule->limit) {
        decision_reject(out, -1);
    } else {
        /* oldest first, until enough has left the window */
        int64_t left = v.inside;
        int64_t j = v.lo;
        for (; j < v.b; j++) {
            if (!v.clear_all && j <= newest) /* newer buckets are empty */
                left -= count_of(counts, rule, j);
            if (left <= rule->limit - cost)
                break;
        }
        decision_reject(out, drop_time(rule, j) - now_ns);
    }
    out->remaining = max_i64(rule->limit - v.inside, 0); /* in debt: 0, not below */
    out->reset_after_ns = 0;
    if (v.inside > 0) {
        /* newest non-empty counted bucket (the state is written: newest may have moved) */
        for (int64_t j = min_i64(v.b, h.latest_ns / rule->bucket_ns); j >= v.lo; j--) {
            if (count_of(counts, rule, j) > 0) {
                out->reset_after_ns = drop_time(rule, j) - now_ns;
                break;
            }
        }
    }
}

static void sliding_buckets_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns)
{
    sliding_buckets_header_t h;
    memcpy(&h, state, sizeof(h));
    unsigned char *counts = (unsigned char *)state + sizeof(h);
    now_ns = max_i64(now_ns, h.latest_ns); /* clamp */
    view_t v = look(rule, &h, counts, now_ns);
    add_at(rule, &h, counts, &v, cost, now_ns);
    memcpy(state, &h, sizeof(h));
}

static int64_t sliding_buckets_debt(const sl_rule_t *rule, const void *state, int64_t cost,
                                    int64_t now_ns)
{
    sliding_buckets_header_t h;
    memcpy(&h, state, sizeof(h));
    const unsigned char *counts = (const unsigned char *)state + sizeof(h);
    view_t v = look(rule, &h, counts, max_i64(now_ns, h.latest_ns)); /* clamp */
    return max_i64(sat_count(v.inside, cost) - rule->limit, 0);      /* counted units past N */
}

static void sliding_buckets_refund(const sl_rule_t *rule, void *state, int64_t cost,
                                   int64_t charged_ns, int64_t now_ns)
{
    sliding_buckets_header_t h;
    memcpy(&h, state, sizeof(h));
    unsigned char *counts = (unsigned char *)state + sizeof(h);
    const int64_t newest = h.latest_ns / rule->bucket_ns;
    view_t v = look(rule, &h, counts, max_i64(now_ns, h.latest_ns));
    if (v.clear_all)
        return; /* nothing the ring holds is counted any more */
    /* the charge's bucket, then older ones still counted and still in the ring */
    int64_t lo = max_i64(v.lo, newest - rule->buckets);
    for (int64_t j = min_i64(charged_ns / rule->bucket_ns, newest); j >= lo && cost > 0; j--) {
        int64_t c = count_of(counts, rule, j);
        int64_t take = min_i64(c, cost);
        store_i64(counts + slot(rule, j), c - take);
        h.total -= take;
        cost -= take;
    }
    memcpy(state, &h, sizeof(h));
}

static void sliding_buckets_convert(const sl_rule_t *from, const void *from_state,
                                    const sl_rule_t *to, void *to_state, size_t to_bytes,
                                    int64_t now_ns)
{
    (void)to_bytes; /* rule->state_size: a fixed size */
    (void)now_ns;   /* the counts keep their own time: nothing to clamp */
    sliding_buckets_header_t h;
    memcpy(&h, from_state, sizeof(h));
    const unsigned char *counts = (const unsigned char *)from_state + sizeof(h);
    unsigned char *to_counts = (unsigned char *)to_state + sizeof(h);
    const int64_t newest = h.latest_ns / from->bucket_ns;
    const int64_t oldest_to = h.latest_ns / to->bucket_ns - to->buckets; /* the new ring's */
    memset(to_state, 0, to->state_size);
    int64_t total = 0; /* <= h.total: no overflow */
    for (int64_t j = max_i64(newest - from->buckets, 0); j <= newest; j++) {
        int64_t c = count_of(counts, from, j);
        int64_t last_ns = j == newest ? h.latest_ns : (j + 1) * from->bucket_ns - 1;
        int64_t m = last_ns / to->bucket_ns;
        if (c == 0 || m < oldest_to)
            continue;
        store_i64(to_counts + slot(to, m), count_of(to_counts, to, m) + c);
        total += c;
    }
    h.total = total;
    memcpy(to_state, &h, sizeof(h));
}

static int64_t sliding_buckets_span(const sl_rule_t *rule, const void *state, int64_t now_ns,
                                    int64_t *at_ns)
{
    *at_ns = max_i64(now_ns, load_i64(state)); /* clamp to the latest admission */
    return (*at_ns / rule->bucket_ns + 1) * rule->bucket_ns;
}

static bool sliding_buckets_valid(const sl_rule_t *rule, const void *state)
{
    sliding_buckets_header_t h;
    memcpy(&h, state, sizeof(h));
    const unsigned char *counts = (const unsigned char *)state + sizeof(h);
    if (h.latest_ns < 0 || h.latest_ns > SL_NOW_MAX_NS || h.total < 0 || h.total > SL_COUNT_MAX)
        return false;
    int64_t sum = 0;
    for (int64_t j = 0; j <= rule->buckets; j++) {
        int64_t c = load_i64(counts + 8 * j);
        if (c < 0 || c > h.total - sum) /* the counts add up to the total, in range */
            return false;
        sum += c;
    }
    return sum == h.total;
}

static bool sliding_buckets_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    sliding_buckets_header_t h;
    memcpy(&h, state, sizeof(h));
    const unsigned char *counts = (const unsigned char *)state + sizeof(h);
    return look(rule, &h, counts, max_i64(now_ns, h.latest_ns)).inside == 0;
}

static uint32_t sliding_buckets_state_size(const sl_rule_t *rule)
{
    /* newest, total, K + 1 counts */
    return (uint32_t)(sizeof(sliding_buckets_header_t) + 8 * (size_t)(rule->buckets + 1));
}

/* Counts per bucket: the same buckets mean the same. */
static bool sliding_buckets_same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->window_ns == b->window_ns && a->buckets == b->buckets;
}

/* sliding_buckets' functions, for its row in algorithms.c. */
const algorithm_ops_t sliding_buckets_ops = {
    .decide = sliding_buckets_decide,
    .is_fresh = sliding_buckets_is_fresh,
    .valid = sliding_buckets_valid,
    .refund = sliding_buckets_refund,
    .charge = sliding_buckets_charge,
    .debt = sliding_buckets_debt,
    .convert = sliding_buckets_convert,
    .state_size = sliding_buckets_state_size,
    .same_meaning = sliding_buckets_same_meaning,
    .span = sliding_buckets_span,
};
