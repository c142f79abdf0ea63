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
                           "{\"algorithm\":\"gcra\",\"limit\":3,\"window\":\"1h\",\"burst\":2,"
                           "\"cold_start\":\"closed\"}",
                           "logc",
                           "{\"algorithm\":\"sliding_log\",\"limit\":4,\"window\":\"1m\","
                           "\"cold_start\":\"closed\"}"};
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
                           "{\"algorithm\":\"fixed_window\",\"limit\":3,\"window\":\"1s\","
                           "\"cold_start\":\"closed\"}",
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peek_sees_cold_start),
        cmocka_unit_test(test_peek_after_cold_window),
    };
    if (tmpdir_create("engine") != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, tmpdir_remove);
}
