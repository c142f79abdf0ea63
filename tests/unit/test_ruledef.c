/*
 * test_ruledef.c - rule definitions: every field valid and invalid in YAML and JSON, the line
 * and column of planted errors, overrides (blocked, inherited fields, the burst that follows the
 * limit), duration formatting, the example rules file, and seeded round trips (to_json ->
 * parse_json and list_to_yaml -> parse_yaml give equal rules).
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

/* ---- helpers ------------------------------------------------------------------------------- */

static char err[RULEDEF_ERR_MAX];

/* Parses YAML that must be valid. */
static ruledef_list_t yaml_ok(const char *text)
{
    ruledef_list_t list;
    if (ruledef_parse_yaml(text, strlen(text), &list, err) != 0)
        fail_msg("unexpected error: %s\n--- in ---\n%s", err, text);
    return list;
}

/* Parses YAML that must be refused; returns the message (valid until the next call). */
static const char *yaml_err(const char *text)
{
    ruledef_list_t list = {.n = 99};
    if (ruledef_parse_yaml(text, strlen(text), &list, err) == 0)
        fail_msg("parsed, expected an error:\n%s", text);
    assert_int_equal(list.n, 0);
    assert_null(list.rules);
    return err;
}

static ruledef_t json_ok(const char *json, const char *hint)
{
    ruledef_t def;
    if (ruledef_parse_json(json, strlen(json), hint, &def, err) != 0)
        fail_msg("unexpected error: %s\n--- in ---\n%s", err, json);
    return def;
}

static const char *json_err(const char *json, const char *hint)
{
    ruledef_t def;
    if (ruledef_parse_json(json, strlen(json), hint, &def, err) == 0)
        fail_msg("parsed, expected an error: %s", json);
    assert_int_equal(def.noverrides, 0);
    assert_null(def.overrides);
    return err;
}

/* A one-rule file: the head below (lines 1-5) and `extra` from line 6 on. */
static const char *one_rule(const char *algorithm, const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf),
             "rules:\n  - name: r\n    algorithm: %s\n    limit: 10\n    window: 1s\n%s", algorithm,
             extra);
    return buf;
}

/* ---- YAML: valid fields -------------------------------------------------------------------- */

static void test_yaml_spec_example(void **unused)
{
    (void)unused;
    ruledef_list_t l = yaml_ok("rules:\n"
                               "  - name: login\n"
                               "    algorithm: sliding_log\n"
                               "    limit: 10\n"
                               "    window: 1m\n"
                               "    key: \"{ip}\"\n"
                               "    on_store_error: deny\n"
                               "  - name: api\n"
                               "    algorithm: token_bucket\n"
                               "    limit: 100\n"
                               "    window: 1s\n"
                               "    burst: 200\n"
                               "    overrides:\n"
                               "      - key: \"tenant:acme\"\n"
                               "        limit: 1000\n");
    assert_int_equal(l.n, 2);
    ruledef_t *login = &l.rules[0], *api = &l.rules[1];
    assert_string_equal(login->name, "login");
    assert_int_equal(login->rule.algorithm, SL_SLIDING_LOG);
    assert_int_equal(login->rule.limit, 10);
    assert_int_equal(login->rule.window_ns, 60 * SL_NS_PER_SEC);
    assert_true(login->has_key);
    assert_string_equal(login->key_text, "{ip}");
    assert_int_equal(login->key.nparts, 1);
    assert_int_equal(login->on_store_error, RULE_ON_ERROR_DENY);
    assert_int_equal(login->cold_start, RULE_COLD_OPEN);
    assert_false(login->shadow);
    assert_int_equal(login->noverrides, 0);

    assert_int_equal(api->rule.algorithm, SL_TOKEN_BUCKET);
    assert_int_equal(api->rule.burst, 200);
    assert_int_equal(api->rule.capacity, 200);
    assert_false(api->has_key);
    assert_int_equal(api->on_store_error, RULE_ON_ERROR_ALLOW);
    assert_int_equal(api->noverrides, 1);
    rule_override_t *ov = &api->overrides[0];
    assert_int_equal(ov->key_len, 11);
    assert_memory_equal(ov->key, "tenant:acme", 12);
    assert_false(ov->blocked);
    assert_int_equal(ov->fields, OVERRIDE_F_LIMIT);
    assert_int_equal(ov->rule.limit, 1000);
    assert_int_equal(ov->rule.burst, 2000); /* the burst keeps its proportion to the limit */
    assert_int_equal(ov->rule.capacity, 2000);
    assert_int_equal(ov->rule.window_ns, SL_NS_PER_SEC);
    assert_int_equal(ov->rule.interval_ns, SL_NS_PER_SEC / 1000);
    ruledef_list_free(&l);
    assert_int_equal(l.n, 0);
}

static void test_yaml_every_field(void **unused)
{
    (void)unused;
    ruledef_list_t l = yaml_ok("rules:\n"
                               "- name: \"a-b.c:d_9\"\n"
                               "  algorithm: gcra\n"
                               "  limit: 5\n"
                               "  window: 1h30m\n"
                               "  burst: 0\n"
                               "  max_delay: 250\n" /* integer milliseconds */
                               "  key: \"{header:x-api-key}:{path}\"\n"
                               "  shadow: true\n"
                               "  on_store_error: allow\n"
                               "  cold_start: closed\n"
                               "- {name: sb, algorithm: sliding_buckets, limit: 7, window: 60000,"
                               " buckets: 6}\n"
                               "- name: 2024\n" /* a plain scalar is taken as written */
                               "  algorithm: fixed_window\n"
                               "  limit: 1\n"
                               "  window: 1ms\n"
                               "  shadow: FALSE\n");
    assert_int_equal(l.n, 3);
    ruledef_t *a = &l.rules[0];
    assert_string_equal(a->name, "a-b.c:d_9");
    assert_int_equal(a->rule.algorithm, SL_GCRA);
    assert_int_equal(a->rule.window_ns, 5400 * SL_NS_PER_SEC);
    assert_int_equal(a->rule.burst, 0);
    assert_int_equal(a->rule.capacity, 1);
    assert_int_equal(a->rule.max_delay_ns, 250 * SL_NS_PER_MS);
    assert_string_equal(a->key_text, "{header:x-api-key}:{path}");
    assert_true(a->shadow);
    assert_int_equal(a->cold_start, RULE_COLD_CLOSED);
    assert_int_equal(l.rules[1].rule.window_ns, 60 * SL_NS_PER_SEC);
    assert_int_equal(l.rules[1].rule.buckets, 6);
    assert_int_equal(l.rules[1].rule.bucket_ns, 10 * SL_NS_PER_SEC);
    assert_string_equal(l.rules[2].name, "2024");
    assert_false(l.rules[2].shadow);
    ruledef_list_free(&l);
}

/* mode, lease_time and sync_interval: the default lease time, what is written back, and each
 * refusal. */
static void test_mode(void **unused)
{
    (void)unused;
    ruledef_list_t l = yaml_ok("rules:\n"
                               "- {name: a, algorithm: fixed_window, limit: 10, window: 1m}\n"
                               "- {name: b, algorithm: fixed_window, limit: 10, window: 1m,"
                               " mode: leased}\n"
                               "- {name: c, algorithm: sliding_window, limit: 10, window: 2s,"
                               " mode: leased}\n"
                               "- {name: d, algorithm: token_bucket, limit: 10, window: 1s,"
                               " burst: 3, mode: leased}\n"
                               "- {name: e, algorithm: gcra, limit: 100, window: 1m, mode: leased,"
                               " lease_time: 250ms}\n"
                               "- {name: f, algorithm: fixed_window, limit: 10, window: 1m,"
                               " mode: strict}\n");
    assert_int_equal(l.rules[0].mode, RULE_MODE_STRICT);
    assert_int_equal(ruledef_lease_ns(&l.rules[0]), 0);
    assert_int_equal(l.rules[1].mode, RULE_MODE_LEASED);
    assert_int_equal(ruledef_lease_ns(&l.rules[1]), SL_NS_PER_SEC);      /* min(1m / 10, 1s) */
    assert_int_equal(ruledef_lease_ns(&l.rules[2]), 200 * SL_NS_PER_MS); /* 2s / 10 */
    /* token_bucket 10/s burst 3: T 100ms, tau 300ms, room 200ms; min(1s / 10, 1s, 200ms) */
    assert_int_equal(ruledef_lease_ns(&l.rules[3]), 100 * SL_NS_PER_MS);
    assert_int_equal(ruledef_lease_room_ns(&l.rules[3].rule), 200 * SL_NS_PER_MS);
    assert_int_equal(ruledef_lease_ns(&l.rules[4]), 250 * SL_NS_PER_MS);
    /* written back: mode only when leased, lease_time only when given */
    char *j = ruledef_to_json(&l.rules[1]);
    assert_non_null(strstr(j, "\"cold_start\":\"open\",\"mode\":\"leased\"}"));
    free(j);
    j = ruledef_to_json(&l.rules[4]);
    assert_non_null(strstr(j, "\"mode\":\"leased\",\"lease_time\":\"250ms\""));
    ruledef_t back = json_ok(j, NULL);
    assert_true(ruledef_equal(&back, &l.rules[4]));
    assert_false(ruledef_equal(&back, &l.rules[1]));
    ruledef_free(&back);
    free(j);
    j = ruledef_to_json(&l.rules[5]);
    assert_null(strstr(j, "mode"));
    free(j);
    ruledef_list_free(&l);

    /* approximate: every algorithm, sync_interval 100ms unless given, written back */
    l = yaml_ok("rules:\n"
                "- {name: a, algorithm: sliding_log, limit: 10, window: 1m, mode: approximate}\n"
                "- {name: b, algorithm: token_bucket, limit: 10, window: 1s, burst: 1,"
                " mode: approximate, sync_interval: 250ms}\n");
    assert_int_equal(l.rules[0].mode, RULE_MODE_APPROXIMATE);
    assert_int_equal(ruledef_sync_ns(&l.rules[0]), 100 * SL_NS_PER_MS);
    assert_int_equal(ruledef_lease_ns(&l.rules[0]), 0);
    assert_int_equal(ruledef_sync_ns(&l.rules[1]), 250 * SL_NS_PER_MS);
    j = ruledef_to_json(&l.rules[0]);
    assert_non_null(strstr(j, "\"mode\":\"approximate\"}"));
    free(j);
    j = ruledef_to_json(&l.rules[1]);
    assert_non_null(strstr(j, "\"mode\":\"approximate\",\"sync_interval\":\"250ms\""));
    back = json_ok(j, NULL);
    assert_true(ruledef_equal(&back, &l.rules[1]));
    back.sync_ns = 0;
    assert_false(ruledef_equal(&back, &l.rules[1]));
    ruledef_free(&back);
    free(j);
    ruledef_list_free(&l);

    /* replicas: strict only, replica_wait 100ms unless given, both written back when given */
    l = yaml_ok("rules:\n"
                "- {name: a, algorithm: fixed_window, limit: 10, window: 1m, replicas: 1}\n"
                "- {name: b, algorithm: gcra, limit: 10, window: 1s, replicas: 2,"
                " replica_wait: 20ms}\n");
    assert_int_equal(l.rules[0].replicas, 1);
    assert_int_equal(ruledef_replica_wait_ns(&l.rules[0]), 100 * SL_NS_PER_MS);
    assert_int_equal(ruledef_replica_wait_ns(&l.rules[1]), 20 * SL_NS_PER_MS);
    j = ruledef_to_json(&l.rules[0]);
    assert_non_null(strstr(j, "\"cold_start\":\"open\",\"replicas\":1}"));
    free(j);
    j = ruledef_to_json(&l.rules[1]);
    assert_non_null(strstr(j, "\"replicas\":2,\"replica_wait\":\"20ms\""));
    back = json_ok(j, NULL);
    assert_true(ruledef_equal(&back, &l.rules[1]));
    back.replica_wait_ns = 0;
    assert_false(ruledef_equal(&back, &l.rules[1]));
    ruledef_free(&back);
    free(j);
    ruledef_list_free(&l);

    static const struct {
        const char *algorithm, *extra, *want;
    } rows[] = {
        {"fixed_window", "    mode: fast\n",
         "line 6, column 11: rules[0].mode: must be strict, leased or approximate, not 'fast'"},
        {"fixed_window", "    sync_interval: 1s\n",
         "line 6, column 20: rules[0].sync_interval: only applies to a rule with mode: "
         "approximate"},
        {"fixed_window", "    mode: leased\n    sync_interval: 1s\n",
         "line 7, column 20: rules[0].sync_interval: only applies to a rule with mode: "
         "approximate"},
        {"fixed_window", "    mode: approximate\n    lease_time: 1s\n",
         "line 7, column 17: rules[0].lease_time: only applies to a rule with mode: leased"},
        {"fixed_window", "    mode: approximate\n    sync_interval: 1500us\n",
         "line 7, column 20: rules[0].sync_interval: must be whole milliseconds, at least 1ms"},
        {"fixed_window", "    mode: approximate\n    sync_interval: 2h\n",
         "line 7, column 20: rules[0].sync_interval: must be at most 1h"},
        {"sliding_log", "    mode: leased\n",
         "line 6, column 11: rules[0].mode: sliding_log cannot lease: it keeps each unit's time "
         "(sliding_buckets can)"},
        {"token_bucket", "    burst: 1\n    mode: leased\n",
         "line 7, column 11: rules[0].mode: token_bucket cannot lease with burst 1: a lease's time "
         "is held in the bucket, and its capacity less one interval is under 1ms"},
        {"gcra", "    burst: 2\n    mode: leased\n    lease_time: 300ms\n",
         "line 8, column 17: rules[0].lease_time: 300ms is longer than the bucket's room for a "
         "lease, 200ms (its capacity less one interval)"},
        {"fixed_window", "    lease_time: 1s\n",
         "line 6, column 17: rules[0].lease_time: only applies to a rule with mode: leased"},
        {"fixed_window", "    mode: leased\n    lease_time: 1500us\n",
         "line 7, column 17: rules[0].lease_time: must be whole milliseconds, at least 1ms"},
        {"fixed_window", "    mode: leased\n    lease_time: 0\n",
         "line 7, column 17: rules[0].lease_time: must be whole milliseconds, at least 1ms"},
        {"fixed_window", "    replicas: 0\n",
         "line 6, column 15: rules[0].replicas: must be an integer > 0"},
        {"fixed_window", "    replicas: 65\n",
         "line 6, column 15: rules[0].replicas: must be at most 64"},
        {"fixed_window", "    replica_wait: 10ms\n",
         "line 6, column 19: rules[0].replica_wait: only applies to a rule with replicas"},
        {"fixed_window", "    replicas: 1\n    replica_wait: 2s\n",
         "line 7, column 19: rules[0].replica_wait: must be whole milliseconds, 1ms .. 1s"},
        {"fixed_window", "    replicas: 1\n    replica_wait: 1500us\n",
         "line 7, column 19: rules[0].replica_wait: must be whole milliseconds, 1ms .. 1s"},
        {"fixed_window", "    mode: leased\n    replicas: 1\n",
         "line 7, column 15: rules[0].replicas: only applies to a strict rule: a leased rule "
         "decides locally from what it was granted"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *got = yaml_err(one_rule(rows[i].algorithm, rows[i].extra));
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("row %zu:\n got  %s\n want %s", i, got, rows[i].want);
    }
}

static void test_yaml_defaults(void **unused)
{
    (void)unused;
    ruledef_list_t l = yaml_ok(one_rule("token_bucket", ""));
    assert_int_equal(l.rules[0].rule.burst, 10);
    assert_int_equal(l.rules[0].rule.max_delay_ns, 0);
    ruledef_list_free(&l);
    l = yaml_ok(one_rule("sliding_buckets", ""));
    assert_int_equal(l.rules[0].rule.buckets, SL_BUCKETS_DEFAULT);
    ruledef_list_free(&l);
}

/* ---- YAML: errors with positions ----------------------------------------------------------- */

typedef struct bad_field {
    const char *algorithm;
    const char *extra; /* from line 6 */
    const char *want;
} bad_field_t;

static void test_yaml_field_errors(void **unused)
{
    (void)unused;
    static const bad_field_t rows[] = {
        {"fixed_window", "    limt: 3\n", "line 6, column 5: rules[0]: unknown field 'limt'"},
        {"fixed_window", "    limit: 4\n", "line 6, column 5: rules[0]: duplicate field 'limit'"},
        {"token_bucket", "    burst: -1\n",
         "line 6, column 12: rules[0].burst: must be an integer >= 0"},
        {"token_bucket", "    burst: 0\n",
         "line 6, column 12: rules[0].burst: must be at least 1 for token_bucket"},
        {"token_bucket", "    burst: +5\n",
         "line 6, column 12: rules[0].burst: must be an integer >= 0 written without a sign"},
        {"token_bucket", "    burst: 010\n",
         "line 6, column 12: rules[0].burst: must be an integer >= 0 written without leading "
         "zeros"},
        {"token_bucket", "    burst: 1e3\n",
         "line 6, column 12: rules[0].burst: must be an integer >= 0, not a fractional number"},
        {"token_bucket", "    burst: 99999999999999999999\n",
         "line 6, column 12: rules[0].burst: must be an integer >= 0 (out of range)"},
        {"token_bucket", "    burst: \"5\"\n",
         "line 6, column 12: rules[0].burst: must be an integer >= 0, not a string"},
        {"token_bucket", "    burst:\n",
         "line 6, column 11: rules[0].burst: must be an integer >= 0, not null"},
        {"gcra", "    burst: 9000000000000000000\n",
         "line 6, column 12: rules[0].burst: window / limit * burst is out of range (above about "
         "73 years); lower the window or the burst"},
        {"fixed_window", "    burst: 5\n",
         "line 6, column 12: rules[0].burst: only applies to token_bucket and gcra"},
        {"sliding_log", "    buckets: 5\n",
         "line 6, column 14: rules[0].buckets: only applies to sliding_buckets"},
        {"sliding_buckets", "    buckets: 0\n",
         "line 6, column 14: rules[0].buckets: must be an integer > 0"},
        {"sliding_buckets", "    buckets: 5000\n",
         "line 6, column 14: rules[0].buckets: must be 1..4096"},
        {"sliding_buckets", "    buckets: 7\n",
         "line 6, column 14: rules[0].buckets: must divide the window (1s)"},
        {"sliding_window", "    max_delay: 1s\n",
         "line 6, column 16: rules[0].max_delay: only applies to token_bucket and gcra"},
        {"gcra", "    max_delay: 367d\n",
         "line 6, column 16: rules[0].max_delay: must be at most 366d"},
        {"gcra", "    max_delay: -5\n",
         "line 6, column 16: rules[0].max_delay: must be a duration or milliseconds >= 0"},
        {"gcra", "    max_delay: 1.5\n",
         "line 6, column 16: rules[0].max_delay: must be a duration such as \"1s\" or integer "
         "milliseconds, not a fractional number"},
        {"gcra", "    max_debt: -1\n",
         "line 6, column 15: rules[0].max_debt: must be an integer >= 0"},
        {"gcra", "    max_debt: 4611686018427387904\n",
         "line 6, column 15: rules[0].max_debt: must be at most 4611686018427387903 (2^62 - 1) "
         "units past the limit"},
        {"sliding_log", "    max_debt: \"5\"\n",
         "line 6, column 15: rules[0].max_debt: must be an integer >= 0, not a string"},
        {"gcra", "    max_delay: 99999999999999999999999s\n",
         "line 6, column 16: rules[0].max_delay: duration '99999999999999999999999s' is out of "
         "range"},
        {"fixed_window", "    key: {ip}\n",
         "line 6, column 10: rules[0].key: must be a string, not a mapping (quote key templates: "
         "\"{ip}\")"},
        {"fixed_window", "    key: \"{hostname}\"\n",
         "line 6, column 10: rules[0].key: offset 0: unknown placeholder '{hostname}' (expected "
         "ip, ip/N, ip6/N, header:NAME, query:NAME, path or method)"},
        {"fixed_window", "    key: \"\"\n",
         "line 6, column 10: rules[0].key: offset 0: empty key template (every request would "
         "share one key)"},
        {"fixed_window", "    key: \"a\\0b\"\n",
         "line 6, column 10: rules[0].key: must not contain NUL bytes"},
        {"fixed_window", "    shadow: yes\n",
         "line 6, column 13: rules[0].shadow: must be true or false, not a string"},
        {"fixed_window", "    shadow: \"true\"\n",
         "line 6, column 13: rules[0].shadow: must be true or false, not a string"},
        {"fixed_window", "    on_store_error: ignore\n",
         "line 6, column 21: rules[0].on_store_error: must be allow or deny, not 'ignore'"},
        {"fixed_window", "    cold_start: warm\n",
         "line 6, column 17: rules[0].cold_start: must be open or closed, not 'warm'"},
        {"fixed_window", "    cold_start: [open]\n",
         "line 6, column 17: rules[0].cold_start: must be a string, not a list"},
        {"fixed_window", "    overrides: {}\n",
         "line 6, column 16: rules[0].overrides: must be a list, not a mapping"},
        {"sliding_log", "    overrides: [{key: k, limit: 2000000}]\n",
         "line 6, column 33: rules[0].overrides[0].limit: must be at most 1048576 for "
         "sliding_log"},
        {"fixed_window", "    overrides:\n      - limit: 5\n",
         "line 7, column 9: rules[0].overrides[0]: missing required field 'key'"},
        {"fixed_window", "    overrides:\n      - key: k\n",
         "line 7, column 9: rules[0].overrides[0]: names no field to override (limit, window, "
         "burst, buckets, max_delay)"},
        {"fixed_window", "    overrides:\n      - key: \"\"\n        limit: 1\n",
         "line 7, column 14: rules[0].overrides[0].key: must be 1..1024 bytes, not 0"},
        {"fixed_window", "    overrides:\n      - key: k\n        limit: -1\n",
         "line 8, column 16: rules[0].overrides[0].limit: must be an integer >= 0"},
        {"fixed_window", "    overrides:\n      - key: k\n        algorithm: gcra\n",
         "line 8, column 9: rules[0].overrides[0]: unknown field 'algorithm'"},
        {"fixed_window", "    overrides:\n      - key: k\n        limit: 0\n        window: 2s\n",
         "line 9, column 17: rules[0].overrides[0].window: a blocked override (limit 0) takes no "
         "other fields"},
        {"fixed_window", "    overrides:\n      - key: k\n        burst: 3\n",
         "line 8, column 16: rules[0].overrides[0].burst: only applies to token_bucket and gcra"},
        {"fixed_window",
         "    overrides:\n      - key: a\n        limit: 1\n      - key: b\n        limit: 2\n"
         "      - {key: a, limit: 3}\n",
         "line 11, column 15: rules[0].overrides[2].key: duplicate override key 'a' (also "
         "overrides[0])"},
        {"fixed_window", "    overrides:\n      - 5\n",
         "line 7, column 9: rules[0].overrides[0]: must be a mapping of fields, not an integer"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *got = yaml_err(one_rule(rows[i].algorithm, rows[i].extra));
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("row %zu:\n got  %s\n want %s", i, got, rows[i].want);
    }
}

/* Errors in the head fields, and in the file's shape. */
static void test_yaml_shape_errors(void **unused)
{
    (void)unused;
    static const struct {
        const char *text, *want;
    } rows[] = {
        {"", "line 1, column 1: expected a mapping with 'rules:' at the top level"},
        {"# only a comment\n",
         "line 1, column 1: expected a mapping with 'rules:' at the top level"},
        {"- a\n- b\n", "line 1, column 1: expected a mapping with 'rules:' at the top level"},
        {"rulez: []\n", "line 1, column 1: unknown top-level field 'rulez' (expected 'rules:', or "
                        "'domain:' for an envoyproxy/ratelimit configuration)"},
        {"rules: []\nrules: []\n", "line 2, column 1: duplicate field 'rules'"},
        {"version: 2\n", "line 1, column 1: unknown top-level field 'version' (expected "
                         "'rules:', or 'domain:' for an envoyproxy/ratelimit configuration)"},
        {"rules: {a: 1}\n", "line 1, column 8: rules: must be a list of rules, not a mapping"},
        /* an empty list would turn every rule off: a file cut short looks like this */
        {"rules: []\n", "line 1, column 8: rules: is empty: a rules file names at least one rule "
                        "(to remove rules, delete them from the file or with SL.RULE DEL)"},
        {"# nothing yet\nrules:\n", "line 2, column 7: rules: is empty: a rules file names at "
                                    "least one rule (to remove rules, delete them from the file "
                                    "or with SL.RULE DEL)"},
        {"rules: ~\n", "line 1, column 8: rules: is empty: a rules file names at least one rule "
                       "(to remove rules, delete them from the file or with SL.RULE DEL)"},
        {"rules:\n  - just a string\n",
         "line 2, column 5: rules[0]: must be a mapping of fields, not a string"},
        {"rules:\n  - algorithm: gcra\n    limit: 1\n    window: 1s\n",
         "line 2, column 5: rules[0]: missing required field 'name'"},
        {"rules:\n  - name: x\n    limit: 1\n    window: 1s\n",
         "line 2, column 5: rules[0]: missing required field 'algorithm'"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    window: 1s\n",
         "line 2, column 5: rules[0]: missing required field 'limit'"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 1\n",
         "line 2, column 5: rules[0]: missing required field 'window'"},
        {"rules:\n  - name: \"a b\"\n",
         "line 2, column 11: rules[0].name: 'a b' is not 1..64 characters of A-Z a-z 0-9 _ . : -"},
        {"rules:\n  - name: "
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
         "line 2, column 11: rules[0].name: "
         "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is not 1..64 characters of A-Z a-z 0-9 _ "
         ". : -"},
        {"rules:\n  - name: ~\n", "line 2, column 11: rules[0].name: must be a string, not null"},
        {"rules:\n  - name: x\n    algorithm: leaky\n",
         "line 3, column 16: rules[0].algorithm: unknown algorithm 'leaky' (expected "
         "fixed_window, sliding_log, sliding_window, sliding_buckets, token_bucket, gcra or "
         "concurrency)"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 0\n",
         "line 4, column 12: rules[0].limit: must be an integer > 0"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 1\n    hold_timeout: 1s\n",
         "line 5, column 19: rules[0].hold_timeout: only applies to concurrency (the window "
         "elsewhere)"},
        {"rules:\n  - name: x\n    algorithm: concurrency\n    limit: 1\n    window: 1s\n"
         "    hold_timeout: 1s\n",
         "line 5, column 13: rules[0].window: give hold_timeout or window, not both: they are one "
         "value"},
        {"rules:\n  - name: x\n    algorithm: concurrency\n    limit: 4097\n    hold_timeout: "
         "1s\n",
         "line 4, column 12: rules[0].limit: must be at most 4096 for concurrency"},
        {"rules:\n  - name: x\n    algorithm: concurrency\n    limit: 4\n    hold_timeout: "
         "30s\n    mode: leased\n",
         "line 6, column 11: rules[0].mode: concurrency cannot lease: a hold is released by its id "
         "or expires, never spent elsewhere"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 10\n    window: 5 s\n",
         "line 5, column 13: rules[0].window: malformed duration '5 s' (e.g. 250ms, 10s, 1h30m)"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 10\n    window: 0\n",
         "line 5, column 13: rules[0].window: must be at least 1ms"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 10\n    window: 999us\n",
         "line 5, column 13: rules[0].window: must be at least 1ms"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 10\n    window: 367d\n",
         "line 5, column 13: rules[0].window: must be at most 366d"},
        {"rules:\n  - name: x\n    algorithm: gcra\n    limit: 10\n    window: 9223372036855\n",
         "line 5, column 13: rules[0].window: must be at most 366d"},
        {"rules:\n  - name: x\n    algorithm: sliding_buckets\n    limit: 10\n    window: "
         "1000001ns\n",
         "line 2, column 5: rules[0].buckets: must divide the window (1000001ns); 10 is the "
         "default"},
        {"rules:\n- {name: a, algorithm: gcra, limit: 1, window: 1s}\n"
         "- {name: b, algorithm: gcra, limit: 1, window: 1s}\n"
         "- {name: a, algorithm: gcra, limit: 1, window: 1s}\n",
         "line 4, column 10: rules[2].name: duplicate rule name 'a' (also rules[0])"},
        {"rules:\n  - name: x\n   algorithm: x\n",
         "line 3, column 4: did not find expected '-' indicator (while parsing a block "
         "collection at line 2, column 3)"},
        {"rules: [\n", "line 2, column 1: did not find expected node content (while parsing a "
                       "flow node at line 2, column 1)"},
        {"rules: &a []\nx: *a\n", "line 2, column 4: aliases (*a) are not supported"},
        {"rules: !!set []\n", "line 1, column 8: unsupported tag 'tag:yaml.org,2002:set'"},
        {"rules: []\n---\nrules: []\n", "line 2, column 1: expected one YAML document, found "
                                        "another"},
        {"rules: [\"\xff\"]\n", "line 1, column 10: invalid leading UTF-8 octet"},
        {"rules:\n  - {? [a] : 1}\n", "line 2, column 8: rules[0]: field names must be strings, "
                                      "not a list"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *got = yaml_err(rows[i].text);
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("row %zu:\n got  %s\n want %s", i, got, rows[i].want);
    }
}

static void test_yaml_nesting_limit(void **unused)
{
    (void)unused;
    char text[256] = "rules: ";
    for (int i = 0; i < 40; i++)
        strcat(text, "[");
    const char *got = yaml_err(text);
    assert_non_null(strstr(got, "nested more than 32 levels deep"));
}

/* ---- overrides ----------------------------------------------------------------------------- */

static void test_overrides_inherit(void **unused)
{
    (void)unused;
    ruledef_list_t l = yaml_ok("rules:\n"
                               "  - name: tb\n"
                               "    algorithm: token_bucket\n"
                               "    limit: 100\n"
                               "    window: 1s\n"
                               "    overrides:\n"
                               "      - {key: premium, limit: 1000}\n"
                               "      - {key: slow, window: 10s}\n"
                               "      - {key: blocked, limit: 0}\n"
                               "      - {key: small, burst: 5, max_delay: 20ms}\n"
                               "  - name: api\n"
                               "    algorithm: token_bucket\n"
                               "    limit: 100\n"
                               "    window: 1s\n"
                               "    burst: 200\n"
                               "    overrides:\n"
                               "      - {key: acme, limit: 1000}\n"
                               "      - {key: tiny, limit: 3}\n"
                               "      - {key: both, limit: 1000, burst: 50}\n"
                               "  - name: pacer\n"
                               "    algorithm: gcra\n"
                               "    limit: 10\n"
                               "    window: 1s\n"
                               "    burst: 0\n"
                               "    overrides:\n"
                               "      - {key: k, limit: 20}\n"
                               "  - name: sb\n"
                               "    algorithm: sliding_buckets\n"
                               "    limit: 10\n"
                               "    window: 1s\n"
                               "    buckets: 4\n"
                               "    overrides:\n"
                               "      - {key: k, window: 2s}\n"
                               "      - {key: j, buckets: 8}\n");
    const ruledef_t *tb = &l.rules[0];
    assert_int_equal(tb->noverrides, 4);
    /* the default burst follows the override's limit */
    assert_int_equal(tb->overrides[0].rule.limit, 1000);
    assert_int_equal(tb->overrides[0].rule.burst, 1000);
    assert_int_equal(tb->overrides[0].rule.window_ns, SL_NS_PER_SEC);
    /* a window only */
    assert_int_equal(tb->overrides[1].rule.limit, 100);
    assert_int_equal(tb->overrides[1].rule.burst, 100);
    assert_int_equal(tb->overrides[1].rule.window_ns, 10 * SL_NS_PER_SEC);
    assert_int_equal(tb->overrides[1].rule.interval_ns, 100 * SL_NS_PER_MS);
    assert_int_equal(tb->overrides[1].fields, OVERRIDE_F_WINDOW);
    /* blocked: the parent's rule, marked blocked */
    assert_true(tb->overrides[2].blocked);
    assert_int_equal(tb->overrides[2].fields, OVERRIDE_F_LIMIT);
    assert_int_equal(tb->overrides[2].rule.limit, 100);
    assert_int_equal(tb->overrides[2].rule.state_size, tb->rule.state_size);
    assert_int_equal(tb->overrides[3].rule.burst, 5);
    assert_int_equal(tb->overrides[3].rule.capacity, 5);
    assert_int_equal(tb->overrides[3].rule.max_delay_ns, 20 * SL_NS_PER_MS);
    assert_int_equal(tb->overrides[3].fields, OVERRIDE_F_BURST | OVERRIDE_F_MAX_DELAY);
    /* a burst kept in proportion to the limit (rounded up), unless the override gives one: an
     * override that raises the limit raises the capacity too */
    const ruledef_t *api = &l.rules[1];
    assert_int_equal(api->overrides[0].rule.burst, 2000);
    assert_int_equal(api->overrides[0].rule.capacity, 2000);
    assert_int_equal(api->overrides[1].rule.burst, 6);
    assert_int_equal(api->overrides[2].rule.burst, 50);
    assert_int_equal(l.rules[2].overrides[0].rule.burst, 0); /* a pacer stays a pacer */
    const ruledef_t *sb = &l.rules[3];
    assert_int_equal(sb->overrides[0].rule.buckets, 4);
    assert_int_equal(sb->overrides[0].rule.bucket_ns, 500 * SL_NS_PER_MS);
    assert_int_equal(sb->overrides[1].rule.buckets, 8);
    assert_int_equal(sb->overrides[1].rule.state_size, 16 + 8 * 9);
    ruledef_list_free(&l);
}

static void test_override_inherited_field_error(void **unused)
{
    (void)unused;
    /* buckets 10 (the rule's) does not divide the override's window */
    const char *got = yaml_err(one_rule("sliding_buckets", "    overrides:\n"
                                                           "      - key: k\n"
                                                           "        window: 1000001ns\n"));
    assert_string_equal(got, "line 7, column 9: rules[0].overrides[0].buckets: must divide the "
                             "window (1000001ns); 10 is the rule's");
}

static void test_override_json(void **unused)
{
    (void)unused;
    ruledef_t gcra = json_ok("{\"name\":\"g\",\"algorithm\":\"gcra\",\"limit\":10,"
                             "\"window\":\"1s\",\"burst\":3}",
                             NULL);
    rule_override_t ov;
    const char *j = "{\"limit\": 50, \"max_delay\": \"1s\"}";
    assert_int_equal(override_parse_json(&gcra, "user:7", 6, j, strlen(j), &ov, err), 0);
    assert_int_equal(ov.rule.limit, 50);
    assert_int_equal(ov.rule.burst, 15); /* the rule's burst, in proportion: 3 * 50 / 10 */
    assert_int_equal(ov.rule.max_delay_ns, SL_NS_PER_SEC);
    assert_int_equal(ov.key_len, 6);
    assert_string_equal(ov.key, "user:7");
    char *back = override_to_json(&gcra, &ov);
    assert_string_equal(back, "{\"limit\":50,\"max_delay\":\"1s\"}");
    rule_override_t again;
    assert_int_equal(override_parse_json(&gcra, "user:7", 6, back, strlen(back), &again, err), 0);
    assert_true(override_equal(&ov, &again));
    free(back);
    override_free(&again);
    override_free(&ov);

    /* a key with any bytes (from the URL / command) */
    const char raw[] = {'a', '\0', (char)0xff};
    j = "{\"limit\":0}";
    assert_int_equal(override_parse_json(&gcra, raw, 3, j, strlen(j), &ov, err), 0);
    assert_true(ov.blocked);
    assert_memory_equal(ov.key, raw, 3);
    back = override_to_json(&gcra, &ov);
    assert_string_equal(back, "{\"limit\":0}");
    free(back);
    override_free(&ov);

    static const struct {
        const char *json, *want;
    } bad[] = {
        {"{}", "line 1, column 1: names no field to override (limit, window, burst, buckets, "
               "max_delay)"},
        {"{\"limit\": -1}", "line 1, column 11: limit: must be an integer >= 0"},
        {"{\"limit\": 5,\n \"name\": \"x\"}", "line 2, column 2: unknown field 'name'"},
        {"{\"key\": \"other\", \"limit\": 1}",
         "line 1, column 9: key: 'other' does not match the override's key"},
        {"{\"buckets\": 4}", "line 1, column 13: buckets: only applies to sliding_buckets"},
        {"{\"window\": \"2x\"}",
         "line 1, column 12: window: malformed duration '2x' (e.g. 250ms, 10s, 1h30m)"},
        {"{\"limit\": 1", "line 1, column 11: '}' expected near end of file"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ov.key = (char *)"sentinel";
        assert_int_equal(
            override_parse_json(&gcra, "k", 1, bad[i].json, strlen(bad[i].json), &ov, err), -1);
        assert_null(ov.key);
        if (strcmp(err, bad[i].want) != 0)
            fail_msg("row %zu:\n got  %s\n want %s", i, err, bad[i].want);
    }
    assert_int_equal(override_parse_json(&gcra, "", 0, "{\"limit\":1}", 11, &ov, err), -1);
    assert_string_equal(err, "key: must be 1..1024 bytes, not 0");
    ruledef_free(&gcra);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void test_json_valid(void **unused)
{
    (void)unused;
    ruledef_t d = json_ok("{\"algorithm\":\"sliding_window\",\"limit\":20,\"window\":1500,"
                          "\"key\":\"{ip/24}\",\"shadow\":true,\"cold_start\":\"closed\"}",
                          "per-ip");
    assert_string_equal(d.name, "per-ip");
    assert_int_equal(d.rule.window_ns, 1500 * SL_NS_PER_MS);
    assert_true(d.shadow);
    assert_int_equal(d.key.parts[0].prefix, 24);
    char *j = ruledef_to_json(&d);
    assert_string_equal(j, "{\"name\":\"per-ip\",\"algorithm\":\"sliding_window\",\"limit\":20,"
                           "\"window\":\"1500ms\",\"key\":\"{ip/24}\",\"shadow\":true,"
                           "\"on_store_error\":\"allow\",\"cold_start\":\"closed\"}");
    free(j);
    ruledef_free(&d);

    d = json_ok("{\"name\":\"t\",\"algorithm\":\"token_bucket\",\"limit\":3,\"window\":\"1m\"}",
                "t");
    j = ruledef_to_json(&d);
    assert_string_equal(j, "{\"name\":\"t\",\"algorithm\":\"token_bucket\",\"limit\":3,"
                           "\"window\":\"1m\",\"burst\":3,\"shadow\":false,"
                           "\"on_store_error\":\"allow\",\"cold_start\":\"open\"}");
    free(j);
    ruledef_free(&d);
}

static void test_json_errors(void **unused)
{
    (void)unused;
    static const struct {
        const char *json, *hint, *want;
    } rows[] = {
        {"", NULL, "line 1, column 1: '[' or '{' expected near end of file"},
        {"[1]", NULL, "line 1, column 1: expected a JSON object of rule fields, not an array"},
        {"  \"x\"", NULL, "line 1, column 5: '[' or '{' expected near '\"x\"'"},
        {"{\"name\":\"a\",\n \"name\":\"b\"}", NULL,
         "line 2, column 7: duplicate object key near '\"name\"'"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\"} x", NULL,
         "line 1, column 57: end of file expected near 'x'"},
        {"{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\"}", NULL,
         "line 1, column 1: missing required field 'name'"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\"}", "b",
         "line 1, column 9: name: 'a' does not match the name 'b' in the request"},
        {"{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\"}", "bad name",
         "name: the rule name in the request is not 1..64 characters of A-Z a-z 0-9 _ . : -"},
        {"{\n  \"name\": \"a\",\n  \"algorithm\": \"gcra\",\n  \"limit\": \"10\",\n"
         "  \"window\": \"1s\"\n}",
         NULL, "line 4, column 12: limit: must be an integer > 0, not a string"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1.0,\"window\":\"1s\"}", NULL,
         "line 1, column 40: limit: must be an integer > 0, not a fractional number"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\",\"limt\":2}", NULL,
         "line 1, column 56: unknown field 'limt'"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\",\"shadow\":1}", NULL,
         "line 1, column 65: shadow: must be true or false, not an integer"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":null}", NULL,
         "line 1, column 51: window: must be a duration such as \"1s\" or integer milliseconds, "
         "not null"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":{\"s\":1}}", NULL,
         "line 1, column 51: window: must be a duration such as \"1s\" or integer milliseconds, "
         "not a mapping"},
        {"{\"name\":\"\u00e9\u00e9\",\"algorithm\":\"gcra\"}", NULL,
         "line 1, column 9: name: '\?\?\?\?' is not 1..64 characters of A-Z a-z 0-9 _ . : -"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\",\"overrides\":[]}",
         NULL,
         "line 1, column 68: overrides: not part of a rule object here: set overrides one "
         "key at a time"},
        {"{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":99999999999999999999}", NULL,
         "line 1, column 59: too big integer near '99999999999999999999'"},
        {"{\"name\":\"a\",\"algorithm\":\"fixed_window\",\"limit\":5,\"window\":\"1s\","
         "\"max_delay\":\"1s\"}",
         NULL, "line 1, column 76: max_delay: only applies to token_bucket and gcra"},
        {"{\"name\":\"a\",\"algorithm\":\"fixed_window\",\"limit\":5,\"window\":\"1s\","
         "\"key\":\"{ip\"}",
         NULL,
         "line 1, column 70: key: offset 0: '{' without a closing '}' (write '{{' for a "
         "literal '{')"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *got = json_err(rows[i].json, rows[i].hint);
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("row %zu:\n got  %s\n want %s", i, got, rows[i].want);
    }
}

/* ---- names and durations ------------------------------------------------------------------- */

static void test_names(void **unused)
{
    (void)unused;
    assert_true(ruledef_name_valid("a", 1));
    assert_true(ruledef_name_valid("A-z_0.9:x", 9));
    char long_name[66];
    memset(long_name, 'n', sizeof(long_name));
    assert_true(ruledef_name_valid(long_name, 64));
    assert_false(ruledef_name_valid(long_name, 65));
    assert_false(ruledef_name_valid("", 0));
    assert_false(ruledef_name_valid("a b", 3));
    assert_false(ruledef_name_valid("a/b", 3));
    assert_false(ruledef_name_valid("a\0b", 3));
    assert_false(ruledef_name_valid("\xc3\xa9", 2));
}

static void test_durations(void **unused)
{
    (void)unused;
    static const struct {
        int64_t ns;
        const char *text;
    } rows[] = {
        {0, "0s"},
        {1, "1ns"},
        {1500, "1500ns"},
        {SL_NS_PER_US, "1us"},
        {1500 * SL_NS_PER_US, "1500us"},
        {SL_NS_PER_MS, "1ms"},
        {250 * SL_NS_PER_MS, "250ms"},
        {1500 * SL_NS_PER_MS, "1500ms"},
        {SL_NS_PER_SEC, "1s"},
        {90 * SL_NS_PER_SEC, "1m30s"},
        {3600 * SL_NS_PER_SEC, "1h"},
        {5400 * SL_NS_PER_SEC, "1h30m"},
        {86400 * SL_NS_PER_SEC, "1d"},
        {(86400 + 3601) * SL_NS_PER_SEC, "1d1h1s"},
        {SL_WINDOW_MAX_NS, "366d"},
        {INT64_MAX, "9223372036854775807ns"},
        {-SL_NS_PER_SEC, "-1s"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char buf[32];
        assert_string_equal(ruledef_format_duration(rows[i].ns, buf), rows[i].text);
        int64_t back = 0;
        if (rows[i].ns >= 0) {
            assert_int_equal(sl_duration_parse(buf, strlen(buf), &back), SL_OK);
            assert_int_equal(back, rows[i].ns);
        }
    }
    char buf[32];
    assert_string_equal(ruledef_format_duration(INT64_MIN, buf), "-9223372036854775808ns");
}

/* ---- the example file ---------------------------------------------------------------------- */

static char *read_example(const char *name)
{
    char path[1024];
    const char *src = __FILE__; /* .../tests/unit/test_ruledef.c */
    const char *cut = strstr(src, "tests/unit/");
    assert_non_null(cut);
    snprintf(path, sizeof(path), "%.*sexamples/%s", (int)(cut - src), src, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static const ruledef_t *find(const ruledef_list_t *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->rules[i].name, name) == 0)
            return &l->rules[i];
    }
    fail_msg("no rule %s", name);
    return NULL;
}

static void test_example_file(void **unused)
{
    (void)unused;
    ruledef_list_t l = yaml_ok(read_example("rules.yaml"));
    assert_true(l.n >= 7);
    assert_int_equal(find(&l, "login")->on_store_error, RULE_ON_ERROR_DENY);
    const ruledef_t *api = find(&l, "api");
    assert_int_equal(api->rule.burst, 200);
    assert_true(api->noverrides >= 1);
    assert_int_equal(find(&l, "per-ip")->key.parts[0].prefix, 24);
    assert_int_equal(find(&l, "search")->rule.algorithm, SL_GCRA);
    assert_int_equal(find(&l, "exports")->rule.algorithm, SL_FIXED_WINDOW);
    bool shadow = false, buckets = false, blocked = false;
    for (size_t i = 0; i < l.n; i++) {
        shadow |= l.rules[i].shadow;
        buckets |= l.rules[i].rule.algorithm == SL_SLIDING_BUCKETS;
        for (size_t j = 0; j < l.rules[i].noverrides; j++)
            blocked |= l.rules[i].overrides[j].blocked;
    }
    assert_true(shadow && buckets && blocked);
    /* and it survives a round trip */
    char *y = ruledef_list_to_yaml(&l);
    ruledef_list_t back = yaml_ok(y);
    assert_int_equal(back.n, l.n);
    for (size_t i = 0; i < l.n; i++)
        assert_true(ruledef_equal(&l.rules[i], &back.rules[i]));
    free(y);
    ruledef_list_free(&back);
    ruledef_list_free(&l);
}

/* ---- round trips on seeded random rules ---------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static int64_t rnd_in(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static const char *rnd_duration(char *buf)
{
    static const int64_t units[] = {1, 1000, 1000000, 1000000000, 60000000000LL};
    int64_t ns = rnd_in(1, 5000) * units[rnd() % 5];
    if (ns < SL_WINDOW_MIN_NS)
        ns = SL_WINDOW_MIN_NS + rnd_in(0, 999) * 1000;
    if (rnd() % 4 == 0 && ns % SL_NS_PER_MS == 0) {
        snprintf(buf, 32, "%lld", (long long)(ns / SL_NS_PER_MS)); /* integer ms */
        return buf;
    }
    char tmp[32];
    snprintf(buf, 40, "\"%s\"", ruledef_format_duration(ns, tmp));
    return buf;
}

/* Appends a random string of printable and awkward characters, JSON/YAML-escaped. */
static void rnd_key(char *out, size_t cap)
{
    static const char *const pieces[] = {
        "tenant",  ":", "acme", "\\\"", "\\\\", " ", "\\n", "\\t",  "\\u00e9", "\\u2028",
        "\\u0001", "#", "&x",   "*",    "{",    "}", "- ",  "null", "42",      "\\u0085"};
    size_t n = (size_t)rnd_in(1, 6);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        strncat(out, pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))], cap - strlen(out) - 1);
}

static const char *const algorithms[] = {"fixed_window",    "sliding_log",  "sliding_window",
                                         "sliding_buckets", "token_bucket", "gcra"};

/* A random rule as a JSON object (written so it is also YAML flow syntax). */
static void rnd_rule_json(char *out, size_t cap, int index, bool with_overrides)
{
    int a = (int)(rnd() % 6);
    bool tokens = a >= 4;
    char d1[40], d2[40];
    int n = snprintf(out, cap,
                     "{\"name\": \"r%d.%d\", \"algorithm\": \"%s\", \"limit\": %lld, "
                     "\"window\": %s",
                     index, (int)(rnd() % 100), algorithms[a], (long long)rnd_in(1, 3000),
                     rnd_duration(d1));
    if (tokens && rnd() % 2)
        n += snprintf(out + n, cap - n, ", \"burst\": %lld", (long long)rnd_in(1, 500));
    if (tokens && rnd() % 2)
        n += snprintf(out + n, cap - n, ", \"max_delay\": %s", rnd_duration(d2));
    if (a == 3 && rnd() % 2)
        n += snprintf(out + n, cap - n, ", \"buckets\": %d", rnd() % 2 ? 1 : 5);
    if (rnd() % 4 == 0)
        n += snprintf(out + n, cap - n, ", \"max_debt\": %lld", (long long)rnd_in(0, 5000));
    if (rnd() % 2) {
        static const char *const keys[] = {"{ip}",
                                           "{ip/24}",
                                           "{header:x-api-key}",
                                           "{header:x-user}:{path}",
                                           "{{lit}} {method}",
                                           "\\u00e9{query:t}"};
        n += snprintf(out + n, cap - n, ", \"key\": \"%s\"", keys[rnd() % 6]);
    }
    n += snprintf(out + n, cap - n, ", \"shadow\": %s, \"on_store_error\": \"%s\"",
                  rnd() % 2 ? "true" : "false", rnd() % 2 ? "deny" : "allow");
    if (rnd() % 2)
        n += snprintf(out + n, cap - n, ", \"cold_start\": \"%s\"", rnd() % 2 ? "open" : "closed");
    if (a != 1 && rnd() % 3 == 0) {
        n += snprintf(out + n, cap - n, ", \"mode\": \"leased\"");
        if (rnd() % 2)
            n += snprintf(out + n, cap - n, ", \"lease_time\": \"%lldms\"",
                          (long long)rnd_in(1, 500));
    } else if (rnd() % 4 == 0) {
        n += snprintf(out + n, cap - n, ", \"mode\": \"approximate\"");
        if (rnd() % 2)
            n += snprintf(out + n, cap - n, ", \"sync_interval\": \"%lldms\"",
                          (long long)rnd_in(1, 5000));
    } else if (rnd() % 3 == 0) {
        n += snprintf(out + n, cap - n, ", \"replicas\": %lld", (long long)rnd_in(1, 64));
        if (rnd() % 2)
            n += snprintf(out + n, cap - n, ", \"replica_wait\": \"%lldms\"",
                          (long long)rnd_in(1, 1000));
    }
    if (with_overrides && rnd() % 2) {
        n += snprintf(out + n, cap - n, ", \"overrides\": [");
        int k = (int)rnd_in(1, 4);
        for (int i = 0; i < k; i++) {
            char key[128];
            rnd_key(key, sizeof(key) - 8);
            n += snprintf(out + n, cap - n, "%s{\"key\": \"%d%s\"", i ? ", " : "", i, key);
            if (rnd() % 5 == 0)
                n += snprintf(out + n, cap - n, ", \"limit\": 0");
            else if (rnd() % 2)
                n += snprintf(out + n, cap - n, ", \"limit\": %lld", (long long)rnd_in(1, 9000));
            else
                n += snprintf(out + n, cap - n, ", \"window\": %s", rnd_duration(d1));
            if (tokens && rnd() % 3 == 0)
                n += snprintf(out + n, cap - n, ", \"burst\": %lld", (long long)rnd_in(0, 50));
            n += snprintf(out + n, cap - n, "}");
        }
        n += snprintf(out + n, cap - n, "]");
    }
    snprintf(out + n, cap - n, "}");
}

/* max_debt: the capacity by default (an override's under an override), 0 takes no debt; written
 * back only when given, so a rule read again means the same. */
static void test_max_debt(void **unused)
{
    (void)unused;
    ruledef_t d = json_ok("{\"algorithm\":\"gcra\",\"limit\":10,\"window\":\"1s\"}", "g");
    assert_int_equal(d.rule.max_debt, 11); /* the capacity, burst + 1 */
    assert_false(d.max_debt_given);
    char *j = ruledef_to_json(&d);
    assert_null(strstr(j, "max_debt"));
    free(j);
    ruledef_free(&d);
    d = json_ok("{\"algorithm\":\"sliding_log\",\"limit\":100,\"window\":\"1m\","
                "\"max_debt\":0}",
                "s");
    assert_int_equal(d.rule.max_debt, 0);
    j = ruledef_to_json(&d);
    assert_string_equal(j, "{\"name\":\"s\",\"algorithm\":\"sliding_log\",\"limit\":100,"
                           "\"window\":\"1m\",\"max_debt\":0,\"shadow\":false,"
                           "\"on_store_error\":\"allow\",\"cold_start\":\"open\"}");
    ruledef_t back = json_ok(j, "s");
    assert_true(ruledef_equal(&d, &back));
    free(j);
    ruledef_free(&back);
    ruledef_free(&d);
    /* an override of the limit: the default follows its capacity; a given one stays */
    ruledef_list_t l = yaml_ok("rules:\n"
                               "  - name: a\n    algorithm: fixed_window\n    limit: 10\n"
                               "    window: 1s\n    overrides:\n      - key: k\n"
                               "        limit: 50\n"
                               "  - name: b\n    algorithm: fixed_window\n    limit: 10\n"
                               "    window: 1s\n    max_debt: 3\n    overrides:\n"
                               "      - key: k\n        limit: 50\n");
    assert_int_equal(l.rules[0].overrides[0].rule.max_debt, 50);
    assert_int_equal(l.rules[1].rule.max_debt, 3);
    assert_int_equal(l.rules[1].overrides[0].rule.max_debt, 3);
    ruledef_list_free(&l);
    /* an unlimited rule takes no number, max_debt included */
    static const char unlimited[] =
        "{\"unlimited\":true,\"domain\":\"d\",\"descriptor\":\"k\",\"max_debt\":1}";
    assert_int_equal(ruledef_parse_json(unlimited, strlen(unlimited), "u", &d, err), -1);
    assert_non_null(strstr(err, "an unlimited rule takes no max_debt"));
}

static void test_round_trips(void **unused)
{
    (void)unused;
    const char *seed_env = getenv("SLUICE_SEED");
    rng_state = seed_env ? strtoull(seed_env, NULL, 0) : 0x5eed5eedULL;
    if (rng_state == 0)
        rng_state = 1;
    int parsed = 0, files = 0, overrides = 0;
    for (int iter = 0; iter < 200; iter++) {
        /* JSON rule -> to_json -> parse_json */
        char text[8192];
        rnd_rule_json(text, sizeof(text), iter, false);
        ruledef_t d;
        if (ruledef_parse_json(text, strlen(text), NULL, &d, err) != 0) {
            /* only combinations the generator cannot avoid may fail */
            if (!strstr(err, "must divide the window") && !strstr(err, "out of range") &&
                !strstr(err, "must be at least 1ms") && !strstr(err, "1048576") &&
                !strstr(err, "cannot lease") && !strstr(err, "room for a lease"))
                fail_msg("%s\n%s", err, text);
            continue;
        }
        parsed++;
        char *j = ruledef_to_json(&d);
        ruledef_t back = json_ok(j, d.name);
        assert_true(ruledef_equal(&d, &back));
        free(j);
        ruledef_free(&back);
        ruledef_free(&d);

        /* YAML list with overrides -> list_to_yaml -> parse_yaml */
        char file[65536] = "rules: [";
        int nrules = (int)rnd_in(0, 4);
        for (int r = 0; r < nrules; r++) {
            rnd_rule_json(text, sizeof(text), r, true);
            strcat(file, r ? ",\n" : "\n");
            strcat(file, text);
        }
        strcat(file, "]\n");
        ruledef_list_t l;
        if (ruledef_parse_yaml(file, strlen(file), &l, err) != 0)
            continue; /* as above: some random combinations are invalid */
        files++;
        char *y = ruledef_list_to_yaml(&l);
        assert_non_null(y);
        ruledef_list_t lb = yaml_ok(y);
        assert_int_equal(lb.n, l.n);
        for (size_t i = 0; i < l.n; i++) {
            if (!ruledef_equal(&l.rules[i], &lb.rules[i]))
                fail_msg("rule %zu differs after:\n%s\nfrom\n%s", i, y, file);
            /* each override also survives JSON */
            for (size_t k = 0; k < l.rules[i].noverrides; k++) {
                const rule_override_t *ov = &l.rules[i].overrides[k];
                overrides++;
                char *oj = override_to_json(&l.rules[i], ov);
                rule_override_t ob;
                assert_int_equal(override_parse_json(&l.rules[i], ov->key, ov->key_len, oj,
                                                     strlen(oj), &ob, err),
                                 0);
                assert_true(override_equal(ov, &ob));
                override_free(&ob);
                free(oj);
            }
        }
        free(y);
        ruledef_list_free(&lb);
        ruledef_list_free(&l);
    }
    /* the generator mostly makes valid rules */
    assert_true(parsed > 100);
    assert_true(files > 50);
    assert_true(overrides > 50);
}

static void test_yaml_writer_refuses_non_utf8(void **unused)
{
    (void)unused;
    ruledef_t d =
        json_ok("{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":2,\"window\":\"1s\"}", NULL);
    rule_override_t ov[1];
    assert_int_equal(override_parse_json(&d, "\xff", 1, "{\"limit\":1}", 11, &ov[0], err), 0);
    d.overrides = ov;
    d.noverrides = 1;
    ruledef_list_t l = {.n = 1, .rules = &d};
    assert_null(ruledef_list_to_yaml(&l));
    override_free(&ov[0]);
    d.overrides = NULL;
    d.noverrides = 0;
    ruledef_list_t empty = {.n = 0, .rules = NULL};
    char *y = ruledef_list_to_yaml(&empty);
    assert_string_equal(y, "rules: []\n");
    free(y);
}

/* The field an error is about, read back from the parsers' own messages. */
static void test_err_field(void **state)
{
    (void)state;
    static const struct {
        const char *json; /* a rule refused (NULL: err is given as is) */
        const char *err;
        const char *field; /* NULL: none */
    } rows[] = {
        {"{\"algorithm\":\"gcra\",\"limit\":0,\"window\":\"1s\"}", NULL, "limit"},
        {"{\"algorithm\":\"gcra\",\"limit\":\"x\",\"window\":\"1s\"}", NULL, "limit"},
        {"{\"algorithm\":\"nope\",\"limit\":1,\"window\":\"1s\"}", NULL, "algorithm"},
        {"{\"algorithm\":\"gcra\",\"limit\":5,\"window\":\"5 s\"}", NULL, "window"},
        {"{\"algorithm\":\"gcra\",\"limit\":5,\"window\":\"1s\",\"burst\":-1}", NULL, "burst"},
        {"{\"algorithm\":\"gcra\",\"limit\":5}", NULL, "window"},
        {"{\"algorithm\":\"gcra\",\"limit\":5,\"window\":\"1s\",\"foo\":1}", NULL, "foo"},
        {"{\"algorithm\":\"sliding_buckets\",\"limit\":5,\"window\":\"1s\",\"buckets\":3}", NULL,
         "buckets"},
        {"{\"algorithm\":\"gcra\",\"limit\":5,", NULL, NULL},
        {"[1]", NULL, NULL},
        {NULL, "line 7, column 12: rules[1].limit: must be an integer > 0", "rules[1].limit"},
        {NULL, "line 3, column 5: rules[0]: missing required field 'window'", "rules[0].window"},
        {NULL, "unknown field 'x'", "x"},
        {NULL, "line 1, column 40: unknown field ''", NULL},
        {"{\"algorithm\":\"gcra\",\"limit\":5,\"window\":\"1s\",\"\":1}", NULL, NULL},
        {NULL, "line 1, column 30: string or '}' expected near end of file", NULL},
        {NULL, "", NULL},
        {NULL, "limit:no space", NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *e = rows[i].json != NULL ? json_err(rows[i].json, "r") : rows[i].err;
        char field[64];
        bool named = ruledef_err_field(e, field, sizeof field);
        if (rows[i].field == NULL) {
            if (named)
                fail_msg("row %zu: '%s' names field '%s', expected none", i, e, field);
            assert_string_equal(field, "");
        } else {
            if (!named)
                fail_msg("row %zu: '%s' names no field, expected '%s'", i, e, rows[i].field);
            assert_string_equal(field, rows[i].field);
        }
    }
    /* a field that does not fit is not cut short */
    char small[6];
    assert_false(ruledef_err_field("line 1, column 2: window: malformed", small, sizeof small));
    assert_string_equal(small, "");
    assert_false(ruledef_err_field("unknown field 'abcdefgh'", small, sizeof small));
    assert_true(ruledef_err_field("burst: must be", small, sizeof small));
    assert_string_equal(small, "burst");
}

/* ---- priorities ------------------------------------------------------------------------------ */

/* Priorities, reserves and the priority template: the reserve above each priority, the canonical
 * JSON and its round trip, the JSON forms (list, object), and every error with its words. */
static void test_priorities(void **unused)
{
    (void)unused;
    ruledef_list_t l =
        yaml_ok(one_rule("token_bucket", "    burst: 7\n"
                                         "    priorities: [low, normal, high, critical]\n"
                                         "    reserve: {critical: 20%, high: 1}\n"
                                         "    priority: \"{header:x-priority}\"\n"));
    const ruledef_t *d = &l.rules[0];
    assert_int_equal(d->prio.n, 4);
    assert_string_equal(d->prio.name[3], "critical");
    /* capacity 7: 20 % rounds up to 2, then the unit of high */
    assert_int_equal(prio_reserve_above(&d->prio, 0, d->rule.capacity), 3);
    assert_int_equal(prio_reserve_above(&d->prio, 1, d->rule.capacity), 3);
    assert_int_equal(prio_reserve_above(&d->prio, 2, d->rule.capacity), 2);
    assert_int_equal(prio_reserve_above(&d->prio, 3, d->rule.capacity), 0);
    assert_int_equal(prio_reserve_above(&d->prio, 0, 100), 21); /* an override's capacity */
    assert_true(d->has_priority_src);
    char *json = ruledef_to_json(d);
    assert_non_null(strstr(json, "\"priorities\":\"low, normal, high, critical\","
                                 "\"reserve\":\"critical: 20%, high: 1\","
                                 "\"priority\":\"{header:x-priority}\""));
    ruledef_t back = json_ok(json, NULL);
    assert_true(ruledef_equal(d, &back));
    ruledef_free(&back);
    free(json);
    ruledef_list_free(&l);

    ruledef_t j = json_ok("{\"algorithm\":\"concurrency\",\"limit\":10,\"hold_timeout\":\"1s\","
                          "\"priorities\":[\"a\",\"b\"],\"reserve\":{\"b\":4}}",
                          "c");
    assert_int_equal(prio_reserve_above(&j.prio, 0, j.rule.capacity), 4);
    ruledef_free(&j);

    static const struct {
        const char *extra, *words;
    } bad[] = {
        {"    priorities: [low, high]\n    reserve: {top: 10%}\n",
         "reserve: 'top' is not one of the priorities (low, high)"},
        {"    priorities: [a, b, c]\n    reserve: {b: 60%, c: 50%}\n",
         "reserve: the reserves sum to 110%, past 100% of the limit"},
        {"    priorities: [a, b]\n    reserve: {b: 11}\n",
         "reserve: the reserves sum to 11 units, past the limit's 10"},
        {"    priorities: [a, b]\n    reserve: {a: 1}\n",
         "'a' is the lowest priority: every unit is already its own"},
        {"    priorities: [a, a]\n", "priorities: 'a' is named twice"},
        {"    priorities: []\n", "priorities: must be a list of names"},
        {"    priorities: [a, b, c, d, e, f, g, h, i]\n", "priorities: at most 8 priorities"},
        {"    priorities: [\"a b\"]\n", "'a?b' is not 1..32 characters"},
        {"    priorities: [a, b]\n    reserve: {b: \"5.5%\"}\n", "must be a percent 1%..100%"},
        {"    priorities: [a, b]\n    reserve: {b: 0}\n", "must be a percent 1%..100%"},
        {"    priorities: [a, b]\n    reserve: {b: 101%}\n", "must be a percent 1%..100%"},
        {"    priorities: [a, b]\n    reserve: {b: 1, b: 2}\n", ""},
        {"    reserve: {b: 1}\n", "reserve: only applies to a rule with priorities"},
        {"    priority: \"{header:x}\"\n", "priority: only applies to a rule with priorities"},
        {"    priorities: [a, b]\n    priority: \"{nope}\"\n", "priority: "},
        {"    priorities: [a, b]\n    mode: approximate\n", "priorities: only with mode: strict"},
        {"    priorities: \"a,\"\n", "'' is not 1..32 characters"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *e = yaml_err(one_rule("fixed_window", bad[i].extra));
        if (strstr(e, bad[i].words) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, e, bad[i].words);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_spec_example),
        cmocka_unit_test(test_yaml_every_field),
        cmocka_unit_test(test_yaml_defaults),
        cmocka_unit_test(test_mode),
        cmocka_unit_test(test_yaml_field_errors),
        cmocka_unit_test(test_yaml_shape_errors),
        cmocka_unit_test(test_yaml_nesting_limit),
        cmocka_unit_test(test_overrides_inherit),
        cmocka_unit_test(test_override_inherited_field_error),
        cmocka_unit_test(test_override_json),
        cmocka_unit_test(test_json_valid),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_example_file),
        cmocka_unit_test(test_max_debt),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_priorities),
        cmocka_unit_test(test_yaml_writer_refuses_non_utf8),
        cmocka_unit_test(test_err_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
