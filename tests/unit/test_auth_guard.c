/*
 * test_auth_guard.c - attempts at a secret per address (server/auth_guard.h), with explicit
 * times: the first five failures answered at once, the sixth held back 50 ms, and from then on
 * the address hot: every attempt refused unchecked (the right secret too, with the same verdict
 * as a wrong one), held back 100, 200, 400, 800 ms, 1 s ... one after another; an attempt whose
 * reply would wait more than 10 s dropped without growing the queue; a success clears nothing;
 * the window forgets a minute after the last failure, and the reported retry time says when;
 * IPv6 counted by /64; a full table judges newcomers by the shared entry rather than growing or
 * letting them through.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/auth_guard.h"

#define MS INT64_C(1000000)
#define T0 INT64_C(1000000000000) /* monotonic ns: any start */

static netaddr_t ip(const char *s)
{
    netaddr_t a;
    if (netaddr_parse(s, strlen(s), &a) != 0) {
        fail_msg("address %s does not parse", s);
    }
    return a;
}

static guard_verdict_t wrong(guard_t *g, const netaddr_t *a, int64_t t)
{
    return guard_attempt(g, a, t, false);
}

static guard_verdict_t right(guard_t *g, const netaddr_t *a, int64_t t)
{
    return guard_attempt(g, a, t, true);
}

static void assert_same_verdict(guard_verdict_t x, guard_verdict_t y)
{
    assert_int_equal(x.let_in, y.let_in);
    assert_int_equal(x.hot, y.hot);
    assert_int_equal(x.drop, y.drop);
    assert_int_equal(x.hold_ns, y.hold_ns);
    assert_int_equal(x.retry_ns, y.retry_ns);
    assert_int_equal(x.failures, y.failures);
    assert_int_equal(x.shared, y.shared);
}

/* Wrong secrets at one instant, as a pipeline or parallel connections send them. */
static void test_schedule(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(1);
    netaddr_t a = ip("192.0.2.7");
    static const struct {
        uint32_t failures;
        int64_t hold_ms; /* all at T0: each waits behind the ones before it */
        bool hot, drop;
    } rows[] = {
        {1, 0, false, false},    {2, 0, false, false},    {3, 0, false, false},
        {4, 0, false, false},    {5, 0, false, false},    {6, 50, false, false},
        {7, 150, true, false},   {8, 350, true, false},   {9, 750, true, false},
        {10, 1550, true, false}, {11, 2550, true, false}, {12, 3550, true, false},
        {13, 4550, true, false}, {14, 5550, true, false}, {15, 6550, true, false},
        {16, 7550, true, false}, {17, 8550, true, false}, {18, 9550, true, false},
        {19, 0, true, true},     {20, 0, true, true},     {21, 0, true, true},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        guard_verdict_t v = wrong(g, &a, T0);
        assert_false(v.let_in);
        assert_int_equal(v.failures, rows[i].failures);
        assert_int_equal(v.hold_ns, rows[i].hold_ms * MS);
        assert_int_equal(v.hot, rows[i].hot);
        assert_int_equal(v.drop, rows[i].drop);
        assert_false(v.shared);
        /* held: the address cools a window after this attempt, counted from the reply */
        assert_int_equal(v.retry_ns, v.failures > GUARD_FREE_FAILURES && !v.drop
                                         ? GUARD_WINDOW_NS - v.hold_ns
                                         : 0);
    }
    /* the dropped ones did not grow the queue: a second later one more fits, 1 s behind the
     * last held (due at T0 + 9550 ms) */
    guard_verdict_t v = wrong(g, &a, T0 + 1000 * MS);
    assert_false(v.drop);
    assert_int_equal(v.hold_ns, 9550 * MS);
    /* another address is not slowed by the first */
    netaddr_t b = ip("192.0.2.8");
    assert_int_equal(wrong(g, &b, T0).hold_ns, 0);
    assert_true(right(g, &b, T0).let_in);
    guard_free(g);
}

/* Failures spread out in time: each held its own delay from when it came, once the queue of
 * earlier ones is gone; the queue never holds more than 10 s. */
static void test_spread(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(2);
    netaddr_t a = ip("198.51.100.1");
    int64_t t = T0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(wrong(g, &a, t).hold_ns, 0);
        t += 100 * MS;
    }
    static const int64_t want_ms[] = {50, 100, 200, 400, 800, 1000, 1000};
    for (size_t i = 0; i < sizeof want_ms / sizeof want_ms[0]; i++) {
        t += 5000 * MS; /* long after the previous reply left */
        guard_verdict_t v = wrong(g, &a, t);
        assert_int_equal(v.hold_ns, want_ms[i] * MS);
        assert_int_equal(v.hot, i > 0); /* the sixth failure made it hot */
    }
    /* a failure more than the window after the last starts over */
    t += GUARD_WINDOW_NS + 1;
    guard_verdict_t v = wrong(g, &a, t);
    assert_int_equal(v.failures, 1);
    assert_int_equal(v.hold_ns, 0);
    assert_false(v.hot);
    guard_free(g);
}

/* The exact abuse: a right secret of the other user after every five wrong ones. It clears
 * nothing: the sixth wrong one is held and the address hot, and then the right one is refused. */
static void test_success_clears_nothing(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(3);
    netaddr_t a = ip("203.0.113.9");
    assert_true(right(g, &a, T0).let_in);
    for (uint32_t i = 1; i <= 5; i++) {
        guard_verdict_t v = wrong(g, &a, T0);
        assert_int_equal(v.failures, i);
        assert_int_equal(v.hold_ns, 0);
    }
    guard_verdict_t ok = right(g, &a, T0); /* not hot yet: let in, and nothing forgotten */
    assert_true(ok.let_in);
    assert_false(ok.hot);
    guard_verdict_t sixth = wrong(g, &a, T0);
    assert_int_equal(sixth.failures, 6);
    assert_int_equal(sixth.hold_ns, 50 * MS);
    assert_false(sixth.hot);
    guard_verdict_t refused = right(g, &a, T0);
    assert_false(refused.let_in);
    assert_true(refused.hot);
    assert_int_equal(refused.failures, 7);
    assert_int_equal(refused.hold_ns, 150 * MS);
    assert_int_equal(guard_live(g, T0), 1);
    guard_free(g);
}

/* While hot, a right secret gets exactly the verdict a wrong one would: two tables fed the same
 * history, then one a right secret and the other a wrong one, at every step. */
static void test_no_oracle(void **unused)
{
    (void)unused;
    guard_t *g1 = guard_create(4), *g2 = guard_create(4);
    netaddr_t a = ip("192.0.2.99");
    for (int i = 0; i < 6; i++) {
        assert_same_verdict(wrong(g1, &a, T0), wrong(g2, &a, T0));
    }
    int64_t t = T0;
    for (int i = 0; i < 40; i++) {
        t += (i % 7) * 300 * MS;
        guard_verdict_t r = right(g1, &a, t), w = wrong(g2, &a, t);
        assert_false(r.let_in);
        assert_true(r.hot);
        assert_same_verdict(r, w);
    }
    guard_free(g1);
    guard_free(g2);
}

/* A hot address cools exactly a window after its last attempt, which retry_ns tells from when
 * the reply leaves; an attempt before then (refused, counted) starts the window again. */
static void test_cooling(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(5);
    netaddr_t a = ip("198.51.100.200");
    guard_verdict_t v = {0};
    for (int i = 0; i < 8; i++) {
        v = wrong(g, &a, T0);
    }
    assert_true(v.hot);
    int64_t cool = T0 + v.hold_ns + v.retry_ns; /* = T0 + GUARD_WINDOW_NS */
    assert_int_equal(cool, T0 + GUARD_WINDOW_NS);
    guard_verdict_t still = right(g, &a, cool);
    assert_false(still.let_in);
    assert_true(still.hot);
    /* that attempt counted: the window now ends a window after it */
    assert_false(right(g, &a, cool + GUARD_WINDOW_NS).let_in);
    int64_t after = cool + 2 * GUARD_WINDOW_NS + 1;
    guard_verdict_t in = right(g, &a, after);
    assert_true(in.let_in);
    /* and the count starts over: five free failures again */
    for (uint32_t i = 1; i <= 5; i++) {
        guard_verdict_t f = wrong(g, &a, after);
        assert_int_equal(f.failures, i);
        assert_int_equal(f.hold_ns, 0);
    }
    guard_free(g);
}

/* IPv6 by /64: the addresses of one host's prefix share a count; another /64 does not. */
static void test_ipv6_prefix(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(6);
    char text[64];
    for (int i = 1; i <= 6; i++) {
        snprintf(text, sizeof text, "2001:db8:1:2::%x", i * 977);
        netaddr_t a = ip(text);
        guard_verdict_t v = wrong(g, &a, T0);
        assert_int_equal(v.failures, (uint32_t)i);
    }
    netaddr_t same = ip("2001:db8:1:2:ffff::1");
    assert_false(right(g, &same, T0).let_in); /* the /64 is hot */
    netaddr_t other = ip("2001:db8:1:3::1");
    assert_true(right(g, &other, T0).let_in);
    assert_int_equal(wrong(g, &other, T0).failures, 1);
    /* an unknown peer (no address) is one address of its own */
    netaddr_t none = {0};
    assert_int_equal(wrong(g, &none, T0).failures, 1);
    assert_int_equal(wrong(g, &none, T0).failures, 2);
    guard_free(g);
}

/* More addresses than the table holds within a window: it never holds more than its size, the
 * newcomers share one entry (hot after its first six failures: then their right secrets are
 * refused too: the cap fails closed), and entries free again once their window has passed. */
static void test_bounded(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(7);
    size_t shared = 0, held_shared = 0;
    netaddr_t last_shared = {0};
    for (uint32_t i = 0; i < 3 * GUARD_ADDRESSES; i++) {
        netaddr_t a = {.family = 4,
                       .addr = {10, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i}};
        guard_verdict_t v = wrong(g, &a, T0);
        if (v.shared) {
            shared++;
            held_shared += v.hold_ns > 0 || v.drop;
            last_shared = a;
        }
        assert_true(v.hold_ns <= GUARD_QUEUE_MAX_NS);
    }
    size_t live = guard_live(g, T0);
    assert_true(live <= GUARD_ADDRESSES);
    assert_int_equal(live + shared, 3 * GUARD_ADDRESSES);
    assert_true(shared >= 2 * GUARD_ADDRESSES);
    assert_int_equal(held_shared, shared - GUARD_FREE_FAILURES);
    /* an address judged by the hot shared entry: its right secret is refused, counted there */
    guard_verdict_t v = right(g, &last_shared, T0);
    assert_true(v.shared);
    assert_true(v.hot);
    assert_false(v.let_in);
    /* an address of the table is judged by its own entry (one failure: not hot) */
    netaddr_t first = {.family = 4, .addr = {10, 0, 0, 0}};
    guard_verdict_t own = right(g, &first, T0);
    assert_false(own.shared);
    assert_true(own.let_in);
    /* a window later every entry is free for new addresses again, the shared one cool */
    int64_t later = T0 + GUARD_WINDOW_NS + 1;
    assert_int_equal(guard_live(g, later), 0);
    assert_true(right(g, &last_shared, later).let_in);
    netaddr_t fresh = ip("172.16.0.1");
    v = wrong(g, &fresh, later);
    assert_false(v.shared);
    assert_int_equal(v.failures, 1);
    guard_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_success_clears_nothing),
        cmocka_unit_test(test_no_oracle),
        cmocka_unit_test(test_cooling),
        cmocka_unit_test(test_ipv6_prefix),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
