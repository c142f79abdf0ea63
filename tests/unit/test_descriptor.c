/*
 * test_descriptor.c - a rule's descriptor (rules/descriptor.h) and the rule fields that carry it
 * (ruledef.h): the entries' text both ways, with seeded random keys and values of every awkward
 * character; each way the text can be wrong; the fields in a rule (JSON and YAML), unlimited
 * rules, and what a rule may not combine them with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prop/gen.h"
#include "rules/descriptor.h"
#include "rules/ruledef.h"
#include "rules/wildcard.h"

static char err[RULEDEF_ERR_MAX];

static rule_descriptor_t *entries_ok(const char *text)
{
    rule_descriptor_t *d = calloc(1, sizeof *d);
    assert_non_null(d);
    if (desc_parse_entries(d, text, strlen(text), err, sizeof err) != 0) {
        fail_msg("'%s': %s", text, err);
    }
    return d;
}

static void test_entries(void **unused)
{
    (void)unused;
    rule_descriptor_t *d = entries_ok(" tenant = acme ,user");
    assert_int_equal(d->n, 2);
    assert_string_equal(d->entries[0].key, "tenant");
    assert_string_equal(d->entries[0].value, "acme");
    assert_false(d->entries[0].glob);
    assert_string_equal(d->entries[1].key, "user");
    assert_null(d->entries[1].value);
    char *text = desc_entries_text(d);
    assert_string_equal(text, "tenant=acme, user");
    free(text);
    desc_free(d);

    d = entries_ok("path=/api*, path=/a%2A, k%3Dx=%20v%2C%25");
    assert_true(d->entries[0].glob);
    assert_string_equal(d->entries[0].value, "/api*");
    assert_int_equal(d->entries[0].value_len, 5);
    assert_false(d->entries[1].glob); /* an escaped star is the star itself */
    assert_string_equal(d->entries[1].value, "/a*");
    assert_int_equal(d->entries[1].value_len, 3);
    assert_string_equal(d->entries[2].key, "k=x");
    assert_string_equal(d->entries[2].value, " v,%");
    text = desc_entries_text(d);
    assert_string_equal(text, "path=/api*, path=/a%2A, k%3Dx=%20v%2C%25");
    free(text);
    desc_free(d);

    /* wildcards anywhere; a literal star or backslash in a pattern is escaped for wildcard.h */
    d = entries_ok("m=foo*bar*baz, l=a%2A\\b*, f==files/*, e=%3Dx");
    assert_true(d->entries[0].glob);
    assert_false(d->entries[0].shared);
    assert_string_equal(d->entries[1].value, "a\\*\\\\b*");
    assert_true(d->entries[2].shared);
    assert_string_equal(d->entries[2].value, "files/*");
    assert_false(d->entries[3].glob); /* a value starting with '=' is written %3D */
    assert_string_equal(d->entries[3].value, "=x");
    text = desc_entries_text(d);
    assert_string_equal(text, "m=foo*bar*baz, l=a%2A\\b*, f==files/*, e=%3Dx");
    free(text);
    desc_free(d);
    rule_descriptor_t bad = {0};
    assert_int_equal(desc_parse_entries(&bad, "f==files", 8, err, sizeof err), -1);
    assert_string_equal(err, "entry 1: '==' counts every value a pattern matches as one: the "
                             "value needs a wildcard ('*')");
}

static void test_entries_errors(void **unused)
{
    (void)unused;
    static const struct {
        const char *text, *want;
    } rows[] = {
        {"", "entry 1 is empty"},
        {"a, ,b", "entry 2 is empty"},
        {"a,", "entry 2 is empty"},
        {"=x", "entry 1: the key is empty"},
        {"k=", "entry 1: the value is empty (write the key alone to match any value)"},
        {"k = ", "entry 1: the value is empty (write the key alone to match any value)"},
        {"a, k=%zz", "entry 2: '%' must start an escape of two hex digits (%25 is '%')"},
        {"k=%4", "entry 1: '%' must start an escape of two hex digits (%25 is '%')"},
        {"k=a%00b", "entry 1: holds a NUL (%00)"},
        {"k=%ff", "entry 1: is not UTF-8"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        rule_descriptor_t d = {0};
        err[0] = '\0';
        if (desc_parse_entries(&d, rows[i].text, strlen(rows[i].text), err, sizeof err) == 0) {
            fail_msg("'%s' was accepted", rows[i].text);
        }
        assert_string_equal(err, rows[i].want);
        assert_int_equal(d.n, 0);
        free(d.entries);
    }
    char many[4096] = "k0";
    for (int i = 1; i <= DESC_ENTRIES_MAX; i++) {
        snprintf(many + strlen(many), sizeof many - strlen(many), ",k%d", i);
    }
    rule_descriptor_t d = {0};
    assert_int_equal(desc_parse_entries(&d, many, strlen(many), err, sizeof err), -1);
    assert_string_equal(err, "more than 32 entries");
    char longer[DESC_WRITTEN_MAX + 2];
    memset(longer, 'k', DESC_TEXT_MAX + 1); /* one key a byte too long */
    longer[DESC_TEXT_MAX + 1] = '\0';
    assert_int_equal(desc_parse_entries(&d, longer, strlen(longer), err, sizeof err), -1);
    assert_string_equal(err, "its keys and values hold more than 2048 bytes");
    longer[DESC_TEXT_MAX] = '\0'; /* escaped, as a writer would: 3 bytes each */
    char escaped[3 * DESC_TEXT_MAX + 1] = "";
    for (size_t i = 0; i < DESC_TEXT_MAX / 2; i++) {
        strcat(escaped, "%2C");
    }
    assert_int_equal(desc_parse_entries(&d, escaped, strlen(escaped), err, sizeof err), 0);
    char *text = desc_entries_text(&d);
    assert_string_equal(text, escaped); /* what was read can always be written and read back */
    free(text);
    for (size_t i = 0; i < d.n; i++) {
        free(d.entries[i].key);
        free(d.entries[i].value);
    }
    free(d.entries);
    d = (rule_descriptor_t){0};
    memset(longer, 'k', DESC_WRITTEN_MAX + 1);
    longer[DESC_WRITTEN_MAX + 1] = '\0';
    assert_int_equal(desc_parse_entries(&d, longer, strlen(longer), err, sizeof err), -1);
    assert_string_equal(err, "longer than 8192 bytes");
}

/* A random key or value: 1..12 characters drawn mostly from those the text format escapes. */
static void gen_text(prng_t *r, char *out, bool star_end)
{
    static const char *const pieces[] = {
        "a", "Z",  "0",  ",", "=", "%", " ", "*", "/", "\t", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
        "|", "\\", "%2A"};
    size_t n = (size_t)prng_range(r, 1, 12);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strcat(out, pieces[prng_range(r, 0, 15)]);
    }
    if (star_end) {
        strcat(out, "*");
    }
}

static void test_entries_round_trip(void **unused)
{
    (void)unused;
    uint64_t seed = prop_seed();
    for (long c = 0; c < 2000; c++) {
        prng_t r = prop_case_prng(seed, 0, c);
        rule_descriptor_t d = {0};
        d.n = (size_t)prng_range(&r, 1, 5);
        d.entries = calloc(d.n, sizeof *d.entries);
        for (size_t i = 0; i < d.n; i++) {
            char key[64], value[64];
            gen_text(&r, key, false);
            d.entries[i].key = strdup(key);
            if (prng_chance(&r, 70)) {
                bool glob = prng_chance(&r, 30);
                char pattern[2 * sizeof value + 2];
                gen_text(&r, value, false);
                size_t n = glob ? wildcard_quote(value, strlen(value), false, pattern) : 0;
                if (glob) { /* a wildcard at a place drawn, never inside an escape */
                    size_t at = 0, skip = (size_t)prng_range(&r, 0, (int64_t)n);
                    for (size_t k = 0; k < skip && at < n; k++) {
                        at += pattern[at] == '\\' ? 2 : 1;
                        while ((pattern[at] & 0xC0) == 0x80) { /* not inside a character */
                            at++;
                        }
                    }
                    memmove(pattern + at + 1, pattern + at, n - at + 1);
                    pattern[at] = '*';
                }
                d.entries[i].value = strdup(glob ? pattern : value);
                d.entries[i].glob = glob;
                d.entries[i].shared = glob && prng_chance(&r, 50);
                d.entries[i].value_len = strlen(d.entries[i].value);
            }
        }
        char *text = desc_entries_text(&d);
        assert_non_null(text);
        rule_descriptor_t back = {0};
        if (desc_parse_entries(&back, text, strlen(text), err, sizeof err) != 0) {
            fail_msg("seed %llu case %ld: '%s': %s", (unsigned long long)seed, c, text, err);
        }
        if (!desc_equal(&d, &back)) {
            fail_msg("seed %llu case %ld: '%s' read back differently", (unsigned long long)seed, c,
                     text);
        }
        free(text);
        for (size_t i = 0; i < d.n; i++) {
            free(d.entries[i].key);
            free(d.entries[i].value);
        }
        free(d.entries);
        for (size_t i = 0; i < back.n; i++) {
            free(back.entries[i].key);
            free(back.entries[i].value);
        }
        free(back.entries);
    }
}

static ruledef_t rule_ok(const char *json)
{
    ruledef_t def;
    if (ruledef_parse_json(json, strlen(json), NULL, &def, err) != 0) {
        fail_msg("%s: %s", json, err);
    }
    return def;
}

static void test_rule_fields(void **unused)
{
    (void)unused;
    ruledef_t def = rule_ok("{\"name\":\"edge.login\",\"algorithm\":\"sliding_log\",\"limit\":5,"
                            "\"window\":\"1m\",\"domain\":\"edge\",\"descriptor\":\"path=/login\","
                            "\"limit_name\":\"login\",\"replaces\":\"per ip, x%2Cy\"}");
    assert_non_null(def.desc);
    assert_string_equal(def.desc->domain, "edge");
    assert_string_equal(def.desc->limit_name, "login");
    assert_int_equal(def.desc->nreplaces, 2);
    assert_string_equal(def.desc->replaces[1], "x,y");
    assert_false(def.unlimited);
    char *json = ruledef_to_json(&def);
    assert_string_equal(json, "{\"name\":\"edge.login\",\"algorithm\":\"sliding_log\",\"limit\":5,"
                              "\"window\":\"1m\",\"shadow\":false,\"on_store_error\":\"allow\","
                              "\"cold_start\":\"open\",\"domain\":\"edge\",\"descriptor\":"
                              "\"path=/login\",\"limit_name\":\"login\",\"replaces\":\"per ip, "
                              "x%2Cy\"}");
    ruledef_t back = rule_ok(json);
    assert_true(ruledef_equal(&def, &back));
    free(json);

    /* a change of the descriptor is a change of the rule */
    ruledef_t other = rule_ok("{\"name\":\"edge.login\",\"algorithm\":\"sliding_log\",\"limit\":5,"
                              "\"window\":\"1m\",\"domain\":\"edge\",\"descriptor\":\"path=/log*\","
                              "\"limit_name\":\"login\",\"replaces\":\"per ip, x%2Cy\"}");
    assert_false(ruledef_equal(&def, &other));
    ruledef_free(&other);
    ruledef_free(&back);
    ruledef_free(&def);

    /* quota_mode: written only when true, kept through JSON, part of the rule's identity */
    def = rule_ok("{\"name\":\"shop.s1\",\"algorithm\":\"fixed_window\",\"limit\":1,"
                  "\"window\":\"1m\",\"quota_mode\":true,\"domain\":\"shop\","
                  "\"descriptor\":\"service=s1\"}");
    assert_true(def.desc->quota);
    json = ruledef_to_json(&def);
    assert_string_equal(json, "{\"name\":\"shop.s1\",\"algorithm\":\"fixed_window\",\"limit\":1,"
                              "\"window\":\"1m\",\"shadow\":false,\"on_store_error\":\"allow\","
                              "\"cold_start\":\"open\",\"domain\":\"shop\",\"descriptor\":"
                              "\"service=s1\",\"quota_mode\":true}");
    back = rule_ok(json);
    assert_true(ruledef_equal(&def, &back));
    back.desc->quota = false;
    assert_false(ruledef_equal(&def, &back));
    ruledef_free(&back);
    ruledef_free(&def);
    free(json);

    /* unlimited: no numbers written, a fixed window no one fills */
    def = rule_ok("{\"name\":\"edge.admin\",\"unlimited\":true,\"domain\":\"edge\","
                  "\"descriptor\":\"user=admin\"}");
    assert_true(def.unlimited);
    assert_int_equal(def.rule.algorithm, SL_FIXED_WINDOW);
    assert_int_equal(def.rule.limit, RULE_UNLIMITED_LIMIT);
    assert_int_equal(def.rule.window_ns, SL_NS_PER_SEC);
    json = ruledef_to_json(&def);
    assert_string_equal(json, "{\"name\":\"edge.admin\",\"unlimited\":true,\"shadow\":false,"
                              "\"on_store_error\":\"allow\",\"cold_start\":\"open\",\"domain\":"
                              "\"edge\",\"descriptor\":\"user=admin\"}");
    back = rule_ok(json);
    assert_true(ruledef_equal(&def, &back));
    ruledef_free(&back);
    free(json);

    /* ... which no override can give numbers to */
    rule_override_t ov;
    assert_int_equal(override_parse_json(&def, "k", 1, "{\"limit\":5}", 11, &ov, err), -1);
    assert_string_equal(err, "line 1, column 1: rule 'edge.admin' is unlimited: it has no "
                             "numbers to override");
    ruledef_free(&def);

    /* both formats: a rules file keeps the fields through its writer */
    static const char file[] = "rules:\n"
                               "  - name: edge.user\n"
                               "    algorithm: fixed_window\n"
                               "    limit: 3\n"
                               "    window: 1s\n"
                               "    domain: edge\n"
                               "    descriptor: tenant=acme, user\n"
                               "  - name: edge.user-admin\n"
                               "    unlimited: true\n"
                               "    domain: edge\n"
                               "    descriptor: tenant=acme, user=admin\n";
    ruledef_list_t list;
    if (ruledef_parse_yaml(file, strlen(file), &list, err) != 0) {
        fail_msg("%s", err);
    }
    char *yaml = ruledef_list_to_yaml(&list);
    ruledef_list_t again;
    if (ruledef_parse_yaml(yaml, strlen(yaml), &again, err) != 0) {
        fail_msg("%s\n%s", err, yaml);
    }
    assert_int_equal(again.n, 2);
    assert_true(ruledef_equal(&list.rules[0], &again.rules[0]));
    assert_true(ruledef_equal(&list.rules[1], &again.rules[1]));
    free(yaml);
    ruledef_list_free(&again);
    ruledef_list_free(&list);
}

static void test_rule_field_errors(void **unused)
{
    (void)unused;
#define RULE(rest) "{\"name\":\"a\",\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\"" rest "}"
    static const struct {
        const char *json, *want;
    } rows[] = {
        {RULE(",\"domain\":\"edge\""), "line 1, column 65: domain: needs 'descriptor' beside it"},
        {RULE(",\"descriptor\":\"k\""), "line 1, column 69: descriptor: needs 'domain' beside it"},
        {RULE(",\"limit_name\":\"n\""),
         "line 1, column 69: limit_name: only applies to a rule with a domain and a descriptor"},
        {RULE(",\"quota_mode\":true"),
         "line 1, column 69: quota_mode: only applies to a rule with a domain and a descriptor"},
        {RULE(",\"domain\":\"d\",\"descriptor\":\"k\",\"quota_mode\":1"),
         "line 1, column 99: quota_mode: must be true or false, not an integer"},
        {RULE(",\"unlimited\":false"),
         "line 1, column 68: unlimited: only applies to a rule with a domain and a descriptor"},
        {RULE(",\"domain\":\"\",\"descriptor\":\"k\""),
         "line 1, column 65: domain: must be 1..255 bytes of UTF-8 text without NUL"},
        {RULE(",\"domain\":\"d\",\"descriptor\":\"k=\""),
         "line 1, column 82: descriptor: entry 1: the value is empty (write the key alone to "
         "match any value)"},
        {RULE(",\"domain\":\"d\",\"descriptor\":\"k\",\"replaces\":\"a,,b\""),
         "line 1, column 97: replaces: name 2 is empty"},
        {RULE(",\"domain\":\"d\",\"descriptor\":7"),
         "line 1, column 82: descriptor: must be a string, not an integer"},
        {"{\"name\":\"a\",\"unlimited\":true,\"domain\":\"d\",\"descriptor\":\"k\",\"limit\":3}",
         "line 1, column 68: limit: an unlimited rule takes no limit: it admits everything"},
        {"{\"name\":\"a\",\"unlimited\":true}",
         "line 1, column 25: unlimited: only applies to a rule with a domain and a descriptor"},
    };
#undef RULE
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ruledef_t def;
        err[0] = '\0';
        if (ruledef_parse_json(rows[i].json, strlen(rows[i].json), NULL, &def, err) == 0) {
            fail_msg("accepted: %s", rows[i].json);
        }
        if (strcmp(err, rows[i].want) != 0) {
            fail_msg("%s\n got: %s\nwant: %s", rows[i].json, err, rows[i].want);
        }
    }
    ruledef_list_t list;
    static const char file[] = "rules:\n"
                               "  - name: a\n"
                               "    unlimited: true\n"
                               "    domain: d\n"
                               "    descriptor: k\n"
                               "    overrides:\n"
                               "      - {key: x, limit: 1}\n";
    assert_int_equal(ruledef_parse_yaml(file, strlen(file), &list, err), -1);
    assert_string_equal(err, "line 7, column 7: rules[0].overrides: an unlimited rule takes no "
                             "overrides: it admits everything");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries),
        cmocka_unit_test(test_entries_errors),
        cmocka_unit_test(test_entries_round_trip),
        cmocka_unit_test(test_rule_fields),
        cmocka_unit_test(test_rule_field_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
