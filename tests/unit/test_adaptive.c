/*
 * test_adaptive.c - adaptive concurrency limits (src/core/adaptive.c, sl_release_sample();
 * src/rules/ruledef_adaptive.c): cases worked by hand. tests/prop/prop_adaptive.c has the
 * properties over a simulated service and random sequences.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/ruledef.h"
#include "sluice/sluice.h"

#define MS  SL_NS_PER_MS
#define SEC SL_NS_PER_SEC
#define T0  (INT64_C(1700000000) * SEC)

static sl_rule_t adaptive_rule(sl_adaptive_algorithm_t alg, int64_t limit, int64_t min, int64_t max)
{
    sl_rule_t r;
    assert_int_equal(sl_rule_init(&r, SL_CONCURRENCY, limit, 10 * SEC), SL_OK);
    r.adaptive = (sl_adaptive_t){.algorithm = alg, .min_limit = min, .max_limit = max};
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    return r;
}

/* Acquires n units one by one at t; their ids into ids. */
static void acquire_n(const sl_rule_t *r, void *st, int n, int64_t t, uint64_t *ids)
{
    for (int i = 0; i < n; i++) {
        sl_decision_t d;
        sl_hold_t h;
        assert_int_equal(sl_acquire(r, st, 1, 0, t, 9, &d, &h), SL_OK);
        assert_true(d.allowed);
        ids[i] = h.id;
    }
}

/* The state is sized by max_limit; the decision's limit is the adaptive limit; a window of
 * `limit` fine samples with the limit busy adds one (AIMD), a drop in the next window cuts it
 * to 90 % (rounded down), never under min_limit. */
static void test_aimd_window(void **cm)
{
    (void)cm;
    sl_rule_t r = adaptive_rule(SL_ADAPTIVE_AIMD, 4, 2, 8);
    assert_int_equal(sl_state_size(&r), 48 + 16 * 8);
    unsigned char st[48 + 16 * 8] = {0};
    uint64_t ids[8];
    sl_decision_t d;
    acquire_n(&r, st, 4, T0, ids);
    assert_int_equal(sl_acquire(&r, st, 1, 0, T0, 9, &d, &(sl_hold_t){0}), SL_OK);
    assert_false(d.allowed); /* the limit is 4, not the state's room of 8 */
    assert_int_equal(d.limit, 4);
    sl_sample_t fine = {20 * MS, false};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_release_sample(&r, st, ids[i], T0 + MS, &fine, &d, NULL), SL_OK);
        assert_int_equal(d.limit, 4); /* the window is not over */
    }
    assert_int_equal(sl_release_sample(&r, st, ids[3], T0 + MS, &fine, &d, NULL), SL_OK);
    assert_int_equal(d.limit, 5);
    assert_int_equal(sl_limit_now(&r, st), 5);
    acquire_n(&r, st, 5, T0 + 2 * MS, ids);
    sl_sample_t drop = {-1, true};
    assert_int_equal(sl_release_sample(&r, st, ids[0], T0 + 3 * MS, &drop, &d, NULL), SL_OK);
    for (int i = 1; i < 5; i++)
        assert_int_equal(sl_release_sample(&r, st, ids[i], T0 + 3 * MS, &fine, &d, NULL), SL_OK);
    assert_int_equal(d.limit, 4); /* 5 * 90 / 100 = 4.5, rounded down */
    assert_int_equal(sl_state_check(&r, st), SL_OK);
}

/* A latency past latency_timeout is a drop; the floor is min_limit. */
static void test_aimd_timeout_floor(void **cm)
{
    (void)cm;
    sl_rule_t r;
    sl_rule_init(&r, SL_CONCURRENCY, 2, 10 * SEC);
    r.adaptive = (sl_adaptive_t){.algorithm = SL_ADAPTIVE_AIMD,
                                 .min_limit = 2,
                                 .max_limit = 4,
                                 .backoff_pct = 50,
                                 .timeout_ns = 100 * MS};
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    unsigned char st[48 + 16 * 4] = {0};
    uint64_t ids[2];
    sl_decision_t d;
    acquire_n(&r, st, 2, T0, ids);
    sl_sample_t slow = {101 * MS, false};
    sl_release_sample(&r, st, ids[0], T0 + MS, &slow, &d, NULL);
    sl_release_sample(&r, st, ids[1], T0 + MS, &slow, &d, NULL);
    assert_int_equal(d.limit, 2); /* 2 * 50 % = 1, held at min_limit 2 */
}

/* A release without a sample, of no live hold, or with nothing in its sample changes nothing;
 * a latency above the cap is refused. */
static void test_silent_release(void **cm)
{
    (void)cm;
    sl_rule_t r = adaptive_rule(SL_ADAPTIVE_VEGAS, 1, 1, 4);
    unsigned char st[48 + 16 * 4] = {0}, before[sizeof st];
    uint64_t ids[1];
    sl_decision_t d;
    acquire_n(&r, st, 1, T0, ids);
    memcpy(before, st, sizeof st);
    sl_sample_t none = {-1, false}, big = {SL_ADAPTIVE_LATENCY_MAX_NS + 1, false};
    sl_sample_t fine = {5 * MS, false};
    assert_int_equal(sl_release_sample(&r, st, ids[0] ^ 1, T0, &fine, &d, NULL), SL_EHOLD);
    assert_memory_equal(st, before, sizeof st);
    assert_int_equal(sl_release_sample(&r, st, ids[0], T0, &big, &d, NULL), SL_EINVAL);
    assert_memory_equal(st, before, sizeof st);
    assert_int_equal(sl_release_sample(&r, st, ids[0], T0, &none, &d, NULL), SL_OK);
    assert_memory_equal(st + 32, before + 32, 16); /* the adaptive bytes */
}

/* Vegas: the first windows measure the least latency; then a window with no queue grows the
 * limit by 6 (beta = 6 * max(1, floor(log10 limit))), one with a long queue shrinks it by 1. */
static void test_vegas_steps(void **cm)
{
    (void)cm;
    sl_rule_t r = adaptive_rule(SL_ADAPTIVE_VEGAS, 1, 1, 100);
    static unsigned char st[48 + 16 * 100];
    memset(st, 0, sizeof st);
    uint64_t ids[100];
    sl_decision_t d;
    int64_t t = T0;
    for (int w = 0; w < 3; w++) { /* two windows of drain, then noload = 10 ms */
        acquire_n(&r, st, 1, t, ids);
        sl_release_sample(&r, st, ids[0], t, &(sl_sample_t){10 * MS, false}, &d, NULL);
        assert_int_equal(d.limit, 1);
    }
    acquire_n(&r, st, 1, t, ids);
    sl_release_sample(&r, st, ids[0], t, &(sl_sample_t){10 * MS, false}, &d, NULL);
    assert_int_equal(d.limit, 7); /* no queue: + 6 */
    acquire_n(&r, st, 7, t, ids);
    for (int i = 0; i < 7; i++)
        sl_release_sample(&r, st, ids[i], t, &(sl_sample_t){100 * MS, false}, &d, NULL);
    assert_int_equal(d.limit, 6); /* queue ceil(7 * 0.9) = 7 > beta 6: - 1 */
}

/* Bounds are checked: min_limit <= limit <= max_limit <= SL_HOLDS_MAX, a holding algorithm,
 * only the algorithm's own options. */
static void test_prepare_bounds(void **cm)
{
    (void)cm;
    sl_rule_t r;
    sl_rule_init(&r, SL_CONCURRENCY, 10, SEC);
    sl_rule_t t = r;
    t.adaptive = (sl_adaptive_t){SL_ADAPTIVE_AIMD, 11, 20, 0, 0, 0};
    assert_int_equal(sl_rule_prepare(&t), SL_EADAPTIVE);
    t.adaptive = (sl_adaptive_t){SL_ADAPTIVE_AIMD, 1, 9, 0, 0, 0};
    assert_int_equal(sl_rule_prepare(&t), SL_EADAPTIVE);
    t.adaptive = (sl_adaptive_t){SL_ADAPTIVE_AIMD, 1, SL_HOLDS_MAX + 1, 0, 0, 0};
    assert_int_equal(sl_rule_prepare(&t), SL_EADAPTIVE);
    t.adaptive = (sl_adaptive_t){SL_ADAPTIVE_AIMD, 1, 20, 0, 0, 30};
    assert_int_equal(sl_rule_prepare(&t), SL_EADAPTIVE); /* probe is vegas's */
    t.adaptive = (sl_adaptive_t){SL_ADAPTIVE_VEGAS, 1, 20, 0, 0, 4};
    assert_int_equal(sl_rule_prepare(&t), SL_EADAPTIVE); /* probe under 5 */
    sl_rule_init(&t, SL_GCRA, 10, SEC);
    t.adaptive = (sl_adaptive_t){SL_ADAPTIVE_AIMD, 1, 20, 0, 0, 0};
    assert_int_equal(sl_rule_prepare(&t), SL_EADAPTIVE);
    t = r;
    t.adaptive = (sl_adaptive_t){SL_ADAPTIVE_AIMD, 1, 20, 0, 0, 0};
    assert_int_equal(sl_rule_prepare(&t), SL_OK);
    assert_int_equal(t.adaptive.backoff_pct, 90);
    assert_int_equal(t.adaptive.timeout_ns, 5 * SEC);
    assert_int_equal(sl_limit_now(&t, NULL), 10);
}

/* A rule file's flat fields parse, write back canonically, and refuse what does not fit. */
static void test_ruledef(void **cm)
{
    (void)cm;
    const char *json = "{\"name\":\"api\",\"algorithm\":\"concurrency\",\"limit\":20,"
                       "\"window\":\"30s\",\"adaptive\":\"aimd\",\"min_limit\":5,"
                       "\"max_limit\":200,\"backoff\":80}";
    ruledef_t def;
    char err[RULEDEF_ERR_MAX];
    assert_int_equal(ruledef_parse_json(json, strlen(json), NULL, &def, err), 0);
    assert_int_equal(def.rule.adaptive.algorithm, SL_ADAPTIVE_AIMD);
    assert_int_equal(def.rule.adaptive.backoff_pct, 80);
    char *out = ruledef_to_json(&def);
    assert_non_null(out);
    assert_non_null(strstr(out, "\"adaptive\":\"aimd\",\"min_limit\":5,\"max_limit\":200,"
                                "\"backoff\":80,\"latency_timeout\":\"5s\""));
    ruledef_t again;
    assert_int_equal(ruledef_parse_json(out, strlen(out), NULL, &again, err), 0);
    assert_true(ruledef_equal(&def, &again));
    free(out);
    ruledef_free(&def);
    ruledef_free(&again);
    static const struct {
        const char *json, *err;
    } bad[] = {
        {"\"adaptive\":\"aimd\",\"min_limit\":5,\"max_limit\":200,\"probe\":9",
         "probe: does not apply to adaptive: aimd"},
        {"\"adaptive\":\"aimd\",\"min_limit\":5", "adaptive: needs 'max_limit' beside it"},
        {"\"min_limit\":5", "min_limit: only applies with 'adaptive' (aimd or vegas)"},
        {"\"adaptive\":\"tcp\"", "adaptive: unknown adaptive algorithm (expected aimd or vegas)"},
        {"\"adaptive\":\"vegas\",\"min_limit\":30,\"max_limit\":200",
         "min_limit: must be such that min_limit <= limit (20) <= max_limit"},
        {"\"adaptive\":\"vegas\",\"min_limit\":3,\"max_limit\":5000",
         "max_limit: must be at most 4096"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"name\":\"api\",\"algorithm\":\"concurrency\",\"limit\":20,\"window\":\"30s\","
                 "%s}",
                 bad[i].json);
        assert_int_equal(ruledef_parse_json(text, strlen(text), NULL, &def, err), -1);
        if (strstr(err, bad[i].err) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].err);
    }
}

/* A rule that starts adapting keeps the key's holds and starts from its limit; one that stops
 * keeps the holds and drops the adaptive bytes; a narrower range clamps the limit into it. */
static void test_convert(void **cm)
{
    (void)cm;
    sl_rule_t fixed;
    sl_rule_init(&fixed, SL_CONCURRENCY, 3, 10 * SEC);
    sl_rule_t ad = adaptive_rule(SL_ADAPTIVE_AIMD, 3, 1, 6);
    sl_rule_t narrow = adaptive_rule(SL_ADAPTIVE_AIMD, 2, 1, 2);
    unsigned char a[48 + 16 * 3] = {0}, b[48 + 16 * 6] = {0}, c[48 + 16 * 3] = {0};
    unsigned char n[48 + 16 * 2] = {0};
    uint64_t ids[3];
    sl_decision_t d;
    acquire_n(&fixed, a, 2, T0, ids);
    assert_int_equal(sl_state_convert(&fixed, a, &ad, b, T0), SL_OK);
    assert_int_equal(sl_in_flight(&ad, b, T0), 2);
    assert_int_equal(sl_limit_now(&ad, b), 3);
    uint64_t more[1];
    acquire_n(&ad, b, 1, T0, more); /* 3 of 3 */
    for (int i = 0; i < 2; i++)
        assert_int_equal(sl_release_sample(&ad, b, ids[i], T0, &(sl_sample_t){MS, false}, &d, NULL),
                         SL_OK);
    assert_int_equal(sl_release_sample(&ad, b, more[0], T0, &(sl_sample_t){MS, false}, &d, NULL),
                     SL_OK);
    assert_int_equal(sl_limit_now(&ad, b), 4); /* a busy window: + 1 */
    acquire_n(&ad, b, 2, T0, ids);
    assert_int_equal(sl_state_convert(&ad, b, &fixed, c, T0), SL_OK);
    assert_int_equal(sl_state_check(&fixed, c), SL_OK);
    assert_int_equal(sl_in_flight(&fixed, c, T0), 2);
    assert_int_equal(sl_state_convert(&ad, b, &narrow, n, T0), SL_OK);
    assert_int_equal(sl_state_check(&narrow, n), SL_OK);
    assert_int_equal(sl_limit_now(&narrow, n), 2); /* 4 clamped to max_limit 2 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aimd_window),    cmocka_unit_test(test_aimd_timeout_floor),
        cmocka_unit_test(test_silent_release), cmocka_unit_test(test_vegas_steps),
        cmocka_unit_test(test_prepare_bounds), cmocka_unit_test(test_ruledef),
        cmocka_unit_test(test_convert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
