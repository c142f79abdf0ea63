/*
 * test_state_size.c - states of variable size (src/core/core.h): sliding_log's state grows with
 * the admissions a key made, not with its limit or the costs it names; the legacy ring of older
 * snapshots converts exactly; a debt that meets a full ring merges its oldest entry, exact in
 * admissions. prop_state_size.c holds the contract against random sequences.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "sluice/sluice.h"

#define MS    SL_NS_PER_MS
#define SEC   SL_NS_PER_SEC
#define START INT64_C(1700000000000000000) /* aligned to 1 s */

static sl_rule_t log_rule(int64_t limit, int64_t window_ns)
{
    sl_rule_t r;
    assert_int_equal(sl_rule_init(&r, SL_SLIDING_LOG, limit, window_ns), SL_OK);
    return r;
}

static sl_decision_t decide(const sl_rule_t *r, void *state, int64_t cost, int64_t at)
{
    sl_decision_t d;
    core_decide(r, state, cost, START + at, &d);
    return d;
}

static sl_decision_t charge(const sl_rule_t *r, void *state, int64_t debt, int64_t at)
{
    sl_decision_t d;
    core_settle(r, state, 0, debt, START + at, START + at, &d);
    return d;
}

/* Entries in use: the header's second word (sliding_log.c). */
static uint32_t entries(const void *state)
{
    uint32_t w[2];
    memcpy(w, state, sizeof(w));
    return w[1];
}

#define assert_decision(d, allowed_, remaining_, retry_after_)                                     \
    do {                                                                                           \
        sl_decision_t got_ = (d);                                                                  \
        assert_int_equal(got_.allowed, (allowed_));                                                \
        assert_int_equal(got_.remaining, (remaining_));                                            \
        assert_int_equal(got_.retry_after_ns, (retry_after_));                                     \
    } while (0)

/*
 * The attack that made sluiced hold gigabytes: a rule of 2^20 per minute and one request of
 * cost 10^6. The ring of one stamp per unit held 8 MiB; the key now holds one entry: 48 bytes
 * for it (64 with room for the next), 10 packed. A thousand requests at one instant share an
 * entry; at a thousand instants they take a thousand, never more than N.
 */
static void test_one_request_one_entry(void **unused)
{
    (void)unused;
    sl_rule_t r = log_rule(SL_LOG_LIMIT_MAX, 60 * SEC);
    assert_int_equal(sl_state_size(&r), 32 + 16 * (size_t)SL_LOG_LIMIT_MAX);
    assert_int_equal(core_state_min(&r), 48);
    unsigned char small[48];
    core_state_init(&r, small, sizeof(small));
    assert_int_equal(core_state_bytes(&r, small), 48);
    assert_decision(decide(&r, small, 1000000, 0), true, SL_LOG_LIMIT_MAX - 1000000, 0);
    assert_int_equal(entries(small), 1);
    assert_int_equal(core_state_bytes(&r, small), 48);
    assert_int_equal(core_state_need(&r, small), 64);
    assert_int_equal(sl_state_check_len(&r, small, sizeof(small)), SL_OK);
    unsigned char packed[64];
    assert_true(core_state_packed_need(&r, small) <= sizeof(packed));
    assert_int_equal(sl_state_pack(&r, small, packed), 1 + 1 + 5 + 3); /* e 9: 1.7e9 s, 10^6 */

    /* a thousand at one instant: one entry; at a thousand instants: a thousand */
    sl_rule_t k = log_rule(1000, 60 * SEC);
    unsigned char *state = calloc(1, sl_state_size(&k));
    assert_non_null(state);
    for (int i = 0; i < 1000; i++)
        assert_true(decide(&k, state, 1, 5 * MS).allowed);
    assert_int_equal(entries(state), 1);
    assert_int_equal(core_state_need(&k, state), 64);
    memset(state, 0, sl_state_size(&k));
    for (int i = 0; i < 1000; i++)
        assert_true(decide(&k, state, 1, i * MS).allowed);
    assert_int_equal(entries(state), 1000);
    assert_int_equal(core_state_need(&k, state), sl_state_size(&k)); /* never past N */
    free(state);
}

/* A state in a buffer of its own size checks against that length, and no shorter one; a header
 * that promises more entries than N, or than the buffer holds, is refused. */
static void test_check_len(void **unused)
{
    (void)unused;
    sl_rule_t r = log_rule(10, SEC);
    unsigned char *full = calloc(1, sl_state_size(&r));
    assert_non_null(full);
    decide(&r, full, 2, 0);
    decide(&r, full, 3, 10 * MS);
    unsigned char own[64 + 16];
    core_state_move(&r, full, own, 64);
    assert_int_equal(core_state_bytes(&r, own), 64);
    assert_int_equal(sl_state_check_len(&r, own, 64), SL_OK);
    assert_int_equal(sl_state_check_len(&r, own, 63), SL_ESTATE);
    assert_int_equal(sl_state_check_len(&r, own, 47), SL_ESTATE); /* no whole header + entry */
    assert_int_equal(sl_state_check_len(NULL, own, 64), SL_EINVAL);
    assert_int_equal(sl_state_check(&r, full), SL_OK);
    uint32_t cap = 11; /* more than N */
    memcpy(own + 8, &cap, sizeof(cap));
    assert_int_equal(sl_state_check_len(&r, own, sizeof(own)), SL_ESTATE);
    cap = 4; /* more than the 80 bytes hold */
    memcpy(own + 8, &cap, sizeof(cap));
    assert_int_equal(sl_state_check_len(&r, own, sizeof(own)), SL_ESTATE);
    free(full);
}

/* The older ring: u32 head with DROPPED (bit 31) and LATEST (bit 30), u32 count, N stamps. */
static void *legacy(const sl_rule_t *r, uint32_t head, uint32_t count, const int64_t *slots)
{
    unsigned char *ring = calloc(1, 8 + 8 * (size_t)r->limit);
    assert_non_null(ring);
    memcpy(ring, &head, 4);
    memcpy(ring + 4, &count, 4);
    memcpy(ring + 8, slots, 8 * (size_t)r->limit);
    return ring;
}

/* The state a legacy ring converts to, in a buffer of the size it says it needs. */
static unsigned char *from_legacy(const sl_rule_t *r, const void *ring)
{
    size_t need = core_state_legacy_need(r, ring, core_state_legacy_size(r));
    assert_true(need >= core_state_min(r) && need <= sl_state_size(r));
    unsigned char *state = malloc(need);
    assert_non_null(state);
    assert_int_equal(core_state_from_legacy(r, ring, core_state_legacy_size(r), state, need),
                     SL_OK);
    assert_int_equal(sl_state_check_len(r, state, need), SL_OK);
    return state;
}

/*
 * N 4, W 1 s: the ring [t1, -, t0, t0] from head 2 holds t0, t0, t1: the state of 2 at t0 and 1
 * at t1, which packs to the same bytes as the state those requests write. LATEST (a refund took
 * the newest back): [t0, t1] with count 1 records t1 as the latest time, which a clock that
 * steps back is clamped to. DROPPED: N 3 [t0, t1, t1] with some older stamps dropped reads as
 * 2 units at t0 and 2 at t1, and decides as the older ring did.
 */
static void test_legacy_ring(void **unused)
{
    (void)unused;
    sl_rule_t r = log_rule(4, SEC);
    const int64_t t0 = START + 100 * MS, t1 = START + 300 * MS;
    assert_int_equal(core_state_legacy_size(&r), 8 + 8 * 4);
    void *ring = legacy(&r, 2, 3, (int64_t[]){t1, 0, t0, t0});
    unsigned char *state = from_legacy(&r, ring);
    assert_int_equal(entries(state), 2);
    unsigned char *want = calloc(1, sl_state_size(&r));
    assert_non_null(want);
    decide(&r, want, 2, 100 * MS);
    decide(&r, want, 1, 300 * MS);
    unsigned char a[64], b[64];
    size_t n = sl_state_pack(&r, state, a);
    assert_int_equal(sl_state_pack(&r, want, b), n);
    assert_memory_equal(a, b, n);
    free(state);
    free(ring);

    ring = legacy(&r, 0x40000000u, 1, (int64_t[]){t0, t1, 0, 0});
    state = from_legacy(&r, ring);
    assert_true(decide(&r, state, 1, 150 * MS).allowed); /* clamped to t1: stamped t1 */
    assert_int_equal(decide(&r, state, 0, 1250 * MS).remaining, 3);
    free(state);
    free(ring);

    sl_rule_t three = log_rule(3, SEC);
    ring = legacy(&three, 0x80000000u, 3, (int64_t[]){t0, t1, t1});
    state = from_legacy(&three, ring);
    assert_int_equal(entries(state), 2);
    assert_decision(decide(&three, state, 0, 300 * MS), false, 0, 800 * MS); /* t0 leaves */
    assert_decision(decide(&three, state, 1, 300 * MS), false, 0, 800 * MS);
    assert_decision(decide(&three, state, 1, 1100 * MS), true, 0, 0);
    free(state);
    free(ring);
    free(want);
}

/* Bytes that are no older ring of the rule are refused, and so is a buffer too small. */
static void test_legacy_refusals(void **unused)
{
    (void)unused;
    sl_rule_t r = log_rule(3, SEC);
    const int64_t t = START;
    static const struct {
        const char *why;
        uint32_t head, count;
        int64_t slots[3];
    } bad[] = {
        {"head past the ring", 3, 1, {1, 0, 0}},
        {"more stamps than N", 0, 4, {1, 2, 3}},
        {"both flags", 0xC0000000u, 1, {1, 2, 0}},
        {"DROPPED on a ring not full", 0x80000000u, 2, {1, 2, 0}},
        {"LATEST on a full ring", 0x40000000u, 3, {1, 2, 3}},
        {"stamps out of order", 0, 2, {2, 1, 0}},
        {"a latest time no later than the newest stamp", 0x40000000u, 1, {5, 5, 0}},
        {"a stamp past SL_NOW_MAX_NS", 0, 1, {SL_NOW_MAX_NS + 1, 0, 0}},
        {"a negative stamp", 0, 1, {-1, 0, 0}},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        void *ring = legacy(&r, bad[i].head, bad[i].count, bad[i].slots);
        unsigned char state[32 + 16 * 3];
        if (core_state_from_legacy(&r, ring, 8 + 8 * 3, state, sizeof(state)) != SL_ESTATE)
            fail_msg("the legacy ring with %s was not refused", bad[i].why);
        free(ring);
    }
    void *ring = legacy(&r, 0, 3, (int64_t[]){t, t + 1, t + 2});
    unsigned char state[32 + 16 * 3];
    assert_int_equal(core_state_from_legacy(&r, ring, 8 + 8 * 3 - 1, state, sizeof(state)),
                     SL_ESTATE); /* not its length */
    assert_int_equal(core_state_legacy_need(&r, ring, 8 + 8 * 3 - 1), 0);
    assert_int_equal(core_state_from_legacy(&r, ring, 8 + 8 * 3, state, 32 + 16 * 2), SL_ESTATE);
    assert_int_equal(core_state_legacy_need(&r, ring, 8 + 8 * 3), 32 + 16 * 3);
    assert_int_equal(core_state_from_legacy(&r, ring, 8 + 8 * 3, state, sizeof(state)), SL_OK);
    free(ring);

    /* every other algorithm's older state is today's */
    sl_rule_t fw;
    assert_int_equal(sl_rule_init(&fw, SL_FIXED_WINDOW, 5, SEC), SL_OK);
    int64_t old[2] = {START / SEC, 3}, now[2];
    assert_int_equal(core_state_legacy_size(&fw), 16);
    assert_int_equal(core_state_legacy_need(&fw, old, sizeof(old)), 16);
    assert_int_equal(core_state_from_legacy(&fw, old, sizeof(old), now, sizeof(now)), SL_OK);
    assert_memory_equal(old, now, sizeof(old));
}

/*
 * A debt that meets N entries merges the oldest into the next. N 3, W 1 s: 1 at 0, 100 and 200
 * ms, then 2 more at 300 ms: the 1 at 0 joins the entry at 100 ms. The whole log (0, 100, 200,
 * 300, 300) and the merged one decide alike for every cost >= 1, and here for peeks too (the
 * units after the oldest, 4, pass N). N 2, 1 at 0 and 100 ms, 1 more at 200 ms: the units after
 * the oldest are exactly N, so in [1 s, 1.1 s) the whole log holds 2 and allows a peek, the merged
 * one 3 and refuses it, as both refuse a cost of 1 (which waits for 1.1 s in both).
 */
static void test_debt_merges_oldest(void **unused)
{
    (void)unused;
    sl_rule_t r = log_rule(3, SEC);
    unsigned char *state = calloc(1, sl_state_size(&r));
    assert_non_null(state);
    for (int i = 0; i < 3; i++)
        decide(&r, state, 1, i * 100 * MS);
    assert_decision(charge(&r, state, 2, 300 * MS), false, 0, 800 * MS);
    assert_int_equal(entries(state), 3);
    assert_decision(decide(&r, state, 1, SEC), false, 0, 200 * MS); /* 100 and 200 ms leave */
    assert_decision(decide(&r, state, 0, SEC), false, 0, 100 * MS);
    assert_decision(decide(&r, state, 0, 1100 * MS), true, 0, 0);
    assert_decision(decide(&r, state, 1, 1200 * MS), true, 0, 0);
    free(state);

    sl_rule_t two = log_rule(2, SEC);
    state = calloc(1, sl_state_size(&two));
    assert_non_null(state);
    decide(&two, state, 1, 0);
    decide(&two, state, 1, 100 * MS);
    charge(&two, state, 1, 200 * MS);
    assert_int_equal(entries(state), 2);
    assert_decision(decide(&two, state, 0, SEC), false, 0, 100 * MS); /* the whole log: allowed */
    assert_decision(decide(&two, state, 1, SEC), false, 0, 100 * MS); /* as the whole log */
    assert_decision(decide(&two, state, 1, 1100 * MS), true, 0, 0);
    free(state);
}

/* A debt of INT64_MAX units saturates at SL_COUNT_MAX, one entry; another keeps the newest
 * SL_COUNT_MAX units: still valid, still in debt until the newest units leave. */
static void test_debt_saturates(void **unused)
{
    (void)unused;
    sl_rule_t r = log_rule(5, SEC);
    unsigned char *state = calloc(1, sl_state_size(&r));
    assert_non_null(state);
    decide(&r, state, 2, 0);
    charge(&r, state, INT64_MAX, 10 * MS);
    assert_int_equal(entries(state), 1);
    assert_int_equal(sl_state_check(&r, state), SL_OK);
    charge(&r, state, 7, 20 * MS);
    assert_int_equal(entries(state), 2);
    assert_int_equal(sl_state_check(&r, state), SL_OK);
    assert_decision(decide(&r, state, 1, 1010 * MS), false, 0, 10 * MS); /* the 7 at 20 ms */
    assert_decision(decide(&r, state, 5, 1020 * MS), true, 0, 0);
    free(state);
}

/* The fixed-size algorithms: their size is the rule's, and a move is a copy. */
static void test_fixed_sizes(void **unused)
{
    (void)unused;
    static const sl_algorithm_t algs[] = {SL_FIXED_WINDOW, SL_SLIDING_WINDOW, SL_SLIDING_BUCKETS,
                                          SL_TOKEN_BUCKET, SL_GCRA};
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        sl_rule_t r;
        assert_int_equal(sl_rule_init(&r, algs[i], 5, SEC), SL_OK);
        unsigned char a[256], b[256];
        core_state_init(&r, a, r.state_size);
        decide(&r, a, 2, 0);
        assert_int_equal(core_state_min(&r), r.state_size);
        assert_int_equal(core_state_bytes(&r, a), r.state_size);
        assert_int_equal(core_state_need(&r, a), r.state_size);
        core_state_move(&r, a, b, r.state_size);
        assert_memory_equal(a, b, r.state_size);
        assert_int_equal(sl_state_check_len(&r, a, r.state_size), SL_OK);
        assert_int_equal(sl_state_check_len(&r, a, r.state_size - 1), SL_ESTATE);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_request_one_entry), cmocka_unit_test(test_check_len),
        cmocka_unit_test(test_legacy_ring),           cmocka_unit_test(test_legacy_refusals),
        cmocka_unit_test(test_debt_merges_oldest),    cmocka_unit_test(test_debt_saturates),
        cmocka_unit_test(test_fixed_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
