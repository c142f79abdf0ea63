/*
 * test_clock.c - sl_now_ns(): CLOCK_REALTIME in ns, never decreasing within the process, from any
 * number of threads. (A real clock step backwards cannot be caused from a test; the guard's
 * contract is checked as observed: no caller ever sees a value below one already returned.)
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "sluice/sluice.h"

static void test_close_to_realtime(void **unused)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t before = (int64_t)ts.tv_sec * SL_NS_PER_SEC + ts.tv_nsec;
    int64_t now = sl_now_ns();
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t after = (int64_t)ts.tv_sec * SL_NS_PER_SEC + ts.tv_nsec;
    assert_true(now >= before);
    assert_true(now <= after);
}

#define THREADS 4
#define CALLS   200000

static _Atomic int64_t published; /* the largest value any thread has seen returned */

static void *reader(void *arg)
{
    int64_t last = 0;
    long *violations = arg;
    for (int i = 0; i < CALLS; i++) {
        int64_t floor_ns = published; /* returned before this call started */
        int64_t now = sl_now_ns();
        if (now < last || now < floor_ns)
            ++*violations;
        last = now;
        int64_t p = published;
        while (now > p && !__atomic_compare_exchange_n((int64_t *)&published, &p, now, 1,
                                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
    }
    return NULL;
}

static void test_never_decreases_across_threads(void **unused)
{
    pthread_t threads[THREADS];
    long violations[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, reader, &violations[i]);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(violations[i], 0);
    }
}

static void test_units_round_up(void **unused)
{
    assert_int_equal(sl_ns_to_units_ceil(1, SL_NS_PER_MS), 1);
    assert_int_equal(sl_ns_to_units_ceil(SL_NS_PER_MS, SL_NS_PER_MS), 1);
    assert_int_equal(sl_ns_to_units_ceil(SL_NS_PER_MS + 1, SL_NS_PER_MS), 2);
    assert_int_equal(sl_ns_to_units_ceil(0, SL_NS_PER_SEC), 0);
    assert_int_equal(sl_ns_to_units_ceil(-1, SL_NS_PER_SEC), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_to_realtime),
        cmocka_unit_test(test_never_decreases_across_threads),
        cmocka_unit_test(test_units_round_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
