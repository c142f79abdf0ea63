/*
 * test_approx_count.c - an approximate rule's count of one key on one node
 * (src/store/approx_count.h): when it decides locally, what it sends, and which replies it takes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store/approx_count.h"

#define MS INT64_C(1000000)
#define S  (100 * MS) /* the sync interval */

/* A key new here is strict; the reply is its count, used for one interval after it arrives. */
static void test_count(void **unused)
{
    (void)unused;
    approx_count_t c = APPROX_COUNT_NEW;
    assert_int_equal(approx_decide(&c, 1, 0), APPROX_STRICT);
    approx_strict_end(&c, 1, true, 5, 0, S, 2 * MS);
    assert_int_equal(approx_decide(&c, 3, 10 * MS), APPROX_ADMIT);
    assert_int_equal(approx_decide(&c, 3, 11 * MS), APPROX_REFUSE); /* 5 - 3 < 3 */
    assert_int_equal(approx_decide(&c, 2, 12 * MS), APPROX_ADMIT);
    assert_int_equal(approx_left(&c), 0);
    assert_int_equal(approx_decide(&c, 1, 2 * MS + S), APPROX_STRICT); /* expired */
}

/* A sync sends what was admitted; its units stay subtracted until its reply counts them. */
static void test_sync(void **unused)
{
    (void)unused;
    approx_count_t c = APPROX_COUNT_NEW;
    approx_reply(&c, 10, 0, S, 20 * MS);           /* used until 120 ms */
    assert_false(approx_sync_due(&c, S, 50 * MS)); /* nothing to send */
    assert_int_equal(approx_decide(&c, 4, 20 * MS), APPROX_ADMIT);
    assert_false(approx_sync_due(&c, S, 30 * MS)); /* an interval after the first count */
    assert_true(approx_sync_due(&c, S, 100 * MS));
    assert_int_equal(approx_sync_begin(&c, 100 * MS), 4);
    assert_false(approx_sync_due(&c, S, 300 * MS)); /* one at a time */
    assert_int_equal(approx_decide(&c, 6, 110 * MS), APPROX_ADMIT);
    assert_int_equal(approx_decide(&c, 1, 111 * MS), APPROX_REFUSE); /* 10 - 4 sending - 6 */
    approx_sync_end(&c, true, 6, 100 * MS, S, 105 * MS);             /* it counts the 4 */
    assert_int_equal(approx_left(&c), 0);                            /* 6 - 6 admitted */
    /* a strict decision's count between two syncs does not put the next one off */
    approx_reply(&c, 3, 120 * MS, S, 125 * MS);
    assert_false(approx_sync_due(&c, S, 150 * MS)); /* 50 ms after the last sync */
    assert_true(approx_sync_due(&c, S, 200 * MS));
    assert_int_equal(approx_sync_begin(&c, 200 * MS), 6);
    approx_sync_end(&c, false, 0, 200 * MS, S, 210 * MS); /* failed: the 6 go again */
    assert_int_equal(c.admitted, 6);
    assert_int_equal(approx_decide(&c, 1, 225 * MS), APPROX_STRICT); /* 125 + S: expired */
}

/* A count forgotten (the rule changed, the key was reset) takes no reply of a request sent
 * before: their counts are under the old numbers or of the old key. */
static void test_forget(void **unused)
{
    (void)unused;
    approx_count_t c = APPROX_COUNT_NEW;
    approx_reply(&c, 900, 0, S, MS);
    assert_int_equal(approx_decide(&c, 1, 2 * MS), APPROX_ADMIT);
    assert_int_equal(approx_sync_begin(&c, 3 * MS), 1);
    approx_forget(&c, 4 * MS);
    approx_sync_end(&c, true, 899, 3 * MS, S, 5 * MS);
    assert_int_equal(approx_decide(&c, 1, 6 * MS), APPROX_STRICT);
    approx_strict_end(&c, 1, true, 50, 6 * MS, S, 7 * MS);
    assert_int_equal(approx_left(&c), 50);
}

/* A strict decision on its way may be admitted by the store: until its answer, its cost is
 * taken off what a newer count leaves; and what the node admitted and has not sent goes ahead
 * of a strict decision (a flush), taken off until its answer, or back to be sent if it fails. */
static void test_in_flight(void **unused)
{
    (void)unused;
    approx_count_t c = APPROX_COUNT_NEW;
    assert_int_equal(approx_decide(&c, 1, 0), APPROX_STRICT);
    assert_int_equal(approx_decide(&c, 4, MS), APPROX_STRICT); /* no count yet */
    approx_strict_end(&c, 1, true, 9, 0, S, 2 * MS);           /* 10, less the first's 1 */
    assert_int_equal(approx_left(&c), 5);                      /* the second's 4 may be taken */
    assert_int_equal(approx_decide(&c, 6, 3 * MS), APPROX_REFUSE);
    assert_int_equal(approx_decide(&c, 5, 3 * MS), APPROX_ADMIT);
    approx_strict_end(&c, 4, true, 5, MS, S, 4 * MS); /* it was admitted: 5 left, 5 admitted */
    assert_int_equal(approx_left(&c), 0);
    /* the count expires with 5 admitted here: they go ahead of the strict decision */
    assert_int_equal(approx_decide(&c, 1, 4 * MS + S), APPROX_STRICT);
    assert_int_equal(approx_flush_begin(&c), 5);
    assert_int_equal(c.admitted, 0);
    assert_int_equal(approx_flush_begin(&c), 0);
    approx_flush_end(&c, 5, false, 0, 4 * MS + S, S, 5 * MS + S); /* failed: sent again */
    assert_int_equal(c.admitted, 5);
    assert_int_equal(c.flushing, 0);
    approx_strict_end(&c, 1, false, 0, 4 * MS + S, S, 5 * MS + S);
    assert_int_equal(c.deciding, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_sync),
        cmocka_unit_test(test_forget),
        cmocka_unit_test(test_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
