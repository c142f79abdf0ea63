/*
 * test_engine.c - sluiced's decision engine over a real SQLite config store, with explicit time:
 * cold starts, inline rules, and the meeting points of features (a peek and a cold start, ...).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/engine.h"
#include "tmpdir.h"

#define NS_PER_SEC INT64_C(1000000000)

static const int64_t t0_ns = INT64_C(1700000000) * NS_PER_SEC;

/* An engine (one worker) over a new store holding the rules given as name, json pairs. */
static engine_t *engine_with(const char *const *rules, size_t n)
{
    char serr[CONFIG_STORE_ERR_MAX], err[ENGINE_ERR_MAX];
    static char path[TMPDIR_MAX + 32];
    tmpdir_file(path, sizeof path, "store", ".db");
    config_store_t *s = NULL;
    assert_int_equal(config_store_open(path, &s, serr), 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(config_store_put_rule(s, rules[2 * i], rules[2 * i + 1], NULL, serr), 0);
    }
    config_store_close(s);
    engine_config_t ec = {
        .store_url = path, .workers = 1, .key_max = 1024, .override_ttl_ns = NS_PER_SEC};
    engine_t *e = NULL;
    if (engine_create(&ec, &e, err) != 0) {
        fail_msg("engine_create: %s", err);
    }
    return e;
}

static engine_decision_t decide(engine_worker_t *w, const char *rule, const char *key, int64_t cost,
                                int64_t now_ns)
{
    engine_worker_begin(w);
    rule_state_t *rs = engine_find(w, rule, strlen(rule));
    assert_non_null(rs);
    engine_decision_t d;
    assert_int_equal(engine_decide(w, rs, key, strlen(key), cost, now_ns, &d), ENGINE_OK);
    return d;
}

/* A peek during a closed cold start answers what an admission would: the key is saturated, not
 * fresh, and the peek itself changes nothing. */
static void test_peek_sees_cold_start(void **unused)
{
    const char *rules[] = {"closed",
                           ("{\"algorithm\":\"gcra\",\"limit\":3,\"window\":\"1h\",\"burst\":2,"
                            "\"cold_start\":\"closed\"}"),
                           "logc",
                           ("{\"algorithm\":\"sliding_log\",\"limit\":4,\"window\":\"1m\","
                            "\"cold_start\":\"closed\"}")};
    engine_t *e = engine_with(rules, 2);
    char err[ENGINE_ERR_MAX];
    assert_int_equal(engine_load_snapshot(e, "", t0_ns, NULL, err), 1); /* none: cold start */
    engine_worker_t *w = engine_worker(e, 0);
    const char *names[] = {"closed", "logc"};
    for (size_t i = 0; i < 2; i++) {
        int64_t now_ns = t0_ns + NS_PER_SEC;
        engine_decision_t peek = decide(w, names[i], "k", 0, now_ns);
        assert_int_equal(peek.d.remaining, 0);
        engine_decision_t again = decide(w, names[i], "k", 0, now_ns);
        assert_int_equal(again.d.remaining, 0);
        engine_decision_t allow = decide(w, names[i], "k", 1, now_ns);
        assert_false(allow.d.allowed);
        assert_true(allow.d.retry_after_ns > 0);
        engine_decision_t after = decide(w, names[i], "k", 0, now_ns);
        assert_int_equal(after.d.remaining, 0);
        assert_int_equal(after.d.reset_after_ns, peek.d.reset_after_ns);
    }
    engine_worker_end(w);
    engine_free(e);
}

/* Outside the closed window, and for an open rule, a peek of a new key reports a fresh key. */
static void test_peek_after_cold_window(void **unused)
{
    const char *rules[] = {"closed",
                           ("{\"algorithm\":\"fixed_window\",\"limit\":3,\"window\":\"1s\","
                            "\"cold_start\":\"closed\"}"),
                           "open",
                           "{\"algorithm\":\"fixed_window\",\"limit\":3,\"window\":\"1s\"}"};
    engine_t *e = engine_with(rules, 2);
    char err[ENGINE_ERR_MAX];
    assert_int_equal(engine_load_snapshot(e, "", t0_ns, NULL, err), 1);
    engine_worker_t *w = engine_worker(e, 0);
    assert_int_equal(decide(w, "open", "k", 0, t0_ns).d.remaining, 3);
    assert_int_equal(decide(w, "closed", "k", 0, t0_ns + NS_PER_SEC / 2).d.remaining, 0);
    assert_int_equal(decide(w, "closed", "k", 0, t0_ns + 2 * NS_PER_SEC).d.remaining, 3);
    engine_worker_end(w);
    engine_free(e);
}

/* ---- inline rules -------------------------------------------------------------------------- */

static engine_t *engine_workers_n(unsigned workers, size_t max_inline)
{
    char err[ENGINE_ERR_MAX];
    static char path[TMPDIR_MAX + 32];
    tmpdir_file(path, sizeof path, "store", ".db");
    engine_config_t ec = {.store_url = path,
                          .workers = workers,
                          .key_max = 1024,
                          .override_ttl_ns = NS_PER_SEC,
                          .max_inline = max_inline};
    engine_t *e = NULL;
    if (engine_create(&ec, &e, err) != 0) {
        fail_msg("engine_create: %s", err);
    }
    return e;
}

static sl_rule_t inline_params_window(int64_t limit, int64_t window_ns)
{
    sl_rule_t r = {.algorithm = SL_SLIDING_LOG,
                   .limit = limit,
                   .window_ns = window_ns,
                   .burst = SL_DEFAULT,
                   .buckets = SL_DEFAULT,
                   .max_debt = SL_DEFAULT};
    return r;
}

static sl_rule_t inline_params(int64_t limit)
{
    return inline_params_window(limit, 10 * NS_PER_SEC);
}

static rule_state_t *inline_rule_window(engine_worker_t *w, int64_t limit, int64_t window_ns,
                                        unsigned *budget, int64_t now_ns)
{
    char err[ENGINE_ERR_MAX];
    sl_rule_t p = inline_params_window(limit, window_ns);
    rule_state_t *rs = NULL;
    int rc = engine_inline_rule(w, &p, budget, now_ns, &rs, err);
    if (rc != ENGINE_OK) {
        fail_msg("engine_inline_rule(limit %lld): %s", (long long)limit, err);
    }
    return rs;
}

static rule_state_t *inline_rule(engine_worker_t *w, int64_t limit, unsigned *budget,
                                 int64_t now_ns)
{
    return inline_rule_window(w, limit, 10 * NS_PER_SEC, budget, now_ns);
}

static int64_t remaining(engine_worker_t *w, rule_state_t *rs, const char *key, int64_t cost,
                         int64_t now_ns)
{
    engine_decision_t d;
    assert_int_equal(engine_decide(w, rs, key, strlen(key), cost, now_ns, &d), ENGINE_OK);
    return d.d.remaining;
}

/* An idle inline rule whose keys are all fresh is taken out of force; one whose keys still hold
 * usage is kept; a rule taken out and asked for again starts fresh (nothing was lost). */
static void test_inline_sweep(void **unused)
{
    engine_t *e = engine_workers_n(1, 0);
    engine_worker_t *w = engine_worker(e, 0);
    engine_worker_begin(w);
    rule_state_t *a = inline_rule_window(w, 5, 10 * NS_PER_SEC, NULL, t0_ns);
    rule_state_t *b = inline_rule_window(w, 6, 60 * NS_PER_SEC, NULL, t0_ns);
    assert_int_equal(remaining(w, a, "k", 1, t0_ns), 4);
    assert_int_equal(remaining(w, b, "k", 1, t0_ns), 5);
    assert_int_equal(engine_inline_count(e), 2);
    assert_int_equal(engine_inline_sweep(e, t0_ns + 9 * NS_PER_SEC), 0); /* not idle yet */
    /* 11 s on both are idle; a's key is fresh (10 s window), b's still holds its unit */
    int64_t later = t0_ns + 11 * NS_PER_SEC;
    assert_int_equal(engine_inline_sweep(e, later), 1);
    assert_int_equal(engine_inline_count(e), 1);
    engine_worker_begin(w);
    rule_state_t *b2 = inline_rule_window(w, 6, 60 * NS_PER_SEC, NULL, later);
    assert_ptr_equal(b2, b);
    assert_int_equal(remaining(w, b2, "k", 0, later), 5);
    rule_state_t *a2 = inline_rule_window(w, 5, 10 * NS_PER_SEC, NULL, later);
    assert_int_equal(remaining(w, a2, "k", 0, later), 5);
    assert_int_equal(engine_inline_count(e), 2);
    engine_worker_end(w);
    engine_free(e);
}

/* A worker still on the set a rule was taken out of decides on it: the rule comes back with that
 * key's usage once no worker holds the old set, and the lookups after find the same table. */
static void test_inline_limbo_keeps_usage(void **unused)
{
    engine_t *e = engine_workers_n(2, 0);
    engine_worker_t *late = engine_worker(e, 0), *other = engine_worker(e, 1);
    engine_worker_begin(late);
    rule_state_t *rs = inline_rule(late, 3, NULL, t0_ns);
    engine_worker_begin(late); /* holds the set with rs */
    int64_t now_ns = t0_ns + 20 * NS_PER_SEC;
    assert_int_equal(engine_inline_sweep(e, now_ns), 1); /* idle, no key: out of force */
    assert_int_equal(engine_inline_count(e), 0);
    /* late still holds the old set: it decides on rs and leaves usage in its table */
    assert_int_equal(remaining(late, rs, "k", 2, now_ns), 1);
    assert_int_equal(engine_inline_sweep(e, now_ns), 0); /* still held: waits in limbo */
    engine_worker_begin(late);                           /* lets go of the old set */
    engine_inline_sweep(e, now_ns);                      /* usage left: back in force */
    assert_int_equal(engine_inline_count(e), 1);
    engine_worker_begin(other);
    rule_state_t *again = inline_rule(other, 3, NULL, now_ns);
    assert_ptr_equal(again, rs);
    assert_int_equal(remaining(other, again, "k", 0, now_ns), 1);
    engine_worker_end(late);
    engine_worker_end(other);
    engine_free(e);
}

/* One connection cannot take every inline rule: its budget runs out, others still create; the
 * global cap refuses everyone until idle rules are reclaimed. */
static void test_inline_bounds(void **unused)
{
    engine_t *e = engine_workers_n(1, 32);
    engine_worker_t *w = engine_worker(e, 0);
    engine_worker_begin(w);
    unsigned flood = engine_inline_budget(e), polite = engine_inline_budget(e);
    assert_int_equal(flood, 16);
    char err[ENGINE_ERR_MAX];
    rule_state_t *rs = NULL;
    for (int64_t limit = 1; limit <= 16; limit++) {
        inline_rule(w, limit, &flood, t0_ns);
    }
    sl_rule_t p = inline_params(17);
    assert_int_equal(engine_inline_rule(w, &p, &flood, t0_ns, &rs, err), ENGINE_EINLINE);
    assert_non_null(strstr(err, "this connection made 16 distinct inline rules"));
    /* a rule the flooder made before is still usable by it and anyone */
    assert_non_null(inline_rule(w, 3, &flood, t0_ns));
    for (int64_t limit = 100; limit < 116; limit++) {
        inline_rule(w, limit, &polite, t0_ns);
    }
    assert_int_equal(engine_inline_count(e), 32);
    unsigned more = engine_inline_budget(e);
    p = inline_params(500);
    assert_int_equal(engine_inline_rule(w, &p, &more, t0_ns, &rs, err), ENGINE_EINLINE);
    assert_non_null(strstr(err, "too many distinct inline rules (at most 32)"));
    engine_inline_sweep(e, t0_ns + 60 * NS_PER_SEC); /* none has a key: all go */
    engine_worker_begin(w);
    assert_int_equal(engine_inline_rule(w, &p, &more, t0_ns + 60 * NS_PER_SEC, &rs, err),
                     ENGINE_OK);
    engine_worker_end(w);
    engine_free(e);
}

/* An inline rule's name is its parameters, the same however they were spelled (a default burst
 * left out or given), with max_delay in it when set: a restart, a snapshot and /metrics agree. */
static void test_inline_names(void **unused)
{
    engine_t *e = engine_workers_n(1, 0);
    engine_worker_t *w = engine_worker(e, 0);
    engine_worker_begin(w);
    char err[ENGINE_ERR_MAX];
    sl_rule_t spelled = {.algorithm = SL_GCRA,
                         .limit = 10,
                         .window_ns = NS_PER_SEC,
                         .burst = SL_DEFAULT,
                         .buckets = SL_DEFAULT,
                         .max_debt = SL_DEFAULT};
    sl_rule_t given = spelled;
    given.burst = 10;
    sl_rule_t delayed = spelled;
    delayed.max_delay_ns = 200 * INT64_C(1000000);
    rule_state_t *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(engine_inline_rule(w, &spelled, NULL, t0_ns, &a, err), ENGINE_OK);
    assert_int_equal(engine_inline_rule(w, &given, NULL, t0_ns, &b, err), ENGINE_OK);
    assert_int_equal(engine_inline_rule(w, &delayed, NULL, t0_ns, &c, err), ENGINE_OK);
    assert_ptr_equal(a, b);
    assert_string_equal(a->def.name, "inline:gcra:10:1000:-1:-1");
    assert_string_equal(c->def.name, "inline:gcra:10:1000:-1:-1:200");
    engine_worker_end(w);
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peek_sees_cold_start),
        cmocka_unit_test(test_peek_after_cold_window),
        cmocka_unit_test(test_inline_sweep),
        cmocka_unit_test(test_inline_limbo_keeps_usage),
        cmocka_unit_test(test_inline_bounds),
        cmocka_unit_test(test_inline_names),
    };
    if (tmpdir_create("engine") != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, tmpdir_remove);
}
