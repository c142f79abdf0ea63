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

#include "engine/engine.h"
#include "engine/events.h"
#include "tmpdir.h"

#define NS_PER_SEC INT64_C(1000000000)

static const int64_t t0_ns = INT64_C(1700000000) * NS_PER_SEC;

/* An engine (one worker) over a new store holding the rules given as name, json pairs, its keys
 * capped at max_memory bytes (0: none). */
static engine_t *engine_capped(const char *const *rules, size_t n, size_t max_memory)
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
    engine_settings_t ec = {.store_url = path,
                            .workers = 1,
                            .key_max = 1024,
                            .override_ttl_ns = NS_PER_SEC,
                            .max_memory = max_memory};
    engine_t *e = NULL;
    if (engine_create(&ec, &e, err) != 0) {
        fail_msg("engine_create: %s", err);
    }
    return e;
}

static engine_t *engine_with(const char *const *rules, size_t n)
{
    return engine_capped(rules, n, 0);
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
    engine_settings_t ec = {.store_url = path,
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
                                        engine_inline_budget_t *budget, int64_t now_ns)
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

static rule_state_t *inline_rule(engine_worker_t *w, int64_t limit, engine_inline_budget_t *budget,
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
    engine_inline_budget_t flood = engine_inline_budget(e), polite = engine_inline_budget(e);
    assert_int_equal(flood.left, 16);
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
    engine_inline_budget_t more = engine_inline_budget(e);
    p = inline_params(500);
    assert_int_equal(engine_inline_rule(w, &p, &more, t0_ns, &rs, err), ENGINE_EINLINE);
    assert_non_null(strstr(err, "too many distinct inline rules (at most 32: --max-inline-rules)"));
    engine_inline_sweep(e, t0_ns + 60 * NS_PER_SEC); /* none has a key: all go */
    engine_worker_begin(w);
    assert_int_equal(engine_inline_rule(w, &p, &more, t0_ns + 60 * NS_PER_SEC, &rs, err),
                     ENGINE_OK);
    engine_worker_end(w);
    engine_free(e);
}

static engine_inline_budget_t budget_from(const engine_t *e, const char *addr)
{
    engine_inline_budget_t b = engine_inline_budget(e);
    netaddr_t a;
    assert_int_equal(netaddr_parse(addr, strlen(addr), &a), NETADDR_OK);
    engine_inline_budget_address(&b, &a);
    return b;
}

/* The probe that took the server-wide cap: one address opening many connections, each making
 * its budget of inline rules. Together they stop at --max-inline-per-address (a quarter
 * of the cap by default), with an error naming it and counted; another address still makes its
 * own; an IPv6 client counts by its /64; rules taken out of force give the address its share
 * back. */
static void test_inline_per_address(void **unused)
{
    engine_t *e = engine_workers_n(1, 128); /* 16 per connection, 32 per address */
    engine_worker_t *w = engine_worker(e, 0);
    engine_worker_begin(w);
    char err[ENGINE_ERR_MAX];
    rule_state_t *rs = NULL;
    uint64_t refused = event_total(EV_INLINE_ADDRESS);
    int64_t limit = 1;
    int made = 0;
    for (int conn = 0; conn < 8; conn++) {
        engine_inline_budget_t b = budget_from(e, "127.0.0.1");
        for (int i = 0; i < 16; i++, limit++) {
            sl_rule_t p = inline_params(limit);
            int rc = engine_inline_rule(w, &p, &b, t0_ns, &rs, err);
            if (rc == ENGINE_OK) {
                made++;
                continue;
            }
            assert_int_equal(rc, ENGINE_EINLINE);
            assert_non_null(strstr(err, "the connections from 127.0.0.1 made 32 distinct inline "
                                        "rules, the most one client address may "
                                        "(--max-inline-per-address)"));
        }
    }
    assert_int_equal(made, 32);
    assert_int_equal(event_total(EV_INLINE_ADDRESS) - refused, 8 * 16 - 32);
    /* a rule the address made is used by anyone, made by no one new */
    engine_inline_budget_t b = budget_from(e, "127.0.0.1");
    assert_non_null(inline_rule(w, 1, &b, t0_ns));
    engine_inline_budget_t other = budget_from(e, "127.0.0.2");
    for (int i = 0; i < 16; i++) {
        inline_rule(w, 1000 + i, &other, t0_ns);
    }
    engine_inline_budget_t v6 = budget_from(e, "2001:db8::1"), v6b = budget_from(e, "2001:db8::2");
    engine_inline_budget_t v6c = budget_from(e, "2001:db8:0:1::1");
    for (int i = 0; i < 16; i++) {
        inline_rule(w, 2000 + i, &v6, t0_ns);
        inline_rule(w, 3000 + i, &v6b, t0_ns);
    }
    sl_rule_t p = inline_params(4000);
    assert_int_equal(engine_inline_rule(w, &p, &v6c, t0_ns, &rs, err), ENGINE_OK); /* other /64 */
    v6b = budget_from(e, "2001:db8::3");
    p = inline_params(4001);
    assert_int_equal(engine_inline_rule(w, &p, &v6b, t0_ns, &rs, err), ENGINE_EINLINE);
    assert_non_null(strstr(err, "the connections from 2001:db8:: made 32"));
    engine_inline_sweep(e, t0_ns + 60 * NS_PER_SEC); /* none has a key: all go */
    engine_worker_begin(w);
    b = budget_from(e, "127.0.0.1");
    p = inline_params(5000);
    assert_int_equal(engine_inline_rule(w, &p, &b, t0_ns + 60 * NS_PER_SEC, &rs, err), ENGINE_OK);
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

/*
 * --max-memory is one cap for every rule's keys. At the cap a rule's new key takes the place of
 * an idle key of that rule; when every key was in use since the last lap of the eviction hand
 * (the keys just stored, at first), the new key is decided by on_store_error (deny here),
 * counted as an event. engine_relieve() frees idle keys across the rules below the cap, never a
 * key decided on since its last call.
 */
static void test_memory_cap_evicts_then_refuses(void **unused)
{
    (void)unused;
    const char *rules[] = {"shut",
                           ("{\"algorithm\":\"gcra\",\"limit\":5,\"window\":\"1h\","
                            "\"on_store_error\":\"deny\"}"),
                           "open", "{\"algorithm\":\"gcra\",\"limit\":5,\"window\":\"1h\"}"};
    const size_t cap = 64 * 1024;
    engine_t *e = engine_capped(rules, 2, cap);
    engine_worker_t *w = engine_worker(e, 0);
    uint64_t full_before = event_total(EV_MEMORY_FULL);
    char key[32];
    int i = 0, refused_at = -1;
    for (; i < 20000 && refused_at < 0; i++) {
        snprintf(key, sizeof key, "k%d", i);
        engine_decision_t d = decide(w, "shut", key, 1, t0_ns);
        if (d.store_error) {
            assert_false(d.d.allowed); /* on_store_error: deny */
            refused_at = i;
        }
    }
    assert_true(refused_at > 100);
    assert_int_equal(event_total(EV_MEMORY_FULL), full_before + 1);
    size_t used, max;
    engine_memory(e, &used, &max);
    assert_int_equal(max, cap);
    assert_true(used <= cap);
    /* the lap that refused unmarked every key: the next new keys evict idle ones */
    for (int j = 0; j < 100; j++, i++) {
        snprintf(key, sizeof key, "k%d", i);
        engine_decision_t d = decide(w, "shut", key, 1, t0_ns);
        assert_false(d.store_error);
        assert_true(d.d.allowed);
    }
    /* the other rule's keys fill the rest, then relieving frees both rules' idle keys; a key
     * decided on since the first call stays */
    for (int j = 0; j < 3000; j++) {
        snprintf(key, sizeof key, "o%d", j);
        decide(w, "open", key, 1, t0_ns);
    }
    int64_t kept = decide(w, "shut", "kept", 2, t0_ns).d.remaining; /* 6 - 2 (gcra: burst + 1) */
    assert_int_equal(kept, 4);
    engine_memory(e, &used, &max);
    assert_true(used > cap / 16 * 15); /* near the cap: relieving has work to do */
    /* the shut keys the refusing lap unmarked are idle: they go; "kept" and the open keys
     * were decided on since, and stay (unmarked now) */
    assert_true(engine_relieve(e, t0_ns) > 0);
    engine_memory(e, &used, &max);
    assert_true(used <= cap / 16 * 15);
    assert_int_equal(decide(w, "shut", "kept", 0, t0_ns).d.remaining, kept);
    assert_int_equal(decide(w, "open", "o2999", 0, t0_ns).d.remaining, 5);
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
        cmocka_unit_test(test_inline_per_address),
        cmocka_unit_test(test_inline_names),
        cmocka_unit_test(test_memory_cap_evicts_then_refuses),
    };
    if (tmpdir_create("engine") != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, tmpdir_remove);
}
