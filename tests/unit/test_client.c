/*
 * test_client.c - libsluice-client's pure parts, no server: the over-limit cache with explicit
 * times (expiry, rounding, cost, bound and eviction order, hits), the backoff's bounds, caps
 * and distribution with fixed seeds, slc_retry_delay_ms(), the decision decoder over
 * hand-built hiredis replies (well-formed and malformed), the acquire's and the release's
 * decoders (the same checks, the hold id, "no such hold" as its own code), and the wire form of
 * the decision, settle and acquire commands.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "client/cache.h"
#include "client/common.h"
#include "proto/throttle_args.h"
#include "sluice/client.h"

#define MS INT64_C(1000000) /* ns */

/* ---- cache ----------------------------------------------------------------------------------- */

static slc_decision_t denial(int64_t limit, int64_t remaining, int64_t retry_ms, int64_t reset_ms)
{
    return (slc_decision_t){false, limit, remaining, retry_ms, reset_ms, false};
}

static bool lookup(cache_t *c, const char *rule, const char *key, int64_t cost, int64_t now_ns,
                   slc_decision_t *out)
{
    return cache_lookup(c, rule, strlen(rule), key, strlen(key), cost, now_ns, out);
}

static void remember(cache_t *c, const char *rule, const char *key, int64_t cost, slc_decision_t d,
                     int64_t now_ns)
{
    cache_remember(c, rule, strlen(rule), key, strlen(key), cost, &d, now_ns, cache_epoch(c));
}

static void test_cache_hit_reduces_times(void **unused)
{
    cache_t *c = cache_create(16);
    assert_non_null(c);
    remember(c, "api", "u1", 1, denial(10, 0, 1000, 3000), 5000 * MS);
    slc_decision_t d;
    assert_true(lookup(c, "api", "u1", 1, 5000 * MS, &d));
    assert_false(d.allowed);
    assert_true(d.from_cache);
    assert_int_equal(d.limit, 10);
    assert_int_equal(d.remaining, 0);
    assert_int_equal(d.retry_after_ms, 1000);
    assert_int_equal(d.reset_after_ms, 3000);
    /* 250.5 ms later: 749.5 ms left, reported rounded up */
    assert_true(lookup(c, "api", "u1", 1, 5000 * MS + 250 * MS + MS / 2, &d));
    assert_int_equal(d.retry_after_ms, 750);
    assert_int_equal(d.reset_after_ms, 2750);
    /* 1 ns before expiry: still denied, 1 ms */
    assert_true(lookup(c, "api", "u1", 1, 6000 * MS - 1, &d));
    assert_int_equal(d.retry_after_ms, 1);
    assert_int_equal(cache_hits(c), 3);
    cache_free(c);
}

static void test_cache_expiry(void **unused)
{
    cache_t *c = cache_create(16);
    remember(c, "api", "u1", 1, denial(10, 0, 1000, 1000), 0);
    assert_int_equal(cache_count(c), 1);
    slc_decision_t d = {.limit = -7};
    assert_false(lookup(c, "api", "u1", 1, 1000 * MS, &d)); /* exactly at the retry time */
    assert_int_equal(d.limit, -7);                          /* untouched on a miss */
    assert_int_equal(cache_count(c), 0);                    /* dropped on the way */
    assert_int_equal(cache_hits(c), 0);
    cache_free(c);
}

static void test_cache_only_denials_with_a_retry_time(void **unused)
{
    cache_t *c = cache_create(16);
    slc_decision_t allowed = {true, 10, 9, 0, 100, false};
    slc_decision_t delayed = {true, 10, 0, 300, 100, false}; /* max_delay admission */
    remember(c, "api", "a", 1, allowed, 0);
    remember(c, "api", "b", 1, delayed, 0);
    remember(c, "api", "never", 20, denial(10, 10, -1, 0), 0);
    remember(c, "api", "zero", 1, denial(10, 0, 0, 0), 0);
    assert_int_equal(cache_count(c), 0);
    slc_decision_t d;
    assert_false(lookup(c, "api", "never", 20, 0, &d));
    cache_free(c);
}

static void test_cache_cost(void **unused)
{
    cache_t *c = cache_create(16);
    remember(c, "api", "u1", 3, denial(10, 2, 500, 800), 0);
    slc_decision_t d;
    assert_false(lookup(c, "api", "u1", 2, MS, &d)); /* smaller: may fit, ask the server */
    assert_false(lookup(c, "api", "u1", 0, MS, &d)); /* a peek */
    assert_true(lookup(c, "api", "u1", 3, MS, &d));
    assert_int_equal(d.remaining, 2);
    assert_false(lookup(c, "api", "u1", 9, MS, &d)); /* larger: refused until later, ask */
    assert_int_equal(cache_count(c), 1);             /* another cost does not drop the entry */
    assert_int_equal(cache_hits(c), 1);
    cache_free(c);
}

static void test_cache_names_are_exact(void **unused)
{
    cache_t *c = cache_create(64);
    remember(c, "ab", "c", 1, denial(1, 0, 100, 100), 0);
    slc_decision_t d;
    assert_false(lookup(c, "a", "bc", 1, 0, &d));
    assert_false(lookup(c, "ab", "C", 1, 0, &d));
    assert_false(lookup(c, "ab", "", 1, 0, &d));
    assert_false(lookup(c, "other", "c", 1, 0, &d));
    assert_true(lookup(c, "ab", "c", 1, 0, &d));
    /* keys with NUL bytes and high bytes are compared by length */
    const char key[] = {'k', 0, (char)0xff};
    slc_decision_t den = denial(1, 0, 100, 100);
    cache_remember(c, "r", 1, key, 3, 1, &den, 0, cache_epoch(c));
    assert_false(cache_lookup(c, "r", 1, key, 1, 1, 0, &d));
    assert_true(cache_lookup(c, "r", 1, key, 3, 1, 0, &d));
    cache_free(c);
}

static void test_cache_replace_and_forget(void **unused)
{
    cache_t *c = cache_create(16);
    remember(c, "api", "u1", 5, denial(10, 0, 100, 100), 0);
    remember(c, "api", "u1", 1, denial(10, 0, 900, 900), 50 * MS);
    assert_int_equal(cache_count(c), 1);
    slc_decision_t d;
    assert_true(lookup(c, "api", "u1", 1, 200 * MS, &d)); /* the newer entry: cost 1, 950 ms */
    assert_int_equal(d.retry_after_ms, 750);
    cache_forget(c, "api", 3, "u1", 2);
    assert_int_equal(cache_count(c), 0);
    assert_false(lookup(c, "api", "u1", 1, 200 * MS, &d));
    cache_forget(c, "api", 3, "u1", 2); /* absent: no-op */
    cache_free(c);
}

/* The latest refused cost is kept with the server's report; any admission drops it (the key's
 * usage moved: the refused cost fits later than the server said, or room came back). */
static void test_cache_latest_report(void **unused)
{
    cache_t *c = cache_create(16);
    remember(c, "api", "u1", 8, denial(10, 5, 3000, 5000), 0);
    slc_decision_t d;
    assert_true(lookup(c, "api", "u1", 8, 20 * MS, &d));
    assert_int_equal(d.remaining, 5);
    assert_int_equal(d.retry_after_ms, 2980);
    assert_int_equal(d.reset_after_ms, 4980);
    remember(c, "api", "u1", 9, denial(10, 3, 4000, 7000), 30 * MS); /* the latest: 9 */
    assert_false(lookup(c, "api", "u1", 8, 40 * MS, &d));
    assert_true(lookup(c, "api", "u1", 9, 40 * MS, &d));
    assert_int_equal(d.remaining, 3);
    assert_int_equal(d.retry_after_ms, 3990);
    remember(c, "api", "u1", 1, (slc_decision_t){true, 10, 2, 0, 7990, false}, 50 * MS);
    assert_int_equal(cache_count(c), 0); /* 9 now fits later than the server said */
    assert_false(lookup(c, "api", "u1", 9, 60 * MS, &d));
    cache_free(c);
}

/* An answer to a request asked before a forget or a clear is not remembered: with the async
 * client a reset can overtake a denial on its way. */
static void test_cache_epoch(void **unused)
{
    cache_t *c = cache_create(16);
    slc_decision_t den = denial(10, 0, 1000, 1000);
    uint64_t asked = cache_epoch(c);
    cache_forget(c, "api", 3, "u1", 2);
    cache_remember(c, "api", 3, "u1", 2, 1, &den, 0, asked);
    assert_int_equal(cache_count(c), 0);
    asked = cache_epoch(c);
    cache_clear(c);
    cache_remember(c, "api", 3, "u1", 2, 1, &den, 0, asked);
    assert_int_equal(cache_count(c), 0);
    asked = cache_epoch(c);
    assert_true(cache_resize(&c, 8));
    cache_remember(c, "api", 3, "u1", 2, 1, &den, 0, asked);
    assert_int_equal(cache_count(c), 0);
    cache_remember(c, "api", 3, "u1", 2, 1, &den, 0, cache_epoch(c));
    assert_int_equal(cache_count(c), 1);
    cache_free(c);
}

/* With at most CACHE_PROBE entries every key may use every slot: a full cache drops the entry
 * that expires first, whatever the insertion order. */
static void test_cache_bound_drops_earliest_expiry(void **unused)
{
    cache_t *c = cache_create(4);
    remember(c, "r", "A", 1, denial(1, 0, 500, 500), 0);
    remember(c, "r", "B", 1, denial(1, 0, 100, 100), 0);
    remember(c, "r", "C", 1, denial(1, 0, 900, 900), 0);
    remember(c, "r", "D", 1, denial(1, 0, 300, 300), 0);
    assert_int_equal(cache_count(c), 4);
    remember(c, "r", "E", 1, denial(1, 0, 700, 700), 0);
    assert_int_equal(cache_count(c), 4);
    slc_decision_t d;
    assert_false(lookup(c, "r", "B", 1, 0, &d));
    assert_true(lookup(c, "r", "A", 1, 0, &d));
    assert_true(lookup(c, "r", "C", 1, 0, &d));
    assert_true(lookup(c, "r", "D", 1, 0, &d));
    assert_true(lookup(c, "r", "E", 1, 0, &d));
    remember(c, "r", "F", 1, denial(1, 0, 1000, 1000), 0);
    assert_false(lookup(c, "r", "D", 1, 0, &d));
    /* an expired entry is reused before any live one is dropped */
    remember(c, "r", "G", 1, denial(1, 0, 2000, 2000), 600 * MS); /* A (500) has expired */
    assert_true(lookup(c, "r", "C", 1, 600 * MS, &d));
    assert_true(lookup(c, "r", "E", 1, 600 * MS, &d));
    assert_true(lookup(c, "r", "F", 1, 600 * MS, &d));
    assert_true(lookup(c, "r", "G", 1, 600 * MS, &d));
    assert_int_equal(cache_count(c), 4);
    cache_free(c);
}

static void test_cache_bound_large(void **unused)
{
    cache_t *c = cache_create(64);
    char key[32];
    slc_decision_t d;
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "user:%d", i);
        remember(c, "api", key, 1, denial(5, 0, 1000 + i, 2000), 0);
        assert_true(cache_count(c) <= 64);
        assert_true(lookup(c, "api", key, 1, 0, &d)); /* the newest is always there */
    }
    size_t found = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "user:%d", i);
        found += lookup(c, "api", key, 1, 0, &d);
    }
    assert_int_equal(found, cache_count(c));
    assert_true(found > 32); /* the table is used, not one probe window of it */
    cache_free(c);
}

static void test_cache_zero_and_limits(void **unused)
{
    cache_t *c = cache_create(0);
    assert_non_null(c);
    remember(c, "api", "u1", 1, denial(1, 0, 100, 100), 0);
    slc_decision_t d;
    assert_false(lookup(c, "api", "u1", 1, 0, &d));
    cache_forget(c, "api", 3, "u1", 2);
    cache_free(c);
    assert_null(cache_create((size_t)SLC_CACHE_MAX + 1));
    cache_free(NULL);
}

static void test_cache_huge_retry_saturates(void **unused)
{
    cache_t *c = cache_create(8);
    int64_t now = INT64_C(4000000000000000000);
    remember(c, "api", "u1", 1, denial(1, 0, INT64_MAX, INT64_MAX), now);
    slc_decision_t d;
    assert_true(lookup(c, "api", "u1", 1, now + 5 * MS, &d));
    assert_true(d.retry_after_ms > INT64_C(5000000000000)); /* ~(INT64_MAX - now) / 1 ms */
    assert_true(d.reset_after_ms >= d.retry_after_ms);
    cache_free(c);
}

static void test_cache_resize_keeps_hits(void **unused)
{
    cache_t *c = cache_create(8);
    remember(c, "api", "u1", 1, denial(1, 0, 100, 100), 0);
    slc_decision_t d;
    assert_true(lookup(c, "api", "u1", 1, 0, &d));
    assert_true(cache_resize(&c, 32));
    assert_int_equal(cache_hits(c), 1);
    assert_int_equal(cache_count(c), 0);
    assert_false(cache_resize(&c, (size_t)SLC_CACHE_MAX + 1));
    assert_int_equal(cache_hits(c), 1); /* unchanged on failure */
    remember(c, "api", "u1", 1, denial(1, 0, 100, 100), 0);
    cache_clear(c);
    assert_int_equal(cache_count(c), 0);
    cache_free(c);
}

/* ---- backoff --------------------------------------------------------------------------------- */

static void test_backoff_bounds_and_spread(void **unused)
{
    uint64_t rng = 42;
    for (int attempt = 0; attempt <= 12; attempt++) {
        int64_t ceiling = 100 << attempt;
        if (ceiling > 30000)
            ceiling = 30000;
        int64_t lo = INT64_MAX, hi = -1, sum = 0;
        const int draws = 4000;
        for (int i = 0; i < draws; i++) {
            int64_t v = slc_backoff_ms(attempt, 100, 30000, &rng);
            assert_true(v >= 0 && v <= ceiling);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
        }
        /* full jitter: the whole range is used and the mean is near the middle */
        assert_true(lo <= ceiling / 50);
        assert_true(hi >= ceiling - ceiling / 50);
        int64_t mean = sum / draws;
        assert_true(mean > ceiling * 45 / 100 && mean < ceiling * 55 / 100);
    }
}

static void test_backoff_small_range_uniform(void **unused)
{
    uint64_t rng = 7;
    int counts[4] = {0};
    for (int i = 0; i < 8000; i++) {
        int64_t v = slc_backoff_ms(0, 3, 100, &rng);
        assert_true(v >= 0 && v <= 3);
        counts[v]++;
    }
    for (int i = 0; i < 4; i++)
        assert_true(counts[i] > 1700 && counts[i] < 2300); /* expected 2000 each */
}

static void test_backoff_caps_and_overflow(void **unused)
{
    uint64_t rng = 1;
    const int attempts[] = {31, 32, 62, 63, 64, 100, 1000, 2147483647};
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        for (int j = 0; j < 200; j++) {
            int64_t v = slc_backoff_ms(attempts[i], 1000, 60000, &rng);
            assert_true(v >= 0 && v <= 60000);
        }
    }
    int64_t hi = 0;
    for (int j = 0; j < 200; j++) {
        int64_t v = slc_backoff_ms(62, INT64_MAX, INT64_MAX, &rng);
        assert_true(v >= 0);
        hi = v > hi ? v : hi;
    }
    assert_true(hi > INT64_MAX / 2); /* the cap is reachable, not truncated */
    /* degenerate inputs */
    assert_int_equal(slc_backoff_ms(5, 0, 1000, &rng), 0);
    assert_int_equal(slc_backoff_ms(5, 100, 0, &rng), 0);
    assert_int_equal(slc_backoff_ms(5, -100, 1000, &rng), 0);
    assert_int_equal(slc_backoff_ms(5, 100, -1, &rng), 0);
    for (int j = 0; j < 100; j++)
        assert_true(slc_backoff_ms(-3, 10, 1000, &rng) <= 10); /* attempt < 0 counts as 0 */
}

static void test_backoff_seeded(void **unused)
{
    uint64_t a = 12345, b = 12345, c = 54321;
    int same = 0, differ = 0;
    for (int i = 0; i < 50; i++) {
        int64_t x = slc_backoff_ms(10, 1, 1 << 20, &a);
        int64_t y = slc_backoff_ms(10, 1, 1 << 20, &b);
        int64_t z = slc_backoff_ms(10, 1, 1 << 20, &c);
        same += x == y;
        differ += x != z;
    }
    assert_int_equal(same, 50);
    assert_true(differ >= 45);
    assert_int_not_equal(a, 12345); /* the state advances */
    uint64_t zero = 0;              /* 0 is a valid seed */
    int nonzero = 0;
    for (int i = 0; i < 20; i++)
        nonzero += slc_backoff_ms(10, 1, 1 << 20, &zero) != 0;
    assert_true(nonzero > 15);
}

static void test_retry_delay_prefers_server(void **unused)
{
    uint64_t rng = 9;
    slc_decision_t denied = denial(10, 0, 1234, 5000);
    assert_int_equal(slc_retry_delay_ms(&denied, 0, 100, 1000, &rng), 1234); /* above the cap */
    assert_int_equal(slc_retry_delay_ms(&denied, 40, 100, 1000, &rng), 1234);
    slc_decision_t never = denial(10, 10, -1, 0);
    assert_int_equal(slc_retry_delay_ms(&never, 0, 100, 1000, &rng), -1);
    slc_decision_t delayed = {true, 10, 0, 50, 100, false};
    assert_int_equal(slc_retry_delay_ms(&delayed, 3, 100, 1000, &rng), 50);
    slc_decision_t allowed = {true, 10, 5, 0, 100, false};
    assert_int_equal(slc_retry_delay_ms(&allowed, 3, 100, 1000, &rng), 0);
    slc_decision_t unknown = denial(10, 0, 0, 0); /* no retry time: back off */
    for (int i = 0; i < 100; i++) {
        int64_t v = slc_retry_delay_ms(NULL, 2, 100, 1000, &rng);
        assert_true(v >= 0 && v <= 400);
        v = slc_retry_delay_ms(&unknown, 5, 100, 1000, &rng);
        assert_true(v >= 0 && v <= 1000);
    }
}

/* ---- reply decoding -------------------------------------------------------------------------- */

typedef struct built {
    redisReply top;
    redisReply items[8];
    redisReply *ptrs[8];
} built_t;

/* An array reply of n integers. */
static redisReply *ints(built_t *b, size_t n, const long long *v)
{
    memset(b, 0, sizeof *b);
    b->top.type = REDIS_REPLY_ARRAY;
    b->top.elements = n;
    b->top.element = b->ptrs;
    for (size_t i = 0; i < n; i++) {
        b->items[i].type = REDIS_REPLY_INTEGER;
        b->items[i].integer = v[i];
        b->ptrs[i] = &b->items[i];
    }
    return &b->top;
}

static int decode(const redisReply *r, slc_decision_t *d, char *err)
{
    return slc_decision_from_reply(r, d, err, 128);
}

static void test_decode_well_formed(void **unused)
{
    built_t b;
    slc_decision_t d;
    char err[128];
    const long long allowed[] = {1, 100, 99, 0, 10};
    assert_int_equal(decode(ints(&b, 5, allowed), &d, err), SLC_OK);
    assert_true(d.allowed);
    assert_int_equal(d.limit, 100);
    assert_int_equal(d.remaining, 99);
    assert_int_equal(d.retry_after_ms, 0);
    assert_int_equal(d.reset_after_ms, 10);
    assert_false(d.from_cache);
    const long long denied[] = {0, 5, 0, 1500, 60000};
    assert_int_equal(decode(ints(&b, 5, denied), &d, err), SLC_OK);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_ms, 1500);
    assert_int_equal(d.reset_after_ms, 60000);
    const long long never[] = {0, 5, 5, -1, 0};
    assert_int_equal(decode(ints(&b, 5, never), &d, err), SLC_OK);
    assert_int_equal(d.retry_after_ms, -1);
    const long long delayed[] = {1, 2, 0, 250, 1000};
    assert_int_equal(decode(ints(&b, 5, delayed), &d, err), SLC_OK);
    assert_true(d.allowed);
    assert_int_equal(d.retry_after_ms, 250);
}

static void expect_protocol(const redisReply *r, const char *reason)
{
    slc_decision_t d = {.limit = 4242};
    char err[128] = "";
    assert_int_equal(decode(r, &d, err), SLC_EPROTOCOL);
    assert_int_equal(d.limit, 4242); /* untouched */
    if (strstr(err, reason) == NULL)
        fail_msg("error '%s' does not contain '%s'", err, reason);
}

static void test_decode_malformed(void **unused)
{
    built_t b;
    const long long ok[] = {1, 100, 99, 0, 10, 0};
    expect_protocol(ints(&b, 4, ok), "expected 5 elements, got 4");
    expect_protocol(ints(&b, 6, ok), "expected 5 elements, got 6");
    expect_protocol(ints(&b, 0, ok), "expected 5 elements, got 0");
    const long long two[] = {2, 100, 99, 0, 10};
    expect_protocol(ints(&b, 5, two), "allowed must be 0 or 1, got 2");
    const long long neg_limit[] = {1, -1, 0, 0, 0};
    expect_protocol(ints(&b, 5, neg_limit), "limit must be >= 0, got -1");
    const long long neg_remaining[] = {0, 1, -3, 10, 10};
    expect_protocol(ints(&b, 5, neg_remaining), "remaining must be >= 0, got -3");
    const long long allowed_never[] = {1, 1, 0, -1, 10};
    expect_protocol(ints(&b, 5, allowed_never), "retry_after_ms must be >= 0, got -1");
    const long long minus_two[] = {0, 1, 0, -2, 10};
    expect_protocol(ints(&b, 5, minus_two), "retry_after_ms must be >= -1, got -2");
    const long long neg_reset[] = {0, 1, 0, 5, -5};
    expect_protocol(ints(&b, 5, neg_reset), "reset_after_ms must be >= 0");

    ints(&b, 5, ok);
    b.items[2].type = REDIS_REPLY_STRING;
    b.items[2].str = "99";
    b.items[2].len = 2;
    expect_protocol(&b.top, "remaining must be an integer, got a bulk string");
    ints(&b, 5, ok);
    b.items[0].type = REDIS_REPLY_NIL;
    expect_protocol(&b.top, "allowed must be an integer, got nil");
    ints(&b, 5, ok);
    b.items[4].type = REDIS_REPLY_ARRAY;
    expect_protocol(&b.top, "reset_after_ms must be an integer, got an array");
    ints(&b, 5, ok);
    b.ptrs[3] = NULL;
    expect_protocol(&b.top, "retry_after_ms must be an integer, got nothing");

    redisReply nil = {.type = REDIS_REPLY_NIL};
    expect_protocol(&nil, "expected an array of 5 integers, got nil");
    redisReply status = {.type = REDIS_REPLY_STATUS, .str = "OK", .len = 2};
    expect_protocol(&status, "got a status");
    redisReply integer = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    expect_protocol(&integer, "got an integer");
    redisReply bogus = {.type = 99};
    expect_protocol(&bogus, "got an unknown type");
}

static void test_decode_error_reply(void **unused)
{
    char text[] = "ERR unknown rule 'x'";
    redisReply r = {.type = REDIS_REPLY_ERROR, .str = text, .len = strlen(text)};
    slc_decision_t d = {.limit = 1};
    char err[128];
    assert_int_equal(decode(&r, &d, err), SLC_ESERVER);
    assert_string_equal(err, "ERR unknown rule 'x'");
    assert_int_equal(d.limit, 1);
    /* a short err buffer truncates, NUL-terminated; NULL err is allowed */
    char small[8];
    assert_int_equal(slc_decision_from_reply(&r, &d, small, sizeof small), SLC_ESERVER);
    assert_string_equal(small, "ERR unk");
    assert_int_equal(slc_decision_from_reply(&r, &d, NULL, 0), SLC_ESERVER);
    assert_int_equal(slc_decision_from_reply(NULL, &d, NULL, 0), SLC_EINVAL);
    assert_int_equal(slc_decision_from_reply(&r, NULL, NULL, 0), SLC_EINVAL);
}

/* ---- the acquire's and the release's replies ------------------------------------------------ */

static int decode_acquire(const redisReply *r, slc_decision_t *d, uint64_t *id, char *err)
{
    return slc_acquire_from_reply(r, d, id, err, 128);
}

static void test_decode_acquire_well_formed(void **unused)
{
    built_t b;
    slc_decision_t d;
    uint64_t id = 77;
    char err[128];
    const long long held[] = {1, 3, 2, 0, 3600000, 281474976710654LL}; /* 2^48 - 2 */
    assert_int_equal(decode_acquire(ints(&b, 6, held), &d, &id, err), SLC_OK);
    assert_true(d.allowed);
    assert_int_equal(d.limit, 3);
    assert_int_equal(d.remaining, 2);
    assert_int_equal(d.retry_after_ms, 0);
    assert_int_equal(d.reset_after_ms, 3600000);
    assert_false(d.from_cache);
    assert_true(id == 281474976710654ULL);
    const long long refused[] = {0, 3, 0, 1200, 3600000, 0};
    assert_int_equal(decode_acquire(ints(&b, 6, refused), &d, &id, err), SLC_OK);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_ms, 1200);
    assert_true(id == 0);
    const long long never[] = {0, 3, 3, -1, 0, 0};
    assert_int_equal(decode_acquire(ints(&b, 6, never), &d, &id, err), SLC_OK);
    assert_int_equal(d.retry_after_ms, -1);
    /* admitted without a hold: cost 0, or a shadow rule letting a refusal through */
    const long long shadow[] = {1, 1, 0, 0, 10, 0};
    id = 5;
    assert_int_equal(decode_acquire(ints(&b, 6, shadow), &d, &id, err), SLC_OK);
    assert_true(d.allowed && id == 0);
}

static void expect_acquire_protocol(const redisReply *r, const char *reason)
{
    slc_decision_t d = {.limit = 4242};
    uint64_t id = 4242;
    char err[128] = "";
    assert_int_equal(decode_acquire(r, &d, &id, err), SLC_EPROTOCOL);
    assert_int_equal(d.limit, 4242); /* untouched */
    assert_true(id == 4242);
    if (strstr(err, reason) == NULL)
        fail_msg("error '%s' does not contain '%s'", err, reason);
}

/* The acquire's reply is checked by the decision's own code: every fault of a decision is one
 * of an acquire's too, named "acquire", and the hold id is checked on top. */
static void test_decode_acquire_malformed(void **unused)
{
    built_t b;
    const long long ok[] = {1, 3, 2, 0, 10, 9, 9};
    expect_acquire_protocol(ints(&b, 5, ok), "acquire: expected 6 elements, got 5");
    expect_acquire_protocol(ints(&b, 7, ok), "acquire: expected 6 elements, got 7");
    const long long two[] = {2, 3, 2, 0, 10, 9};
    expect_acquire_protocol(ints(&b, 6, two), "acquire: allowed must be 0 or 1, got 2");
    const long long neg_remaining[] = {1, 3, -1, 0, 10, 9};
    expect_acquire_protocol(ints(&b, 6, neg_remaining), "acquire: remaining must be >= 0, got -1");
    const long long allowed_never[] = {1, 3, 0, -1, 10, 9};
    expect_acquire_protocol(ints(&b, 6, allowed_never), "retry_after_ms must be >= 0, got -1");
    const long long neg_id[] = {1, 3, 2, 0, 10, -1};
    expect_acquire_protocol(ints(&b, 6, neg_id), "acquire: hold_id must be >= 0, got -1");
    const long long refused_with_id[] = {0, 3, 0, 100, 10, 9};
    expect_acquire_protocol(ints(&b, 6, refused_with_id),
                            "acquire: a refusal holds nothing, hold_id must be 0, got 9");
    ints(&b, 6, ok);
    b.items[5].type = REDIS_REPLY_STRING;
    b.items[5].str = "9";
    b.items[5].len = 1;
    expect_acquire_protocol(&b.top, "acquire: hold_id must be an integer, got a bulk string");
    ints(&b, 6, ok);
    b.ptrs[5] = NULL;
    expect_acquire_protocol(&b.top, "hold_id must be an integer, got nothing");
    redisReply nil = {.type = REDIS_REPLY_NIL};
    expect_acquire_protocol(&nil, "acquire: expected an array of 6 integers, got nil");
    /* a decision's reply is not an acquire's, nor the other way round */
    slc_decision_t d;
    char err[128];
    assert_int_equal(decode(ints(&b, 6, ok), &d, err), SLC_EPROTOCOL);
    assert_string_equal(err, "decision: expected 5 elements, got 6");
}

static void test_decode_acquire_error_reply(void **unused)
{
    char text[] = "ERR rule 'api' holds nothing to acquire or release";
    redisReply r = {.type = REDIS_REPLY_ERROR, .str = text, .len = strlen(text)};
    slc_decision_t d = {.limit = 1};
    uint64_t id = 3;
    char err[128];
    assert_int_equal(decode_acquire(&r, &d, &id, err), SLC_ESERVER);
    assert_string_equal(err, text);
    assert_true(d.limit == 1 && id == 3);
    built_t b;
    const long long ok[] = {1, 3, 2, 0, 10, 9};
    assert_int_equal(slc_acquire_from_reply(NULL, &d, &id, NULL, 0), SLC_EINVAL);
    assert_int_equal(slc_acquire_from_reply(ints(&b, 6, ok), NULL, &id, NULL, 0), SLC_EINVAL);
    assert_int_equal(slc_acquire_from_reply(ints(&b, 6, ok), &d, NULL, NULL, 0), SLC_EINVAL);
    assert_true(d.limit == 1 && id == 3);
}

static void test_decode_release(void **unused)
{
    char err[128] = "stale";
    redisReply ok = {.type = REDIS_REPLY_STATUS, .str = "OK", .len = 2};
    assert_int_equal(slc_release_from_reply(&ok, err, sizeof err), SLC_OK);
    assert_string_equal(err, "");
    /* the text every server writes (sluiced, sluice.so, the Lua scripts share it) */
    char no_hold[] = "ERR " THROTTLE_NO_HOLD;
    redisReply gone = {.type = REDIS_REPLY_ERROR, .str = no_hold, .len = strlen(no_hold)};
    assert_int_equal(slc_release_from_reply(&gone, err, sizeof err), SLC_ENOHOLD);
    assert_string_equal(err, no_hold);
    assert_true(common_is_no_hold(no_hold, strlen(no_hold)));
    char other[] = "ERR unknown rule 'x'";
    redisReply unknown = {.type = REDIS_REPLY_ERROR, .str = other, .len = strlen(other)};
    assert_int_equal(slc_release_from_reply(&unknown, err, sizeof err), SLC_ESERVER);
    assert_string_equal(err, other);
    /* a prefix cut short, or the words elsewhere, is another error */
    char cut[] = "ERR no such hol";
    redisReply short_text = {.type = REDIS_REPLY_ERROR, .str = cut, .len = strlen(cut)};
    assert_int_equal(slc_release_from_reply(&short_text, err, sizeof err), SLC_ESERVER);
    char inside[] = "ERR rule 'no such hold:'";
    redisReply quoted = {.type = REDIS_REPLY_ERROR, .str = inside, .len = strlen(inside)};
    assert_int_equal(slc_release_from_reply(&quoted, err, sizeof err), SLC_ESERVER);
    redisReply queued = {.type = REDIS_REPLY_STATUS, .str = "QUEUED", .len = 6};
    assert_int_equal(slc_release_from_reply(&queued, err, sizeof err), SLC_EPROTOCOL);
    assert_string_equal(err, "release: expected the status OK, got another status");
    redisReply one = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    assert_int_equal(slc_release_from_reply(&one, err, sizeof err), SLC_EPROTOCOL);
    assert_string_equal(err, "release: expected the status OK, got an integer");
    redisReply nil = {.type = REDIS_REPLY_NIL};
    assert_int_equal(slc_release_from_reply(&nil, NULL, 0), SLC_EPROTOCOL);
    assert_int_equal(slc_release_from_reply(NULL, NULL, 0), SLC_EINVAL);
}

/* ---- the commands on the wire ---------------------------------------------------------------- */

/* argv[0..argc) joined by '|', each length checked */
static void expect_joined(int argc, const char **argv, const size_t *lens, const char *want)
{
    assert_true(argc <= COMMON_ARGV_MAX);
    char joined[256] = "";
    for (int i = 0; i < argc; i++) {
        assert_int_equal(lens[i], strlen(argv[i]));
        strcat(joined, i ? "|" : "");
        strcat(joined, argv[i]);
    }
    assert_string_equal(joined, want);
}

static void expect_argv_p(const char *rule, const char *key, int64_t cost, int peek,
                          const char *priority, const char *want)
{
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char buf[COMMON_INT_CHARS];
    int argc = common_decision_argv(rule, key, cost, peek, priority, argv, lens, buf);
    expect_joined(argc, argv, lens, want);
}

static void expect_argv(const char *rule, const char *key, int64_t cost, int peek, const char *want)
{
    expect_argv_p(rule, key, cost, peek, NULL, want);
}

static void expect_settle_argv(int64_t reserved, int64_t actual, int64_t at_ms, const char *want)
{
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[3][COMMON_INT_CHARS];
    int argc = common_settle_argv("tok", "u 42", reserved, actual, at_ms, argv, lens, nums);
    expect_joined(argc, argv, lens, want);
}

static void test_decision_argv(void **unused)
{
    expect_argv("api", "u1", 1, 0, "SL.ALLOW|api|u1");
    expect_argv("api", "u1", 5, 0, "SL.ALLOW|api|u1|COST|5");
    expect_argv("api", "u1", 0, 0, "SL.ALLOW|api|u1|COST|0");
    expect_argv("api", "u1", INT64_MAX, 0, "SL.ALLOW|api|u1|COST|9223372036854775807");
    expect_argv("api", "u 1", 0, 1, "SL.PEEK|api|u 1");
    expect_argv("api", "u1", 7, 1, "SL.PEEK|api|u1");
    expect_argv_p("api", "u1", 1, 0, "high", "SL.ALLOW|api|u1|PRIORITY|high");
    expect_argv_p("api", "u1", 5, 0, "low", "SL.ALLOW|api|u1|COST|5|PRIORITY|low");
    expect_argv_p("api", "u1", 5, 1, "critical", "SL.PEEK|api|u1|PRIORITY|critical");
    slc_request_opts_t none = {0}, high = {.priority = "high"};
    assert_null(common_priority(NULL));
    assert_null(common_priority(&none));
    assert_string_equal(common_priority(&high), "high");
}

static void test_settle_argv(void **unused)
{
    expect_settle_argv(300, 120, -1, "SL.SETTLE|tok|u 42|300|120");
    expect_settle_argv(0, 0, 0, "SL.SETTLE|tok|u 42|0|0|AT|0");
    expect_settle_argv(100, 1100, 1700000000123, "SL.SETTLE|tok|u 42|100|1100|AT|1700000000123");
    expect_settle_argv(INT64_MAX, INT64_MAX, INT64_MAX,
                       "SL.SETTLE|tok|u 42|9223372036854775807|9223372036854775807|AT|"
                       "9223372036854775807");
}

static void expect_acquire_argv_p(int64_t cost, int64_t timeout_ms, const char *priority,
                                  const char *want)
{
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[2][COMMON_INT_CHARS];
    int argc = common_acquire_argv("jobs", "u 42", cost, timeout_ms, priority, argv, lens, nums);
    expect_joined(argc, argv, lens, want);
}

static void expect_acquire_argv(int64_t cost, int64_t timeout_ms, const char *want)
{
    expect_acquire_argv_p(cost, timeout_ms, NULL, want);
}

static void expect_release_argv(uint64_t id, const slc_release_opts_t *opts, const char *want)
{
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[2][COMMON_INT_CHARS];
    int argc = common_release_argv("jobs", "u 42", id, opts, argv, lens, nums);
    expect_joined(argc, argv, lens, want);
}

static void test_release_argv(void **unused)
{
    slc_release_opts_t none = {0}, lat = {.has_latency = true, .latency_us = 1500};
    slc_release_opts_t both = {.has_latency = true, .latency_us = 0, .dropped = true};
    slc_release_opts_t drop = {.dropped = true}, max = {true, SLC_LATENCY_MAX_US, false};
    expect_release_argv(7, NULL, "SL.RELEASE|jobs|u 42|7");
    expect_release_argv(7, &none, "SL.RELEASE|jobs|u 42|7");
    expect_release_argv(7, &lat, "SL.RELEASE|jobs|u 42|7|LATENCY|1500us");
    expect_release_argv(7, &both, "SL.RELEASE|jobs|u 42|7|LATENCY|0us|DROPPED");
    expect_release_argv((uint64_t)INT64_MAX, &drop,
                        "SL.RELEASE|jobs|u 42|9223372036854775807|DROPPED");
    expect_release_argv(1, &max, "SL.RELEASE|jobs|u 42|1|LATENCY|3600000000us");
    assert_null(common_release_invalid(1, &max));
    assert_null(common_release_invalid(1, &both));
    /* a latency not given is not checked */
    slc_release_opts_t unset = {.has_latency = false, .latency_us = -5};
    assert_null(common_release_invalid(1, &unset));
    slc_release_opts_t neg = {.has_latency = true, .latency_us = -1};
    slc_release_opts_t over = {.has_latency = true, .latency_us = SLC_LATENCY_MAX_US + 1};
    assert_string_equal(common_release_invalid(1, &neg), "latency_us must be 0 .. 3600000000 (1h)");
    assert_string_equal(common_release_invalid(1, &over),
                        "latency_us must be 0 .. 3600000000 (1h)");
    assert_string_equal(common_release_invalid((uint64_t)INT64_MAX + 1, &lat),
                        "hold_id must be below 2^63 (an id slc_acquire() gave)");
}

static void test_acquire_argv(void **unused)
{
    expect_acquire_argv(1, 0, "SL.ACQUIRE|jobs|u 42");
    expect_acquire_argv(3, 0, "SL.ACQUIRE|jobs|u 42|COST|3");
    expect_acquire_argv(0, 0, "SL.ACQUIRE|jobs|u 42|COST|0");
    expect_acquire_argv(1, 250, "SL.ACQUIRE|jobs|u 42|TIMEOUT|250");
    expect_acquire_argv(INT64_MAX, INT64_MAX,
                        "SL.ACQUIRE|jobs|u 42|COST|9223372036854775807|TIMEOUT|"
                        "9223372036854775807");
    expect_acquire_argv_p(1, 0, "high", "SL.ACQUIRE|jobs|u 42|PRIORITY|high");
    expect_acquire_argv_p(INT64_MAX, INT64_MAX, "critical",
                          "SL.ACQUIRE|jobs|u 42|COST|9223372036854775807|TIMEOUT|"
                          "9223372036854775807|PRIORITY|critical");
    assert_null(common_release_invalid(0, NULL));
    assert_null(common_release_invalid((uint64_t)INT64_MAX, NULL));
    assert_string_equal(common_release_invalid((uint64_t)INT64_MAX + 1, NULL),
                        "hold_id must be below 2^63 (an id slc_acquire() gave)");
    assert_null(common_acquire_invalid(0, 0));
    assert_null(common_acquire_invalid(INT64_MAX, INT64_MAX));
    assert_string_equal(common_acquire_invalid(-1, 0), "cost must be >= 0");
    assert_string_equal(common_acquire_invalid(1, -1),
                        "timeout_ms must be >= 1, or 0 for the rule's hold_timeout");
}

static void test_settle_invalid(void **unused)
{
    assert_null(common_settle_invalid(0, 0, -1));
    assert_null(common_settle_invalid(300, 120, 0));
    assert_null(common_settle_invalid(INT64_MAX, INT64_MAX, INT64_MAX));
    assert_string_equal(common_settle_invalid(-1, 0, -1), "reserved must be >= 0");
    assert_string_equal(common_settle_invalid(0, -1, -1), "actual must be >= 0");
    assert_string_equal(common_settle_invalid(0, 0, -2),
                        "at_ms must be >= 0 (Unix ms), or -1 for none");
    assert_string_equal(common_settle_invalid(0, 0, INT64_MIN),
                        "at_ms must be >= 0 (Unix ms), or -1 for none");
}

static void test_strerror(void **unused)
{
    assert_string_equal(slc_strerror(SLC_OK), "success");
    assert_string_equal(slc_strerror(SLC_ESERVER), "server error");
    assert_string_equal(slc_strerror(-1000), "unknown error");
    assert_string_equal(slc_strerror(SLC_ENOHOLD), "no such hold");
    int codes[] = {SLC_EIO, SLC_ESERVER, SLC_EPROTOCOL, SLC_ENOMEM, SLC_EINVAL, SLC_ENOHOLD};
    for (size_t i = 0; i < 6; i++)
        for (size_t j = i + 1; j < 6; j++)
            assert_string_not_equal(slc_strerror(codes[i]), slc_strerror(codes[j]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_hit_reduces_times),
        cmocka_unit_test(test_cache_expiry),
        cmocka_unit_test(test_cache_only_denials_with_a_retry_time),
        cmocka_unit_test(test_cache_cost),
        cmocka_unit_test(test_cache_names_are_exact),
        cmocka_unit_test(test_cache_replace_and_forget),
        cmocka_unit_test(test_cache_latest_report),
        cmocka_unit_test(test_cache_epoch),
        cmocka_unit_test(test_cache_bound_drops_earliest_expiry),
        cmocka_unit_test(test_cache_bound_large),
        cmocka_unit_test(test_cache_zero_and_limits),
        cmocka_unit_test(test_cache_huge_retry_saturates),
        cmocka_unit_test(test_cache_resize_keeps_hits),
        cmocka_unit_test(test_backoff_bounds_and_spread),
        cmocka_unit_test(test_backoff_small_range_uniform),
        cmocka_unit_test(test_backoff_caps_and_overflow),
        cmocka_unit_test(test_backoff_seeded),
        cmocka_unit_test(test_retry_delay_prefers_server),
        cmocka_unit_test(test_decode_well_formed),
        cmocka_unit_test(test_decode_malformed),
        cmocka_unit_test(test_decode_error_reply),
        cmocka_unit_test(test_decode_acquire_well_formed),
        cmocka_unit_test(test_decode_acquire_malformed),
        cmocka_unit_test(test_decode_acquire_error_reply),
        cmocka_unit_test(test_decode_release),
        cmocka_unit_test(test_decision_argv),
        cmocka_unit_test(test_acquire_argv),
        cmocka_unit_test(test_release_argv),
        cmocka_unit_test(test_settle_argv),
        cmocka_unit_test(test_settle_invalid),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
