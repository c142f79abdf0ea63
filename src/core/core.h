/*
 * core.h - internal interface between the rule dispatcher (rule.c) and the algorithms.
 *
 * Each algorithm file implements these functions (the members of its algorithm_ops_t, below)
 * over a state of the size its state_size() gives:
 *
 *   decide(rule, state, cost, now_ns, out)        cost >= 0, now_ns >= 0, state any alignment.
 *   is_fresh(rule, state, now_ns)                 true when state decides as all-zero would.
 *   valid(rule, state)                            true when state is one the functions here can
 *                                                 have written (bytes from a snapshot are checked),
 *                                                 for a state whose buffer holds the bytes it says
 *                                                 (core_state_check() sees to that first).
 *   refund(rule, state, cost, charged_ns, now_ns)
 *                                                 gives back cost > 0 units charged at charged_ns,
 *                                                 0 <= charged_ns <= now_ns (sl_refund()).
 *   charge(rule, state, cost, now_ns)             adds cost > 0 units at now_ns even past the
 *                                                 limit: debt (sl_settle()).
 *   debt(rule, state, cost, now_ns)               the key's debt at now_ns after a charge of
 *                                                 cost >= 0 units, not writing: the units it has
 *                                                 charged beyond what it can admit then, in the
 *                                                 algorithm's own terms (0 when it could admit
 *                                                 its whole cost), saturating at SL_COUNT_MAX.
 *                                                 sl_settle() refuses a charge whose debt passes
 *                                                 rule->max_debt.
 *   convert(from, from_state, to, to_state, to_bytes, now_ns)
 *                                                 writes to_state (a buffer of to_bytes >=
 *                                                 core_state_convert_need() bytes, not
 *                                                 overlapping) with the usage of a valid from_state
 *                                                 carried to `to`, a rule of the same algorithm
 *                                                 whose state means something else
 *                                                 (sl_state_convert()).
 *
 * States of variable size. A state records the size of its own buffer. Most algorithms have a
 * fixed size, rule->state_size bytes. One with CORE_CAP_VARIABLE (sliding_log: one entry per
 * admission, see sliding_log.c) has a buffer that grows with the admissions a key made and never
 * needs more than rule->state_size bytes (room for N entries); its header records how many entries
 * the buffer holds, 0 meaning rule->state_size bytes' worth, so that a zeroed rule->state_size
 * buffer (what callers of the public sl_decide() pass) is a fresh state with all the room it can
 * need. The contract, the same for every algorithm (trivial for the fixed ones):
 *
 *   core_state_min(rule)               bytes of a fresh key's smallest buffer.
 *   core_state_init(rule, buf, bytes)  writes a fresh state into a buffer of `bytes` >=
 *                                      core_state_min() bytes (all of it: the same bytes
 *                                      for the same size).
 *   core_state_bytes(rule, state)      the buffer size the state says it has.
 *   core_state_need(rule, state)       the least buffer size, <= rule->state_size, in which any
 *                                      one more operation on the state fits without losing
 *                                      anything: a decision of any cost, a charge, a refund, a
 *                                      lease; the caller moves a state whose core_state_bytes()
 *                                      is smaller to a buffer of at least this size before the
 *                                      operation (core_decide() and core_settle() assert room).
 *   core_state_move(rule, from, to, to_bytes)
 *                                      writes the same state into another buffer (not
 *                                      overlapping) of to_bytes >= core_state_need(from) bytes,
 *                                      or at least the bytes of what it holds, to grow or shrink
 *                                      it; it then decides exactly as before.
 *
 * A table keeps each key's state in a buffer of core_state_need() bytes (or a little more), and
 * may shrink it after an operation: a sliding_log key then costs what its entries take. Every
 * function taking a state reads only the bytes its header says.
 *
 * The dispatcher (rule.c) has already validated the arguments, so these functions do not
 * check them again: core_decide() and core_settle(), through which every decision, refund and
 * charge enters, assert the preconditions above (a prepared rule, costs >= 0; core_settle()
 * itself makes charged_ns <= now_ns), and an algorithm asserts only its own state's
 * invariants (sliding_log's ring). They read no clock, allocate nothing, lock nothing. Helpers
 * for overflow-free arithmetic are here so every algorithm uses the same ones.
 */
#ifndef SLUICE_CORE_H
#define SLUICE_CORE_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "core/algorithms.h"
#include "sluice/sluice.h"

/* The variable size of a state (CORE_CAP_VARIABLE: sliding_log), the contract above, and its
 * packed forms. packed_max is the most sl_state_pack() writes under the rule, packed_need the
 * most a given state packs to; unpack_need the buffer a packed state needs (core_state_need()
 * of what it unpacks to), 0 when its bytes are no packed state; unpack false for bytes that are
 * no valid state. legacy_*: the older unpacked layout of older snapshots (see
 * core_state_legacy_size() below): its size, the buffer its state needs (0: not such bytes), and
 * the state. */
typedef struct algorithm_variable {
    size_t (*state_min)(const sl_rule_t *rule);
    void (*state_init)(const sl_rule_t *rule, void *buf, size_t bytes);
    size_t (*state_bytes)(const sl_rule_t *rule, const void *state);
    size_t (*state_need)(const sl_rule_t *rule, const void *state);
    void (*state_move)(const sl_rule_t *rule, const void *from, void *to, size_t to_bytes);
    size_t (*convert_need)(const sl_rule_t *from, const void *from_state, const sl_rule_t *to);
    size_t (*packed_max)(const sl_rule_t *rule);
    size_t (*packed_need)(const sl_rule_t *rule, const void *state);
    size_t (*pack)(const sl_rule_t *rule, const void *state, void *out);
    size_t (*unpack_need)(const sl_rule_t *rule, const void *in, size_t len);
    bool (*unpack)(const sl_rule_t *rule, const void *in, size_t len, void *state, size_t bytes);
    size_t (*legacy_size)(const sl_rule_t *rule);
    size_t (*legacy_need)(const sl_rule_t *rule, const void *legacy, size_t len);
    bool (*from_legacy)(const sl_rule_t *rule, const void *legacy, size_t len, void *state,
                        size_t bytes);
} algorithm_variable_t;

/*
 * The functions of an algorithm that holds units (CORE_CAP_HOLDS): sl_acquire(), sl_release()
 * and what metrics read, over a state its ops' decide also decides on. Arguments checked by the
 * caller (holds.c): a prepared rule, cost >= 0, 1 ms <= hold_ns <= rule->window_ns, now_ns
 * clamped to [0, SL_NOW_MAX_NS].
 *
 *   acquire(rule, state, cost, hold_ns, now_ns, entropy, out, hold)
 *                         the decision of cost units held until now + hold_ns (the state's
 *                         latest time if later); admitted with cost > 0, a hold with a new id
 *                         (*hold: id, until_ns, and expired, the holds it found expired and
 *                         dropped); entropy keys the key's ids when it has none yet. Writes
 *                         only when it admits a cost > 0; *hold untouched otherwise.
 *   release(rule, state, id, now_ns, sample, out, expired)
 *                         frees the live hold `id` (SL_OK, *expired the holds dropped with it;
 *                         the sample, may be NULL, moves an adaptive limit) or returns SL_EHOLD
 *                         and writes nothing; *out a peek after.
 *   in_flight(rule, state, now_ns)
 *                         the units live holds hold at now_ns.
 */
/* The time a hold of hold_ns (0: the rule's window_ns, the hold timeout) lives: SL_OK and
 * *out_ns, or SL_EHOLDTIME outside [1 ms, window_ns]. */
int core_hold_time(const sl_rule_t *rule, int64_t hold_ns, int64_t *out_ns);

/* Where in a holding algorithm's state its adaptive bytes are (adaptive.h; concurrency.c). */
#define CORE_HOLDS_ADAPTIVE_AT 32

typedef struct algorithm_holds {
    void (*acquire)(const sl_rule_t *rule, void *state, int64_t cost, int64_t hold_ns,
                    int64_t now_ns, uint64_t entropy, sl_decision_t *out, sl_hold_t *hold);
    int (*release)(const sl_rule_t *rule, void *state, uint64_t id, int64_t now_ns,
                   const sl_sample_t *sample, sl_decision_t *out, int64_t *expired);
    int64_t (*in_flight)(const sl_rule_t *rule, const void *state, int64_t now_ns);
} algorithm_holds_t;

/*
 * One algorithm's functions: its file (src/core/<x>.c) defines them static and exports this
 * one struct, `<x>_ops`, which its row in algorithms.c points at. The first seven are the
 * contract at the top; the others:
 *
 *   state_size(rule)      the bytes of the largest state (rule->state_size, sl_state_size()) of
 *                         a rule whose numbers sl_rule_prepare() has checked.
 *   same_meaning(a, b)    whether a state means the same usage under two rules of the
 *                         algorithm (sl_state_convert() then copies it rather than converting).
 *   span                  counting algorithms that lease (lease.c): the span of time the state
 *                         cannot tell apart around now_ns (clamped as a decision clamps it,
 *                         written to *at_ns), returning its end, the first ns of the next window
 *                         or bucket. Units admitted at *at_ns and spent at any time in [*at_ns,
 *                         end) leave the state as they would have had they arrived when spent.
 *   lease, lease_return   CORE_CAP_TOKENS algorithms that lease: grant up to want units held for
 *                         lease_ns (returning the units granted), and give back `unused` units
 *                         of a lease granted at at_ns, its time not yet run (now_ns >= at_ns).
 *   variable              NULL for a state of fixed size, rule->state_size bytes, packed as it
 *                         is (every CORE_CAP_VARIABLE row has one, no other).
 *   holds                 acquire and release (above): every CORE_CAP_HOLDS row has them, no
 *                         other.
 *
 * A CORE_CAP_LEASABLE row has span, or lease and lease_return (tests/unit/test_algorithm_table.c
 * checks that the rows and their functions agree).
 */
typedef struct algorithm_ops {
    void (*decide)(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                   sl_decision_t *out);
    bool (*is_fresh)(const sl_rule_t *rule, const void *state, int64_t now_ns);
    bool (*valid)(const sl_rule_t *rule, const void *state);
    void (*refund)(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,
                   int64_t now_ns);
    void (*charge)(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns);
    int64_t (*debt)(const sl_rule_t *rule, const void *state, int64_t cost, int64_t now_ns);
    void (*convert)(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                    void *to_state, size_t to_bytes, int64_t now_ns);
    uint32_t (*state_size)(const sl_rule_t *rule);
    bool (*same_meaning)(const sl_rule_t *a, const sl_rule_t *b);
    int64_t (*span)(const sl_rule_t *rule, const void *state, int64_t now_ns, int64_t *at_ns);
    int64_t (*lease)(const sl_rule_t *rule, void *state, int64_t want, int64_t lease_ns,
                     int64_t now_ns);
    void (*lease_return)(const sl_rule_t *rule, void *state, int64_t unused, int64_t at_ns,
                         int64_t until_ns, int64_t now_ns);
    const algorithm_variable_t *variable;
    const algorithm_holds_t *holds;
} algorithm_ops_t;

/* The functions of a prepared rule's algorithm. */
static inline const algorithm_ops_t *core_ops(const sl_rule_t *rule)
{
    return core_algorithms[rule->algorithm].ops;
}

/* States have no alignment requirement: every access goes through these (a mov on x86-64). */
static inline int64_t load_i64(const void *p)
{
    int64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline void store_i64(void *p, int64_t v)
{
    memcpy(p, &v, sizeof(v));
}

/* a + b, saturating at INT64_MAX (both non-negative). */
static inline int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* a * b, saturating at INT64_MAX (both non-negative). */
static inline int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* A count plus a cost in debt, saturating at SL_COUNT_MAX (count <= SL_COUNT_MAX, cost >= 0). */
static inline int64_t sat_count(int64_t count, int64_t cost)
{
    return cost > SL_COUNT_MAX - count ? SL_COUNT_MAX : count + cost;
}

static inline int64_t max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static inline int64_t min_i64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Fills the parts of a decision common to every algorithm's rejection. */
static inline void decision_reject(sl_decision_t *out, int64_t retry_after_ns)
{
    out->allowed = false;
    out->retry_after_ns = retry_after_ns;
    out->delay_ns = 0;
}

static inline void decision_admit(sl_decision_t *out)
{
    out->allowed = true;
    out->retry_after_ns = 0;
    out->delay_ns = 0;
}

/* ---- states of variable size (the contract at the top) ----------------------------------------
 */

/* Inline: a table calls the three that only read on every decision of a state kept out of line. */
static inline size_t core_state_min(const sl_rule_t *rule)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    return v != NULL ? v->state_min(rule) : rule->state_size;
}

static inline size_t core_state_bytes(const sl_rule_t *rule, const void *state)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    return v != NULL ? v->state_bytes(rule, state) : rule->state_size;
}

static inline size_t core_state_need(const sl_rule_t *rule, const void *state)
{
    const algorithm_variable_t *v = core_ops(rule)->variable;
    return v != NULL ? v->state_need(rule, state) : rule->state_size;
}

void core_state_init(const sl_rule_t *rule, void *buf, size_t bytes);
void core_state_move(const sl_rule_t *rule, const void *from, void *to, size_t to_bytes);

/* sl_state_check_len(): SL_OK when the `len` bytes at state hold a state of the rule (its
 * header's buffer size within len, and valid), SL_ESTATE when not. A prepared rule. */
int core_state_check(const sl_rule_t *rule, const void *state, size_t len);

/* The least bytes of a buffer under `to` for sl_state_convert() of a valid from_state, with room
 * for one more operation; and the conversion into a buffer of to_bytes >= that (SL_OK,
 * SL_EALGORITHM, SL_ESTATE for a from_state core_state_check(from, .., its bytes) refuses). */
size_t core_state_convert_need(const sl_rule_t *from, const void *from_state, const sl_rule_t *to);
int core_state_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                       void *to_state, size_t to_bytes, int64_t now_ns);

/* The most sl_state_pack() writes for this state (sliding_log: what its entries take, rather
 * than sl_state_packed_max()'s N of them). */
size_t core_state_packed_need(const sl_rule_t *rule, const void *state);

/* The buffer size sl_state_unpack() of these packed bytes needs, with room for one more
 * operation (<= rule->state_size; 0 when they are no packed state of the rule); and the unpack
 * into a buffer of `bytes` (>= that): SL_OK or SL_ESTATE (state unspecified then). */
size_t core_state_unpack_need(const sl_rule_t *rule, const void *packed, size_t len);
int core_state_unpack(const sl_rule_t *rule, const void *packed, size_t len, void *state,
                      size_t bytes);

/*
 * States that older builds kept unpacked (an older snapshot's entries): sliding_log's ring was
 * 8 + 8 * N bytes, one stamp per admitted unit; every other algorithm's state is unchanged.
 * core_state_legacy_size() is that size; core_state_legacy_need() the buffer the state of such
 * bytes needs, with room for one more operation (0 when they are no such state);
 * core_state_from_legacy() writes the state into a buffer of `bytes` >= that: exact (each stamp
 * one unit, equal stamps one entry, a settle's DROPPED and LATEST kept as sliding_log.c says).
 * Returns SL_OK, or SL_ESTATE for bytes that are not a valid older state of the rule.
 */
size_t core_state_legacy_size(const sl_rule_t *rule);
size_t core_state_legacy_need(const sl_rule_t *rule, const void *legacy, size_t len);
int core_state_from_legacy(const sl_rule_t *rule, const void *legacy, size_t len, void *state,
                           size_t bytes);

/* sl_state_saturate() into a buffer of `bytes` >= core_state_min(rule). */
void core_state_saturate(const sl_rule_t *rule, void *state, size_t bytes, int64_t at_ns);

/* Treats times outside [0, SL_NOW_MAX_NS] as its ends (now + window + tolerance stay far from
 * INT64_MAX). */
static inline int64_t core_clamp_now(int64_t now_ns)
{
    return now_ns < 0 ? 0 : now_ns > SL_NOW_MAX_NS ? SL_NOW_MAX_NS : now_ns;
}

/*
 * The dispatch behind sl_decide(), for callers that have already validated their arguments
 * (cost >= 0, a prepared rule, a state in a buffer of at least core_state_need() bytes): the
 * table's hot path, one indirect call through the rule's row.
 */
static inline void core_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                               sl_decision_t *out)
{
    assert(core_algorithm(rule->algorithm) != NULL);
    assert(rule->state_size > 0 && cost >= 0);
    out->limit = rule->capacity;
    core_ops(rule)->decide(rule, state, cost, core_clamp_now(now_ns), out);
}

/*
 * Priorities (reserve.c): a request that must leave `reserve` >= 0 units of the key's limit
 * unused, for higher priorities. core_reserve_admits() is the one check: true when a peek's
 * remaining is at least cost + reserve (the caller then decides or acquires as usual, which
 * admits), else false with *out the refusal, the state unchanged: retry_after_ns the wait until
 * cost + reserve fit (-1 when they never can), remaining what the request's priority could
 * take. core_reserve_view() turns an admission's remaining into the priority's. Reserve 0 is
 * an ordinary request (true at once). core_decide_reserved() is core_decide() with a reserve.
 */
bool core_reserve_admits(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                         int64_t now_ns, sl_decision_t *out);
void core_reserve_view(sl_decision_t *out, int64_t reserve);
void core_decide_reserved(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                          int64_t now_ns, sl_decision_t *out);

/*
 * The settle behind sl_settle() and sl_refund() (a refund is a settle with actual 0), for
 * validated arguments (0 <= reserved, 0 <= actual): gives back reserved - actual, or charges
 * actual - reserved past the limit, then fills *out with a peek. Times are clamped as
 * sl_decide() clamps them, and now_ns to no earlier than charged_ns. Returns the now_ns it used
 * (>= 0), or SL_EDEBT when the charge would leave the key owing more than rule->max_debt: the
 * state is then unchanged and *out a peek at now_ns. (A table storing a key that was absent
 * stores nothing then: the state it passed is still fresh.)
 */
int64_t core_settle(const sl_rule_t *rule, void *state, int64_t reserved, int64_t actual,
                    int64_t charged_ns, int64_t now_ns, sl_decision_t *out);

/*
 * The shard lock's fairness, counted (table.c): handoffs, the times a waiter that had napped
 * HANDOFF_NAPS times claimed the lock and then got it, summed over the shards (each shard's
 * count saturates at 255); passed_max, the most acquisitions of a shard's lock by other threads
 * between such a claim and the claimant's own (saturating at 255) -- bounded by the number of
 * other threads locking the shard, one each, whatever the load. Takes every shard's lock once.
 */
void sl_table_lock_counts(sl_table_t *t, uint64_t *handoffs, unsigned *passed_max);

#endif /* SLUICE_CORE_H */
