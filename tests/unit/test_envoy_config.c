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

#include <stdio.h>
#include <stdlib.h>

#include "prop/gen.h"
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
    assert_false(login->glob);
    assert_true(login->shadow_mode);
    assert_int_equal(login->limit.unit, RLS_UNIT_MINUTE); /* units in any case */
    assert_string_equal(login->limit.name, "login");
    assert_int_equal(login->limit.nreplaces, 1);
    assert_string_equal(login->limit.replaces[0], "other");
    assert_true(c.root.children[2].glob);
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

/* unit: week, as envoyproxy/ratelimit takes it: Envoy's WEEK (7), a window of 7 days */
static void test_week(void **unused)
{
    (void)unused;
    envoy_config_t c = parsed("domain: w\ndescriptors:\n  - key: k\n"
                              "    rate_limit: {unit: week, requests_per_unit: 3}\n");
    assert_int_equal(c.root.children[0].limit.unit, RLS_UNIT_WEEK);
    assert_int_equal(RLS_UNIT_WEEK, 7);
    ruledef_list_t l;
    char err[ENVOY_CONFIG_ERR_MAX];
    assert_int_equal(envoy_config_rules(&c, &l, err), 0);
    assert_int_equal(l.rules[0].rule.window_ns, 7 * 86400 * SL_NS_PER_SEC);
    assert_int_equal(l.rules[0].rule.limit, 3);
    ruledef_list_free(&l);
    envoy_config_free(&c);
}

/* The node a descriptor of pairs kv[0..2n) matches: its line, or 0 for none. */
static unsigned match(const envoy_config_t *c, size_t n, const char *const *kv)
{
    rls_entry_t e[4];
    for (size_t i = 0; i < n; i++) {
        e[i] = (rls_entry_t){kv[2 * i], strlen(kv[2 * i]), kv[2 * i + 1], strlen(kv[2 * i + 1])};
    }
    const envoy_node_t *m = envoy_config_match(c, e, n, NULL);
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
    expect_error(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, "
        "requests_per_unit: 1}\n",
        "line 4, column 24: descriptors[0].rate_limit.unit: unknown unit 'fortnight': one of "
        "second, minute, hour, day, week, month, year");
    expect_error("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n",
                 "line 4, column 17: descriptors[0].rate_limit.unit: is required: one of second, "
                 "minute, hour, day, week, month, year");
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

/* ---- as sluice rules ----------------------------------------------------------------------- */

static ruledef_list_t rules_of(const char *text)
{
    envoy_config_t c = parsed(text);
    ruledef_list_t list;
    char err[ENVOY_CONFIG_ERR_MAX] = "";
    if (envoy_config_rules(&c, &list, err) != 0) {
        fail_msg("%s", err);
    }
    envoy_config_free(&c);
    return list;
}

static void test_rules(void **unused)
{
    (void)unused;
    ruledef_list_t l = rules_of(config_yaml);
    static const char *const names[] = {"edge.remote_address",   "edge.path:_login",
                                        "edge.path:_api__",      "edge.path",
                                        "edge.tenant:acme.user", "edge.tenant:acme.user:bob"};
    assert_int_equal(l.n, 6);
    for (size_t i = 0; i < l.n; i++) {
        assert_string_equal(l.rules[i].name, names[i]);
        assert_non_null(l.rules[i].desc);
        assert_string_equal(l.rules[i].desc->domain, "edge");
    }
    const ruledef_t *ra = &l.rules[0], *login = &l.rules[1], *api = &l.rules[2];
    assert_int_equal(ra->rule.algorithm, SL_FIXED_WINDOW);
    assert_int_equal(ra->rule.limit, 10);
    assert_int_equal(ra->rule.window_ns, SL_NS_PER_SEC);
    assert_int_equal(ra->desc->n, 1);
    assert_null(ra->desc->entries[0].value);
    assert_false(ra->shadow);
    assert_true(login->shadow);
    assert_int_equal(login->rule.limit, 5);
    assert_int_equal(login->rule.window_ns, 60 * SL_NS_PER_SEC);
    assert_string_equal(login->desc->limit_name, "login");
    assert_int_equal(login->desc->nreplaces, 1);
    assert_string_equal(login->desc->replaces[0], "other");
    assert_string_equal(login->desc->entries[0].value, "/login");
    assert_true(api->desc->entries[0].glob);
    assert_int_equal(api->desc->entries[0].value_len, 6); /* the pattern, star and all */
    assert_int_equal(api->rule.window_ns, 3600 * SL_NS_PER_SEC);
    assert_true(l.rules[4].unlimited);
    assert_int_equal(l.rules[4].desc->n, 2);
    assert_int_equal(l.rules[5].rule.window_ns, 365 * 86400 * SL_NS_PER_SEC);
    /* each survives the store's JSON */
    for (size_t i = 0; i < l.n; i++) {
        char *json = ruledef_to_json(&l.rules[i]);
        ruledef_t back;
        char err[RULEDEF_ERR_MAX];
        assert_int_equal(ruledef_parse_json(json, strlen(json), NULL, &back, err), 0);
        assert_true(ruledef_equal(&l.rules[i], &back));
        ruledef_free(&back);
        free(json);
    }
    ruledef_list_free(&l);

    /* sluice's addition: any algorithm */
    l = rules_of("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
                 "requests_per_unit: 7, algorithm: token_bucket}\n");
    assert_int_equal(l.rules[0].rule.algorithm, SL_TOKEN_BUCKET);
    assert_int_equal(l.rules[0].rule.burst, 7);
    ruledef_list_free(&l);
}

static void test_rules_names(void **unused)
{
    (void)unused;
    /* "/a b" and "/a_b" write the same name: the second is told apart by a hash */
    ruledef_list_t l = rules_of("domain: d\ndescriptors:\n"
                                "  - {key: p, value: /a b, rate_limit: {unit: second, "
                                "requests_per_unit: 1}}\n"
                                "  - {key: p, value: /a_b, rate_limit: {unit: second, "
                                "requests_per_unit: 1}}\n"
                                "  - key: a_very_long_descriptor_key_that_goes_on\n"
                                "    value: and_a_value_that_is_longer_still\n"
                                "    rate_limit: {unit: second, requests_per_unit: 1}\n");
    assert_int_equal(l.n, 3);
    assert_string_equal(l.rules[0].name, "d.p:_a_b");
    assert_int_equal(strlen(l.rules[1].name), strlen("d.p:_a_b") + 9);
    assert_memory_equal(l.rules[1].name, "d.p:_a_b-", 9);
    assert_int_equal(strlen(l.rules[2].name), RULE_NAME_MAX);
    assert_true(ruledef_name_valid(l.rules[1].name, strlen(l.rules[1].name)));
    assert_true(ruledef_name_valid(l.rules[2].name, strlen(l.rules[2].name)));
    static const char full[] =
        "d.a_very_long_descriptor_key_that_goes_on:and_a_value_that_is_longer_still";
    assert_memory_equal(l.rules[2].name, full, RULE_NAME_MAX - 9);
    assert_int_equal(l.rules[2].name[RULE_NAME_MAX - 9], '-');
    ruledef_list_free(&l);
}

static void expect_rules_error(const char *text, const char *want)
{
    envoy_config_t c = parsed(text);
    ruledef_list_t list;
    char err[ENVOY_CONFIG_ERR_MAX] = "";
    assert_int_equal(envoy_config_rules(&c, &list, err), -1);
    assert_string_equal(err, want);
    assert_int_equal(list.n, 0);
    envoy_config_free(&c);
}

static void test_rules_errors(void **unused)
{
    (void)unused;
    expect_rules_error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                       "requests_per_unit: 2000000, algorithm: sliding_log}\n",
                       "line 3, column 5: descriptors[0].rate_limit: sliding_log: limit must be a "
                       "positive integer (at most 1048576 for sliding_log, at most 4096 for "
                       "concurrency)");
    expect_rules_error("domain: d\n", "descriptors: there are none: a configuration names its "
                                      "descriptors, or `descriptors: []` for none (to remove a "
                                      "domain's rules, stop giving its file)");
    char longdomain[600] = "domain: ";
    memset(longdomain + 8, 'd', 256);
    strcpy(longdomain + 8 + 256, "\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n");
    expect_rules_error(longdomain, "line 3, column 5: descriptors[0]: cannot be a sluice rule: "
                                   "domain: must be 1..255 bytes of UTF-8 text without NUL");
    char deep[4096] = "domain: d\ndescriptors:\n";
    for (int i = 0; i <= DESC_ENTRIES_MAX; i++) {
        snprintf(deep + strlen(deep), sizeof deep - strlen(deep),
                 "%*s- key: k%d\n%*s  descriptors:\n", 2 + 4 * i, "", i, 2 + 4 * i, "");
    }
    /* deeper than a descriptor can be: the YAML is refused before (two levels per descriptor) */
    envoy_config_t c;
    char err[ENVOY_CONFIG_ERR_MAX] = "";
    assert_int_equal(envoy_config_parse(deep, strlen(deep), &c, err), -1);
    assert_non_null(strstr(err, "nested more than 32 levels deep"));
}

/*
 * Where the import meets the server's lookup: the tree the server builds from the imported
 * rules' descriptors (envoy_config_add) gives every descriptor the rule of the node the
 * original configuration gives it. Random configurations and descriptors over a small alphabet
 * of keys and values, so that they meet often; seeded (SLUICE_SEED).
 */
static const char *const keys_alpha[] = {"a", "b", "c"};
static const char *const values_alpha[] = {"x", "xy", "y", "x*", "xy*", ""};

static void gen_nodes(prng_t *r, char *out, size_t cap, int depth, int indent)
{
    int n = (int)prng_range(r, 1, 4);
    for (int i = 0; i < n; i++) {
        const char *v = values_alpha[prng_range(r, 0, 5)];
        snprintf(out + strlen(out), cap - strlen(out), "%*s- key: %s\n", indent, "",
                 keys_alpha[prng_range(r, 0, 2)]);
        if (v[0] != '\0') {
            snprintf(out + strlen(out), cap - strlen(out), "%*s  value: \"%s\"\n", indent, "", v);
        }
        if (prng_chance(r, 70)) {
            if (prng_chance(r, 15)) {
                snprintf(out + strlen(out), cap - strlen(out),
                         "%*s  rate_limit: {unlimited: true}\n", indent, "");
            } else {
                snprintf(out + strlen(out), cap - strlen(out),
                         "%*s  rate_limit: {unit: second, requests_per_unit: %d}\n", indent, "",
                         (int)prng_range(r, 1, 99));
            }
        }
        if (depth < 3 && prng_chance(r, 50)) {
            snprintf(out + strlen(out), cap - strlen(out), "%*s  descriptors:\n", indent, "");
            gen_nodes(r, out, cap, depth + 1, indent + 4);
        }
    }
}

/* The nodes with a limit that is not unlimited, in the order envoy_config_rules makes their
 * rules (depth first). */
static void number_limits(const envoy_node_t *parent, const envoy_node_t **order, size_t *n)
{
    for (size_t i = 0; i < parent->n; i++) {
        const envoy_node_t *c = &parent->children[i];
        if (c->has_limit && !c->limit.unlimited) {
            order[(*n)++] = c;
        }
        number_limits(c, order, n);
    }
}

/* What a lookup decides: the limited rule, or NULL for no limit (none, or unlimited). */
static const ruledef_t *limited(const ruledef_t *r)
{
    return r != NULL && !r->unlimited ? r : NULL;
}

static void test_rules_tree_agrees(void **unused)
{
    (void)unused;
    uint64_t seed = prop_seed();
    int cases = 0, matched = 0;
    for (long k = 0; k < 300; k++) {
        prng_t r = prop_case_prng(seed, 1, k);
        char text[65536] = "domain: d\ndescriptors:\n";
        gen_nodes(&r, text, sizeof text, 0, 2);
        envoy_config_t c;
        char err[ENVOY_CONFIG_ERR_MAX];
        if (envoy_config_parse(text, strlen(text), &c, err) != 0) {
            envoy_config_free(&c);
            continue; /* two nodes with the same key and value on one level */
        }
        cases++;
        ruledef_list_t l;
        if (envoy_config_rules(&c, &l, err) != 0) {
            fail_msg("%s\n%s", err, text);
        }
        const envoy_node_t *order[4096];
        size_t nl = 0;
        number_limits(&c.root, order, &nl);
        assert_true(nl <= l.n);
        envoy_config_t built = {.domain = strdup("d")};
        for (size_t i = 0; i < l.n; i++) {
            envoy_node_t *node =
                envoy_config_add(&built, l.rules[i].desc->entries, l.rules[i].desc->n);
            assert_non_null(node);
            assert_null(node->data);
            node->data = &l.rules[i];
            node->has_limit = true;
        }
        for (int q = 0; q < 200; q++) {
            rls_entry_t e[4];
            size_t n = (size_t)prng_range(&r, 1, 4);
            for (size_t i = 0; i < n; i++) {
                const char *key = keys_alpha[prng_range(&r, 0, 2)];
                static const char *const vals[] = {"x", "xy", "xyz", "y", "yx", "x*", "z"};
                const char *v = vals[prng_range(&r, 0, 6)];
                e[i] = (rls_entry_t){key, strlen(key), v, strlen(v)};
            }
            const envoy_node_t *want = envoy_config_match(&c, e, n, NULL);
            const envoy_node_t *got = envoy_config_match(&built, e, n, NULL);
            const ruledef_t *want_rule =
                NULL; /* the i-th limited node's is the i-th limited rule */
            for (size_t i = 0, j = 0; want != NULL && i < nl; i++, j++) {
                while (l.rules[j].unlimited) {
                    j++;
                }
                want_rule = order[i] == want ? &l.rules[j] : want_rule;
            }
            const ruledef_t *got_rule = limited(got != NULL ? got->data : NULL);
            if (got_rule != want_rule) {
                fail_msg("seed %llu case %ld: the rules' tree gives %s, the file %s\n%s",
                         (unsigned long long)seed, k, got_rule ? got_rule->name : "none",
                         want_rule ? want_rule->name : "none", text);
            }
            matched += want_rule != NULL;
        }
        envoy_config_free(&built);
        ruledef_list_free(&l);
        envoy_config_free(&c);
    }
    assert_true(cases > 100);
    assert_true(matched > 1000); /* the alphabet makes descriptors meet limits often */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),        cmocka_unit_test(test_week),
        cmocka_unit_test(test_match),        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_rules),        cmocka_unit_test(test_rules_names),
        cmocka_unit_test(test_rules_errors), cmocka_unit_test(test_rules_tree_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
