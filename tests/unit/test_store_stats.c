/*
 * test_store_stats.c - the request stores' declared statistics (request_store.h: store_stat_t)
 * and how they are read (store/store_stats.h):
 *   - every store's list is well formed: a family's rows together, its help on the first row
 *     only and one kind; the values it names exist; the INFO names are unique and each is the
 *     sample's Prometheus name without "sluice_" and "_total", then its labels' values;
 *   - Prometheus text has one # HELP and # TYPE per family and one line per row, each row's
 *     value the same text INFO shows;
 *   - loops' values add up, a shared row's value is taken once, not summed;
 *   - the forms: integers, ns as seconds, a ratio (0 while its divisor is), "none" (1 while 0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/store_stats.h"

extern const request_store_ops_t memory_store_ops;
extern const request_store_ops_t redis_request_ops;

static const request_store_ops_t *const stores[] = {&memory_store_ops, &redis_request_ops};

static store_stats_t stats_of(const request_store_ops_t *ops)
{
    return (store_stats_t){.list = ops->stat_list, .n = ops->nstat};
}

static void test_lists_well_formed(void **unused)
{
    (void)unused;
    for (size_t s = 0; s < sizeof stores / sizeof stores[0]; s++) {
        store_stats_t st = stats_of(stores[s]);
        assert_true(st.n == 0 || stores[s]->stats != NULL);
        char names[64][128];
        assert_true(st.n <= 64);
        for (size_t i = 0; i < st.n; i++) {
            const store_stat_t *r = &st.list[i];
            bool first = i == 0 || strcmp(st.list[i - 1].metric, r->metric) != 0;
            assert_int_equal(first, r->help != NULL); /* help once, on the family's first row */
            if (!first) {
                assert_int_equal(r->kind, st.list[i - 1].kind);
            }
            for (size_t j = 0; first && j < i; j++) {
                assert_string_not_equal(st.list[j].metric, r->metric); /* families together */
            }
            assert_true(r->at < STORE_STAT_VALUES_MAX && r->over < STORE_STAT_VALUES_MAX);
            assert_true(strncmp(r->metric, "sluice_", 7) == 0);
            assert_true(store_stat_info_name(&st, i, names[i], sizeof names[i]) > 0);
            for (size_t j = 0; j < i; j++) {
                assert_string_not_equal(names[j], names[i]);
            }
        }
    }
}

static void test_info_names(void **unused)
{
    (void)unused;
    static const store_stat_t list[] = {
        {"sluice_redis_leases_total", "h", "", "event=\"taken\"", STORE_STAT_COUNTER,
         STORE_STAT_INT, 0, 0, false},
        {"sluice_redis_approx_sync_lag_seconds", "h", "_sum", "", STORE_STAT_SUMMARY,
         STORE_STAT_SECONDS, 1, 0, false},
        {"sluice_redis_nodes", "h", "", "mode=\"lua\",x=\"y\"", STORE_STAT_GAUGE, STORE_STAT_INT, 2,
         0, true},
    };
    store_stats_t st = {.list = list, .n = 3};
    char name[64];
    store_stat_info_name(&st, 0, name, sizeof name);
    assert_string_equal(name, "redis_leases_taken");
    store_stat_info_name(&st, 1, name, sizeof name);
    assert_string_equal(name, "redis_approx_sync_lag_seconds_sum");
    store_stat_info_name(&st, 2, name, sizeof name);
    assert_string_equal(name, "redis_nodes_lua_y");
    assert_int_equal(store_stat_info_name(&st, 0, name, 8), 0); /* too small: nothing */
}

static void test_sum_and_forms(void **unused)
{
    (void)unused;
    static const store_stat_t list[] = {
        {"sluice_a_total", "a", "", "", STORE_STAT_COUNTER, STORE_STAT_INT, 0, 0, false},
        {"sluice_b_seconds", "b", "_sum", "", STORE_STAT_SUMMARY, STORE_STAT_SECONDS, 1, 0, false},
        {"sluice_c", "c", "", "", STORE_STAT_GAUGE, STORE_STAT_RATIO, 0, 2, false},
        {"sluice_d", "d", "", "", STORE_STAT_GAUGE, STORE_STAT_NONE, 2, 0, false},
        {"sluice_e", "e", "", "k=\"v\"", STORE_STAT_GAUGE, STORE_STAT_INT, 3, 0, true},
    };
    store_stats_t loop1 = {.list = list, .n = 5, .value = {3, 1500000000, 0, 7}};
    store_stats_t loop2 = {.list = list, .n = 5, .value = {5, 250000000, 4, 7}};
    store_stats_t total = {0};
    store_stats_add(&total, &loop1);
    store_stats_add(&total, &loop2);
    char t[32];
    store_stat_text(&total, 0, t, sizeof t);
    assert_string_equal(t, "8");
    store_stat_text(&total, 1, t, sizeof t);
    assert_string_equal(t, "1.750000000");
    store_stat_text(&total, 2, t, sizeof t);
    assert_string_equal(t, "2.000000");
    store_stat_text(&total, 3, t, sizeof t);
    assert_string_equal(t, "0");
    store_stat_text(&total, 4, t, sizeof t);
    assert_string_equal(t, "7"); /* shared: the store's, not 14 */
    store_stats_t idle = {.list = list, .n = 5};
    store_stat_text(&idle, 2, t, sizeof t);
    assert_string_equal(t, "0.000000");
    store_stat_text(&idle, 3, t, sizeof t);
    assert_string_equal(t, "1");

    buf_t b = {0};
    store_stats_prometheus(&total, &b);
    buf_add(&b, "", 1); /* a NUL, to read it as a string */
    assert_non_null(strstr(b.data, "# HELP sluice_a_total a\n# TYPE sluice_a_total counter\n"
                                   "sluice_a_total 8\n"));
    assert_non_null(strstr(b.data, "# TYPE sluice_b_seconds summary\nsluice_b_seconds_sum "
                                   "1.750000000\n"));
    assert_non_null(strstr(b.data, "sluice_e{k=\"v\"} 7\n"));
    buf_free(&b);
    b = (buf_t){0};
    store_stats_info(&total, &b);
    buf_add(&b, "", 1); /* a NUL, to read it as a string */
    assert_string_equal(b.data, "a:8\r\nb_seconds_sum:1.750000000\r\nc:2.000000\r\nd:0\r\n"
                                "e_v:7\r\n");
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_well_formed),
        cmocka_unit_test(test_info_names),
        cmocka_unit_test(test_sum_and_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
