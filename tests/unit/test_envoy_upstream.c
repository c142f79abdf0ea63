/*
 * test_envoy_upstream.c - envoyproxy/ratelimit's own configuration files (copied unchanged into
 * tests/envoy_upstream/, see its NOTICE) read as sluiced reads them: every file upstream loads
 * becomes rules that survive the config store's JSON, every file upstream refuses is refused;
 * and the answers upstream's configuration tests expect of them: wildcards anywhere in a value
 * (wildcard.yaml), share_threshold (every value a pattern matches counted on the pattern),
 * requests_per_unit: 0 (a rule refusing every request), quota_mode (example.yaml) kept in the
 * rules, a file whose descriptors are empty (a domain with no rules). The
 * lookups are made on the rule set's descriptor trees (engine/descriptors.h), as the gRPC and
 * /json fronts make them, after the rules went through their JSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/descriptors.h"
#include "rules/envoy_config.h"

/* tests/envoy_upstream/<name>, from this file's path */
static char *upstream_text(const char *name, size_t *len)
{
    char path[1024];
    const char *here = __FILE__, *cut = strstr(here, "unit/test_envoy_upstream.c");
    snprintf(path, sizeof path, "%.*senvoy_upstream/%s", (int)(cut - here), here, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail_msg("cannot open %s", path);
    }
    char *text = calloc(1, 1 << 16);
    *len = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    return text;
}

/* The rules a file stands for, each read back from its JSON as the config store does. */
static ruledef_list_t upstream_rules(const char *name)
{
    size_t len;
    char *text = upstream_text(name, &len), err[ENVOY_CONFIG_ERR_MAX] = "";
    envoy_config_t c;
    ruledef_list_t l = {0}, back = {0};
    if (envoy_config_parse(text, len, &c, err) != 0 || envoy_config_rules(&c, &l, err) != 0) {
        fail_msg("%s: %s", name, err);
    }
    back.rules = calloc(l.n, sizeof *back.rules);
    for (size_t i = 0; i < l.n; i++, back.n++) {
        char *json = ruledef_to_json(&l.rules[i]), why[RULEDEF_ERR_MAX];
        assert_non_null(json);
        if (ruledef_parse_json(json, strlen(json), NULL, &back.rules[i], why) != 0) {
            fail_msg("%s: %s: %s", name, json, why);
        }
        assert_true(ruledef_equal(&l.rules[i], &back.rules[i]));
        free(json);
    }
    ruledef_list_free(&l);
    envoy_config_free(&c);
    free(text);
    return back;
}

static void test_every_file_loads(void **unused)
{
    (void)unused;
    static const char *const loads[] = {"test_config/basic_config.yaml",
                                        "test_config/metadata.yaml",
                                        "test_config/shadowmode_config.yaml",
                                        "test_config/share_threshold.yaml",
                                        "test_config/wildcard.yaml",
                                        "test_config/merge_domain_key1.yaml",
                                        "test_config/merge_domain_key2.yaml",
                                        "integration/basic.yaml",
                                        "integration/another.yaml",
                                        "integration/share_threshold.yaml",
                                        "integration/reload.yaml",
                                        "examples/config.yaml",
                                        "examples/example.yaml"};
    for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++) {
        ruledef_list_t l = upstream_rules(loads[i]);
        assert_true(l.n > 0);
        ruledef_list_free(&l);
    }
}

/* Each file upstream's loader refuses, and the words sluice's message has. */
static void test_every_bad_file_refused(void **unused)
{
    (void)unused;
    static const char *const refused[][2] = {
        {"test_config/bad_limit_unit.yaml", "unknown unit 'foo'"},
        {"test_config/bad_yaml.yaml", "line 1"},
        {"test_config/duplicate_key.yaml", "the same key and value as descriptor 0"},
        {"test_config/empty_domain.yaml", "domain: is required"},
        {"test_config/empty_key.yaml", "key: is required"},
        {"test_config/misspelled_key.yaml", "unknown field 'ratelimit'"},
        {"test_config/misspelled_key2.yaml", "unknown field 'requestsperunit'"},
        {"test_config/non_map_list.yaml", "must be a mapping"},
        {"test_config/non_string_key.yaml", "unknown field '0.25'"},
        {"test_config/replaces_empty.yaml", "name: is required"},
        {"test_config/replaces_self.yaml", "a limit cannot replace itself"},
        {"test_config/unlimited_with_unit.yaml", "must not be given with unlimited: true"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        size_t len;
        char *text = upstream_text(refused[i][0], &len), err[ENVOY_CONFIG_ERR_MAX] = "";
        envoy_config_t c;
        ruledef_list_t l = {0};
        int rc = envoy_config_parse(text, len, &c, err);
        if (rc == 0) {
            rc = envoy_config_rules(&c, &l, err);
            envoy_config_free(&c);
        }
        assert_int_equal(rc, -1);
        if (strstr(err, refused[i][1]) == NULL) {
            fail_msg("%s: '%s' does not say '%s'", refused[i][0], err, refused[i][1]);
        }
        free(text);
    }
}

/* The rule set's trees of a file's rules; rules[i]'s data is its index + 1. */
typedef struct tree {
    ruledef_list_t l;
    descriptors_t *d;
} tree_t;

static tree_t tree_of(const char *name)
{
    tree_t t = {.l = upstream_rules(name)};
    const ruledef_t **defs = calloc(t.l.n, sizeof *defs);
    void **data = calloc(t.l.n, sizeof *data);
    for (size_t i = 0; i < t.l.n; i++) {
        defs[i] = &t.l.rules[i];
        data[i] = (void *)(uintptr_t)(i + 1);
    }
    t.d = descriptors_build(defs, data, t.l.n);
    assert_non_null(t.d);
    free(defs);
    free(data);
    return t;
}

static void tree_free(tree_t *t)
{
    descriptors_free(t->d);
    ruledef_list_free(&t->l);
}

/* The rule a descriptor (pairs kv[0..2n)) is decided by, or NULL; counted as descriptors_match's.
 */
static const ruledef_t *lookup(const tree_t *t, const char *domain, size_t n, const char *const *kv,
                               const char **counted)
{
    rls_entry_t e[4];
    for (size_t i = 0; i < n; i++) {
        e[i] = (rls_entry_t){kv[2 * i], strlen(kv[2 * i]), kv[2 * i + 1], strlen(kv[2 * i + 1])};
    }
    const char *ignored[4];
    void *got =
        descriptors_match(t->d, domain, strlen(domain), e, n, counted != NULL ? counted : ignored);
    return got != NULL ? &t->l.rules[(uintptr_t)got - 1] : NULL;
}

#define ONE(k, v)                                                                                  \
    1, (const char *[])                                                                            \
    {                                                                                              \
        k, v                                                                                       \
    }

/* upstream's TestWildcardConfig */
static void test_wildcards(void **unused)
{
    (void)unused;
    tree_t t = tree_of("test_config/wildcard.yaml");
    const char *td = "test-domain";
    assert_non_null(lookup(&t, td, ONE("noVal", "foo1"), NULL));
    const ruledef_t *w1 = lookup(&t, td, ONE("wild", "foo1"), NULL);
    assert_non_null(w1);
    assert_ptr_equal(w1, lookup(&t, td, ONE("wild", "foo2"), NULL));
    assert_ptr_equal(w1, lookup(&t, td, ONE("wild", "foo"), NULL)); /* '*' matches nothing too */
    assert_null(lookup(&t, td, ONE("wild", "bar"), NULL));
    assert_null(lookup(&t, td, ONE("noWild", "foo1"), NULL));
    const ruledef_t *m = lookup(&t, td, ONE("midWild", "barab"), NULL);
    assert_non_null(m);
    assert_ptr_equal(m, lookup(&t, td, ONE("midWild", "bar123b"), NULL));
    assert_ptr_equal(m, lookup(&t, td, ONE("midWild", "barb"), NULL));
    assert_null(lookup(&t, td, ONE("midWild", "bara"), NULL));
    assert_null(lookup(&t, td, ONE("midWild", "xbarb"), NULL));
    const ruledef_t *mw = lookup(&t, td, ONE("multiWild", "foo123bar456baz"), NULL);
    assert_non_null(mw);
    assert_int_equal(mw->rule.limit, 10);
    assert_ptr_equal(mw, lookup(&t, td, ONE("multiWild", "foobarbaz"), NULL));
    assert_null(lookup(&t, td, ONE("multiWild", "foo123baz"), NULL));
    assert_null(lookup(&t, td, ONE("multiWild", "bar456baz"), NULL));
    assert_non_null(
        lookup(&t, td, 2, (const char *[]){"nestedWild", "val1", "wild", "goo1"}, NULL));
    assert_null(lookup(&t, td, 2, (const char *[]){"nestedWild", "val1", "wild", "foo1"}, NULL));
    tree_free(&t);
}

/* upstream's share_threshold tests: which entries are counted on their pattern */
static void test_share_threshold(void **unused)
{
    (void)unused;
    tree_t t = tree_of("test_config/share_threshold.yaml");
    const char *td = "test-domain", *counted[4];
    const ruledef_t *r = lookup(&t, td, ONE("files", "files/a.pdf"), counted);
    assert_non_null(r);
    assert_int_equal(r->rule.limit, 100);
    assert_string_equal(counted[0], "files/*");
    assert_ptr_equal(r, lookup(&t, td, ONE("files", "files/b.csv"), counted));
    /* an explicit value first, unshared; then the shared pattern */
    r = lookup(&t, td, ONE("file", "test1"), counted);
    assert_int_equal(r->rule.limit, 50);
    assert_null(counted[0]);
    r = lookup(&t, td, ONE("file", "test2"), counted);
    assert_int_equal(r->rule.limit, 100);
    assert_string_equal(counted[0], "test*");
    /* a shared level above the limit, an unshared pattern between */
    r = lookup(&t, td, 3, (const char *[]){"path", "path/x", "file", "file/y", "type", "pdf"},
               counted);
    assert_int_equal(r->rule.limit, 120);
    assert_string_equal(counted[0], "path/*");
    assert_null(counted[1]);
    assert_null(counted[2]);
    /* the same key at two levels, both shared */
    r = lookup(&t, td, 2, (const char *[]){"files", "top/a", "files", "nested/b"}, counted);
    assert_int_equal(r->rule.limit, 300);
    assert_string_equal(counted[0], "top/*");
    assert_string_equal(counted[1], "nested/*");
    /* middle and multiple wildcards */
    r = lookup(&t, td, ONE("multiroute", "svc1ep2rpc"), counted);
    assert_int_equal(r->rule.limit, 50);
    assert_string_equal(counted[0], "svc*ep*rpc");
    r = lookup(&t, td, 2, (const char *[]){"tenant", "t1prod", "resource", "res9v2"}, counted);
    assert_int_equal(r->rule.limit, 60);
    assert_string_equal(counted[1], "res*v2");
    tree_free(&t);
}

/* reload.yaml's `block`: requests_per_unit 0, a rule of limit 0 that keeps it through JSON */
static void test_limit_zero(void **unused)
{
    (void)unused;
    tree_t t = tree_of("integration/reload.yaml");
    const ruledef_t *r = lookup(&t, "reload", ONE("block", "foo"), NULL);
    assert_non_null(r);
    assert_true(r->blocked);
    assert_int_equal(r->rule.window_ns, 1000000000);
    char *json = ruledef_to_json(r);
    assert_non_null(strstr(json, "\"limit\":0"));
    free(json);
    assert_false(lookup(&t, "reload", ONE("key1", "foo"), NULL)->blocked);
    tree_free(&t);
}

/* example.yaml's service_1 and service_2 are in quota mode, through JSON; its others are not */
static void test_quota_mode(void **unused)
{
    (void)unused;
    tree_t t = tree_of("examples/example.yaml");
    const ruledef_t *r = lookup(&t, "rl", ONE("service", "service_1"), NULL);
    assert_non_null(r);
    assert_true(r->desc->quota);
    assert_int_equal(r->rule.limit, 1);
    char *json = ruledef_to_json(r);
    assert_non_null(strstr(json, "\"quota_mode\":true"));
    free(json);
    assert_true(lookup(&t, "rl", ONE("service", "service_2"), NULL)->desc->quota);
    assert_false(lookup(&t, "rl", ONE("unspec", "x"), NULL)->desc->quota);
    json = ruledef_to_json(lookup(&t, "rl", ONE("unspec", "x"), NULL));
    assert_null(strstr(json, "quota_mode"));
    free(json);
    tree_free(&t);
    static const char plain[] = "domain: d\ndescriptors:\n  - key: k\n    value: v\n"
                                "    share_threshold: true\n";
    envoy_config_t c;
    char err[ENVOY_CONFIG_ERR_MAX] = "";
    assert_int_equal(envoy_config_parse(plain, strlen(plain), &c, err), -1);
    assert_non_null(strstr(err, "descriptors[0].share_threshold: needs a value with a wildcard"));
}

/* example.yaml's detailed_metric and metadata, which change nothing in sluice: one note each,
 * at the first, for the server to log */
static void test_notes(void **unused)
{
    (void)unused;
    size_t len;
    char *text = upstream_text("examples/example.yaml", &len), err[ENVOY_CONFIG_ERR_MAX] = "";
    envoy_config_t c;
    assert_int_equal(envoy_config_parse(text, len, &c, err), 0);
    char *notes = envoy_config_notes(&c);
    assert_non_null(notes);
    assert_string_equal(notes,
                        "line 79, column 5: descriptors[3].detailed_metric: taken: names "
                        "envoyproxy/ratelimit's statistics after each value; sluiced counts per "
                        "rule (sluice_decisions_total{rule=...}), so it changes nothing here\n"
                        "line 87, column 5: descriptors[5].metadata: taken (and 1 more): "
                        "envoyproxy/ratelimit sends it as a response's dynamic metadata; sluiced "
                        "sends none, so it changes nothing here");
    free(notes);
    envoy_config_free(&c);
    free(text);
    text = upstream_text("integration/basic.yaml", &len); /* says none of them */
    assert_int_equal(envoy_config_parse(text, len, &c, err), 0);
    assert_null(envoy_config_notes(&c));
    envoy_config_free(&c);
    free(text);
}

/* duplicate_domain.yaml alone (upstream refuses it only beside basic_config.yaml, the same
 * domain): `descriptors:` with nothing under it, a domain with no rules */
static void test_empty_descriptors(void **unused)
{
    (void)unused;
    ruledef_list_t l = upstream_rules("test_config/duplicate_domain.yaml");
    assert_int_equal(l.n, 0);
    ruledef_list_free(&l);
    static const char empty[] = "domain: d\ndescriptors: []\n", none[] = "domain: d\n";
    envoy_config_t c;
    char err[ENVOY_CONFIG_ERR_MAX] = "";
    assert_int_equal(envoy_config_parse(empty, strlen(empty), &c, err), 0);
    assert_int_equal(envoy_config_rules(&c, &l, err), 0);
    assert_int_equal(l.n, 0);
    ruledef_list_free(&l);
    envoy_config_free(&c);
    assert_int_equal(envoy_config_parse(none, strlen(none), &c, err), 0);
    assert_int_equal(envoy_config_rules(&c, &l, err), -1); /* a file cut short */
    assert_non_null(strstr(err, "descriptors: there are none"));
    envoy_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_file_loads),  cmocka_unit_test(test_every_bad_file_refused),
        cmocka_unit_test(test_wildcards),         cmocka_unit_test(test_share_threshold),
        cmocka_unit_test(test_limit_zero),        cmocka_unit_test(test_quota_mode),
        cmocka_unit_test(test_empty_descriptors), cmocka_unit_test(test_notes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
