/*
 * test_algorithms.c - the six algorithms against docs/algorithms.md, table-driven with an
 * explicit `now` (as redis-cell's it_rate_limits): each row is (time after the table's start,
 * cost) -> (allowed, remaining, retry_after, reset_after, delay), every expected value worked
 * out by hand from the documented integer formulas (the working is in the comments).
 *
 * The table runner also checks on every row: limit == the rule's capacity; a peek (cost 0) or a
 * rejected request leaves the state bytes as they were and an admitted cost > 0 changes them;
 * sl_state_is_fresh() is true at (effective now) + reset_after and, when reset_after > 0, false
 * one ns earlier. "Effective now" is now, or for a row whose time went back, the time the docs
 * clamp it to (the algorithm's "latest time recorded"), written in the row.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"
#include "sluice/sluice.h"

#define NS    INT64_C(1)
#define US    SL_NS_PER_US
#define MS    SL_NS_PER_MS
#define SEC   SL_NS_PER_SEC
#define START INT64_C(1700000000000000000) /* a realistic epoch time, aligned to 1 s */

#define NO_CLAMP INT64_MIN

typedef struct row {
    int64_t at;          /* ns after the table's start */
    int64_t cost;        /* units */
    bool allowed;        /* expected */
    int64_t remaining;   /* expected, units */
    int64_t retry_after; /* expected, ns */
    int64_t reset_after; /* expected, ns */
    int64_t delay;       /* expected, ns */
    int64_t clamp_to;    /* NO_CLAMP, or the time after start the docs clamp `at` to, ns */
} row_t;

#define ALLOW(at, cost, rem, reset)                                                                \
    {                                                                                              \
        (at), (cost), true, (rem), 0, (reset), 0, NO_CLAMP                                         \
    }
#define DENY(at, cost, rem, retry, reset)                                                          \
    {                                                                                              \
        (at), (cost), false, (rem), (retry), (reset), 0, NO_CLAMP                                  \
    }
#define DELAY(at, cost, rem, reset, delay)                                                         \
    {                                                                                              \
        (at), (cost), true, (rem), 0, (reset), (delay), NO_CLAMP                                   \
    }
#define ALLOW_CLAMPED(at, to, cost, rem, reset)                                                    \
    {                                                                                              \
        (at), (cost), true, (rem), 0, (reset), 0, (to)                                             \
    }
#define DENY_CLAMPED(at, to, cost, rem, retry, reset)                                              \
    {                                                                                              \
        (at), (cost), false, (rem), (retry), (reset), 0, (to)                                      \
    }

#define NROWS(rows) (sizeof(rows) / sizeof((rows)[0]))

/* ---- helpers ----------------------------------------------------------------------------- */

static sl_rule_t make_rule(sl_algorithm_t alg, int64_t limit, int64_t window_ns, int64_t burst,
                           int64_t buckets, int64_t max_delay_ns)
{
    sl_rule_t rule = rule_fields(alg, limit, window_ns, burst, buckets, max_delay_ns);
    assert_int_equal(sl_rule_prepare(&rule), SL_OK);
    return rule;
}

static sl_rule_t simple_rule(sl_algorithm_t alg, int64_t limit, int64_t window_ns)
{
    return make_rule(alg, limit, window_ns, SL_DEFAULT, SL_DEFAULT, 0);
}

/* A zeroed, 8-byte aligned state buffer for `rule` (the caller frees it). */
static void *new_state(const sl_rule_t *rule)
{
    size_t size = sl_state_size(rule);
    assert_true(size > 0);
    void *state = calloc(1, size);
    assert_non_null(state);
    return state;
}

static bool field_ok(const char *table, size_t i, const char *field, int64_t got, int64_t want)
{
    if (got == want) {
        return true;
    }
    print_error("%s row %zu: %s: got %" PRId64 ", want %" PRId64 "\n", table, i, field, got, want);
    return false;
}

/*
 * Runs `rows` in order on one key (a state that starts all zero) under `rule`, times relative to
 * `start`, and checks each row as described at the top of the file. Reports every mismatch of a
 * row, then fails.
 */
static void run_table(const char *table, const sl_rule_t *rule, int64_t start, const row_t *rows,
                      size_t n)
{
    size_t size = sl_state_size(rule);
    unsigned char *state = new_state(rule);
    unsigned char *before = malloc(size);
    assert_non_null(before);
    for (size_t i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        int64_t now = start + r->at;
        int64_t eff = r->clamp_to == NO_CLAMP ? now : start + r->clamp_to;
        sl_decision_t d;
        bool ok = true;
        memcpy(before, state, size);
        memset(&d, 0x5a, sizeof(d));
        ok &= field_ok(table, i, "rc", sl_decide(rule, state, r->cost, now, &d), SL_OK);
        ok &= field_ok(table, i, "allowed", d.allowed, r->allowed);
        ok &= field_ok(table, i, "limit", d.limit, rule->capacity);
        ok &= field_ok(table, i, "remaining", d.remaining, r->remaining);
        ok &= field_ok(table, i, "retry_after_ns", d.retry_after_ns, r->retry_after);
        ok &= field_ok(table, i, "reset_after_ns", d.reset_after_ns, r->reset_after);
        ok &= field_ok(table, i, "delay_ns", d.delay_ns, r->delay);
        bool writes = r->allowed && r->cost > 0;
        ok &= field_ok(table, i, writes ? "state changed" : "state unchanged",
                       memcmp(before, state, size) != 0, writes);
        ok &= field_ok(table, i, "fresh at now + reset_after",
                       sl_state_is_fresh(rule, state, eff + r->reset_after), true);
        if (r->reset_after > 0) {
            ok &= field_ok(table, i, "fresh at now + reset_after - 1",
                           sl_state_is_fresh(rule, state, eff + r->reset_after - 1), false);
        }
        if (!ok) {
            free(before);
            free(state);
            fail_msg("%s: row %zu (now = start + %" PRId64 " ns, cost %" PRId64 ") is wrong", table,
                     i, r->at, r->cost);
        }
    }
    free(before);
    free(state);
}

/* ---- sliding_log ------------------------------------------------------------------------- */

/*
 * Seed 003's example: RateLimiter(3, 10000) with timestamps in ms. m = stamps in (now - W, now].
 * 3000: m = 3, the (3 + 1 - 3) = 1st oldest stamp, 0, leaves at 0 + 10 000 -> retry 7000 ms;
 * reset = newest + W - now = 2000 + 10 000 - 3000 = 9000 ms. 11 000: (1000, 11 000] holds 2000.
 * Then cost 3 at 11 000: m = 2, the 2nd oldest (11 000) must leave -> retry 10 000 ms. 12 000:
 * (2000, 12 000] excludes 2000 exactly, m = 1, cost 2 fits.
 */
static const row_t seed003_rows[] = {
    ALLOW(0 * MS, 1, 2, 10000 * MS),        ALLOW(1000 * MS, 1, 1, 10000 * MS),
    ALLOW(2000 * MS, 1, 0, 10000 * MS),     DENY(3000 * MS, 1, 0, 7000 * MS, 9000 * MS),
    ALLOW(11000 * MS, 1, 1, 10000 * MS),    DENY(11000 * MS, 3, 1, 10000 * MS, 10000 * MS),
    DENY(11000 * MS, 4, 1, -1, 10000 * MS), ALLOW(12000 * MS, 2, 0, 10000 * MS),
};

static void test_sliding_log_seed003(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_LOG, 3, 10000 * MS);
    run_table("seed003 (start 0)", &rule, 0, seed003_rows, NROWS(seed003_rows));
    run_table("seed003 (start 1.7e18)", &rule, START, seed003_rows, NROWS(seed003_rows));
}

/* N 1, W 1 s: the window (now - W, now] excludes exactly now - W. */
static const row_t log_exclusion_rows[] = {
    ALLOW(0, 1, 0, SEC),
    DENY(SEC - 1, 1, 0, 1, 1),
    ALLOW(SEC, 1, 0, SEC),
    DENY(SEC, 1, 0, SEC, SEC),
    DENY(2 * SEC - 1, 1, 0, 1, 1),
    ALLOW(2 * SEC, 0, 1, 0), /* peek: the stamp at 1 s is out, fresh again */
};

static void test_sliding_log_excludes_now_minus_w(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_LOG, 1, SEC);
    run_table("sliding_log exclusion", &rule, START, log_exclusion_rows, NROWS(log_exclusion_rows));
}

/*
 * N 2, W 1 s, time going back. Latest time recorded = the newest stamp (5 s). 4.5 s is treated
 * as 5 s: (4 s, 5 s] holds 1, admitted, stamped 5 s (not 4.5 s). At 5.9 s both stamps are at
 * 5 s: the 1st oldest leaves at 6 s -> retry 100 ms. A 4.5 s stamp would have let 5.9 s in.
 */
static const row_t log_clamp_rows[] = {
    ALLOW(5 * SEC, 1, 1, SEC),
    ALLOW_CLAMPED(4500 * MS, 5 * SEC, 1, 0, SEC),
    ALLOW_CLAMPED(4 * SEC, 5 * SEC, 0, 0, SEC),
    DENY(5900 * MS, 1, 0, 100 * MS, 100 * MS),
    ALLOW(6 * SEC, 1, 1, SEC),
};

static void test_sliding_log_clamps_backwards_time(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_LOG, 2, SEC);
    run_table("sliding_log clamp", &rule, START, log_clamp_rows, NROWS(log_clamp_rows));
}

/* ---- fixed_window ------------------------------------------------------------------------ */

/*
 * N 3, W 1 s, start aligned to W. reset = (k + 1)W - now while count > 0; retry = (k + 1)W - now.
 * Row 6 goes back to 999 ms, into the previous window: clamped to idx*W = 1 s, where the count
 * is 3 -> rejected (no fresh quota from the old window).
 */
static const row_t fixed_rows[] = {
    ALLOW(0, 1, 2, SEC),
    ALLOW(500 * MS, 2, 0, 500 * MS),
    DENY(SEC - 1, 1, 0, 1, 1),
    ALLOW(SEC, 0, 3, 0), /* new window, count 0: fresh */
    ALLOW(SEC, 3, 0, SEC),
    DENY(SEC, 4, 0, -1, SEC),
    DENY_CLAMPED(999 * MS, SEC, 1, 0, SEC, SEC),
    DENY(2 * SEC - 1, 1, 0, 1, 1),
    ALLOW(2 * SEC, 1, 2, SEC),
    ALLOW(3500 * MS, 0, 3, 0),
    DENY(2500 * MS, 4, 2, -1, 500 * MS),
};

static void test_fixed_window_table(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_FIXED_WINDOW, 3, SEC);
    run_table("fixed_window", &rule, START, fixed_rows, NROWS(fixed_rows));
}

/*
 * Windows are aligned to multiples of W since the epoch, not to the first request.
 * W 1 s, first request at 1.7e18 + 300 ms: its window ends 700 ms later.
 * W 7 ms: 1.7e18 / 7e6 = 242 857 142 857 rem 1e6, so 1.7e18 is 1 ms into its window: 6 ms left.
 */
static const row_t fixed_align_1s_rows[] = {
    ALLOW(300 * MS, 1, 0, 700 * MS),
    DENY(999 * MS, 1, 0, 1 * MS, 1 * MS),
    ALLOW(SEC, 1, 0, SEC),
};

static const row_t fixed_align_7ms_rows[] = {
    ALLOW(0, 2, 0, 6 * MS),
    DENY(6 * MS - 1, 1, 0, 1, 1),
    ALLOW(6 * MS, 2, 0, 7 * MS),
};

static void test_fixed_window_epoch_alignment(void **cm)
{
    (void)cm;
    sl_rule_t r1 = simple_rule(SL_FIXED_WINDOW, 1, SEC);
    sl_rule_t r7 = simple_rule(SL_FIXED_WINDOW, 2, 7 * MS);
    run_table("fixed_window 1s alignment", &r1, START, fixed_align_1s_rows,
              NROWS(fixed_align_1s_rows));
    run_table("fixed_window 7ms alignment", &r7, START, fixed_align_7ms_rows,
              NROWS(fixed_align_7ms_rows));
}

/* ---- sliding_window ---------------------------------------------------------------------- */

/*
 * N 4, W 1 s, start aligned (k0 = start / W). Admitted iff prev*(W - e) + (curr + c)*W <= 4W.
 * remaining = max(0, floor((4W - prev*(W - e)) / W) - curr).
 *  r1 0:       prev 0 curr 0, c 4 fits; remaining 0; reset (k0 + 2)W - now = 2 s.
 *  r2 0:       c 1: R = 4 - 4 - 1 < 0 -> next window, prev 4: e2 = W - floor(3W/4) = 250 ms,
 *              retry = 1 s + 250 ms.
 *  r3 1.25 s:  window k0+1, prev 4 curr 0, e 250 ms: 4*750ms + 1W = 4W fits. remaining
 *              floor((4W - 3W)/W) - 1 = 0. reset (k0 + 3)W - now = 1.75 s.
 *  r4 1.5 s:   4*500ms + 2W = 4W fits; remaining 0; reset 1.5 s.
 *  r5 1.5 s:   c 1: R = 4 - 2 - 1 = 1, e' = W - floor(1W/4) = 750 ms < W -> retry 250 ms.
 *  r6 1.75 s:  4*250ms + 3W = 4W fits; curr 3; reset 1.25 s.
 *  r7 1.75 s:  c 2: R = -1 -> next window, prev 3: e2 = W - floor(2W/3) = 333 333 334 ns,
 *              retry = 2 s + e2 - 1.75 s = 583 333 334 ns. remaining floor(3W/W) - 3 = 0.
 *  r8 0.9 s:   back in time, clamped to idx*W = 1 s (e 0): 4W + 4W > 4W. R = 0, e' = W is not
 *              < W -> next window, prev 3: e2 = W - floor(3W/3) = 0, retry = 2 s - 1 s = 1 s;
 *              reset = (k0 + 3)W - 1 s = 2 s.
 *  r9 2.5 s:   peek, window k0+2: prev 3 curr 0, e 500 ms: floor((4W - 1.5W)/W) = 2;
 *              only prev > 0: reset (k0 + 3)W - now = 500 ms.
 *  r10 3.5 s:  peek, stored window k0+1 is two back: both 0, fresh.
 *  r11 3.5 s:  c 5 > N: retry -1.
 */
static const row_t sw_rows[] = {
    ALLOW(0, 4, 0, 2 * SEC),
    DENY(0, 1, 0, 1250 * MS, 2 * SEC),
    ALLOW(1250 * MS, 1, 0, 1750 * MS),
    ALLOW(1500 * MS, 1, 0, 1500 * MS),
    DENY(1500 * MS, 1, 0, 250 * MS, 1500 * MS),
    ALLOW(1750 * MS, 1, 0, 1250 * MS),
    DENY(1750 * MS, 2, 0, 583333334, 1250 * MS),
    DENY_CLAMPED(900 * MS, SEC, 1, 0, SEC, 2 * SEC),
    ALLOW(2500 * MS, 0, 2, 500 * MS),
    ALLOW(3500 * MS, 0, 4, 0),
    DENY(3500 * MS, 5, 4, -1, 0),
};

static void test_sliding_window_table(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_WINDOW, 4, SEC);
    run_table("sliding_window", &rule, START, sw_rows, NROWS(sw_rows));
}

/* ---- sliding_buckets --------------------------------------------------------------------- */

/*
 * N 5, W 1 s, K 4, G 250 ms, start aligned (b0 = start / G). Counted: buckets b-3..b, and b-4
 * when e <= G - 2. Bucket j stops counting at d_j = (j + 5)G - 1.
 *  r1 0:         c 2 into b0. reset d_b0 - now = 1.25 s - 1.
 *  r2 300 ms:    c 2 into b0+1 (total 4). reset d_(b0+1) - now = 1.5 s - 1 - 300 ms.
 *  r3 600 ms:    c 2: 4 + 2 > 5. Dropping b0 (at 1.25 s - 1) leaves 2 -> retry 650 ms - 1.
 *  r4 1.25s - 2: b = b0+4, e = G - 2: b0 still counted, total 4 -> rejected, retry 1 ns.
 *  r5 1.25s - 1: e = G - 1: b0 no longer counted, total 2 -> c 2 admitted into b0+4;
 *                reset d_(b0+4) - now = 2.25 s - 1 - (1.25 s - 1) = 1 s.
 *  r7 1.25s + 1: b = b0+5, e = 1: counts b0+1 (2) and b0+4 (2): c 1 admitted, total 5;
 *                reset d_(b0+5) - now = 2.5 s - 1 - 1.25 s - 1.
 *  r9 1.25s + 1: c 1 rejected; dropping b0+1 (at 1.5 s - 1) leaves 3 -> retry 250 ms - 2.
 *  r10 1.5s - 1: e = G - 1, b0+1 not counted: total 3, c 1 admitted into b0+5 (now 2).
 *  r11 2.5s - 1: b0+9, e = G - 1: b0+5 not counted: fresh (its d is exactly now).
 *  r12 2.5s - 2: e = G - 2: b0+5 (2) counted: remaining 3, reset 1.
 */
static const row_t buckets_rows[] = {
    ALLOW(0, 2, 3, 1250 * MS - 1),
    ALLOW(300 * MS, 2, 1, 1200 * MS - 1),
    DENY(600 * MS, 2, 1, 650 * MS - 1, 900 * MS - 1),
    DENY(1250 * MS - 2, 2, 1, 1, 250 * MS + 1),
    ALLOW(1250 * MS - 1, 2, 1, SEC),
    ALLOW(1250 * MS - 1, 0, 1, SEC),
    ALLOW(1250 * MS + 1, 1, 0, 1250 * MS - 2),
    DENY(1250 * MS + 1, 6, 0, -1, 1250 * MS - 2),
    DENY(1250 * MS + 1, 1, 0, 250 * MS - 2, 1250 * MS - 2),
    ALLOW(1500 * MS - 1, 1, 1, SEC),
    ALLOW(2500 * MS - 1, 0, 5, 0),
    ALLOW(2500 * MS - 2, 0, 3, 1),
};

static void test_sliding_buckets_table(void **cm)
{
    (void)cm;
    sl_rule_t rule = make_rule(SL_SLIDING_BUCKETS, 5, SEC, SL_DEFAULT, 4, 0);
    assert_int_equal(rule.bucket_ns, 250 * MS);
    run_table("sliding_buckets", &rule, START, buckets_rows, NROWS(buckets_rows));
}

/*
 * N 3, W 1 s, K 4, G 250 ms. After c 2 at 600 ms (bucket b0+2), a request at 300 ms (bucket
 * b0+1) is clamped to the latest admission, 600 ms, and its cost goes to b0+2:
 * reset d_(b0+2) - 600 ms = 1.15 s - 1. At 600 ms the only non-empty bucket, b0+2, drops at
 * 1.75 s - 1 -> retry 1.15 s - 1 (had the unit gone to b0+1 it would be 900 ms - 1).
 */
static const row_t buckets_clamp_rows[] = {
    ALLOW(600 * MS, 2, 1, 1150 * MS - 1),
    ALLOW_CLAMPED(300 * MS, 600 * MS, 1, 0, 1150 * MS - 1),
    DENY(600 * MS, 1, 0, 1150 * MS - 1, 1150 * MS - 1),
    ALLOW(1750 * MS - 1, 3, 0, SEC),
};

static void test_sliding_buckets_clamps_backwards_time(void **cm)
{
    (void)cm;
    sl_rule_t rule = make_rule(SL_SLIDING_BUCKETS, 3, SEC, SL_DEFAULT, 4, 0);
    run_table("sliding_buckets clamp", &rule, START, buckets_clamp_rows, NROWS(buckets_clamp_rows));
}

/* ---- token_bucket ------------------------------------------------------------------------ */

/*
 * N 2, W 1 s, B 3: T = 500 ms, tau = 1.5 s, capacity 3.
 *  r1 0:        TAT' = 1.5 s, 1.5 - 1.5 <= 0: admitted, remaining floor((1.5 - 1.5)/0.5) = 0.
 *  r2 0:        TAT' = 2 s: retry 2 - 1.5 - 0 = 500 ms; reset TAT0 - now = 1.5 s.
 *  r3 500ms-1:  retry 1; remaining floor((1.5 s - (1.5 s - 500 ms + 1)) / T) = 0.
 *  r4 500 ms:   admitted, TAT' = 2 s; reset 1.5 s.
 *  r5 1.5 s:    peek: remaining floor((1.5 - 0.5)/0.5) = 2, reset 500 ms.
 *  r6 1.5 s:    c 4 > 3: -1.
 *  r8 10 s:     c 2 on a full bucket: remaining 1, reset 1 s.
 */
static const row_t tb_rows[] = {
    ALLOW(0, 3, 0, 1500 * MS),
    DENY(0, 1, 0, 500 * MS, 1500 * MS),
    DENY(500 * MS - 1, 1, 0, 1, 1000 * MS + 1),
    ALLOW(500 * MS, 1, 0, 1500 * MS),
    ALLOW(1500 * MS, 0, 2, 500 * MS),
    DENY(1500 * MS, 4, 2, -1, 500 * MS),
    ALLOW(10 * SEC, 0, 3, 0),
    ALLOW(10 * SEC, 2, 1, SEC),
};

/* N 3, W 1 s: T = ceil(1e9 / 3) = 333 333 334 (never faster than N per W), tau = 3T. */
static const row_t tb_uneven_rows[] = {
    ALLOW(0, 3, 0, 1000000002),
    DENY(0, 1, 0, 333333334, 1000000002),
    ALLOW(333333334, 1, 0, 1000000002),
};

/*
 * N 1, W 1 s, B 2: T 1 s, tau 2 s. After an admission at 10 s (TAT 11 s), a request at 5 s (a
 * clock that stepped back) is decided at 5 s, not clamped: an earlier now sees less refilled.
 * TAT' = 12 s, retry 12 - 2 - 5 = 5 s, remaining floor((2 - (11 - 5))/1) < 0 -> 0, reset
 * 11 - 5 = 6 s; a peek at 5 s waits TAT - tau - now = 4 s. At 10 s the bucket is as it was.
 */
static const row_t tb_back_rows[] = {
    ALLOW(10 * SEC, 1, 1, SEC),
    DENY(5 * SEC, 1, 0, 5 * SEC, 6 * SEC),
    DENY(5 * SEC, 0, 0, 4 * SEC, 6 * SEC),
    ALLOW(10 * SEC, 1, 0, 2 * SEC),
    ALLOW(10500 * MS, 0, 0, 1500 * MS),
    ALLOW(11 * SEC, 0, 1, SEC),
};

static void test_token_bucket_table(void **cm)
{
    (void)cm;
    sl_rule_t rule = make_rule(SL_TOKEN_BUCKET, 2, SEC, 3, SL_DEFAULT, 0);
    sl_rule_t uneven = simple_rule(SL_TOKEN_BUCKET, 3, SEC);
    sl_rule_t back = make_rule(SL_TOKEN_BUCKET, 1, SEC, 2, SL_DEFAULT, 0);
    run_table("token_bucket", &rule, START, tb_rows, NROWS(tb_rows));
    run_table("token_bucket T = ceil(W/N)", &uneven, START, tb_uneven_rows, NROWS(tb_uneven_rows));
    run_table("token_bucket time going back", &back, START, tb_back_rows, NROWS(tb_back_rows));
}

/*
 * max_delay. N 1, W 1 s, B 1 (T = tau = 1 s), D 2.5 s. Three requests at one instant: the 2nd
 * must wait 1 s, the 3rd 2 s: the delays add up (nginx's limit_req delay, Guava's acquire), as
 * the caller acts at now + delay and no interval t may see more than B + floor(t / T) actions.
 * The clamp uses TAT - tau - max_delay (docs: the latest time recorded), which is before now
 * here, so nothing is clamped; clamping to TAT - tau would give the 3rd (and every later
 * request at this instant) a delay of 1 s. The 4th would wait 3 s > D: rejected, retry 3 s.
 * Cost 2 > capacity 1 is rejected with -1 whatever D is (-1 <= D must not read as "short
 * enough"). At 500 ms the wait is 2.5 s = D exactly: admitted with that delay.
 * remaining after a delayed admission is floor((tau - (TAT' - now)) / T) < 0, floored at 0.
 */
static const row_t tb_delay_rows[] = {
    ALLOW(0, 1, 0, SEC),
    DELAY(0, 1, 0, 2 * SEC, SEC),
    DELAY(0, 1, 0, 3 * SEC, 2 * SEC),
    DENY(0, 1, 0, 3 * SEC, 3 * SEC),
    DENY(0, 2, 0, -1, 3 * SEC),
    DELAY(500 * MS, 1, 0, 3500 * MS, 2500 * MS),
};

static void test_token_bucket_max_delay(void **cm)
{
    (void)cm;
    sl_rule_t rule = make_rule(SL_TOKEN_BUCKET, 1, SEC, 1, SL_DEFAULT, 2500 * MS);
    run_table("token_bucket max_delay", &rule, START, tb_delay_rows, NROWS(tb_delay_rows));
}

/* ---- gcra -------------------------------------------------------------------------------- */

/*
 * redis-cell's published CL.THROTTLE table (it_rate_limits): max_burst 4, 1 per second, so
 * W 1 s, N 1, B 4: T 1 s, tau = T(B + 1) = 5 s, limit 5. redis-cell reports retry_after -1
 * when allowed; sluice reports 0. Rows: (offset, cost) -> remaining, reset, retry, limited.
 */
static const row_t redis_cell_rows[] = {
    DENY(0, 6, 5, -1, 0),                    /* 0: cost 6 > 5 never fits */
    ALLOW(0, 1, 4, 1 * SEC),                 /* 1 */
    ALLOW(0, 1, 3, 2 * SEC),                 /* 2 */
    ALLOW(0, 1, 2, 3 * SEC),                 /* 3 */
    ALLOW(0, 1, 1, 4 * SEC),                 /* 4 */
    ALLOW(0, 1, 0, 5 * SEC),                 /* 5 */
    DENY(0, 1, 0, 1 * SEC, 5 * SEC),         /* 6 */
    ALLOW(3000 * MS, 1, 2, 3000 * MS),       /* 7 */
    ALLOW(3100 * MS, 1, 1, 3900 * MS),       /* 8 */
    ALLOW(4000 * MS, 1, 1, 4000 * MS),       /* 9 */
    ALLOW(8000 * MS, 1, 4, 1000 * MS),       /* 10 */
    ALLOW(9500 * MS, 1, 4, 1000 * MS),       /* 11 */
    ALLOW(9500 * MS, 0, 4, 1 * SEC),         /* 12: peek */
    ALLOW(9500 * MS, 2, 2, 3 * SEC),         /* 13 */
    DENY(9500 * MS, 5, 2, 3 * SEC, 3 * SEC), /* 14 */
};

static void test_gcra_redis_cell_table(void **cm)
{
    (void)cm;
    sl_rule_t rule = make_rule(SL_GCRA, 1, SEC, 4, SL_DEFAULT, 0);
    assert_int_equal(rule.capacity, 5);
    assert_int_equal(rule.interval_ns, SEC);
    assert_int_equal(rule.tolerance_ns, 5 * SEC);
    run_table("gcra redis-cell", &rule, START, redis_cell_rows, NROWS(redis_cell_rows));
}

/*
 * N 1, W 1 s, B 0: T = tau = 1 s, capacity 1. After an admission at 10 s (TAT 11 s), a request
 * at 5 s is decided at 5 s: TAT' = 12 s, retry 12 - 1 - 5 = 6 s, reset 11 - 5 = 6 s. Before the
 * clamp was dropped it reported retry 1 s and reset 1 s, measured from 10 s, not from the
 * caller's now; the admissions are the same either way (a cost >= 1 waits past 10 s).
 */
static const row_t gcra_back_rows[] = {
    ALLOW(10 * SEC, 1, 0, SEC),
    DENY(5 * SEC, 1, 0, 6 * SEC, 6 * SEC),
    ALLOW(11 * SEC, 1, 0, SEC),
};

/*
 * N 2, W 1 s, B 1: T 500 ms, tau = T(B + 1) = 1 s, capacity 2; D 600 ms.
 *  r1 0:       c 2: TAT' = 1 s, admitted, remaining 0, reset 1 s.
 *  r2 100 ms:  TAT' = 1.5 s, wait 1.5 - 1 - 0.1 = 400 ms <= D: delayed 400 ms, reset 1.4 s.
 *  r3 100 ms:  TAT' = 2 s, wait 900 ms > D: rejected, retry 900 ms, reset TAT0 - now = 1.4 s.
 *  r4 400 ms:  wait 2 - 1 - 0.4 = 600 ms = D: delayed 600 ms, reset 1.6 s.
 *  r5 400 ms:  c 3 > 2: -1 even with D.
 */
static const row_t gcra_delay_rows[] = {
    ALLOW(0, 2, 0, SEC),
    DELAY(100 * MS, 1, 0, 1400 * MS, 400 * MS),
    DENY(100 * MS, 1, 0, 900 * MS, 1400 * MS),
    DELAY(400 * MS, 1, 0, 1600 * MS, 600 * MS),
    DENY(400 * MS, 3, 0, -1, 1600 * MS),
};

static void test_gcra_time_back_and_max_delay(void **cm)
{
    (void)cm;
    sl_rule_t back = make_rule(SL_GCRA, 1, SEC, 0, SL_DEFAULT, 0);
    sl_rule_t delay = make_rule(SL_GCRA, 2, SEC, 1, SL_DEFAULT, 600 * MS);
    run_table("gcra time going back", &back, START, gcra_back_rows, NROWS(gcra_back_rows));
    run_table("gcra max_delay", &delay, START, gcra_delay_rows, NROWS(gcra_delay_rows));
}

/* ---- every algorithm --------------------------------------------------------------------- */

/* One rule of each algorithm with a capacity known by hand. */
typedef struct known {
    sl_rule_t rule;
    int64_t capacity;
} known_t;

static size_t known_rules(known_t *out)
{
    size_t n = 0;
    out[n++] = (known_t){simple_rule(SL_FIXED_WINDOW, 5, SEC), 5};
    out[n++] = (known_t){simple_rule(SL_SLIDING_LOG, 5, SEC), 5};
    out[n++] = (known_t){simple_rule(SL_SLIDING_WINDOW, 5, SEC), 5};
    out[n++] = (known_t){make_rule(SL_SLIDING_BUCKETS, 5, SEC, SL_DEFAULT, 5, 0), 5};
    out[n++] = (known_t){make_rule(SL_TOKEN_BUCKET, 5, SEC, 7, SL_DEFAULT, 0), 7};
    out[n++] = (known_t){make_rule(SL_GCRA, 5, SEC, 7, SL_DEFAULT, 0), 8};
    out[n++] = (known_t){make_rule(SL_TOKEN_BUCKET, 5, SEC, 7, SL_DEFAULT, 10 * SEC), 7};
    out[n++] = (known_t){make_rule(SL_GCRA, 5, SEC, 7, SL_DEFAULT, 10 * SEC), 8};
    out[n++] = (known_t){simple_rule(SL_CONCURRENCY, 5, SEC), 5};
    return n;
}

/* A fresh (all-zero) state: a peek sees the whole capacity, nothing to wait for or reset. */
static void test_fresh_state_peek(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        void *state = new_state(&k[i].rule);
        sl_decision_t d;
        assert_true(sl_state_is_fresh(&k[i].rule, state, START));
        assert_true(sl_state_is_fresh(&k[i].rule, state, 0));
        assert_int_equal(sl_decide(&k[i].rule, state, 0, START, &d), SL_OK);
        assert_true(d.allowed);
        assert_int_equal(d.limit, k[i].capacity);
        assert_int_equal(d.remaining, k[i].capacity);
        assert_int_equal(d.retry_after_ns, 0);
        assert_int_equal(d.reset_after_ns, 0);
        assert_int_equal(d.delay_ns, 0);
        assert_int_equal(k[i].rule.capacity, k[i].capacity);
        free(state);
    }
}

/* cost > capacity: rejected with retry_after -1, state untouched, even with max_delay and for
 * costs whose products overflow 64 bits. */
static void test_cost_over_capacity(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        size_t size = sl_state_size(rule);
        unsigned char *state = new_state(rule);
        unsigned char *copy = malloc(size);
        int64_t costs[] = {k[i].capacity + 1, INT64_MAX / 2, INT64_MAX};
        sl_decision_t d;
        assert_non_null(copy);
        assert_int_equal(sl_decide(rule, state, 1, START, &d), SL_OK);
        assert_true(d.allowed);
        memcpy(copy, state, size);
        for (size_t c = 0; c < sizeof(costs) / sizeof(costs[0]); c++) {
            char what[96];
            bool ok = true;
            snprintf(what, sizeof(what), "%s (max_delay %" PRId64 ") cost %" PRId64,
                     sl_algorithm_name(rule->algorithm), rule->max_delay_ns, costs[c]);
            ok &= field_ok(what, 0, "rc", sl_decide(rule, state, costs[c], START + 1, &d), SL_OK);
            ok &= field_ok(what, 0, "allowed", d.allowed, false);
            ok &= field_ok(what, 0, "retry_after_ns", d.retry_after_ns, -1);
            ok &= field_ok(what, 0, "delay_ns", d.delay_ns, 0);
            ok &= field_ok(what, 0, "remaining", d.remaining, k[i].capacity - 1);
            ok &= field_ok(what, 0, "state unchanged", memcmp(state, copy, size) == 0, true);
            if (!ok) {
                failures++;
                memcpy(state, copy, size);
            }
        }
        free(copy);
        free(state);
    }
    assert_int_equal(failures, 0);
}

static void test_negative_cost_and_null_arguments(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        size_t size = sl_state_size(rule);
        unsigned char *state = new_state(rule);
        unsigned char *copy = malloc(size);
        sl_decision_t d;
        assert_non_null(copy);
        assert_int_equal(sl_decide(rule, state, 2, START, &d), SL_OK);
        memcpy(copy, state, size);
        assert_int_equal(sl_decide(rule, state, -1, START, &d), SL_ECOST);
        assert_int_equal(sl_decide(rule, state, INT64_MIN, START, &d), SL_ECOST);
        assert_memory_equal(state, copy, size);
        assert_int_equal(sl_decide(NULL, state, 1, START, &d), SL_EINVAL);
        assert_int_equal(sl_decide(rule, NULL, 1, START, &d), SL_EINVAL);
        assert_int_equal(sl_decide(rule, state, 1, START, NULL), SL_EINVAL);
        assert_memory_equal(state, copy, size);
        free(copy);
        free(state);
    }
}

/*
 * After one admission, a long run of peeks and rejections at many times (later, equal, earlier)
 * never changes the state bytes.
 */
static void test_peek_and_rejection_never_write(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    const int64_t times[] = {START,       START + 1,        START - 1,        START + 999 * MS,
                             START + SEC, START + 10 * SEC, START - 10 * SEC, 0};
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        size_t size = sl_state_size(rule);
        unsigned char *state = new_state(rule);
        unsigned char *copy = malloc(size);
        sl_decision_t d;
        assert_non_null(copy);
        /* fill to capacity at START, so that any cost > 0 at START is rejected */
        assert_int_equal(sl_decide(rule, state, k[i].capacity, START, &d), SL_OK);
        assert_true(d.allowed);
        memcpy(copy, state, size);
        for (size_t t = 0; t < sizeof(times) / sizeof(times[0]); t++) {
            assert_int_equal(sl_decide(rule, state, 0, times[t], &d), SL_OK);
            assert_memory_equal(state, copy, size);
            for (int64_t c = 1; c <= k[i].capacity + 1; c++) {
                assert_int_equal(sl_decide(rule, state, c, times[t], &d), SL_OK);
                if (d.allowed) {
                    memcpy(copy, state, size); /* admitted: the new state is the reference */
                    break;
                }
                assert_memory_equal(state, copy, size);
            }
        }
        free(copy);
        free(state);
    }
}

/* now < 0 is treated as 0: a fresh key at -5 ns decides as at 0. fixed_window: window 0,
 * reset (0 + 1)W - 0 = W; sliding_log: 0 + W - 0; token_bucket: TAT' = 0 + T. */
static void test_negative_now_is_zero(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        void *a = new_state(rule), *b = new_state(rule);
        sl_decision_t da, db;
        assert_int_equal(sl_decide(rule, a, 1, -5, &da), SL_OK);
        assert_int_equal(sl_decide(rule, b, 1, 0, &db), SL_OK);
        assert_true(da.allowed);
        assert_int_equal(da.remaining, db.remaining);
        assert_int_equal(da.reset_after_ns, db.reset_after_ns);
        assert_int_equal(da.retry_after_ns, db.retry_after_ns);
        assert_memory_equal(a, b, sl_state_size(rule));
        switch (rule->algorithm) {
        case SL_FIXED_WINDOW:
        case SL_SLIDING_LOG:
        case SL_CONCURRENCY: /* the hold's expiry, 0 + W */
            assert_int_equal(da.reset_after_ns, SEC);
            break;
        case SL_TOKEN_BUCKET:
        case SL_GCRA:
            assert_int_equal(da.reset_after_ns, 200 * MS); /* T = 1 s / 5 */
            break;
        case SL_SLIDING_WINDOW:
        case SL_SLIDING_BUCKETS:
            break;
        }
        free(a);
        free(b);
    }
}

/* sl_state_is_fresh(): an admission makes the key not fresh until reset_after has elapsed. */
static void test_state_is_fresh_after_reset(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        void *state = new_state(rule);
        sl_decision_t d;
        assert_int_equal(sl_decide(rule, state, 1, START + 123, &d), SL_OK);
        assert_true(d.allowed);
        assert_true(d.reset_after_ns > 0);
        assert_false(sl_state_is_fresh(rule, state, START + 123));
        assert_false(sl_state_is_fresh(rule, state, START + 123 + d.reset_after_ns - 1));
        assert_true(sl_state_is_fresh(rule, state, START + 123 + d.reset_after_ns));
        assert_true(sl_state_is_fresh(rule, state, START + 123 + d.reset_after_ns + 100 * SEC));
        free(state);
    }
}

/*
 * A state has no alignment requirement (sluice.h: plain bytes, copyable with memcpy): the same
 * requests decided on states at offsets 1 and 3 of a buffer give the same decisions and bytes
 * as on an aligned state.
 */
static void test_unaligned_state(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    static const int64_t at[] = {0, 0, 1, 300 * MS, 300 * MS, SEC, SEC + 1, 2500 * MS, 2 * SEC};
    static const int64_t cost[] = {1, 3, 0, 2, 9, 1, 4, 0, 2};
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        size_t size = sl_state_size(rule);
        unsigned char *aligned = new_state(rule);
        unsigned char *buf = calloc(1, size + 8);
        assert_non_null(buf);
        for (size_t off = 1; off <= 3; off += 2) {
            memset(aligned, 0, size);
            memset(buf, 0, size + 8);
            for (size_t r = 0; r < sizeof(at) / sizeof(at[0]); r++) {
                sl_decision_t a, b;
                assert_int_equal(sl_decide(rule, aligned, cost[r], START + at[r], &a), SL_OK);
                assert_int_equal(sl_decide(rule, buf + off, cost[r], START + at[r], &b), SL_OK);
                assert_int_equal(a.allowed, b.allowed);
                assert_int_equal(a.remaining, b.remaining);
                assert_int_equal(a.retry_after_ns, b.retry_after_ns);
                assert_int_equal(a.reset_after_ns, b.reset_after_ns);
                assert_int_equal(a.delay_ns, b.delay_ns);
                assert_memory_equal(aligned, buf + off, size);
                assert_int_equal(sl_state_is_fresh(rule, buf + off, START + at[r] + 5 * SEC),
                                 sl_state_is_fresh(rule, aligned, START + at[r] + 5 * SEC));
            }
        }
        free(buf);
        free(aligned);
    }
}

/* ---- refunds and settles ----------------------------------------------------------------- */

static sl_decision_t decide_at(const sl_rule_t *rule, void *state, int64_t cost, int64_t at)
{
    sl_decision_t d;
    assert_int_equal(sl_decide(rule, state, cost, START + at, &d), SL_OK);
    return d;
}

static sl_decision_t refund_at(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged,
                               int64_t at)
{
    sl_decision_t d;
    assert_int_equal(sl_refund(rule, state, cost, START + charged, START + at, &d), SL_OK);
    return d;
}

static sl_decision_t settle_at(const sl_rule_t *rule, void *state, int64_t reserved, int64_t actual,
                               int64_t charged, int64_t at)
{
    sl_decision_t d;
    assert_int_equal(sl_settle(rule, state, reserved, actual, START + charged, START + at, &d),
                     SL_OK);
    assert_int_equal(sl_state_check(rule, state), SL_OK);
    return d;
}

/*
 * The worked example of docs/algorithms.md. sliding_log, limit 1000, window 60 s: a reservation
 * of 300 that used 120 gives 180 back; one of 100 that used 1100 charges 1000 past the limit at
 * 7 s. The window then holds 120 (at 0) + 100 (at 5 s) + 1000 (at 7 s) = 1220 units, three
 * entries: a peek waits until 220 have left (the 120 at 60 s, the 100 at 65 s), a request of 1
 * until one more has (the 1000 leave at 67 s).
 */
static void test_settle_worked_example(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_LOG, 1000, 60 * SEC);
    void *state = new_state(&rule);
    sl_decision_t d = decide_at(&rule, state, 300, 0);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 700);
    d = settle_at(&rule, state, 300, 120, 0, 2 * SEC);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 880);
    d = decide_at(&rule, state, 100, 5 * SEC);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 780);
    d = settle_at(&rule, state, 100, 1100, 5 * SEC, 7 * SEC);
    assert_false(d.allowed); /* in debt: even a peek is refused */
    assert_int_equal(d.remaining, 0);
    assert_int_equal(d.retry_after_ns, 58 * SEC);
    assert_int_equal(d.reset_after_ns, 60 * SEC);
    assert_true(decide_at(&rule, state, 0, 65 * SEC).allowed);
    d = decide_at(&rule, state, 1, 7 * SEC);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_ns, 60 * SEC);
    assert_false(decide_at(&rule, state, 1, 67 * SEC - 1).allowed);
    d = decide_at(&rule, state, 1, 67 * SEC);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 999);
    free(state);
}

/*
 * Refunds by hand. fixed_window N 5, W 1 s: only the charge's window gives back, never below 0.
 * sliding_window N 10, W 1 s: a charge of the window before comes off prev. At 1.25 s (e = 250
 * ms) with prev 4: floor(10 - 4 * 0.75) = 7 - curr. sliding_buckets N 6, W 1 s, K 2 (G 500 ms):
 * a refund of 4 charged in bucket 0 takes the 2 there and none of bucket 1's 3.
 */
static void test_refund_windows(void **cm)
{
    (void)cm;
    sl_rule_t fw = simple_rule(SL_FIXED_WINDOW, 5, SEC);
    void *state = new_state(&fw);
    assert_int_equal(decide_at(&fw, state, 3, 200 * MS).remaining, 2);
    sl_decision_t d = refund_at(&fw, state, 2, 200 * MS, 500 * MS);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 4);
    assert_int_equal(d.reset_after_ns, 500 * MS);
    d = refund_at(&fw, state, 5, 200 * MS, 700 * MS); /* more than it holds: to 0 */
    assert_int_equal(d.remaining, 5);
    assert_int_equal(d.reset_after_ns, 0);
    assert_true(sl_state_is_fresh(&fw, state, START + 700 * MS));
    assert_int_equal(decide_at(&fw, state, 2, 1100 * MS).remaining, 3);
    assert_int_equal(refund_at(&fw, state, 2, 900 * MS, 1200 * MS).remaining, 3); /* gone */
    free(state);

    sl_rule_t sw = simple_rule(SL_SLIDING_WINDOW, 10, SEC);
    state = new_state(&sw);
    assert_int_equal(decide_at(&sw, state, 4, 500 * MS).remaining, 6);
    assert_int_equal(decide_at(&sw, state, 3, 1250 * MS).remaining, 4); /* 7 - 3 */
    d = refund_at(&sw, state, 2, 500 * MS, 1250 * MS);                  /* prev 4 -> 2 */
    assert_int_equal(d.remaining, 5);                                   /* floor(8.5) - 3 */
    d = refund_at(&sw, state, 5, 1250 * MS, 1250 * MS);                 /* curr 3 -> 0 */
    assert_int_equal(d.remaining, 8);
    assert_int_equal(d.reset_after_ns, 750 * MS); /* prev only: to the window's end */
    free(state);

    sl_rule_t sb = make_rule(SL_SLIDING_BUCKETS, 6, SEC, SL_DEFAULT, 2, 0);
    state = new_state(&sb);
    decide_at(&sb, state, 2, 100 * MS);
    assert_int_equal(decide_at(&sb, state, 3, 600 * MS).remaining, 1);
    assert_int_equal(refund_at(&sb, state, 4, 100 * MS, 700 * MS).remaining, 3);
    assert_int_equal(refund_at(&sb, state, 2, 600 * MS, 700 * MS).remaining, 5);
    assert_int_equal(refund_at(&sb, state, 9, 600 * MS, 700 * MS).remaining, 6);
    free(state);
}

/*
 * sliding_log N 4, W 1 s, stamps 0, 100, 100, 200 ms: a refund of 2 charged at 100 ms removes
 * the two stamps at 100 ms (the newest no newer than the charge), not the one at 200 ms. A
 * cost of 3 then needs the stamp at 0 gone: retry 1000 - 300 = 700 ms; reset 200 + 1000 - 300.
 */
static void test_refund_sliding_log(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_LOG, 4, SEC);
    void *state = new_state(&rule);
    decide_at(&rule, state, 1, 0);
    decide_at(&rule, state, 2, 100 * MS);
    assert_int_equal(decide_at(&rule, state, 1, 200 * MS).remaining, 0);
    sl_decision_t d = refund_at(&rule, state, 2, 100 * MS, 300 * MS);
    assert_int_equal(d.remaining, 2);
    assert_int_equal(d.reset_after_ns, 900 * MS);
    d = decide_at(&rule, state, 3, 300 * MS);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_ns, 700 * MS);
    /* every stamp back: the key is fresh, but a clock that steps back behind 200 ms is still
     * clamped to it (the stamp at 0 left at 1 s, measured from 200 ms on) */
    refund_at(&rule, state, 4, 200 * MS, 300 * MS);
    assert_true(sl_state_is_fresh(&rule, state, START + 300 * MS));
    d = decide_at(&rule, state, 4, 100 * MS);
    assert_true(d.allowed);
    assert_int_equal(d.reset_after_ns, SEC); /* stamped at 200 ms, not 100 ms */
    free(state);
}

/*
 * token_bucket N 1, W 1 s, B 4: T 1 s, tau 4 s. A charge of 2 at 0 (TAT 2 s), then 3 at 1 s
 * (TAT 5 s). A refund of the 2 at 1 s gives back only what the bucket had not refilled by then,
 * 2 s - 1 s: TAT 4 s, exactly the state of a bucket that only took the 3 at 1 s. Giving back
 * all of it (TAT 3 s) would leave one more unit than that bucket ever had. A refund once the
 * charge has refilled gives back nothing.
 */
static void test_refund_token_bucket(void **cm)
{
    (void)cm;
    sl_rule_t rule = make_rule(SL_TOKEN_BUCKET, 1, SEC, 4, SL_DEFAULT, 0);
    void *state = new_state(&rule), *never = new_state(&rule);
    decide_at(&rule, state, 2, 0);
    assert_int_equal(decide_at(&rule, state, 3, SEC).remaining, 0);
    sl_decision_t d = refund_at(&rule, state, 2, 0, SEC);
    assert_int_equal(d.remaining, 1);
    assert_int_equal(d.reset_after_ns, 3 * SEC);
    decide_at(&rule, never, 3, SEC);
    assert_memory_equal(state, never, sl_state_size(&rule));
    d = refund_at(&rule, state, 1, 3 * SEC, 4 * SEC); /* refilled by 4 s: TAT stays */
    assert_memory_equal(state, never, sl_state_size(&rule));
    /* at the charge's own time a refund undoes it byte for byte */
    decide_at(&rule, never, 2, 2 * SEC);
    refund_at(&rule, never, 2, 2 * SEC, 2 * SEC);
    assert_memory_equal(state, never, sl_state_size(&rule));
    free(never);
    free(state);
}

/* A rule of k's numbers whose debt is unbounded (max_debt SL_COUNT_MAX). */
static sl_rule_t unbounded(const sl_rule_t *rule)
{
    sl_rule_t r = *rule;
    r.max_debt = SL_COUNT_MAX;
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    return r;
}

/* A charge past the limit puts every algorithm in debt: a peek is refused until retry_after,
 * then admitted (token_bucket/gcra with max_delay: admitted within max_delay of it, a peek is
 * never delayed); the state checks, and survives its packed form. */
static void test_debt_every_algorithm(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t u = unbounded(&k[i].rule), *rule = &u;
        void *state = new_state(rule), *back = new_state(rule);
        assert_true(decide_at(rule, state, k[i].capacity, 0).allowed);
        /* with max_delay, a debt within it only delays: go past it */
        int64_t debt = 3 + (rule->interval_ns > 0 ? rule->max_delay_ns / rule->interval_ns : 0);
        sl_decision_t d = settle_at(rule, state, k[i].capacity, k[i].capacity + debt, 0, 10 * MS);
        assert_false(d.allowed);
        assert_int_equal(d.remaining, 0);
        assert_true(d.retry_after_ns > 0);
        assert_true(d.reset_after_ns >= d.retry_after_ns);
        int64_t until = 10 * MS + d.retry_after_ns;
        assert_false(decide_at(rule, state, 0, until - 1).allowed);
        assert_false(decide_at(rule, state, 1, until - 1).allowed);
        assert_true(decide_at(rule, state, 0, until).allowed);
        unsigned char packed[256];
        assert_true(sl_state_packed_max(rule) <= sizeof(packed));
        size_t len = sl_state_pack(rule, state, packed);
        assert_int_equal(sl_state_unpack(rule, packed, len, back), SL_OK);
        sl_decision_t e = decide_at(rule, back, 0, 10 * MS);
        assert_int_equal(e.allowed, false);
        assert_int_equal(e.retry_after_ns, d.retry_after_ns);
        assert_int_equal(e.reset_after_ns, d.reset_after_ns);
        free(back);
        free(state);
    }
}

/*
 * max_debt bounds a debt, for every algorithm (default the capacity). The attack a client can
 * send, a settle of reserved 0 and actual INT64_MAX (which locked a token_bucket key for about 235
 * years), is refused: SL_EDEBT, the state byte for byte as it was, the reply a peek on it. A debt
 * of exactly max_debt is taken, one unit more is refused; max_debt 0 takes no debt but admits a
 * charge up to the capacity. max_debt outside [0, SL_COUNT_MAX] is no rule.
 */
static void test_max_debt(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        assert_int_equal(rule->max_debt, k[i].capacity);
        unsigned char *state = new_state(rule), *was = new_state(rule);
        sl_decision_t d;
        assert_int_equal(sl_settle(rule, state, 0, INT64_MAX, START, START, &d), SL_EDEBT);
        assert_memory_equal(state, was, sl_state_size(rule));
        assert_true(d.allowed);
        assert_int_equal(d.remaining, k[i].capacity);
        int64_t full = k[i].capacity + rule->max_debt;
        assert_int_equal(sl_settle(rule, state, 0, full, START, START, &d), SL_OK);
        assert_true(!d.allowed || rule->max_delay_ns > 0); /* in debt (or within the delay) */
        memcpy(was, state, sl_state_size(rule));
        assert_int_equal(sl_settle(rule, state, 0, 1, START, START, &d), SL_EDEBT);
        assert_memory_equal(state, was, sl_state_size(rule));
        assert_int_equal(sl_settle(rule, state, 1, 2, START, START, &d), SL_EDEBT); /* a charge */
        assert_int_equal(sl_settle(rule, state, 2, 1, START, START, &d), SL_OK);    /* a refund */

        sl_rule_t none = *rule;
        none.max_debt = 0;
        assert_int_equal(sl_rule_prepare(&none), SL_OK);
        memset(state, 0, sl_state_size(rule));
        assert_int_equal(sl_settle(&none, state, 0, k[i].capacity, START, START, &d), SL_OK);
        assert_int_equal(d.remaining, 0);
        assert_int_equal(sl_settle(&none, state, 0, 1, START, START, &d), SL_EDEBT);
        free(was);
        free(state);
    }
    sl_rule_t r;
    assert_int_equal(sl_rule_init(&r, SL_GCRA, 10, SEC), SL_OK);
    sl_rule_t bad = r;
    bad.max_debt = -2;
    assert_int_equal(sl_rule_prepare(&bad), SL_EMAXDEBT);
    bad.max_debt = SL_COUNT_MAX + 1;
    assert_int_equal(sl_rule_prepare(&bad), SL_EMAXDEBT);
    bad.max_debt = SL_COUNT_MAX;
    assert_int_equal(sl_rule_prepare(&bad), SL_OK);
    assert_false(sl_rule_same(&r, &bad)); /* another bound: another rule */
}

/* Debt saturates (counts at SL_COUNT_MAX, TAT at INT64_MAX) and the state stays valid. */
static void test_debt_saturates(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t u = unbounded(&k[i].rule), *rule = &u;
        void *state = new_state(rule);
        sl_decision_t d = settle_at(rule, state, 0, INT64_MAX, 0, 0);
        assert_false(d.allowed);
        assert_int_equal(d.remaining, 0);
        d = settle_at(rule, state, 0, INT64_MAX, 0, 0); /* twice: no overflow */
        assert_false(d.allowed);
        int64_t first; /* the second word, or for token_bucket/gcra the first */
        switch (rule->algorithm) {
        case SL_FIXED_WINDOW:
            memcpy(&first, (unsigned char *)state + 8, sizeof(first));
            assert_int_equal(first, SL_COUNT_MAX);               /* the count */
            assert_true(decide_at(rule, state, 0, SEC).allowed); /* the next window */
            break;
        case SL_TOKEN_BUCKET:
        case SL_GCRA:
            memcpy(&first, state, sizeof(first));
            assert_int_equal(first, INT64_MAX); /* TAT */
            assert_int_equal(d.reset_after_ns, INT64_MAX - START);
            assert_false(sl_state_is_fresh(rule, state, SL_NOW_MAX_NS));
            break;
        case SL_SLIDING_BUCKETS:
            memcpy(&first, (unsigned char *)state + 8, sizeof(first));
            assert_int_equal(first, SL_COUNT_MAX); /* the total */
            break;
        case SL_SLIDING_WINDOW:
        case SL_SLIDING_LOG:
        case SL_CONCURRENCY: /* one hold of 65535 units, the most a hold records */
            break;
        }
        free(state);
    }
}

static void test_refund_settle_arguments(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_GCRA, 5, SEC);
    int64_t tat = 0;
    sl_decision_t d;
    assert_int_equal(sl_refund(&rule, &tat, -1, START, START, &d), SL_ECOST);
    assert_int_equal(sl_settle(&rule, &tat, -1, 0, START, START, &d), SL_ECOST);
    assert_int_equal(sl_settle(&rule, &tat, 0, -1, START, START, &d), SL_ECOST);
    assert_int_equal(sl_refund(NULL, &tat, 1, START, START, &d), SL_EINVAL);
    assert_int_equal(sl_refund(&rule, NULL, 1, START, START, &d), SL_EINVAL);
    assert_int_equal(sl_settle(&rule, &tat, 1, 2, START, START, NULL), SL_EINVAL);
    assert_int_equal(tat, 0);
    /* a refund of nothing charged changes nothing; an equal settle neither */
    assert_int_equal(sl_refund(&rule, &tat, 3, START, START, &d), SL_OK);
    assert_int_equal(sl_settle(&rule, &tat, 3, 3, START, START, &d), SL_OK);
    assert_int_equal(tat, 0);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, rule.capacity);
    /* now before charged is taken as charged: a settle charges at the charge's time */
    assert_int_equal(sl_settle(&rule, &tat, 0, 1, START + SEC, START, &d), SL_OK);
    assert_int_equal(tat, START + SEC + rule.interval_ns);
}

/* A decision's allowed, remaining and retry_after, failing at the caller's line. */
#define assert_decision(d, allowed_, remaining_, retry_after_)                                     \
    do {                                                                                           \
        sl_decision_t got_ = (d);                                                                  \
        assert_int_equal(got_.allowed, (allowed_));                                                \
        assert_int_equal(got_.remaining, (remaining_));                                            \
        assert_int_equal(got_.retry_after_ns, (retry_after_));                                     \
    } while (0)

/* ---- packed states ----------------------------------------------------------------------- */

/* The documented format, byte for byte: stamps at whole microseconds pack with e = 3, each entry
 * its delta and its units. The older form (one stamp per unit) reads as the same state. */
static void test_sliding_log_packed_format(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_LOG, 4, SEC);
    unsigned char *state = new_state(&rule);
    sl_decision_t d;
    const int64_t t0 = INT64_C(1000000000) * US; /* 10^9 us */
    assert_int_equal(sl_decide(&rule, state, 2, t0, &d), SL_OK);
    assert_int_equal(sl_decide(&rule, state, 1, t0 + 201 * US, &d), SL_OK);
    unsigned char out[128];
    assert_true(sl_state_packed_max(&rule) <= sizeof(out));
    size_t n = sl_state_pack(&rule, state, out);
    /* 64 + e 3; count 2; 10^9 us << 1 | 1 (more than a unit) -> 81 a8 d6 b9 07, then 2 units;
     * +201 << 1 (one unit) -> 92 03 */
    static const unsigned char want[] = {67, 2, 0x81, 0xa8, 0xd6, 0xb9, 0x07, 2, 0x92, 0x03};
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(out, want, sizeof(want));
    /* the older form: count 3 stamps, +0, +201 */
    static const unsigned char old[] = {3, 3, 0x80, 0x94, 0xeb, 0xdc, 0x03, 0x00, 0xc9, 0x01};
    unsigned char *back = new_state(&rule);
    assert_int_equal(sl_state_unpack(&rule, old, sizeof(old), back), SL_OK);
    assert_int_equal(sl_state_pack(&rule, back, out), sizeof(want));
    assert_memory_equal(out, want, sizeof(want));
    /* one nanosecond off a microsecond: the stamps pack in ns (e = 0) and still round-trip */
    assert_int_equal(sl_decide(&rule, state, 1, t0 + 201 * US + 1, &d), SL_OK);
    n = sl_state_pack(&rule, state, out);
    assert_int_equal(out[0], 64);
    assert_int_equal(sl_state_unpack(&rule, out, n, back), SL_OK);
    assert_int_equal(sl_decide(&rule, back, 0, t0 + SEC, &d), SL_OK);
    assert_int_equal(d.remaining, 2); /* t0's two units left exactly at t0 + W */
    free(back);
    free(state);
}

/*
 * LATEST in byte 0. N 3, W 1 s, times in whole ms (e = 6): 1 at t0, 1 at t0 + 2 ms, the newest
 * refunded: the latest time follows the entries [64 + 32 + 6, count 1, t0 / 1 ms << 1 (one unit),
 * 2 ms later]. The older form's DROPPED (a debt kept the newest N stamps of more) reads as one more
 * unit at the oldest stamp: [t0, t0 + 1 ms, t0 + 1 ms] + DROPPED is 2 units at t0 and 2 at t0 +
 * 1 ms, which decides as the older ring did: a peek refused until t0 leaves, then 1 left.
 */
static void test_sliding_log_packed_flags(void **cm)
{
    (void)cm;
    sl_rule_t rule = simple_rule(SL_SLIDING_LOG, 3, SEC);
    unsigned char *state = new_state(&rule), *back = new_state(&rule);
    const int64_t t0 = INT64_C(1000000000) * MS - START; /* 10^9 ms, as an offset */
    unsigned char out[64];
    decide_at(&rule, state, 1, t0);
    decide_at(&rule, state, 1, t0 + 2 * MS);
    refund_at(&rule, state, 1, t0 + 2 * MS, t0 + 2 * MS);
    size_t n = sl_state_pack(&rule, state, out);
    static const unsigned char want[] = {102, 1, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 2};
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(out, want, sizeof(want));
    assert_int_equal(sl_state_unpack(&rule, out, n, back), SL_OK);
    sl_decision_t a = decide_at(&rule, state, 1, t0 + MS); /* stepped back: clamped to t0 + 2 ms */
    sl_decision_t b = decide_at(&rule, back, 1, t0 + MS);
    assert_int_equal(a.reset_after_ns, SEC);
    assert_int_equal(b.reset_after_ns, a.reset_after_ns);
    assert_int_equal(b.remaining, a.remaining);

    /* the older form: 16 + 6, count 3, t0 / 1 ms, +1, +0 */
    static const unsigned char dropped[] = {22, 3, 0x80, 0x94, 0xeb, 0xdc, 0x03, 1, 0};
    assert_int_equal(sl_state_unpack(&rule, dropped, sizeof(dropped), back), SL_OK);
    n = sl_state_pack(&rule, back, out);
    static const unsigned char entries[] = {70, 2, 0x81, 0xa8, 0xd6, 0xb9, 0x07, 2, 3, 2};
    assert_int_equal(n, sizeof(entries));
    assert_memory_equal(out, entries, sizeof(entries));
    assert_decision(decide_at(&rule, back, 0, t0 + MS), false, 0, SEC - MS);
    assert_decision(decide_at(&rule, back, 0, t0 + SEC - 1), false, 0, 1);
    assert_decision(decide_at(&rule, back, 1, t0 + SEC), true, 0, 0);
    free(back);
    free(state);
}

/* Bytes that are not a packed state of the rule are refused, whatever they are. */
static void test_packed_state_refusals(void **cm)
{
    (void)cm;
    sl_rule_t log = simple_rule(SL_SLIDING_LOG, 3, SEC);
    unsigned char *state = new_state(&log);
    static const struct {
        const char *why;
        unsigned char bytes[16];
        size_t len;
    } bad[] = {
        {"empty", {0}, 0},
        {"no count", {3}, 1},
        {"e above 9", {10, 0}, 2},
        {"e above 9 with the dropped flag", {26, 3, 1, 0, 0}, 5},
        {"an unknown flag", {32 + 3, 0}, 2},
        {"the dropped flag on a ring that is not full", {16 + 3, 2, 1, 0}, 4},
        {"both flags", {48 + 3, 3, 1, 0, 0}, 5},
        {"the latest-time flag on a full ring", {32 + 3, 3, 1, 0, 0, 1}, 6},
        {"the latest-time flag without its time", {32 + 3, 1, 1}, 3},
        {"a latest time no later than the newest stamp", {32 + 3, 1, 1, 0}, 4},
        {"count above the limit", {3, 4, 1, 0, 0, 0}, 6},
        {"fewer stamps than the count", {3, 2, 1}, 3},
        {"a truncated varint", {3, 1, 0x80}, 3},
        {"a byte after the last stamp", {3, 1, 1, 0}, 4},
        {"a varint over 64 bits",
         {0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
         12},
        {"a stamp past SL_NOW_MAX_NS", {9, 1, 0xff, 0xff, 0xff, 0xff, 0x1f}, 7},
        {"entries with the older dropped flag", {64 + 16 + 3, 1, 1, 1}, 4},
        {"e above 9 in entries", {64 + 10, 1, 1, 1}, 4},
        {"an entry of no unit", {64 + 3, 1, 1, 0}, 4},
        {"a single unit written as a count", {64 + 3, 1, 3, 1}, 4},
        {"an entry without its units", {64 + 3, 1, 1}, 3},
        {"an entry no later than the one before", {64 + 3, 2, 2, 0}, 4},
        {"more entries than the limit", {64 + 3, 4, 2, 2, 2, 2}, 6},
        {"units past SL_COUNT_MAX",
         {64, 2, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 3, 2},
         14},
        {"entries, a latest time no later than the newest", {64 + 32 + 3, 1, 2, 0}, 4},
        {"entries, a byte after the last", {64 + 3, 1, 2, 0}, 4},
        {"an unknown flag above entries", {128 + 3, 0}, 2},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (sl_state_unpack(&log, bad[i].bytes, bad[i].len, state) != SL_ESTATE) {
            fail_msg("sliding_log: %s was not refused", bad[i].why);
        }
    }
    static const unsigned char empty[] = {0, 0}, empty_entries[] = {64, 0};
    assert_int_equal(sl_state_unpack(&log, empty, sizeof(empty), state), SL_OK);
    assert_int_equal(sl_state_unpack(&log, empty_entries, sizeof(empty_entries), state), SL_OK);
    assert_int_equal(sl_state_unpack(NULL, empty, sizeof(empty), state), SL_EINVAL);
    assert_int_equal(sl_state_unpack(&log, NULL, 2, state), SL_EINVAL);

    /* the others pack to their state: a wrong length or an invalid state is refused */
    sl_rule_t fw = simple_rule(SL_FIXED_WINDOW, 3, SEC);
    unsigned char fw_state[16] = {0}, packed[16];
    assert_int_equal(sl_state_packed_max(&fw), 16);
    assert_int_equal(sl_state_pack(&fw, fw_state, packed), 16);
    assert_int_equal(sl_state_unpack(&fw, packed, 15, fw_state), SL_ESTATE);
    int64_t over[2] = {1, SL_COUNT_MAX + 1}; /* more than any debt */
    assert_int_equal(sl_state_unpack(&fw, over, sizeof(over), fw_state), SL_ESTATE);
    over[1] = 4; /* window 1 holding 4 > N: a debt */
    assert_int_equal(sl_state_unpack(&fw, over, sizeof(over), fw_state), SL_OK);
    assert_int_equal(sl_state_unpack(&fw, packed, 16, fw_state), SL_OK);
    free(state);
}

/* ---- conversions to other parameters ------------------------------------------------------ */

/* sl_state_convert() at START + at into a new buffer (the caller frees it), checked as every
 * converted state must be: sl_state_check() accepts it, and its packed form unpacks to a state
 * that packs to the same bytes and decides alike. */
static void *convert_at(const sl_rule_t *from, const void *state, const sl_rule_t *to, int64_t at)
{
    size_t size = sl_state_size(to);
    void *out = new_state(to), *back = new_state(to), *a = new_state(to), *b = new_state(to);
    unsigned char *packed = malloc(sl_state_packed_max(to));
    unsigned char *again = malloc(sl_state_packed_max(to));
    assert_non_null(packed);
    assert_non_null(again);
    assert_int_equal(sl_state_convert(from, state, to, out, START + at), SL_OK);
    assert_int_equal(sl_state_check(to, out), SL_OK);
    size_t len = sl_state_pack(to, out, packed);
    assert_int_equal(sl_state_unpack(to, packed, len, back), SL_OK);
    assert_int_equal(sl_state_pack(to, back, again), len);
    assert_memory_equal(packed, again, len);
    for (int64_t cost = 0; cost <= 2; cost++) {
        memcpy(a, out, size);
        memcpy(b, back, size);
        sl_decision_t x = decide_at(to, a, cost, at), y = decide_at(to, b, cost, at);
        assert_int_equal(x.allowed, y.allowed);
        assert_int_equal(x.remaining, y.remaining);
        assert_int_equal(x.retry_after_ns, y.retry_after_ns);
        assert_int_equal(x.reset_after_ns, y.reset_after_ns);
    }
    free(again);
    free(packed);
    free(b);
    free(a);
    free(back);
    return out;
}

/*
 * sliding_log, 10 per minute, a key with 5 entries (0, 1, 2, 3, 4 s), its override changed at
 * 10 s. To limit 2: the newest 2 entries stay, the older units joining the oldest of them (4 at
 * 3 s, 1 at 4 s): refused, 0 left, a peek refused too (over the limit is debt); a request of 1
 * waits for the 4th oldest unit, 3 s, to leave at 63 s, as with all 5 entries. To 20 and back to
 * 10, or to 5 (which holds all 5) and back: 15 and 5 left, the history kept both ways. Back from
 * 2 to 10 the 5 units are still there, at 3 s and 4 s: 4 left after a request, 7 after one more
 * at 63 s (the 4 at 3 s gone).
 */
static void test_convert_sliding_log_override(void **cm)
{
    (void)cm;
    sl_rule_t ten = simple_rule(SL_SLIDING_LOG, 10, 60 * SEC);
    sl_rule_t two = simple_rule(SL_SLIDING_LOG, 2, 60 * SEC);
    sl_rule_t five = simple_rule(SL_SLIDING_LOG, 5, 60 * SEC);
    sl_rule_t twenty = simple_rule(SL_SLIDING_LOG, 20, 60 * SEC);
    void *state = new_state(&ten);
    for (int64_t s = 0; s < 5; s++)
        decide_at(&ten, state, 1, s * SEC);

    void *low = convert_at(&ten, state, &two, 10 * SEC);
    assert_decision(decide_at(&two, low, 0, 10 * SEC), false, 0, 53 * SEC);
    assert_decision(decide_at(&two, low, 1, 10 * SEC), false, 0, 53 * SEC);

    void *up = convert_at(&ten, state, &twenty, 10 * SEC);
    assert_decision(decide_at(&twenty, up, 0, 10 * SEC), true, 15, 0);
    void *back = convert_at(&twenty, up, &ten, 10 * SEC);
    assert_decision(decide_at(&ten, back, 0, 10 * SEC), true, 5, 0);
    free(back);
    void *held = convert_at(&ten, state, &five, 10 * SEC);
    assert_decision(decide_at(&five, held, 0, 10 * SEC), true, 0, 0);
    assert_decision(decide_at(&five, held, 1, 10 * SEC), false, 0, 50 * SEC);
    back = convert_at(&five, held, &ten, 10 * SEC);
    assert_decision(decide_at(&ten, back, 1, 10 * SEC), true, 4, 0);
    free(back);

    back = convert_at(&two, low, &ten, 10 * SEC);
    assert_decision(decide_at(&ten, back, 1, 10 * SEC), true, 4, 0);
    assert_decision(decide_at(&ten, back, 1, 63 * SEC), true, 7, 0); /* 4 s, 10 s, 63 s */
    assert_decision(decide_at(&two, low, 1, 63 * SEC), true, 0, 0);  /* 4 s left: 1 + 1 */
    free(back);
    free(held);
    free(up);
    free(low);
    free(state);
}

/*
 * sliding_log's latest time and debt. A refund that took the newest entry back keeps its time:
 * N 4, entries at 0 and 200 ms, the 200 ms one refunded; converted to N 3, a clock stepped back
 * to 100 ms is still clamped to 200 ms (the entry at 0 leaves at 1 s measured from there: at
 * 1.15 s 2 left, not 3). A debt: N 3, 3 at 0 and 2 more at 100 ms are 5 units in 2 entries; to
 * N 5 they are the 5 units exactly: a peek allowed with 0 left, a request refused until 1 s.
 * With a window of 50 ms the units at 0 are gone: 2 at 100 ms.
 */
static void test_convert_sliding_log_flags(void **cm)
{
    (void)cm;
    sl_rule_t four = simple_rule(SL_SLIDING_LOG, 4, SEC),
              three = simple_rule(SL_SLIDING_LOG, 3, SEC);
    void *state = new_state(&four);
    decide_at(&four, state, 1, 0);
    decide_at(&four, state, 1, 200 * MS);
    refund_at(&four, state, 1, 200 * MS, 200 * MS);
    void *out = convert_at(&four, state, &three, 300 * MS);
    assert_decision(decide_at(&three, out, 1, 100 * MS), true, 1, 0); /* clamped to 200 ms */
    assert_decision(decide_at(&three, out, 0, 1150 * MS), true, 2, 0);
    free(out);
    free(state);

    sl_rule_t five = simple_rule(SL_SLIDING_LOG, 5, SEC);
    sl_rule_t short_window = simple_rule(SL_SLIDING_LOG, 5, 50 * MS);
    state = new_state(&three);
    decide_at(&three, state, 3, 0);
    settle_at(&three, state, 0, 2, 100 * MS, 100 * MS);
    out = convert_at(&three, state, &five, 200 * MS);
    assert_decision(decide_at(&five, out, 0, 200 * MS), true, 0, 0);
    assert_decision(decide_at(&five, out, 1, 999 * MS), false, 0, 1 * MS);
    assert_decision(decide_at(&five, out, 1, SEC), true, 2, 0);
    free(out);
    out = convert_at(&three, state, &short_window, 200 * MS);
    assert_decision(decide_at(&short_window, out, 0, 120 * MS), true, 3, 0); /* clamped: 100 ms */
    assert_decision(decide_at(&short_window, out, 1, 200 * MS), true, 4, 0);
    free(out);
    free(state);
}

/*
 * fixed_window N 10, W 20 s, 5 taken at 2 s (window [0, 20 s)), converted at 5 s. The same
 * window is a copy: to N 2 it is over the limit until 20 s, back to 10 it has 5 left. W 4 s:
 * the 5 go to [4 s, 8 s), the window of now; W 40 s to [0, 40 s). At 25 s the window is over:
 * fresh, all zero.
 */
static void test_convert_fixed_window(void **cm)
{
    (void)cm;
    sl_rule_t from = simple_rule(SL_FIXED_WINDOW, 10, 20 * SEC);
    sl_rule_t two = simple_rule(SL_FIXED_WINDOW, 2, 20 * SEC);
    sl_rule_t short_window = simple_rule(SL_FIXED_WINDOW, 10, 4 * SEC);
    sl_rule_t long_window = simple_rule(SL_FIXED_WINDOW, 10, 40 * SEC);
    void *state = new_state(&from);
    decide_at(&from, state, 5, 2 * SEC);
    void *out = convert_at(&from, state, &two, 5 * SEC);
    assert_memory_equal(out, state, sl_state_size(&from));
    assert_decision(decide_at(&two, out, 1, 5 * SEC), false, 0, 15 * SEC);
    void *back = convert_at(&two, out, &from, 6 * SEC);
    assert_decision(decide_at(&from, back, 1, 6 * SEC), true, 4, 0);
    free(back);
    free(out);

    out = convert_at(&from, state, &short_window, 5 * SEC);
    sl_decision_t d = decide_at(&short_window, out, 1, 5 * SEC);
    assert_decision(d, true, 4, 0);
    assert_int_equal(d.reset_after_ns, 3 * SEC);
    assert_decision(decide_at(&short_window, out, 1, 8 * SEC), true, 9, 0);
    free(out);
    out = convert_at(&from, state, &long_window, 5 * SEC);
    d = decide_at(&long_window, out, 1, 5 * SEC);
    assert_decision(d, true, 4, 0);
    assert_int_equal(d.reset_after_ns, 35 * SEC);
    free(out);

    out = convert_at(&from, state, &short_window, 25 * SEC);
    static const unsigned char zero[16] = {0};
    assert_memory_equal(out, zero, sizeof(zero));
    free(out);
    free(state);
}

/*
 * sliding_window N 10, W 10 s: 4 at 5 s (window [0, 10 s)), 3 at 12 s; at 15 s prev 4, curr 3.
 * W 4 s: now in [12 s, 16 s); prev's units can be as late as 10 s - 1 ns, in [8 s, 12 s): prev
 * 4, curr 3; at e = 3 s, floor(10 - 4 * 1/4) - 3 = 6 left (7 with the true times: safe). W 40
 * s: both in [0, 40 s): curr 7, 3 left. W 5 s: now in [15 s, 20 s), prev's window [5 s, 10 s)
 * is two back: dropped, curr 3: 7 left, as the true times give.
 */
static void test_convert_sliding_window(void **cm)
{
    (void)cm;
    sl_rule_t from = simple_rule(SL_SLIDING_WINDOW, 10, 10 * SEC);
    void *state = new_state(&from);
    decide_at(&from, state, 4, 5 * SEC);
    decide_at(&from, state, 3, 12 * SEC);
    static const struct {
        int64_t window_ns, remaining;
    } rows[] = {{4 * SEC, 6}, {40 * SEC, 3}, {5 * SEC, 7}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        sl_rule_t to = simple_rule(SL_SLIDING_WINDOW, 10, rows[i].window_ns);
        void *out = convert_at(&from, state, &to, 15 * SEC);
        assert_decision(decide_at(&to, out, 0, 15 * SEC), true, rows[i].remaining, 0);
        free(out);
    }
    /* the same window is a copy, whatever the limit: 10 - 4 * 1/2 - 3 = 5, and 2 - 5 < 0 */
    sl_rule_t two = simple_rule(SL_SLIDING_WINDOW, 2, 10 * SEC);
    void *out = convert_at(&from, state, &two, 15 * SEC);
    assert_memory_equal(out, state, sl_state_size(&from));
    assert_decision(decide_at(&from, out, 0, 15 * SEC), true, 5, 0);
    assert_false(decide_at(&two, out, 0, 15 * SEC).allowed);
    free(out);
    free(state);
}

/*
 * sliding_buckets N 10, W 1 s, K 10 (G 100 ms): 2 at 110 ms (bucket 1), 3 at 420 ms (bucket 4).
 * K 4 (G 250 ms): bucket 1's latest instant, 200 ms - 1 ns, is in bucket 0, 420 ms in bucket 1;
 * bucket 0 is counted until 5 * 250 ms - 1 ns. K 20 (G 50 ms): bucket 1 goes to [150, 200 ms),
 * counted until 24 * 50 ms - 1 ns, 50 ms longer than the units' own [100, 150 ms) would be.
 * W 200 ms, K 2: its ring reaches back to bucket 2 only: bucket 1 is dropped.
 */
static void test_convert_sliding_buckets(void **cm)
{
    (void)cm;
    sl_rule_t from = make_rule(SL_SLIDING_BUCKETS, 10, SEC, SL_DEFAULT, 10, 0);
    sl_rule_t coarse = make_rule(SL_SLIDING_BUCKETS, 10, SEC, SL_DEFAULT, 4, 0);
    sl_rule_t fine = make_rule(SL_SLIDING_BUCKETS, 10, SEC, SL_DEFAULT, 20, 0);
    sl_rule_t short_window = make_rule(SL_SLIDING_BUCKETS, 10, 200 * MS, SL_DEFAULT, 2, 0);
    void *state = new_state(&from);
    decide_at(&from, state, 2, 110 * MS);
    decide_at(&from, state, 3, 420 * MS);

    void *out = convert_at(&from, state, &coarse, 500 * MS);
    assert_decision(decide_at(&coarse, out, 0, 500 * MS), true, 5, 0);
    assert_decision(decide_at(&coarse, out, 0, 1250 * MS - 2), true, 5, 0);
    assert_decision(decide_at(&coarse, out, 0, 1250 * MS - 1), true, 7, 0);
    free(out);
    out = convert_at(&from, state, &fine, 500 * MS);
    assert_decision(decide_at(&fine, out, 0, 1200 * MS - 2), true, 5, 0);
    assert_decision(decide_at(&fine, out, 0, 1200 * MS - 1), true, 7, 0);
    free(out);
    out = convert_at(&from, state, &short_window, 500 * MS);
    assert_decision(decide_at(&short_window, out, 0, 420 * MS), true, 7, 0);
    free(out);
    free(state);
}

/*
 * token_bucket N 10 per 10 s (T 1 s), burst 10: 6 taken at 0, TAT 6 s. At 2 s, 4 units are not
 * refilled: T 2 s (N 5), burst 10: TAT 2 + 4 * 2 = 10 s, (20 - 8) / 2 = 6 left. At 2.5 s, 3.5 s
 * owed is 4 units (rounded up): T 500 ms (N 20), burst 20: TAT 4.5 s, (10 - 2) / 0.5 = 16 left.
 * The same T with burst 3 is a copy: TAT 6 s at 2 s is 1 s beyond a tolerance of 3 s: in debt,
 * a peek waits 1 s. At 7 s the bucket is full again: fresh.
 */
static void test_convert_token_bucket(void **cm)
{
    (void)cm;
    sl_rule_t from = make_rule(SL_TOKEN_BUCKET, 10, 10 * SEC, 10, SL_DEFAULT, 0);
    sl_rule_t slower = make_rule(SL_TOKEN_BUCKET, 5, 10 * SEC, 10, SL_DEFAULT, 0);
    sl_rule_t faster = make_rule(SL_TOKEN_BUCKET, 20, 10 * SEC, 20, SL_DEFAULT, 0);
    sl_rule_t small = make_rule(SL_TOKEN_BUCKET, 10, 10 * SEC, 3, SL_DEFAULT, 0);
    int64_t tat = 0, *out;
    decide_at(&from, &tat, 6, 0);

    out = convert_at(&from, &tat, &slower, 2 * SEC);
    assert_int_equal(*out, START + 10 * SEC);
    assert_decision(decide_at(&slower, out, 0, 2 * SEC), true, 6, 0);
    free(out);
    out = convert_at(&from, &tat, &faster, 2500 * MS);
    assert_int_equal(*out, START + 4500 * MS);
    assert_decision(decide_at(&faster, out, 0, 2500 * MS), true, 16, 0);
    free(out);
    out = convert_at(&from, &tat, &small, 2 * SEC);
    assert_int_equal(*out, tat);
    assert_decision(decide_at(&small, out, 0, 2 * SEC), false, 0, SEC);
    free(out);
    out = convert_at(&from, &tat, &slower, 7 * SEC);
    assert_int_equal(*out, 0);
    free(out);

    /* a saturated debt stays one: to a longer T it saturates again, to a shorter it is finite */
    tat = INT64_MAX;
    out = convert_at(&from, &tat, &slower, 0);
    assert_int_equal(*out, INT64_MAX);
    free(out);
    out = convert_at(&from, &tat, &faster, 0);
    assert_true(*out > START && *out < INT64_MAX);
    assert_false(decide_at(&faster, out, 0, 0).allowed);
    free(out);
}

/* gcra as redis-cell, N 1 per 1 s, burst 4 (T 1 s, tolerance 5 s): 3 at 0, TAT 3 s. At 1 s, 2
 * units owed; N 2 (T 500 ms), burst 9 (tolerance 5 s): TAT 2 s, (5 - 1) / 0.5 = 8 left. */
static void test_convert_gcra(void **cm)
{
    (void)cm;
    sl_rule_t from = make_rule(SL_GCRA, 1, SEC, 4, SL_DEFAULT, 0);
    sl_rule_t to = make_rule(SL_GCRA, 2, SEC, 9, SL_DEFAULT, 0);
    int64_t tat = 0;
    decide_at(&from, &tat, 3, 0);
    int64_t *out = convert_at(&from, &tat, &to, SEC);
    assert_int_equal(*out, START + 2 * SEC);
    assert_decision(decide_at(&to, out, 0, SEC), true, 8, 0);
    free(out);
}

/* Parameters that leave a state's meaning alone copy it byte for byte, every algorithm. */
static void test_convert_same_meaning(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        void *state = new_state(rule);
        decide_at(rule, state, 2, 0);
        decide_at(rule, state, 1, 300 * MS);
        settle_at(rule, state, 1, 3, 300 * MS, 400 * MS);
        void *out = convert_at(rule, state, rule, 2 * SEC); /* even when fresh by then */
        assert_memory_equal(out, state, sl_state_size(rule));
        free(out);
        free(state);
    }
}

/* Wrong arguments: nothing written. */
static void test_convert_arguments(void **cm)
{
    (void)cm;
    sl_rule_t fw = simple_rule(SL_FIXED_WINDOW, 5, SEC),
              sw = simple_rule(SL_SLIDING_WINDOW, 5, SEC);
    sl_rule_t unprepared = rule_fields(SL_FIXED_WINDOW, 5, SEC, SL_DEFAULT, SL_DEFAULT, 0);
    int64_t from[3] = {0}, to[3] = {7, 7, 7};
    const int64_t untouched[3] = {7, 7, 7};
    assert_int_equal(sl_state_convert(NULL, from, &fw, to, START), SL_EINVAL);
    assert_int_equal(sl_state_convert(&fw, NULL, &fw, to, START), SL_EINVAL);
    assert_int_equal(sl_state_convert(&fw, from, NULL, to, START), SL_EINVAL);
    assert_int_equal(sl_state_convert(&fw, from, &fw, NULL, START), SL_EINVAL);
    assert_int_equal(sl_state_convert(&fw, from, &unprepared, to, START), SL_EINVAL);
    assert_int_equal(sl_state_convert(&fw, from, &sw, to, START), SL_EALGORITHM);
    from[1] = -1; /* a negative count */
    assert_int_equal(sl_state_convert(&fw, from, &fw, to, START), SL_ESTATE);
    assert_memory_equal(to, untouched, sizeof(to));
    sl_rule_t tb = simple_rule(SL_TOKEN_BUCKET, 5, SEC), gcra = simple_rule(SL_GCRA, 5, SEC);
    assert_int_equal(sl_state_convert(&tb, from + 2, &gcra, to, START), SL_EALGORITHM);
    assert_memory_equal(to, untouched, sizeof(to));
}

/* sl_state_saturate: the bytes sl_decide() writes when a fresh key takes the whole capacity at
 * that time; such a key has nothing left then (a peek reports remaining 0, a cost of 1 waits,
 * or with max_delay is only delayed), is fresh exactly at the peek's reset_after, and the state
 * checks and survives its packed form. NULL arguments and a rule never prepared are refused. */
static void test_saturate_every_algorithm(void **cm)
{
    (void)cm;
    known_t k[9];
    size_t n = known_rules(k);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &k[i].rule;
        unsigned char *state = new_state(rule), *want = new_state(rule), *back = new_state(rule);
        int64_t at = 333 * MS + 7;
        memset(state, 0xa5, sl_state_size(rule)); /* every byte written */
        assert_int_equal(sl_state_saturate(rule, state, START + at), SL_OK);
        assert_true(decide_at(rule, want, k[i].capacity, at).allowed);
        assert_memory_equal(state, want, sl_state_size(rule));
        assert_int_equal(sl_state_check(rule, state), SL_OK);
        assert_false(sl_state_is_fresh(rule, state, START + at));
        sl_decision_t d = decide_at(rule, state, 0, at);
        assert_int_equal(d.remaining, 0);
        assert_true(d.reset_after_ns > 0);
        assert_true(sl_state_is_fresh(rule, state, START + at + d.reset_after_ns));
        assert_false(sl_state_is_fresh(rule, state, START + at + d.reset_after_ns - 1));
        sl_decision_t one = decide_at(rule, back, 1, at); /* back is fresh: admitted at once */
        assert_true(one.allowed && one.delay_ns == 0);
        memcpy(back, state, sl_state_size(rule));
        one = decide_at(rule, back, 1, at);
        assert_true(!one.allowed || one.delay_ns > 0);
        unsigned char packed[256];
        size_t len = sl_state_pack(rule, state, packed);
        assert_int_equal(sl_state_unpack(rule, packed, len, back), SL_OK);
        assert_memory_equal(back, state, sl_state_size(rule));
        free(back);
        free(want);
        free(state);
    }
    sl_rule_t unprepared = rule_fields(SL_GCRA, 5, SEC, SL_DEFAULT, SL_DEFAULT, 0);
    unsigned char state[64];
    assert_int_equal(sl_state_saturate(&unprepared, state, START), SL_EINVAL);
    assert_int_equal(sl_state_saturate(&k[0].rule, NULL, START), SL_EINVAL);
    assert_int_equal(sl_state_saturate(NULL, state, START), SL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sliding_log_seed003),
        cmocka_unit_test(test_sliding_log_excludes_now_minus_w),
        cmocka_unit_test(test_sliding_log_clamps_backwards_time),
        cmocka_unit_test(test_fixed_window_table),
        cmocka_unit_test(test_fixed_window_epoch_alignment),
        cmocka_unit_test(test_sliding_window_table),
        cmocka_unit_test(test_sliding_buckets_table),
        cmocka_unit_test(test_sliding_buckets_clamps_backwards_time),
        cmocka_unit_test(test_token_bucket_table),
        cmocka_unit_test(test_token_bucket_max_delay),
        cmocka_unit_test(test_gcra_redis_cell_table),
        cmocka_unit_test(test_gcra_time_back_and_max_delay),
        cmocka_unit_test(test_fresh_state_peek),
        cmocka_unit_test(test_cost_over_capacity),
        cmocka_unit_test(test_negative_cost_and_null_arguments),
        cmocka_unit_test(test_peek_and_rejection_never_write),
        cmocka_unit_test(test_negative_now_is_zero),
        cmocka_unit_test(test_state_is_fresh_after_reset),
        cmocka_unit_test(test_unaligned_state),
        cmocka_unit_test(test_settle_worked_example),
        cmocka_unit_test(test_refund_windows),
        cmocka_unit_test(test_refund_sliding_log),
        cmocka_unit_test(test_refund_token_bucket),
        cmocka_unit_test(test_debt_every_algorithm),
        cmocka_unit_test(test_max_debt),
        cmocka_unit_test(test_debt_saturates),
        cmocka_unit_test(test_refund_settle_arguments),
        cmocka_unit_test(test_sliding_log_packed_format),
        cmocka_unit_test(test_sliding_log_packed_flags),
        cmocka_unit_test(test_packed_state_refusals),
        cmocka_unit_test(test_convert_sliding_log_override),
        cmocka_unit_test(test_convert_sliding_log_flags),
        cmocka_unit_test(test_convert_fixed_window),
        cmocka_unit_test(test_convert_sliding_window),
        cmocka_unit_test(test_convert_sliding_buckets),
        cmocka_unit_test(test_convert_token_bucket),
        cmocka_unit_test(test_convert_gcra),
        cmocka_unit_test(test_convert_same_meaning),
        cmocka_unit_test(test_convert_arguments),
        cmocka_unit_test(test_saturate_every_algorithm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
