/*
 * test_algorithm_table.c - the table of algorithms (src/core/algorithms.h) and what is made
 * from it: every row's name round-trips through sl_algorithm_name() / sl_algorithm_parse() and
 * nothing else parses; a row's claims agree with the functions it points at (leasable: a way to
 * lease; variable: variable-size functions; a reason to refuse a lease exactly when it cannot);
 * sl_rule_prepare() accepts each parameter exactly within the row's bounds and refuses it, with
 * the row's error, outside them or where the row does not take it; the error texts made from
 * the rows name the rows they should, and are today's texts word for word; the join of names.
 * What the algorithms do against their claims: tests/prop/prop_algorithm_table.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/algorithms.h"
#include "core/core.h"
#include "sluice/sluice.h"

#define SEC SL_NS_PER_SEC

static size_t rows(void)
{
    size_t n = 0;
    CORE_ALGORITHM_EACH(row) n++;
    return n;
}

static void test_names_round_trip(void **cm)
{
    (void)cm;
    assert_true(rows() >= 6);
    for (unsigned v = 0; v < 2 * CORE_ALGORITHM_SLOTS; v++) {
        const core_algorithm_t *row = core_algorithm_at(v);
        const char *name = sl_algorithm_name((sl_algorithm_t)v);
        if (row == NULL) {
            assert_null(name);
            continue;
        }
        assert_true(v > 0 && v < CORE_ALGORITHM_SLOTS);
        assert_ptr_equal(name, row->name);
        assert_int_equal(core_algorithm_id(row), v);
        sl_algorithm_t back = 0;
        assert_int_equal(sl_algorithm_parse(name, strlen(name), &back), SL_OK);
        assert_int_equal(back, v);
        /* a prefix, a longer text, the name with a NUL and more, another case: none */
        char buf[64];
        snprintf(buf, sizeof buf, "%sx", name);
        assert_int_equal(sl_algorithm_parse(buf, strlen(buf), &back), SL_EALGORITHM);
        assert_int_equal(sl_algorithm_parse(name, strlen(name) - 1, &back), SL_EALGORITHM);
        memcpy(buf, name, strlen(name));
        buf[strlen(name)] = '\0';
        buf[strlen(name) + 1] = 'x';
        assert_int_equal(sl_algorithm_parse(buf, strlen(name) + 2, &back), SL_EALGORITHM);
        buf[0] = (char)(buf[0] - 'a' + 'A');
        assert_int_equal(sl_algorithm_parse(buf, strlen(name), &back), SL_EALGORITHM);
        /* names are distinct, and the iteration visits the rows in sl_algorithm_t order */
        CORE_ALGORITHM_EACH(other)
        {
            assert_true(other == row || strcmp(other->name, row->name) != 0);
        }
    }
    sl_algorithm_t out;
    assert_int_equal(sl_algorithm_parse("", 0, &out), SL_EALGORITHM);
    assert_int_equal(sl_algorithm_parse(NULL, 0, &out), SL_EINVAL);
    const core_algorithm_t *prev = NULL;
    CORE_ALGORITHM_EACH(row)
    {
        assert_true(prev == NULL || core_algorithm_id(row) > core_algorithm_id(prev));
        prev = row;
    }
}

static void test_rows_agree_with_their_functions(void **cm)
{
    (void)cm;
    size_t suggested = 0;
    CORE_ALGORITHM_EACH(row)
    {
        const algorithm_ops_t *ops = row->ops;
        assert_non_null(row->summary);
        assert_non_null(ops);
        assert_non_null(ops->decide);
        assert_non_null(ops->state_size);
        assert_non_null(ops->same_meaning);
        bool leasable = (row->caps & CORE_CAP_LEASABLE) != 0;
        bool tokens = (row->caps & CORE_CAP_TOKENS) != 0;
        /* a way to lease exactly when it claims one: counting (span) or the bucket's */
        assert_int_equal(leasable, ops->span != NULL || ops->lease != NULL);
        assert_int_equal(ops->lease != NULL, ops->lease_return != NULL);
        assert_true(ops->lease == NULL || tokens);
        assert_int_equal(row->lease_refusal != NULL, !leasable);
        assert_int_equal((row->caps & CORE_CAP_VARIABLE) != 0, ops->variable != NULL);
        /* a burst is a bucket's: the capacity comes from it */
        assert_int_equal(row->burst.taken, tokens);
        assert_int_equal(row->burst_means != NULL, row->burst.taken);
        assert_true(row->capacity_extra == 0 || tokens);
        assert_true(row->limit_max >= 1);
        for (unsigned c = 0; c < 32; c++)
            assert_true(!(row->caps & (1u << c)) || c < CORE_CAP_COUNT);
        suggested += row->suggested;
    }
    assert_int_equal(suggested, 1);
    /* what other parts look up by capability is there */
    assert_non_null(core_algorithm_with(CORE_CAP_ALIGNED));
    assert_int_equal(core_algorithm_id_with(CORE_CAP_ALIGNED),
                     core_algorithm_id(core_algorithm_with(CORE_CAP_ALIGNED)));
    assert_int_equal(core_algorithm_id_with(~0u), 0);
    assert_null(core_algorithm_with(~0u));
}

/* sl_rule_prepare() of a rule of this row with one parameter set. */
static int prepare_with(const core_algorithm_t *row, int64_t limit, int64_t burst, int64_t buckets,
                        int64_t max_delay_ns)
{
    sl_rule_t r = {.algorithm = core_algorithm_id(row),
                   .limit = limit,
                   .window_ns = 4096 * SEC,
                   .burst = burst,
                   .buckets = buckets,
                   .max_delay_ns = max_delay_ns,
                   .max_debt = SL_DEFAULT};
    return sl_rule_prepare(&r);
}

/* Every parameter accepted exactly within the row's bounds, with the row's default. */
static void test_parameters_as_the_rows_say(void **cm)
{
    (void)cm;
    const int64_t D = SL_DEFAULT;
    CORE_ALGORITHM_EACH(row)
    {
        assert_int_equal(prepare_with(row, 1, D, D, 0), SL_OK);
        assert_int_equal(prepare_with(row, 0, D, D, 0), SL_ELIMIT);
        if (row->limit_max < INT64_MAX) {
            assert_int_equal(prepare_with(row, row->limit_max, D, D, 0), SL_OK);
            assert_int_equal(prepare_with(row, row->limit_max + 1, D, D, 0), SL_ELIMIT);
        }
        /* burst */
        if (row->burst.taken) {
            assert_int_equal(prepare_with(row, 5, row->burst.min, D, 0), SL_OK);
            /* below the min (SL_DEFAULT, -1, is the default, not a burst) */
            int64_t below = row->burst.min - 1 == D ? row->burst.min - 2 : row->burst.min - 1;
            assert_int_equal(prepare_with(row, 5, below, D, 0), SL_EBURST);
            sl_rule_t r;
            assert_int_equal(sl_rule_init(&r, core_algorithm_id(row), 5, SEC), SL_OK);
            assert_int_equal(r.burst, core_param_default(&row->burst, 5));
            assert_int_equal(r.capacity, r.burst + row->capacity_extra);
        } else {
            assert_int_equal(prepare_with(row, 5, 0, D, 0), SL_OK);
            assert_int_equal(prepare_with(row, 5, 3, D, 0), SL_EBURST);
        }
        /* buckets */
        if (row->buckets.taken) {
            assert_int_equal(prepare_with(row, 5, D, row->buckets.min, 0), SL_OK);
            assert_int_equal(prepare_with(row, 5, D, row->buckets.max, 0), SL_OK);
            assert_int_equal(prepare_with(row, 5, D, row->buckets.min - 1, 0), SL_EBUCKETS);
            assert_int_equal(prepare_with(row, 5, D, row->buckets.max + 1, 0), SL_EBUCKETS);
            sl_rule_t r = {.algorithm = core_algorithm_id(row),
                           .limit = 5,
                           .window_ns = SEC + 1, /* a prime number of ns divides by nothing */
                           .burst = D,
                           .buckets = 2,
                           .max_debt = D};
            assert_int_equal(sl_rule_prepare(&r),
                             row->buckets.divides_window ? SL_EBUCKETS : SL_OK);
            assert_int_equal(sl_rule_init(&r, core_algorithm_id(row), 5, SEC), SL_OK);
            assert_int_equal(r.buckets, core_param_default(&row->buckets, 5));
        } else {
            assert_int_equal(prepare_with(row, 5, D, 0, 0), SL_OK);
            assert_int_equal(prepare_with(row, 5, D, 2, 0), SL_EBUCKETS);
        }
        /* max_delay */
        if (row->max_delay.taken) {
            assert_int_equal(prepare_with(row, 5, D, D, row->max_delay.max), SL_OK);
            assert_int_equal(prepare_with(row, 5, D, D, row->max_delay.max + 1), SL_EDELAY);
            assert_int_equal(prepare_with(row, 5, D, D, row->max_delay.min - 1), SL_EDELAY);
        } else {
            assert_int_equal(prepare_with(row, 5, D, D, SL_DEFAULT), SL_OK);
            assert_int_equal(prepare_with(row, 5, D, D, SEC), SL_EDELAY);
        }
    }
}

/* The error texts made from the rows: each names the rows it should, and they are the texts
 * sluice has always given (clients match on them). */
static void test_error_texts(void **cm)
{
    (void)cm;
    CORE_ALGORITHM_EACH(row)
    {
        assert_non_null(strstr(sl_strerror(SL_EALGORITHM), row->name));
        assert_int_equal(strstr(sl_strerror(SL_EBURST), row->name) != NULL, row->burst.taken);
        assert_int_equal(strstr(sl_strerror(SL_EBUCKETS), row->name) != NULL, row->buckets.taken);
        assert_int_equal(strstr(sl_strerror(SL_EDELAY), row->name) != NULL, row->max_delay.taken);
        assert_int_equal(strstr(sl_strerror(SL_ELIMIT), row->name) != NULL,
                         row->limit_max < INT64_MAX);
    }
    assert_string_equal(sl_strerror(SL_EALGORITHM),
                        "unknown algorithm (expected fixed_window, sliding_log, sliding_window, "
                        "sliding_buckets, token_bucket, gcra or concurrency)");
    assert_string_equal(sl_strerror(SL_ELIMIT),
                        "limit must be a positive integer (at most 1048576 for sliding_log, at "
                        "most 4096 for concurrency)");
    assert_string_equal(sl_strerror(SL_EBURST), "burst must be >= 1 for token_bucket, >= 0 for "
                                                "gcra, and only applies to them");
    assert_string_equal(sl_strerror(SL_EBUCKETS),
                        "buckets must be between 1 and 4096, divide the window, and only applies "
                        "to sliding_buckets");
    assert_string_equal(sl_strerror(SL_EDELAY), "max_delay must be between 0 and 366d and only "
                                                "applies to token_bucket and gcra");
    assert_string_equal(
        sl_strerror(SL_ELEASE),
        "no lease possible: sliding_log and concurrency cannot lease, and a lease time must be "
        "within [1ns, 366d] (token_bucket/gcra: at most the bucket's tolerance "
        "less one interval)");
}

static void test_join(void **cm)
{
    (void)cm;
    char buf[256];
    size_t n = core_algorithm_join(buf, sizeof buf, core_algorithm_any, ", ", " or ");
    assert_int_equal(n, rows());
    assert_string_equal(buf, "fixed_window, sliding_log, sliding_window, sliding_buckets, "
                             "token_bucket, gcra or concurrency");
    assert_int_equal(core_algorithm_join(buf, sizeof buf, core_algorithm_no_lease, ", ", " and "),
                     2);
    assert_string_equal(buf, "sliding_log and concurrency");
    /* cut short: NUL-terminated within the buffer, the names that fit */
    char small[16];
    memset(small, 'x', sizeof small);
    n = core_algorithm_join(small, 15, core_algorithm_any, ", ", " or ");
    assert_int_equal(n, 1);
    assert_string_equal(small, "fixed_window");
    assert_int_equal(small[15], 'x');
    assert_int_equal(core_algorithm_join(small, 0, core_algorithm_any, ", ", " or "), 0);
    assert_int_equal(small[15], 'x');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_rows_agree_with_their_functions),
        cmocka_unit_test(test_parameters_as_the_rows_say),
        cmocka_unit_test(test_error_texts),
        cmocka_unit_test(test_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
