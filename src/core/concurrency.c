/*
 * concurrency.c - in-flight limits: a key holds at most N units at once. An acquire takes `cost`
 * units as one hold with an id and an expiry; a release of the id gives them back; a hold never
 * released (its holder crashed) frees its units when it expires. The rule's window W is the hold
 * timeout: the longest a hold lives, and what an acquire that names none gets.
 *
 * State (48 + 16 * N bytes, N <= SL_HOLDS_MAX), little-endian words as the machine has them:
 *
 *   0  latest_ns   the latest time an operation that wrote was decided at (times are clamped
 *                  to it, as every algorithm's are)
 *   8  secret      64 bits the key's hold ids are made with, from the caller's entropy at the
 *                  first acquire (0 until then)
 *  16  seq         ids issued on the key: the next id is the permutation of seq + 1
 *  24  count, held the holds in the array (uint32) and the units they hold (uint32)
 *  32  adaptive    16 bytes: the key's adaptive limit and its estimator (adaptive.h); zero
 *                  for a fixed limit. With an adaptive limit N is its max_limit (the room for
 *                  holds) and the limit a decision checks is the one these bytes hold (L <= N)
 *  48  holds       count holds of 16 bytes, sorted by expiry (ties: in the order they came):
 *                  expires_ns (int64) and tag (uint64) = id << 16 | cost, with id < 2^48 and
 *                  1 <= cost <= 65535
 *
 * A hold is live while now < expires_ns. Expired holds stay in the array until an operation
 * that writes drops them (they are a prefix: the array is sorted), so a refused request or a
 * peek writes nothing. Invariant: held = the sum of the holds' costs; held <= N unless a settle
 * charged past the limit (debt); count <= N always (a cost >= 1 per hold, and a charge that
 * finds no free slot adds its units to the hold that expires last).
 *
 * Hold ids. An id is the 4-round Feistel permutation of the 48-bit seq under round keys made
 * from the key's secret with sl_hash_mix(): ids are never reused while the key lives (seq only
 * grows, a permutation is one to one) and cannot be told from the ids one has seen without the
 * secret (a release needs the id of a live hold: guessing one takes about 2^48 / N tries). Not a
 * cryptographic cipher: it keeps a client from freeing another's hold by counting, not an
 * adversary with the state's bytes. Two ids are never issued: 0 marks the holds of sl_decide(),
 * which only a refund gives back, and 2^48 - 1 units charged past the limit or merged (a
 * charge, a conversion), which only expiry frees; no release frees either.
 *
 * sl_decide() on this algorithm is an acquire of a hold of the default timeout that no one can
 * release: a hold made at s is live in [s, s + W), so decisions are those of a true sliding
 * window of W (CORE_CAP_EXACT), for the front doors that cannot release.
 *
 * Refund: gives nothing back (not CORE_CAP_REFUNDABLE): units go back by a release of their
 * hold's id, or at its expiry. (Matching a decision's hold by its time gave back, in property
 * tests, units that debt charged between had merged: never sound enough to claim.) Charge (debt):
 * one hold of cost at now + W (id 2^48 - 1). With no free slot a charge is refused (SL_EDEBT)
 * unless max_debt is all: joining a live hold would either take its id (its holder's release then
 * fails) or be freed by that release. Under max_debt all the cost is added to the hold that expires
 * last, which keeps its id, its expiry pushed to now + W if earlier. Convert to another limit: the
 * live holds carry over; beyond the new N, the ones expiring first merge into one hold of id 2^48 -
 * 1 expiring with the last of them (their units stay held at least as long; their ids no longer
 * release).
 */
#include <stddef.h>
#include <string.h>

#include "core/adaptive.h"
#include "core/core.h"

#define HDR_BYTES  48
#define HOLD_BYTES 16
#define ID_BITS    48
#define ID_MASK    ((UINT64_C(1) << ID_BITS) - 1)
#define HALF_MASK  ((UINT64_C(1) << (ID_BITS / 2)) - 1)
#define COST_MAX   INT64_C(0xffff) /* units one hold records */
#define ID_CHARGED ID_MASK         /* the id of units charged or merged: never issued */

typedef struct hdr {
    int64_t latest_ns;
    uint64_t secret;
    uint64_t seq;
    uint32_t count;
    uint32_t held;
    unsigned char adaptive[ADAPTIVE_BYTES];
} hdr_t;

typedef struct hold {
    int64_t expires_ns;
    uint64_t tag; /* id << 16 | cost */
} hold_t;

_Static_assert(sizeof(hdr_t) == HDR_BYTES, "header layout");
_Static_assert(offsetof(hdr_t, adaptive) == CORE_HOLDS_ADAPTIVE_AT, "adaptive bytes");
_Static_assert(sizeof(hold_t) == HOLD_BYTES, "hold layout");

static unsigned char *hold_at(void *state, uint32_t i)
{
    return (unsigned char *)state + HDR_BYTES + (size_t)i * HOLD_BYTES;
}

static hold_t hold_get(const void *state, uint32_t i)
{
    hold_t h;
    memcpy(&h, (const unsigned char *)state + HDR_BYTES + (size_t)i * HOLD_BYTES, sizeof h);
    return h;
}

static void hold_set(void *state, uint32_t i, hold_t h)
{
    memcpy(hold_at(state, i), &h, sizeof h);
}

static int64_t hold_cost(hold_t h)
{
    return (int64_t)(h.tag & 0xffff);
}

static uint64_t hold_id(hold_t h)
{
    return h.tag >> 16;
}

static hdr_t hdr_get(const void *state)
{
    hdr_t h;
    memcpy(&h, state, sizeof h);
    return h;
}

static void hdr_set(void *state, const hdr_t *h)
{
    memcpy(state, h, sizeof *h);
}

/* The holds the state has room for (N): the rule's limit, or its adaptive max_limit. */
static int64_t slots(const sl_rule_t *rule)
{
    return adaptive_slots(rule);
}

/* The limit a decision checks now (L): the rule's, or the key's adaptive limit. */
static int64_t limit_now(const sl_rule_t *rule, const hdr_t *h)
{
    return rule->adaptive.algorithm == SL_ADAPTIVE_NONE ? rule->limit
                                                        : adaptive_limit(rule, h->adaptive);
}

/* The id of sequence number seq under the key's secret: a permutation of [0, 2^48). */
static uint64_t id_of(uint64_t secret, uint64_t seq)
{
    uint64_t l = (seq >> (ID_BITS / 2)) & HALF_MASK, r = seq & HALF_MASK;
    for (uint64_t i = 0; i < 4; i++) {
        uint64_t k = sl_hash_mix(secret ^ (i * SL_HASH_P2), SL_HASH_P0);
        uint64_t f = sl_hash_mix(r ^ k, SL_HASH_P1) & HALF_MASK;
        uint64_t t = l ^ f;
        l = r;
        r = t;
    }
    return (l << (ID_BITS / 2)) | r;
}

/* The first live hold at now (holds before it have expired). */
static uint32_t first_live(const void *state, const hdr_t *h, int64_t now_ns)
{
    uint32_t lo = 0, hi = h->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (hold_get(state, mid).expires_ns <= now_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The units the holds [0, end) hold. */
static int64_t units_before(const void *state, uint32_t end)
{
    int64_t u = 0;
    for (uint32_t i = 0; i < end; i++)
        u += hold_cost(hold_get(state, i));
    return u;
}

/* Drops the holds expired at now (the prefix before `live`). Returns how many. */
static uint32_t drop_expired(void *state, hdr_t *h, uint32_t live)
{
    if (live == 0)
        return 0;
    h->held -= (uint32_t)units_before(state, live);
    memmove(hold_at(state, 0), hold_at(state, live), (size_t)(h->count - live) * HOLD_BYTES);
    memset(hold_at(state, h->count - live), 0, (size_t)live * HOLD_BYTES); /* the same bytes */
    h->count -= live;
    return live;
}

/* Puts a hold in the array after every hold expiring no later (count < N: a free slot). */
static void insert(void *state, hdr_t *h, hold_t nh)
{
    uint32_t at = h->count;
    while (at > 0 && hold_get(state, at - 1).expires_ns > nh.expires_ns)
        at--;
    if (at < h->count) /* usually the latest expiry: appended, nothing moves */
        memmove(hold_at(state, at + 1), hold_at(state, at), (size_t)(h->count - at) * HOLD_BYTES);
    hold_set(state, at, nh);
    h->count++;
    h->held += (uint32_t)hold_cost(nh);
}

/* Removes hold i. */
static void remove_at(void *state, hdr_t *h, uint32_t i)
{
    h->held -= (uint32_t)hold_cost(hold_get(state, i));
    if (i + 1 < h->count) /* the last hold (a pair's own, often): nothing moves */
        memmove(hold_at(state, i), hold_at(state, i + 1), (size_t)(h->count - i - 1) * HOLD_BYTES);
    memset(hold_at(state, h->count - 1), 0, HOLD_BYTES);
    h->count--;
}

/* Time from now until enough holds from `live` on expire for `cost` to fit (live units `u`). */
static int64_t wait_for(const sl_rule_t *rule, const void *state, const hdr_t *h, uint32_t live,
                        int64_t u, int64_t cost, int64_t now_ns)
{
    int64_t limit = limit_now(rule, h);
    if (cost > limit)
        return -1;
    for (uint32_t i = live; i < h->count; i++) {
        hold_t x = hold_get(state, i);
        u -= hold_cost(x);
        if (cost <= limit - u)
            return x.expires_ns - now_ns;
    }
    return 0; /* not reached: with every hold expired, a cost <= N fits */
}

/* Fills the parts of a decision that a peek at now reports after it (`u` units live). */
static void report(const sl_rule_t *rule, const void *state, const hdr_t *h, int64_t u,
                   int64_t now_ns, sl_decision_t *out)
{
    out->limit = limit_now(rule, h);
    out->remaining = max_i64(out->limit - u, 0);
    out->reset_after_ns =
        u > 0 && h->count > 0 ? hold_get(state, h->count - 1).expires_ns - now_ns : 0;
}

/* The hold id for a new hold: the next one under the key's secret, never 0. */
static uint64_t next_id(hdr_t *h, uint64_t entropy, int64_t now_ns)
{
    if (h->secret == 0)
        h->secret = entropy != 0 ? entropy : sl_hash_mix((uint64_t)now_ns, SL_HASH_P2) | 1;
    uint64_t id;
    do {
        h->seq = (h->seq + 1) & ID_MASK;
        id = id_of(h->secret, h->seq);
    } while (id == 0 || id == ID_CHARGED);
    return id;
}

/*
 * The decision of `cost` units held until now + hold_ns: with_id asks for an id (an acquire),
 * else the hold has id 0 (a decision). Writes only when it admits a cost > 0.
 */
static void admit(const sl_rule_t *rule, void *state, int64_t cost, int64_t hold_ns, int64_t now_ns,
                  bool with_id, uint64_t entropy, sl_decision_t *out, sl_hold_t *hold)
{
    hdr_t h = hdr_get(state);
    now_ns = max_i64(now_ns, h.latest_ns);
    uint32_t live = first_live(state, &h, now_ns);
    int64_t u = (int64_t)h.held - units_before(state, live);
    if (cost > limit_now(rule, &h) - u) {
        decision_reject(out, wait_for(rule, state, &h, live, u, cost, now_ns));
        report(rule, state, &h, u, now_ns, out);
        return;
    }
    decision_admit(out);
    if (cost > 0) {
        hold->expired = drop_expired(state, &h, live);
        hold->until_ns = now_ns + hold_ns;
        hold->id = with_id ? next_id(&h, entropy, now_ns) : 0;
        insert(state, &h, (hold_t){hold->until_ns, (hold->id << 16) | (uint64_t)cost});
        h.latest_ns = now_ns;
        hdr_set(state, &h);
        u += cost;
    }
    report(rule, state, &h, u, now_ns, out);
}

static void concurrency_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                               sl_decision_t *out)
{
    sl_hold_t hold;
    admit(rule, state, cost, rule->window_ns, now_ns, false, 0, out, &hold);
}

static void concurrency_acquire(const sl_rule_t *rule, void *state, int64_t cost, int64_t hold_ns,
                                int64_t now_ns, uint64_t entropy, sl_decision_t *out,
                                sl_hold_t *hold)
{
    admit(rule, state, cost, hold_ns, now_ns, true, entropy, out, hold);
}

static int concurrency_release(const sl_rule_t *rule, void *state, uint64_t id, int64_t now_ns,
                               const sl_sample_t *sample, sl_decision_t *out, int64_t *expired)
{
    hdr_t h = hdr_get(state);
    now_ns = max_i64(now_ns, h.latest_ns);
    uint32_t live = first_live(state, &h, now_ns);
    uint32_t found = h.count;
    bool issued = id != 0 && id != ID_CHARGED; /* the others free nothing */
    for (uint32_t i = live; issued && i < h.count && found == h.count; i++)
        found = hold_id(hold_get(state, i)) == id ? i : found;
    int rc = SL_OK;
    if (found == h.count) {
        rc = SL_EHOLD; /* unknown, expired or released: nothing changes */
    } else {
        /* the sample moves the limit with the units in flight as the work ran (this hold's too) */
        if (sample != NULL && rule->adaptive.algorithm != SL_ADAPTIVE_NONE)
            adaptive_update(rule, h.adaptive, (int64_t)h.held - units_before(state, live), sample);
        remove_at(state, &h, found);
        *expired = drop_expired(state, &h, live);
        h.latest_ns = now_ns;
        hdr_set(state, &h);
    }
    decision_admit(out);
    live = rc == SL_OK ? 0 : live;
    report(rule, state, &h, (int64_t)h.held - units_before(state, live), now_ns, out);
    return rc;
}

/* Not refundable (its row does not claim it): a hold goes back by its release, or expires. A
 * refund that matched holds by time could free units other requests hold. */
static void concurrency_refund(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,
                               int64_t now_ns)
{
    (void)rule;
    (void)state;
    (void)cost;
    (void)charged_ns;
    (void)now_ns;
}

/* Live units at now (clamped) and, through *live, the first live hold. */
static int64_t live_units(const void *state, const hdr_t *h, int64_t *now_ns, uint32_t *live)
{
    *now_ns = max_i64(*now_ns, h->latest_ns);
    *live = first_live(state, h, *now_ns);
    return (int64_t)h->held - units_before(state, *live);
}

static int64_t concurrency_debt(const sl_rule_t *rule, const void *state, int64_t cost,
                                int64_t now_ns)
{
    hdr_t h = hdr_get(state);
    uint32_t live;
    int64_t u = live_units(state, &h, &now_ns, &live);
    bool room = h.count - live < (uint32_t)slots(rule);
    /* No free slot: a charge would have to join a live hold, whose id would then free the
     * charged units too. Reported as more than can be recorded, so it is refused unless max_debt
     * is all (SL_COUNT_MAX), as is a cost past what one hold records. A cost of 0 charges
     * nothing: what the key owes now. */
    if ((!room && cost > 0) || cost > COST_MAX)
        return SL_COUNT_MAX;
    return max_i64(sat_count(u, cost) - limit_now(rule, &h), 0);
}

static void concurrency_charge(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns)
{
    hdr_t h = hdr_get(state);
    uint32_t live;
    live_units(state, &h, &now_ns, &live);
    drop_expired(state, &h, live);
    int64_t until = now_ns + rule->window_ns;
    if (h.count < (uint32_t)slots(rule)) {
        insert(state, &h, (hold_t){until, ID_CHARGED << 16 | (uint64_t)min_i64(cost, COST_MAX)});
    } else {
        /* Only with max_debt all (concurrency_debt): the units join the hold that expires last,
         * which keeps its id, so its holder's release still works (and frees them with it). */
        hold_t x = hold_get(state, h.count - 1);
        int64_t c = min_i64(hold_cost(x) + cost, COST_MAX);
        h.held += (uint32_t)(c - hold_cost(x));
        x.tag = hold_id(x) << 16 | (uint64_t)c;
        x.expires_ns = max_i64(x.expires_ns, until);
        hold_set(state, h.count - 1, x);
    }
    h.latest_ns = now_ns;
    hdr_set(state, &h);
}

static void concurrency_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                                void *to_state, size_t to_bytes, int64_t now_ns)
{
    (void)from;
    memset(to_state, 0, to_bytes);
    hdr_t h = hdr_get(from_state);
    uint32_t live;
    live_units(from_state, &h, &now_ns, &live);
    uint32_t n = h.count - live, merged = 0;
    hdr_t o = h;
    o.count = 0;
    o.held = 0;
    adaptive_convert(to, o.adaptive);
    if (n > (uint32_t)slots(to)) { /* the first ones merge into one hold of id 0 */
        merged = n - (uint32_t)slots(to) + 1;
        int64_t units = units_before(from_state, live + merged) - units_before(from_state, live);
        hold_t last = hold_get(from_state, live + merged - 1);
        insert(to_state, &o,
               (hold_t){last.expires_ns, ID_CHARGED << 16 | (uint64_t)min_i64(units, COST_MAX)});
    }
    for (uint32_t i = live + merged; i < h.count; i++)
        insert(to_state, &o, hold_get(from_state, i));
    hdr_set(to_state, &o);
}

/* Whether the n bytes at p are all zero: the first is, and each equals the next (memcmp runs
 * wide, where a loop over the slots of a large limit was most of a read's cost). */
static bool all_zero(const unsigned char *p, size_t n)
{
    return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

static bool concurrency_valid(const sl_rule_t *rule, const void *state)
{
    hdr_t h = hdr_get(state);
    if (h.latest_ns < 0 || h.latest_ns > SL_NOW_MAX_NS || h.count > (uint64_t)slots(rule) ||
        h.seq > ID_MASK || !adaptive_valid(rule, h.adaptive))
        return false;
    int64_t sum = 0, prev = 0;
    for (uint32_t i = 0; i < h.count; i++) {
        hold_t x = hold_get(state, i);
        if (x.expires_ns < prev || x.expires_ns > SL_NOW_MAX_NS + SL_WINDOW_MAX_NS ||
            hold_cost(x) == 0)
            return false;
        prev = x.expires_ns;
        sum += hold_cost(x);
    }
    /* free slots are zero: one state, one byte string */
    return all_zero((const unsigned char *)state + HDR_BYTES + (size_t)h.count * HOLD_BYTES,
                    (size_t)(slots(rule) - h.count) * HOLD_BYTES) &&
           sum == (int64_t)h.held;
}

static bool concurrency_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    hdr_t h = hdr_get(state);
    now_ns = max_i64(now_ns, h.latest_ns);
    /* An adaptive limit is kept while the key is in use: until one hold timeout after its last
     * write, so a key that idles between bursts keeps what it learnt. */
    if (rule->adaptive.algorithm != SL_ADAPTIVE_NONE && now_ns < h.latest_ns + rule->window_ns)
        return false;
    return h.count == 0 || hold_get(state, h.count - 1).expires_ns <= now_ns;
}

static uint32_t concurrency_state_size(const sl_rule_t *rule)
{
    return (uint32_t)(HDR_BYTES + HOLD_BYTES * slots(rule));
}

/* Holds are absolute times: the layout depends on N alone, and the adaptive bytes on the
 * adaptive limit's parameters. */
static bool concurrency_same_meaning(const sl_rule_t *a, const sl_rule_t *b)
{
    return slots(a) == slots(b) && adaptive_same(a, b);
}

static int64_t concurrency_in_flight(const sl_rule_t *rule, const void *state, int64_t now_ns)
{
    (void)rule;
    hdr_t h = hdr_get(state);
    uint32_t live;
    return live_units(state, &h, &now_ns, &live);
}

static const algorithm_holds_t concurrency_holds = {
    .acquire = concurrency_acquire,
    .release = concurrency_release,
    .in_flight = concurrency_in_flight,
};

/* concurrency's functions, for its row in algorithms.c. */
const algorithm_ops_t concurrency_ops = {
    .decide = concurrency_decide,
    .is_fresh = concurrency_is_fresh,
    .valid = concurrency_valid,
    .refund = concurrency_refund,
    .charge = concurrency_charge,
    .debt = concurrency_debt,
    .convert = concurrency_convert,
    .state_size = concurrency_state_size,
    .same_meaning = concurrency_same_meaning,
    .holds = &concurrency_holds,
};
