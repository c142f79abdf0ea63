/*
 * test_envoy_config.c - envoyproxy/ratelimit's configuration (rules/envoy_config.h): a file
 * with every field read into the tree, each way a file can be wrong named with its line and
 * column, and the lookup's semantics: value before prefix before any value, nesting, the
 * depth of the descriptor against the depth of the configuration, nodes without a limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rules/envoy_config.h"

static const char config_yaml[] =
    "domain: edge\n"
    "descriptors:\n"
    "  - key: remote_address\n"
    "    rate_limit:\n"
    "      unit: second\n"
    "      requests_per_unit: 10\n"
    "  - key: path\n"
    "    value: /login\n"
    "    shadow_mode: true\n"
    "    rate_limit: {unit: MINUTE, requests_per_unit: 5, name: login,\n"
    "                 replaces: [{name: other}]}\n"
    "  - key: path\n"
    "    value: /api/*\n"
    "    rate_limit: {unit: hour, requests_per_unit: 100}\n"
    "  - key: path\n"
    "    rate_limit: {unit: day, requests_per_unit: 1000}\n"
    "  - key: tenant\n"
    "    value: acme\n"
    "    detailed_metric: true\n"
    "    descriptors:\n"
    "      - key: user\n"
    "        rate_limit: {unlimited: true}\n"
    "      - key: user\n"
    "        value: bob\n"
    "        rate_limit: {unit: year, requests_per_unit: 1}\n";

static envoy_config_t parsed(const char *text)
{
    envoy_config_t c;
    char err[ENVOY_CONFIG_ERR_MAX] = "";
    if (envoy_config_parse(text, strlen(text), &c, err) != 0) {
        fail_msg("%s", err);
    }
    return c;
}

static void test_parse(void **unused)
{
    (void)unused;
    envoy_config_t c = parsed(config_yaml);
    assert_string_equal(c.domain, "edge");
    assert_int_equal(c.root.n, 5);
    const envoy_node_t *ra = &c.root.children[0], *login = &c.root.children[1];
    assert_string_equal(ra->key, "remote_address");
    assert_null(ra->value);
    assert_true(ra->has_limit);
    assert_int_equal(ra->limit.unit, RLS_UNIT_SECOND);
    assert_int_equal(ra->limit.requests_per_unit, 10);
    assert_int_equal(ra->line, 3);
    assert_string_equal(login->value, "/login");
    assert_false(login->prefix);
    assert_true(login->shadow_mode);
    assert_int_equal(login->limit.unit, RLS_UNIT_MINUTE); /* units in any case */
    assert_string_equal(login->limit.name, "login");
    assert_int_equal(login->limit.nreplaces, 1);
    assert_string_equal(login->limit.replaces[0], "other");
    assert_true(c.root.children[2].prefix);
    const envoy_node_t *acme = &c.root.children[4];
    assert_false(acme->has_limit);
    assert_true(acme->detailed_metric);
    assert_int_equal(acme->n, 2);
    assert_true(acme->children[0].limit.unlimited);
    assert_int_equal(acme->children[0].limit.unit, RLS_UNIT_UNKNOWN);
    assert_int_equal(acme->children[1].limit.unit, RLS_UNIT_YEAR);
    envoy_config_free(&c);
    assert_null(c.domain);
}

/* The node a descriptor of pairs kv[0..2n) matches: its line, or 0 for none. */
static unsigned match(const envoy_config_t *c, size_t n, const char *const *kv)
{
    rls_entry_t e[4];
    for (size_t i = 0; i < n; i++) {
        e[i] = (rls_entry_t){kv[2 * i], strlen(kv[2 * i]), kv[2 * i + 1], strlen(kv[2 * i + 1])};
    }
    const envoy_node_t *m = envoy_config_match(c, e, n);
    return m != NULL ? m->line : 0;
}

static void test_match(void **unused)
{
    (void)unused;
    envoy_config_t c = parsed(config_yaml);
    assert_int_equal(match(&c, 1, (const char *[]){"remote_address", "10.0.0.1"}), 3);
    assert_int_equal(match(&c, 1, (const char *[]){"path", "/login"}), 7);   /* its value */
    assert_int_equal(match(&c, 1, (const char *[]){"path", "/api/v1"}), 12); /* a prefix */
    assert_int_equal(match(&c, 1, (const char *[]){"path", "/api/"}), 12);   /* prefix alone */
    assert_int_equal(match(&c, 1, (const char *[]){"path", "/other"}), 15);  /* any value */
    assert_int_equal(match(&c, 1, (const char *[]){"nokey", "x"}), 0);
    /* nested: the last entry's node decides; the parent has no limit of its own */
    assert_int_equal(match(&c, 2, (const char *[]){"tenant", "acme", "user", "bob"}), 23);
    assert_int_equal(match(&c, 2, (const char *[]){"tenant", "acme", "user", "eve"}), 21);
    assert_int_equal(match(&c, 1, (const char *[]){"tenant", "acme"}), 0);
    assert_int_equal(match(&c, 2, (const char *[]){"tenant", "other", "user", "bob"}), 0);
    /* deeper than the configuration, or shallower: no limit */
    assert_int_equal(match(&c, 2, (const char *[]){"remote_address", "x", "path", "/login"}), 0);
    assert_int_equal(match(&c, 0, NULL), 0);
    envoy_config_free(&c);
}

static void expect_error(const char *text, const char *want)
{
    envoy_config_t c;
    char err[ENVOY_CONFIG_ERR_MAX] = "";
    assert_int_equal(envoy_config_parse(text, strlen(text), &c, err), -1);
    assert_string_equal(err, want);
    assert_null(c.domain);
    assert_null(c.root.children);
}

static void test_errors(void **unused)
{
    (void)unused;
    expect_error("descriptors: []\n", "line 1, column 1: domain: is required");
    expect_error("domain: ''\n", "line 1, column 9: domain: must not be empty");
    expect_error("domain: a\ndomains: b\n", "line 2, column 1: unknown field 'domains'");
    expect_error("domain: a\ndescriptors: {key: x}\n",
                 "line 2, column 14: descriptors: must be a list of descriptors, not a mapping");
    expect_error("domain: a\ndescriptors:\n  - value: x\n",
                 "line 3, column 5: descriptors[0].key: is required");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: week, "
                 "requests_per_unit: 1}\n",
                 "line 4, column 24: descriptors[0].rate_limit.unit: unknown unit 'week': one of "
                 "second, minute, hour, day, month, year");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n",
                 "line 4, column 17: descriptors[0].rate_limit.unit: is required: one of second, "
                 "minute, hour, day, month, year");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: "
                 "second}\n",
                 "line 4, column 41: descriptors[0].rate_limit.unit: must not be given with "
                 "unlimited: true");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                 "requests_per_unit: -1}\n",
                 "line 4, column 51: descriptors[0].rate_limit.requests_per_unit: must be an "
                 "integer 0..4294967295");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, name: n, "
                 "replaces: [{name: n}]}\n",
                 "line 4, column 52: descriptors[0].rate_limit.replaces[0].name: a limit cannot "
                 "replace itself");
    expect_error(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
        "replaces: [{name: ''}]}\n",
        "line 4, column 50: descriptors[0].rate_limit.replaces[0].name: must not be empty");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
                 "line 5, column 5: descriptors[1]: the same key and value as descriptor 0 on "
                 "this level ('k')");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    descriptors:\n      - key: s\n"
                 "        shadow_mode: yes\n",
                 "line 6, column 22: descriptors[0].descriptors[0].shadow_mode: must be true or "
                 "false, not a string");
    expect_error("domain: [a\n", "line 2, column 1: did not find expected ',' or ']' (while "
                                 "parsing a flow sequence at line 1, column 9)");
    expect_error("# nothing\n", "the file holds no configuration (domain: ...)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
