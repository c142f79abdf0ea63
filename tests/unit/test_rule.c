/*
 * test_rule.c - rules, durations, names and error strings (include/sluice/sluice.h): every
 * SL_E* code sl_rule_prepare() can return and the field that causes it, the defaults (burst,
 * buckets), the derived fields and state sizes, the algorithm names, sl_duration_parse(),
 * sl_ns_to_units_ceil() and sl_strerror().
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "rules.h"
#include "sluice/sluice.h"

#define MS  SL_NS_PER_MS
#define SEC SL_NS_PER_SEC
#define DEF SL_DEFAULT

static bool rule_fields_equal(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit && a->window_ns == b->window_ns &&
           a->burst == b->burst && a->buckets == b->buckets && a->max_delay_ns == b->max_delay_ns &&
           a->interval_ns == b->interval_ns && a->tolerance_ns == b->tolerance_ns &&
           a->bucket_ns == b->bucket_ns && a->capacity == b->capacity &&
           a->state_size == b->state_size;
}

/* ---- validation -------------------------------------------------------------------------- */

typedef struct bad_rule {
    const char *what;
    sl_algorithm_t alg;
    int64_t limit, window_ns, burst, buckets, max_delay_ns;
    int want;
} bad_rule_t;

#define FW   SL_FIXED_WINDOW
#define SLOG SL_SLIDING_LOG
#define SW   SL_SLIDING_WINDOW
#define SB   SL_SLIDING_BUCKETS
#define TB   SL_TOKEN_BUCKET
#define GC   SL_GCRA

static const bad_rule_t bad_rules[] = {
    /* algorithm */
    {"algorithm 0", (sl_algorithm_t)0, 10, SEC, DEF, DEF, 0, SL_EALGORITHM},
    {"algorithm 8", (sl_algorithm_t)8, 10, SEC, DEF, DEF, 0, SL_EALGORITHM},
    {"algorithm -1", (sl_algorithm_t)-1, 10, SEC, DEF, DEF, 0, SL_EALGORITHM},
    /* limit */
    {"fixed_window limit 0", FW, 0, SEC, DEF, DEF, 0, SL_ELIMIT},
    {"sliding_log limit -1", SLOG, -1, SEC, DEF, DEF, 0, SL_ELIMIT},
    {"sliding_window limit INT64_MIN", SW, INT64_MIN, SEC, DEF, DEF, 0, SL_ELIMIT},
    {"sliding_buckets limit 0", SB, 0, SEC, DEF, DEF, 0, SL_ELIMIT},
    {"token_bucket limit 0", TB, 0, SEC, DEF, DEF, 0, SL_ELIMIT},
    {"gcra limit -5", GC, -5, SEC, DEF, DEF, 0, SL_ELIMIT},
    {"sliding_log limit > SL_LOG_LIMIT_MAX", SLOG, SL_LOG_LIMIT_MAX + 1, SEC, DEF, DEF, 0,
     SL_ELIMIT},
    /* window */
    {"window 0", FW, 10, 0, DEF, DEF, 0, SL_EWINDOW},
    {"window -1 s", SW, 10, -SEC, DEF, DEF, 0, SL_EWINDOW},
    {"window 1 ms - 1 ns", SLOG, 10, SL_WINDOW_MIN_NS - 1, DEF, DEF, 0, SL_EWINDOW},
    {"window 366 d + 1 ns", TB, 10, SL_WINDOW_MAX_NS + 1, DEF, DEF, 0, SL_EWINDOW},
    {"window INT64_MAX", GC, 10, INT64_MAX, DEF, DEF, 0, SL_EWINDOW},
    {"sliding_buckets window 999 us", SB, 10, 999 * SL_NS_PER_US, DEF, 1, 0, SL_EWINDOW},
    /* burst */
    {"token_bucket burst 0", TB, 10, SEC, 0, DEF, 0, SL_EBURST},
    {"token_bucket burst -2", TB, 10, SEC, -2, DEF, 0, SL_EBURST},
    {"gcra burst -2", GC, 10, SEC, -2, DEF, 0, SL_EBURST},
    {"fixed_window burst 1", FW, 10, SEC, 1, DEF, 0, SL_EBURST},
    {"sliding_log burst 5", SLOG, 10, SEC, 5, DEF, 0, SL_EBURST},
    {"sliding_window burst 5", SW, 10, SEC, 5, DEF, 0, SL_EBURST},
    {"sliding_buckets burst 5", SB, 10, SEC, 5, DEF, 0, SL_EBURST},
    /* buckets */
    {"sliding_buckets buckets 0", SB, 10, SEC, DEF, 0, 0, SL_EBUCKETS},
    {"sliding_buckets buckets -2", SB, 10, SEC, DEF, -2, 0, SL_EBUCKETS},
    {"sliding_buckets 3 buckets do not divide 1 s", SB, 10, SEC, DEF, 3, 0, SL_EBUCKETS},
    {"sliding_buckets buckets > SL_BUCKETS_MAX", SB, 10, (SL_BUCKETS_MAX + 1) * MS, DEF,
     SL_BUCKETS_MAX + 1, 0, SL_EBUCKETS},
    {"sliding_buckets default 10 does not divide 1 000 003 ns", SB, 10, 1000003, DEF, DEF, 0,
     SL_EBUCKETS},
    {"fixed_window buckets 5", FW, 10, SEC, DEF, 5, 0, SL_EBUCKETS},
    {"sliding_log buckets 1", SLOG, 10, SEC, DEF, 1, 0, SL_EBUCKETS},
    {"token_bucket buckets 10", TB, 10, SEC, DEF, 10, 0, SL_EBUCKETS},
    {"gcra buckets 10", GC, 10, SEC, DEF, 10, 0, SL_EBUCKETS},
    /* max_delay */
    {"token_bucket max_delay -1 (SL_DEFAULT is not a max_delay)", TB, 10, SEC, DEF, DEF, -1,
     SL_EDELAY},
    {"token_bucket max_delay -2", TB, 10, SEC, DEF, DEF, -2, SL_EDELAY},
    {"gcra max_delay -1", GC, 10, SEC, DEF, DEF, -1, SL_EDELAY},
    {"gcra max_delay INT64_MIN", GC, 10, SEC, DEF, DEF, INT64_MIN, SL_EDELAY},
    {"fixed_window max_delay 1", FW, 10, SEC, DEF, DEF, 1, SL_EDELAY},
    {"sliding_log max_delay 1 s", SLOG, 10, SEC, DEF, DEF, SEC, SL_EDELAY},
    {"sliding_window max_delay 1 s", SW, 10, SEC, DEF, DEF, SEC, SL_EDELAY},
    {"sliding_buckets max_delay 1 s", SB, 10, SEC, DEF, DEF, SEC, SL_EDELAY},
    /* overflow: tau = T * B (or T * (B + 1)) beyond int64 */
    {"token_bucket T * B overflows", TB, 1, SL_WINDOW_MAX_NS, INT64_C(1) << 20, DEF, 0,
     SL_EOVERFLOW},
    {"gcra B + 1 overflows", GC, 1, SEC, INT64_MAX, DEF, 0, SL_EOVERFLOW},
    {"token_bucket T * B above SL_TOLERANCE_MAX_NS", TB, 1, SL_WINDOW_MAX_NS, 100, DEF, 0,
     SL_EOVERFLOW},
    {"gcra max_delay above 366 days", GC, 10, SEC, DEF, DEF, SL_WINDOW_MAX_NS + 1, SL_EDELAY},
    {"gcra T * (B + 1) overflows", GC, 2, SL_WINDOW_MAX_NS, INT64_C(1) << 40, DEF, 0, SL_EOVERFLOW},
    /* the first invalid field, in the struct's order, decides the code */
    {"algorithm before limit", (sl_algorithm_t)0, 0, 0, -5, -5, -5, SL_EALGORITHM},
    {"limit before window", TB, 0, 0, -5, -5, -5, SL_ELIMIT},
    {"window before burst", TB, 10, 0, -5, -5, -5, SL_EWINDOW},
    {"burst before buckets", TB, 10, SEC, -5, -5, -5, SL_EBURST},
    {"buckets before max_delay", SB, 10, SEC, DEF, 3, -5, SL_EBUCKETS},
};

static void test_prepare_rejects_each_field(void **cm)
{
    (void)cm;
    int failures = 0;
    for (size_t i = 0; i < sizeof(bad_rules) / sizeof(bad_rules[0]); i++) {
        const bad_rule_t *b = &bad_rules[i];
        sl_rule_t rule =
            rule_fields(b->alg, b->limit, b->window_ns, b->burst, b->buckets, b->max_delay_ns);
        sl_rule_t copy = rule;
        int rc = sl_rule_prepare(&rule);
        if (rc != b->want) {
            print_error("%s: sl_rule_prepare returned %d (%s), want %d (%s)\n", b->what, rc,
                        sl_strerror(rc), b->want, sl_strerror(b->want));
            failures++;
        }
        if (!rule_fields_equal(&rule, &copy)) {
            print_error("%s: the rule was changed by a failed sl_rule_prepare\n", b->what);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

typedef struct good_rule {
    const char *what;
    sl_algorithm_t alg;
    int64_t limit, window_ns, burst, buckets, max_delay_ns;
} good_rule_t;

static const good_rule_t good_rules[] = {
    {"window exactly 1 ms", FW, 10, SL_WINDOW_MIN_NS, DEF, DEF, 0},
    {"window exactly 366 d", SW, 10, SL_WINDOW_MAX_NS, DEF, DEF, 0},
    {"sliding_log limit SL_LOG_LIMIT_MAX", SLOG, SL_LOG_LIMIT_MAX, SEC, DEF, DEF, 0},
    {"fixed_window burst 0 buckets 0", FW, 10, SEC, 0, 0, 0},
    {"sliding_log burst 0 buckets 0", SLOG, 10, SEC, 0, 0, 0},
    {"sliding_window burst 0 buckets 0", SW, 10, SEC, 0, 0, 0},
    {"sliding_buckets burst 0", SB, 10, SEC, 0, DEF, 0},
    {"token_bucket buckets 0", TB, 10, SEC, DEF, 0, 0},
    {"gcra burst 0 (max_burst 0: limit 1)", GC, 10, SEC, 0, DEF, 0},
    {"token_bucket burst 1", TB, 10, SEC, 1, DEF, 0},
    {"token_bucket max_delay 1 h", TB, 10, SEC, 5, DEF, 3600 * SEC},
    {"gcra max_delay 1 ns", GC, 10, SEC, 5, DEF, 1},
    {"sliding_buckets 1 bucket", SB, 10, SEC, DEF, 1, 0},
    {"sliding_buckets SL_BUCKETS_MAX buckets", SB, 10, SL_BUCKETS_MAX *MS, DEF, SL_BUCKETS_MAX, 0},
    {"sliding_buckets 7 buckets of 1 ms", SB, 10, 7 * MS, DEF, 7, 0},
    {"token_bucket limit > window in ns (T = 1)", TB, INT64_C(1) << 40, SEC, DEF, DEF, 0},
    {"token_bucket tau 2.28e18 ns (under SL_TOLERANCE_MAX_NS) fits", TB, 1, SL_WINDOW_MAX_NS, 72,
     DEF, 0},
};

static void test_prepare_accepts_edges(void **cm)
{
    (void)cm;
    int failures = 0;
    for (size_t i = 0; i < sizeof(good_rules) / sizeof(good_rules[0]); i++) {
        const good_rule_t *g = &good_rules[i];
        sl_rule_t rule =
            rule_fields(g->alg, g->limit, g->window_ns, g->burst, g->buckets, g->max_delay_ns);
        int rc = sl_rule_prepare(&rule);
        if (rc != SL_OK) {
            print_error("%s: sl_rule_prepare returned %d (%s), want SL_OK\n", g->what, rc,
                        sl_strerror(rc));
            failures++;
        } else if (sl_state_size(&rule) != rule.state_size) {
            print_error("%s: sl_state_size %zu != rule.state_size %u\n", g->what,
                        sl_state_size(&rule), rule.state_size);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* ---- defaults, derived fields, state sizes ----------------------------------------------- */

static void test_defaults_and_derived_fields(void **cm)
{
    (void)cm;
    sl_rule_t r;

    /* token_bucket: burst SL_DEFAULT -> N; T = W / N; tau = T * B; capacity B */
    assert_int_equal(sl_rule_init(&r, SL_TOKEN_BUCKET, 10, SEC), SL_OK);
    assert_int_equal(r.burst, 10);
    assert_int_equal(r.max_delay_ns, 0);
    assert_int_equal(r.interval_ns, 100 * MS);
    assert_int_equal(r.tolerance_ns, SEC);
    assert_int_equal(r.capacity, 10);
    assert_int_equal(sl_state_size(&r), 8);

    /* gcra: burst SL_DEFAULT -> N; tau = T * (B + 1); capacity B + 1 */
    assert_int_equal(sl_rule_init(&r, SL_GCRA, 10, SEC), SL_OK);
    assert_int_equal(r.burst, 10);
    assert_int_equal(r.interval_ns, 100 * MS);
    assert_int_equal(r.tolerance_ns, 1100 * MS);
    assert_int_equal(r.capacity, 11);
    assert_int_equal(sl_state_size(&r), 8);

    /* gcra max_burst 0: limit 1, tau = T */
    r = rule_fields(SL_GCRA, 4, SEC, 0, DEF, 0);
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    assert_int_equal(r.capacity, 1);
    assert_int_equal(r.tolerance_ns, 250 * MS);

    /* explicit burst */
    r = rule_fields(SL_TOKEN_BUCKET, 4, SEC, 9, DEF, 0);
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    assert_int_equal(r.burst, 9);
    assert_int_equal(r.capacity, 9);
    assert_int_equal(r.tolerance_ns, 9 * 250 * MS);

    /* T = ceil(W / N): never faster than N per W */
    assert_int_equal(sl_rule_init(&r, SL_TOKEN_BUCKET, 3, SEC), SL_OK);
    assert_int_equal(r.interval_ns, 333333334);
    assert_int_equal(r.tolerance_ns, 1000000002);
    assert_int_equal(sl_rule_init(&r, SL_GCRA, 7, 10 * MS), SL_OK);
    assert_int_equal(r.interval_ns, 1428572);      /* ceil(10 000 000 / 7) */
    assert_int_equal(r.tolerance_ns, 8 * 1428572); /* B = 7, B + 1 = 8 */
    assert_int_equal(r.capacity, 8);

    /* sliding_buckets: buckets SL_DEFAULT -> 10, G = W / 10 */
    assert_int_equal(sl_rule_init(&r, SL_SLIDING_BUCKETS, 10, SEC), SL_OK);
    assert_int_equal(r.buckets, SL_BUCKETS_DEFAULT);
    assert_int_equal(r.buckets, 10);
    assert_int_equal(r.bucket_ns, 100 * MS);
    assert_int_equal(r.capacity, 10);
    assert_int_equal(sl_state_size(&r), 16 + 8 * 11); /* header: 16 + 8 * (buckets + 1) */
    r = rule_fields(SL_SLIDING_BUCKETS, 10, SEC, DEF, 4, 0);
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    assert_int_equal(r.bucket_ns, 250 * MS);
    assert_int_equal(sl_state_size(&r), 16 + 8 * 5);

    /* the window algorithms: capacity N */
    assert_int_equal(sl_rule_init(&r, SL_FIXED_WINDOW, 10, SEC), SL_OK);
    assert_int_equal(r.capacity, 10);
    assert_int_equal(sl_state_size(&r), 16);
    assert_int_equal(sl_rule_init(&r, SL_SLIDING_WINDOW, 10, SEC), SL_OK);
    assert_int_equal(r.capacity, 10);
    assert_int_equal(sl_state_size(&r), 24);
    assert_int_equal(sl_rule_init(&r, SL_SLIDING_LOG, 10, SEC), SL_OK);
    assert_int_equal(r.capacity, 10);
    assert_int_equal(sl_state_size(&r), 32 + 16 * 10);
    assert_int_equal(sl_rule_init(&r, SL_SLIDING_LOG, 1, SEC), SL_OK);
    assert_int_equal(sl_state_size(&r), 48);
    assert_int_equal(sl_rule_init(&r, SL_SLIDING_LOG, SL_LOG_LIMIT_MAX, SEC), SL_OK);
    assert_int_equal(sl_state_size(&r), 32 + 16 * SL_LOG_LIMIT_MAX);
}

static void test_rule_init_equals_prepare_with_defaults(void **cm)
{
    (void)cm;
    static const sl_algorithm_t algs[] = {SL_FIXED_WINDOW,    SL_SLIDING_LOG,  SL_SLIDING_WINDOW,
                                          SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA};
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        sl_rule_t a, b = rule_fields(algs[i], 20, 2 * SEC, DEF, DEF, 0);
        memset(&a, 0x77, sizeof(a));
        assert_int_equal(sl_rule_init(&a, algs[i], 20, 2 * SEC), SL_OK);
        assert_int_equal(sl_rule_prepare(&b), SL_OK);
        assert_true(rule_fields_equal(&a, &b));
        assert_int_equal(a.state_size, sl_state_size(&a));
    }
    sl_rule_t r;
    assert_int_equal(sl_rule_init(&r, SL_FIXED_WINDOW, 0, SEC), SL_ELIMIT);
    assert_int_equal(sl_rule_init(&r, SL_GCRA, 1, 10), SL_EWINDOW);
    assert_int_equal(sl_rule_init(&r, (sl_algorithm_t)99, 1, SEC), SL_EALGORITHM);
    /* default buckets (10) must divide the window */
    assert_int_equal(sl_rule_init(&r, SL_SLIDING_BUCKETS, 5, SEC + 5), SL_EBUCKETS);
}

/* ---- algorithm names --------------------------------------------------------------------- */

static void test_algorithm_names(void **cm)
{
    (void)cm;
    static const struct {
        sl_algorithm_t alg;
        const char *name;
    } names[] = {
        {SL_FIXED_WINDOW, "fixed_window"},     {SL_SLIDING_LOG, "sliding_log"},
        {SL_SLIDING_WINDOW, "sliding_window"}, {SL_SLIDING_BUCKETS, "sliding_buckets"},
        {SL_TOKEN_BUCKET, "token_bucket"},     {SL_GCRA, "gcra"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        sl_algorithm_t out = (sl_algorithm_t)0;
        assert_non_null(sl_algorithm_name(names[i].alg));
        assert_string_equal(sl_algorithm_name(names[i].alg), names[i].name);
        assert_int_equal(sl_algorithm_parse(names[i].name, strlen(names[i].name), &out), SL_OK);
        assert_int_equal(out, names[i].alg);
        /* round trip through the returned name */
        const char *n = sl_algorithm_name(names[i].alg);
        assert_int_equal(sl_algorithm_parse(n, strlen(n), &out), SL_OK);
        assert_int_equal(out, names[i].alg);
        /* a prefix is not the name */
        assert_int_equal(sl_algorithm_parse(names[i].name, strlen(names[i].name) - 1, &out),
                         SL_EALGORITHM);
    }
    sl_algorithm_t out = (sl_algorithm_t)0;
    /* only `len` bytes are read */
    assert_int_equal(sl_algorithm_parse("gcra_and_more", 4, &out), SL_OK);
    assert_int_equal(out, SL_GCRA);
    assert_int_equal(sl_algorithm_parse("token_bucketX", 12, &out), SL_OK);
    assert_int_equal(out, SL_TOKEN_BUCKET);
    assert_int_equal(sl_algorithm_parse("gcra", 5, &out), SL_EALGORITHM); /* "gcra\0" */
    assert_int_equal(sl_algorithm_parse("", 0, &out), SL_EALGORITHM);
    assert_int_equal(sl_algorithm_parse("GCRA", 4, &out), SL_EALGORITHM);
    assert_int_equal(sl_algorithm_parse("token-bucket", 12, &out), SL_EALGORITHM);
    assert_int_equal(sl_algorithm_parse("leaky_bucket", 12, &out), SL_EALGORITHM);
    assert_int_equal(sl_algorithm_parse(" gcra", 5, &out), SL_EALGORITHM);
    assert_null(sl_algorithm_name((sl_algorithm_t)0));
    assert_null(sl_algorithm_name((sl_algorithm_t)8));
    assert_null(sl_algorithm_name((sl_algorithm_t)-1));
}

/* ---- durations --------------------------------------------------------------------------- */

typedef struct duration_case {
    const char *text;
    int rc;
    int64_t ns; /* when rc == SL_OK */
} duration_case_t;

static const duration_case_t durations[] = {
    {"250ms", SL_OK, 250 * MS},
    {"10s", SL_OK, 10 * SEC},
    {"1m", SL_OK, 60 * SEC},
    {"1h", SL_OK, 3600 * SEC},
    {"1d", SL_OK, 86400 * SEC},
    {"30d", SL_OK, 30 * 86400 * SEC},
    {"1h30m", SL_OK, 5400 * SEC},
    {"90s", SL_OK, 90 * SEC},
    {"1ns", SL_OK, 1},
    {"1us", SL_OK, 1000},
    {"1500us", SL_OK, 1500 * SL_NS_PER_US},
    {"2h45m30s", SL_OK, (2 * 3600 + 45 * 60 + 30) * SEC},
    {"1d12h", SL_OK, 36 * 3600 * SEC},
    {"1m30s250ms", SL_OK, 90 * SEC + 250 * MS},
    {"0s", SL_OK, 0},
    {"366d", SL_OK, SL_WINDOW_MAX_NS},
    {"9223372036854775807ns", SL_OK, INT64_MAX},
    {"9223372036s", SL_OK, INT64_C(9223372036) * SEC},
    {"106751d", SL_OK, INT64_C(106751) * 86400 * SEC},
    /* malformed */
    {"", SL_EDURATION, 0},
    {"10", SL_EDURATION, 0},
    {"1x", SL_EDURATION, 0},
    {"-1s", SL_EDURATION, 0},
    {"+1s", SL_EDURATION, 0},
    {"1.5s", SL_EDURATION, 0},
    {"s", SL_EDURATION, 0},
    {"ms", SL_EDURATION, 0},
    {" 1s", SL_EDURATION, 0},
    {"1s ", SL_EDURATION, 0},
    {"1 s", SL_EDURATION, 0},
    {"1h30", SL_EDURATION, 0},
    {"1S", SL_EDURATION, 0},
    {"1sec", SL_EDURATION, 0},
    {"1mss", SL_EDURATION, 0},
    {"1e3ms", SL_EDURATION, 0},
    /* beyond int64 ns */
    {"9223372036854775808ns", SL_EOVERFLOW, 0},
    {"9223372037s", SL_EOVERFLOW, 0},
    {"106752d", SL_EOVERFLOW, 0},
    {"106751d106751d", SL_EOVERFLOW, 0},
    {"99999999999999999999999999s", SL_EOVERFLOW, 0},
    {"9223372036854775807ns1ns", SL_EOVERFLOW, 0},
};

static void test_duration_parse(void **cm)
{
    (void)cm;
    int failures = 0;
    for (size_t i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
        const duration_case_t *c = &durations[i];
        int64_t ns = -12345;
        int rc = sl_duration_parse(c->text, strlen(c->text), &ns);
        if (rc != c->rc || (rc == SL_OK && ns != c->ns)) {
            print_error("sl_duration_parse(\"%s\"): rc %d ns %" PRId64 ", want rc %d ns %" PRId64
                        "\n",
                        c->text, rc, ns, c->rc, c->ns);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

static void test_duration_parse_reads_only_len(void **cm)
{
    (void)cm;
    int64_t ns = 0;
    assert_int_equal(sl_duration_parse("10s", 2, &ns), SL_EDURATION); /* "10" */
    assert_int_equal(sl_duration_parse("250ms", 4, &ns), SL_OK);      /* "250m" */
    assert_int_equal(ns, 250 * 60 * SEC);
    assert_int_equal(sl_duration_parse("1h30mXYZ", 5, &ns), SL_OK);
    assert_int_equal(ns, 5400 * SEC);
    assert_int_equal(sl_duration_parse("1s\0s", 4, &ns), SL_EDURATION);
}

/* ---- sl_ns_to_units_ceil ----------------------------------------------------------------- */

static void test_ns_to_units_ceil(void **cm)
{
    (void)cm;
    assert_int_equal(sl_ns_to_units_ceil(0, MS), 0);
    assert_int_equal(sl_ns_to_units_ceil(1, MS), 1);
    assert_int_equal(sl_ns_to_units_ceil(MS - 1, MS), 1);
    assert_int_equal(sl_ns_to_units_ceil(MS, MS), 1);
    assert_int_equal(sl_ns_to_units_ceil(MS + 1, MS), 2);
    assert_int_equal(sl_ns_to_units_ceil(1500 * MS, SEC), 2);
    assert_int_equal(sl_ns_to_units_ceil(2 * SEC, SEC), 2);
    assert_int_equal(sl_ns_to_units_ceil(7, 1), 7);
    assert_int_equal(sl_ns_to_units_ceil(999, SL_NS_PER_US), 1);
    /* -1 ("never") and any negative value come back as -1 */
    assert_int_equal(sl_ns_to_units_ceil(-1, MS), -1);
    assert_int_equal(sl_ns_to_units_ceil(-1, SEC), -1);
    assert_int_equal(sl_ns_to_units_ceil(-5 * SEC, SEC), -1);
    assert_int_equal(sl_ns_to_units_ceil(INT64_MIN, SEC), -1);
    /* no overflow in the rounding: ceil(INT64_MAX / unit) */
    assert_int_equal(sl_ns_to_units_ceil(INT64_MAX, 1), INT64_MAX);
    assert_int_equal(sl_ns_to_units_ceil(INT64_MAX, SEC), INT64_C(9223372037));
    assert_int_equal(sl_ns_to_units_ceil(INT64_MAX, MS), INT64_C(9223372036855));
    assert_int_equal(sl_ns_to_units_ceil(INT64_MAX - 1, INT64_MAX), 1);
}

/* ---- sl_strerror ------------------------------------------------------------------------- */

static void test_strerror(void **cm)
{
    (void)cm;
    static const int codes[] = {
        SL_EALGORITHM, SL_ELIMIT, SL_EWINDOW,  SL_EBURST, SL_EBUCKETS,  SL_EDELAY,    SL_ECOST,
        SL_EOVERFLOW,  SL_EKEY,   SL_ENOMEM,   SL_EFULL,  SL_ESTATE,    SL_EDURATION, SL_EINVAL,
        SL_ELEASE,     SL_EDEBT,  SL_EMAXDEBT, SL_EHOLD,  SL_EHOLDTIME, SL_ENOHOLDS,  SL_EADAPTIVE,
    };
    const size_t n = sizeof(codes) / sizeof(codes[0]);
    const char *unknown = sl_strerror(-1000);
    assert_non_null(unknown);
    assert_string_equal(unknown, "unknown error");
    assert_string_equal(sl_strerror(1), "unknown error");
    assert_string_equal(sl_strerror(-22), "unknown error");
    assert_string_equal(sl_strerror(INT_MIN), "unknown error");
    assert_string_equal(sl_strerror(INT_MAX), "unknown error");
    assert_non_null(sl_strerror(SL_OK));
    for (size_t i = 0; i < n; i++) {
        const char *s = sl_strerror(codes[i]);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_not_equal(s, "unknown error");
        assert_string_not_equal(s, sl_strerror(SL_OK));
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(s, sl_strerror(codes[j]));
        }
    }
    /* the codes are the documented numbers (they cross the wire and the FFI) */
    assert_int_equal(SL_EALGORITHM, -1);
    assert_int_equal(SL_EINVAL, -14);
    assert_int_equal(SL_ELEASE, -15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prepare_rejects_each_field),
        cmocka_unit_test(test_prepare_accepts_edges),
        cmocka_unit_test(test_defaults_and_derived_fields),
        cmocka_unit_test(test_rule_init_equals_prepare_with_defaults),
        cmocka_unit_test(test_algorithm_names),
        cmocka_unit_test(test_duration_parse),
        cmocka_unit_test(test_duration_parse_reads_only_len),
        cmocka_unit_test(test_ns_to_units_ceil),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
