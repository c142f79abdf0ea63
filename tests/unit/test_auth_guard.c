/*
 * test_auth_guard.c - failed secrets per address (server/auth_guard.h), with explicit times: the
 * first five answered at once, then held back 50, 100, 200, 400, 800 ms, 1 s ...; one address's
 * held replies spaced one after another (parallel connections gain nothing); a reply queued more
 * than 10 s out closes its connection; a success clears the address; the window forgets; IPv6
 * counted by /64; a full table counts newcomers in the shared entry rather than growing or letting
 * them through.
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

/* Failures at one instant, as a pipeline or parallel connections send them: (failures, hold). */
static void test_schedule(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(1);
    netaddr_t a = ip("192.0.2.7");
    static const struct {
        uint32_t failures;
        int64_t hold_ms; /* all at T0: each waits behind the ones before it */
        bool close;
    } rows[] = {
        {1, 0, false},     {2, 0, false},     {3, 0, false},     {4, 0, false},
        {5, 0, false},     {6, 50, false},    {7, 150, false},   {8, 350, false},
        {9, 750, false},   {10, 1550, false}, {11, 2550, false}, {12, 3550, false},
        {13, 4550, false}, {14, 5550, false}, {15, 6550, false}, {16, 7550, false},
        {17, 8550, false}, {18, 9550, false}, {19, 10550, true}, {20, 11550, true},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        guard_verdict_t v = guard_fail(g, &a, T0);
        assert_int_equal(v.failures, rows[i].failures);
        assert_int_equal(v.hold_ns, rows[i].hold_ms * MS);
        assert_int_equal(v.close, rows[i].close);
        assert_false(v.shared);
    }
    /* another address is not slowed by the first */
    netaddr_t b = ip("192.0.2.8");
    assert_int_equal(guard_fail(g, &b, T0).hold_ns, 0);
    guard_free(g);
}

/* Failures spread out in time: each held its own delay from when it came, once the queue of
 * earlier ones is gone. */
static void test_spread(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(2);
    netaddr_t a = ip("198.51.100.1");
    int64_t t = T0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(guard_fail(g, &a, t).hold_ns, 0);
        t += 100 * MS;
    }
    static const int64_t want_ms[] = {50, 100, 200, 400, 800, 1000, 1000};
    for (size_t i = 0; i < sizeof want_ms / sizeof want_ms[0]; i++) {
        t += 5000 * MS; /* long after the previous reply left */
        assert_int_equal(guard_fail(g, &a, t).hold_ns, want_ms[i] * MS);
    }
    /* a failure more than the window after the last starts over */
    t += GUARD_WINDOW_NS + 1;
    guard_verdict_t v = guard_fail(g, &a, t);
    assert_int_equal(v.failures, 1);
    assert_int_equal(v.hold_ns, 0);
    guard_free(g);
}

static void test_success_clears(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(3);
    netaddr_t a = ip("203.0.113.9");
    for (int i = 0; i < 7; i++) {
        guard_fail(g, &a, T0);
    }
    assert_int_equal(guard_live(g, T0), 1);
    guard_success(g, &a);
    assert_int_equal(guard_live(g, T0), 0);
    guard_verdict_t v = guard_fail(g, &a, T0);
    assert_int_equal(v.failures, 1);
    assert_int_equal(v.hold_ns, 0);
    /* a success of another address changes nothing */
    netaddr_t b = ip("203.0.113.10");
    guard_success(g, &b);
    assert_int_equal(guard_fail(g, &a, T0).failures, 2);
    guard_free(g);
}

/* IPv6 by /64: the addresses of one host's prefix share a count; another /64 does not. */
static void test_ipv6_prefix(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(4);
    char text[64];
    for (int i = 1; i <= 6; i++) {
        snprintf(text, sizeof text, "2001:db8:1:2::%x", i * 977);
        netaddr_t a = ip(text);
        guard_verdict_t v = guard_fail(g, &a, T0);
        assert_int_equal(v.failures, (uint32_t)i);
    }
    netaddr_t other = ip("2001:db8:1:3::1");
    assert_int_equal(guard_fail(g, &other, T0).failures, 1);
    /* an unknown peer (no address) is one address of its own */
    netaddr_t none = {0};
    assert_int_equal(guard_fail(g, &none, T0).failures, 1);
    assert_int_equal(guard_fail(g, &none, T0).failures, 2);
    guard_free(g);
}

/* More addresses than the table holds within a window: it never holds more than its size, the
 * newcomers share one entry (slowed after its first five failures), and entries free again once
 * their window has passed. */
static void test_bounded(void **unused)
{
    (void)unused;
    guard_t *g = guard_create(5);
    size_t shared = 0, held_shared = 0;
    for (uint32_t i = 0; i < 3 * GUARD_ADDRESSES; i++) {
        netaddr_t a = {.family = 4,
                       .addr = {10, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i}};
        guard_verdict_t v = guard_fail(g, &a, T0);
        shared += v.shared;
        held_shared += v.shared && v.hold_ns > 0;
        assert_true(v.hold_ns <= GUARD_DELAY_MAX_NS * (int64_t)v.failures);
    }
    size_t live = guard_live(g, T0);
    assert_true(live <= GUARD_ADDRESSES);
    assert_int_equal(live + shared, 3 * GUARD_ADDRESSES);
    assert_true(shared >= 2 * GUARD_ADDRESSES);
    assert_int_equal(held_shared, shared - GUARD_FREE_FAILURES);
    /* a window later every entry is free for new addresses again */
    int64_t later = T0 + GUARD_WINDOW_NS + 1;
    assert_int_equal(guard_live(g, later), 0);
    netaddr_t fresh = ip("172.16.0.1");
    guard_verdict_t v = guard_fail(g, &fresh, later);
    assert_false(v.shared);
    assert_int_equal(v.failures, 1);
    guard_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule),       cmocka_unit_test(test_spread),
        cmocka_unit_test(test_success_clears), cmocka_unit_test(test_ipv6_prefix),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
