/*
 * test_watch.c - a rule's per-second counters and top keys (engine/watch.h), with explicit times:
 * seconds summed over loops, a slot reused 15 minutes later, a clock that steps back, the top's
 * window of whole intervals, denials (shadow ones too), and a key longer than what is kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine/watch.h"

#define S  INT64_C(1000000000)
#define T0 (INT64_C(1700000000) * S) /* a multiple of 10 s */

static void test_rates_summed_over_loops(void **unused)
{
    (void)unused;
    watch_t *w = watch_create(2, 7);
    assert_non_null(w);
    watch_record(w, 0, "a", 1, WATCH_ALLOWED, T0);
    watch_record(w, 1, "a", 1, WATCH_ALLOWED, T0 + S / 2);
    watch_record(w, 1, "b", 1, WATCH_DENIED, T0 + S - 1);
    watch_record(w, 0, "c", 1, WATCH_SHADOW_DENIED, T0 + 2 * S);
    uint64_t a[3], d[3], sh[3];
    watch_rates(w, T0 / S + 3, 3, a, d, sh); /* seconds T0, T0+1, T0+2 */
    assert_int_equal(a[0], 2);
    assert_int_equal(d[0], 1);
    assert_int_equal(sh[0], 0);
    assert_int_equal(a[1] + d[1] + sh[1], 0);
    assert_int_equal(sh[2], 1);
    watch_release(w);
}

static void test_rates_slot_reused_after_15_minutes(void **unused)
{
    (void)unused;
    watch_t *w = watch_create(1, 7);
    watch_record(w, 0, "a", 1, WATCH_ALLOWED, T0);
    watch_record(w, 0, "a", 1, WATCH_ALLOWED, T0 + WATCH_SECONDS * S); /* the same slot */
    uint64_t a[1], d[1], sh[1];
    watch_rates(w, T0 / S + 1, 1, a, d, sh);
    assert_int_equal(a[0], 0); /* that second is gone: not read as the new one's */
    watch_rates(w, T0 / S + WATCH_SECONDS + 1, 1, a, d, sh);
    assert_int_equal(a[0], 1);
    watch_release(w);
}

static void test_clock_back_stays_in_its_second(void **unused)
{
    (void)unused;
    watch_t *w = watch_create(1, 7);
    watch_record(w, 0, "a", 1, WATCH_ALLOWED, T0 + 5 * S);
    watch_record(w, 0, "a", 1, WATCH_ALLOWED, T0 + 3 * S); /* a clock that stepped back */
    uint64_t a[3], d[3], sh[3];
    watch_rates(w, T0 / S + 6, 3, a, d, sh);
    assert_int_equal(a[2], 2);
    assert_int_equal(a[0], 0);
    watch_release(w);
}

static void test_top_window_is_whole_intervals(void **unused)
{
    (void)unused;
    watch_t *w = watch_create(2, 7);
    for (int i = 0; i < 5; i++) {
        watch_record(w, i % 2, "old", 3, WATCH_ALLOWED, T0); /* interval k */
    }
    for (int i = 0; i < 3; i++) {
        watch_record(w, i % 2, "new", 3, WATCH_DENIED, T0 + 50 * S); /* interval k + 5 */
    }
    topk_item_t out[WATCH_TOP_MAX];
    uint64_t total;
    long n = watch_top(w, false, T0 + 59 * S, 10, out, &total);
    assert_int_equal(n, 2);
    assert_memory_equal(out[0].key, "old", 3);
    assert_int_equal(out[0].count, 5);
    assert_int_equal(out[0].error, 0);
    assert_int_equal(total, 8);
    n = watch_top(w, true, T0 + 59 * S, 10, out, &total);
    assert_int_equal(n, 1);
    assert_memory_equal(out[0].key, "new", 3);
    assert_int_equal(out[0].count, 3);
    /* ten seconds on, interval k is out of the window */
    n = watch_top(w, false, T0 + 60 * S, 10, out, &total);
    assert_int_equal(n, 1);
    assert_memory_equal(out[0].key, "new", 3);
    /* and a loop that starts interval k + 6 reuses k's sketch */
    watch_record(w, 0, "next", 4, WATCH_ALLOWED, T0 + 60 * S);
    n = watch_top(w, false, T0 + 60 * S, 10, out, &total);
    assert_int_equal(n, 2);
    watch_release(w);
}

static void test_top_long_key_counted_whole(void **unused)
{
    (void)unused;
    watch_t *w = watch_create(1, 7);
    char k1[100], k2[100];
    memset(k1, 'x', sizeof k1);
    memcpy(k2, k1, sizeof k2);
    k2[99] = 'y'; /* the same first 64 bytes */
    watch_record(w, 0, k1, sizeof k1, WATCH_ALLOWED, T0);
    watch_record(w, 0, k1, sizeof k1, WATCH_ALLOWED, T0);
    watch_record(w, 0, k2, sizeof k2, WATCH_ALLOWED, T0);
    topk_item_t out[WATCH_TOP_MAX];
    uint64_t total;
    long n = watch_top(w, false, T0, 10, out, &total);
    assert_int_equal(n, 2);
    assert_int_equal(out[0].count, 2);
    assert_int_equal(out[0].key_len, 100);
    assert_int_equal(out[1].count, 1);
    watch_release(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates_summed_over_loops),
        cmocka_unit_test(test_rates_slot_reused_after_15_minutes),
        cmocka_unit_test(test_clock_back_stays_in_its_second),
        cmocka_unit_test(test_top_window_is_whole_intervals),
        cmocka_unit_test(test_top_long_key_counted_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
