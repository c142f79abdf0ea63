/*
 * test_lease.c - sl_lease() and sl_lease_return() against the worked examples of
 * docs/algorithms.md ("Leases"), with an explicit `now`, and their refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "sluice/sluice.h"

#define SEC   SL_NS_PER_SEC
#define START INT64_C(1700000000000000000) /* aligned to 10 s */

static sl_rule_t rule_of(sl_algorithm_t alg, int64_t limit, int64_t window_ns)
{
    sl_rule_t r;
    assert_int_equal(sl_rule_init(&r, alg, limit, window_ns), SL_OK);
    return r;
}

static void lease_ok(const sl_rule_t *r, void *state, int64_t want, int64_t lease_ns, int64_t at,
                     int64_t granted, int64_t until, int64_t remaining, sl_lease_t *out)
{
    assert_int_equal(sl_lease(r, state, want, lease_ns, START + at, out), SL_OK);
    assert_int_equal(out->granted, granted);
    assert_int_equal(out->at_ns, START + at);
    assert_int_equal(out->until_ns, START + until);
    assert_int_equal(out->remaining, remaining);
}

static void decide(const sl_rule_t *r, void *state, int64_t cost, int64_t at, bool allowed,
                   int64_t remaining, int64_t retry_after)
{
    sl_decision_t d;
    assert_int_equal(sl_decide(r, state, cost, START + at, &d), SL_OK);
    assert_int_equal(d.allowed, allowed);
    assert_int_equal(d.remaining, remaining);
    assert_int_equal(d.retry_after_ns, retry_after);
}

/* fixed_window, 100 per 10 s: a lease ends with its window. */
static void test_fixed_window_example(void **cm)
{
    (void)cm;
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 100, 10 * SEC);
    unsigned char s[16] = {0};
    sl_lease_t a, b;
    sl_decision_t d;
    lease_ok(&r, s, 30, 20 * SEC, 5 * SEC, 30, 10 * SEC, 70, &a); /* until the window's end */
    decide(&r, s, 60, 6 * SEC, true, 10, 0);
    lease_ok(&r, s, 30, 1 * SEC, 8 * SEC, 10, 9 * SEC, 0, &b); /* only 10 left */
    assert_int_equal(sl_lease_return(&r, s, &a, 4, START + 9 * SEC, &d), SL_OK);
    assert_true(d.allowed); /* a peek */
    assert_int_equal(d.remaining, 4);
    decide(&r, s, 100, 10 * SEC, true, 0, 0); /* the next window */
}

/* token_bucket, 10 per 10 s, burst 10 (T 1 s, tolerance 10 s): the lease time is held too. */
static void test_token_bucket_example(void **cm)
{
    (void)cm;
    sl_rule_t r = rule_of(SL_TOKEN_BUCKET, 10, 10 * SEC);
    unsigned char s[8] = {0};
    sl_lease_t a, x;
    sl_decision_t d;
    lease_ok(&r, s, 4, 3 * SEC, 0, 4, 3 * SEC, 3, &a); /* TAT 0 + 4 s + 3 s = 7 s */
    decide(&r, s, 4, 0, false, 3, 1 * SEC);            /* TAT' 11 s: 1 s too early */
    assert_int_equal(sl_lease_return(&r, s, &a, 1, START + 2 * SEC, &d), SL_OK);
    assert_int_equal(d.remaining, 7); /* back 1 s + 3 s - 2 s: TAT 5 s, 3 spent by 2 s */
    decide(&r, s, 7, 2 * SEC, true, 0, 0);
    unsigned char before[8];
    memcpy(before, s, sizeof(s));
    assert_int_equal(sl_lease(&r, s, 1, 9 * SEC + 1, START + 2 * SEC, &x), SL_ELEASE);
    assert_memory_equal(before, s, sizeof(s));
}

/* gcra: returning a whole lease at its grant's time gives the bytes back. */
static void test_gcra_return_exact(void **cm)
{
    (void)cm;
    sl_rule_t r = rule_of(SL_GCRA, 10, 10 * SEC);
    unsigned char s[8] = {0}, before[8];
    sl_lease_t a;
    sl_decision_t d;
    decide(&r, s, 3, 0, true, 8, 0); /* not fresh: TAT 3 s */
    memcpy(before, s, sizeof(s));
    lease_ok(&r, s, 20, 2 * SEC, 0, 6, 2 * SEC, 0, &a); /* 11 s of room: 6 units + 2 s, 0 left */
    assert_int_equal(sl_lease_return(&r, s, &a, 6, START, &d), SL_OK);
    assert_memory_equal(before, s, sizeof(s));
}

static void test_refusals(void **cm)
{
    (void)cm;
    sl_rule_t log = rule_of(SL_SLIDING_LOG, 10, 10 * SEC);
    unsigned char s[8 + 8 * 10] = {0};
    sl_lease_t a = {.granted = 1, .at_ns = START, .until_ns = START + 1};
    sl_decision_t d;
    assert_int_equal(sl_lease(&log, s, 1, SEC, START, &a), SL_ELEASE);
    assert_int_equal(sl_lease_return(&log, s, &a, 1, START, &d), SL_ELEASE);
    sl_rule_t fw = rule_of(SL_FIXED_WINDOW, 10, 10 * SEC);
    assert_int_equal(sl_lease(&fw, s, 1, 0, START, &a), SL_ELEASE);
    assert_int_equal(sl_lease(&fw, s, 1, SL_WINDOW_MAX_NS + 1, START, &a), SL_ELEASE);
    assert_int_equal(sl_lease(&fw, s, -1, SEC, START, &a), SL_ECOST);
    assert_int_equal(sl_lease(&fw, NULL, 1, SEC, START, &a), SL_EINVAL);
    assert_int_equal(sl_lease(&fw, s, 2, SEC, START, &a), SL_OK);
    assert_int_equal(sl_lease_return(&fw, s, &a, 3, START, &d), SL_ECOST);
    /* token_bucket of burst 1: no lease time leaves room for a unit */
    sl_rule_t one = rule_of(SL_TOKEN_BUCKET, 10, 10 * SEC);
    one.burst = 1;
    assert_int_equal(sl_rule_prepare(&one), SL_OK);
    assert_int_equal(sl_lease(&one, s, 1, 1, START, &a), SL_ELEASE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_window_example),
        cmocka_unit_test(test_token_bucket_example),
        cmocka_unit_test(test_gcra_return_exact),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
