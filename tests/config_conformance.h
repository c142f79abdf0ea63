/*
 * config_conformance.h - the config store conformance suite: what config_store.h promises,
 * checked the same way against every store. A test program defines a conformance_store_t for a
 * store (how to make a new empty one, and the two things only the store's own SQL can do: refuse
 * a rule, mark the schema newer) and runs CONFORMANCE_TESTS with conformance_use() as the
 * group's setup.
 *
 * Cases: a new store; rules (get, put, delete, list, names with quotes and SQL in them); one
 * version bump per change, none for a change that changes nothing or fails, the bump seen
 * together with its change by another handle (a reader racing a writer); overrides (keys with
 * quotes, every byte value, NUL, empty, 1 KiB; JSON of 1 KiB); walking overrides in byte order
 * with a limit, a callback that stops, and paging after a key; imports (file, merge, replace,
 * origins, the diff, overrides with them, nothing written when the arguments are wrong or the
 * store refuses a rule); a second handle; a schema newer than the code.
 */
#ifndef SLUICE_TESTS_CONFIG_CONFORMANCE_H
#define SLUICE_TESTS_CONFIG_CONFORMANCE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <cmocka.h>

#include "rules/config_store.h"

#define CONFORMANCE_URL_MAX 512

/* A store under test. */
typedef struct conformance_store {
    const char *name; /* "sqlite", "postgresql" */
    /* Writes the URL of a new, empty store (no schema yet) into url (CONFORMANCE_URL_MAX bytes).
     * Returns 0, or -1 with a message on stderr. */
    int (*fresh)(char *url);
    /* From now on, the database refuses every write of a rule named `name` with an error whose
     * text holds "<name> refused" (a trigger), as a constraint of the database would. */
    void (*refuse_rule)(const char *url, const char *name);
    /* Marks the store at url as written by a sluiced that knows schema version `version`. */
    void (*set_schema)(const char *url, int version);
} conformance_store_t;

static const conformance_store_t *conformance; /* the store the group runs against */

/* The suite runs against `store` until told another (before cmocka_run_group_tests). */
static inline void conformance_set(const conformance_store_t *store)
{
    conformance = store;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static inline config_store_t *conf_open(const char *url)
{
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_open(url, &s, err) != 0)
        fail_msg("open %s: %s", url, err);
    assert_non_null(s);
    return s;
}

/* A new, empty store; url (CONFORMANCE_URL_MAX bytes, may be NULL) gets its URL. */
static inline config_store_t *conf_new(char *url)
{
    char own[CONFORMANCE_URL_MAX];
    char *u = url != NULL ? url : own;
    if (conformance->fresh(u) != 0)
        fail_msg("%s: no fresh store", conformance->name);
    return conf_open(u);
}

static inline int64_t conf_version(config_store_t *s)
{
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_version(s, &v, err) != 0)
        fail_msg("version: %s", err);
    return v;
}

static inline int64_t conf_put(config_store_t *s, const char *name, const char *json)
{
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_put_rule(s, name, json, &v, err) != 0)
        fail_msg("put %s: %s", name, err);
    return v;
}

static inline int64_t conf_put_ov(config_store_t *s, const char *rule, const void *key, size_t len,
                                  const char *json)
{
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_put_override(s, rule, key, len, json, &v, err) != 0)
        fail_msg("put override %s: %s", rule, err);
    return v;
}

/* Asserts a get's result (and frees the JSON): want's JSON, or NOTFOUND and no JSON (NULL). */
static inline void conf_got(int rc, char *json, const char *want)
{
    if (want == NULL) {
        assert_int_equal(rc, CONFIG_STORE_NOTFOUND);
        assert_null(json);
        return;
    }
    assert_int_equal(rc, 0);
    assert_non_null(json);
    assert_string_equal(json, want);
    free(json);
}

static inline void conf_rule_is(config_store_t *s, const char *name, const char *want)
{
    char *json = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    int rc = config_store_get_rule(s, name, &json, err);
    if (rc < 0)
        fail_msg("get %s: %s", name, err);
    conf_got(rc, json, want);
}

static inline void conf_ov_is(config_store_t *s, const char *rule, const void *key, size_t len,
                              const char *want)
{
    char *json = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    int rc = config_store_get_override(s, rule, key, len, &json, err);
    if (rc < 0)
        fail_msg("get override %s: %s", rule, err);
    conf_got(rc, json, want);
}

/* Asserts the stored rule names, in order, joined by ','; returns the list's version. */
static inline int64_t conf_names(config_store_t *s, const char *want)
{
    config_rule_t *rules = NULL;
    size_t n = 99;
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_list_rules(s, &rules, &n, &v, err) != 0)
        fail_msg("list: %s", err);
    char got[1024] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "", rules[i].name);
    assert_string_equal(got, want);
    config_rules_free(rules, n);
    return v;
}

/* "a,b" of a diff's list. */
static const char *conf_joined(char *const *names, size_t n)
{
    static char buf[512];
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "", names[i]);
    return buf;
}

/* ---- a new store, rules, versions ---------------------------------------------------------- */

static inline void conf_new_store_is_empty(void **unused)
{
    char url[CONFORMANCE_URL_MAX];
    config_store_t *s = conf_new(url);
    assert_int_equal(conf_version(s), 0);
    assert_int_equal(conf_names(s, ""), 0);
    conf_rule_is(s, "api", NULL);
    conf_ov_is(s, "api", "k", 1, NULL);
    char name[CONFIG_STORE_NAME_MAX];
    assert_non_null(strstr(config_store_describe(s, name), conformance->name));
    config_store_close(s);
    /* reopening keeps the schema and the version */
    s = conf_open(url);
    assert_int_equal(conf_version(s), 0);
    config_store_close(s);
}

static inline void conf_rules_and_versions(void **unused)
{
    config_store_t *s = conf_new(NULL);
    char err[CONFIG_STORE_ERR_MAX] = "";
    int64_t v = -1;

    assert_int_equal(conf_put(s, "login", "{\"limit\":10}"), 1);
    assert_int_equal(conf_put(s, "api", "{\"limit\":100}"), 2);
    assert_int_equal(conf_version(s), 2);
    conf_rule_is(s, "api", "{\"limit\":100}");
    conf_rule_is(s, "login", "{\"limit\":10}");
    conf_rule_is(s, "Api", NULL); /* names are case-sensitive */
    assert_int_equal(conf_names(s, "api,login"), 2);

    assert_int_equal(conf_put(s, "api", "{\"limit\":200}"), 3);
    conf_rule_is(s, "api", "{\"limit\":200}");
    /* the same JSON again changes nothing: same version */
    assert_int_equal(conf_put(s, "api", "{\"limit\":200}"), 3);
    assert_int_equal(conf_version(s), 3);

    assert_int_equal(config_store_del_rule(s, "api", &v, err), 0);
    assert_int_equal(v, 4);
    conf_rule_is(s, "api", NULL);
    v = -1;
    assert_int_equal(config_store_del_rule(s, "api", &v, err), CONFIG_STORE_NOTFOUND);
    assert_int_equal(v, -1);
    assert_int_equal(conf_version(s), 4);
    assert_int_equal(conf_names(s, "login"), 4);

    /* NULL version pointers are allowed */
    assert_int_equal(config_store_put_rule(s, "x", "{}", NULL, err), 0);
    assert_int_equal(config_store_del_rule(s, "x", NULL, err), 0);
    assert_int_equal(conf_version(s), 6);
    /* names and JSON with quotes, backslashes, SQL and format directives are only data */
    const char *odd[] = {"r\xc3\xa9gle 'quoted'", "a\"b", "x'); DROP TABLE rules; --",
                         "back\\slash", "$1 %s ?1"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        assert_int_equal(conf_put(s, odd[i], "{\"a\":\"\\u0000 '\\\"\"}"), 7 + (int64_t)i);
        conf_rule_is(s, odd[i], "{\"a\":\"\\u0000 '\\\"\"}");
    }
    assert_int_equal(conf_names(s, "$1 %s ?1,a\"b,back\\slash,login,r\xc3\xa9gle 'quoted',"
                                   "x'); DROP TABLE rules; --"),
                     11);
    /* names sort by their bytes: upper case before lower, '_' between */
    conf_put(s, "_", "{}");
    conf_put(s, "B", "{}");
    assert_int_equal(conf_names(s, "$1 %s ?1,B,_,a\"b,back\\slash,login,r\xc3\xa9gle 'quoted',"
                                   "x'); DROP TABLE rules; --"),
                     13);
    config_store_close(s);
}

/* A JSON text of `len` bytes: {"pad":"xxx..."}. */
static inline char *conf_json_of(size_t len)
{
    char *j = malloc(len + 1);
    assert_non_null(j);
    memset(j, 'x', len);
    memcpy(j, "{\"pad\":\"", 8);
    memcpy(j + len - 2, "\"}", 2);
    j[len] = '\0';
    return j;
}

static inline void conf_overrides(void **unused)
{
    config_store_t *s = conf_new(NULL);
    char err[CONFIG_STORE_ERR_MAX] = "";
    int64_t v = -1;

    /* an override needs its rule */
    assert_int_equal(config_store_put_override(s, "api", "k", 1, "{}", &v, err), -1);
    assert_non_null(strstr(err, "no rule 'api'"));
    assert_int_equal(conf_version(s), 0);

    conf_put(s, "api", "{}");
    const char k1[] = {'t', 0, 'x'};      /* NUL inside */
    const char k2[] = {'t', 0, 'y'};      /* same prefix up to the NUL */
    const char k3[] = {'t'};              /* a prefix of both */
    const char k4[] = {(char)0xff, 0, 0}; /* high bytes */
    assert_int_equal(conf_put_ov(s, "api", k1, sizeof(k1), "{\"limit\":1}"), 2);
    assert_int_equal(conf_put_ov(s, "api", k2, sizeof(k2), "{\"limit\":2}"), 3);
    assert_int_equal(conf_put_ov(s, "api", k3, sizeof(k3), "{\"limit\":3}"), 4);
    assert_int_equal(conf_put_ov(s, "api", k4, sizeof(k4), "{\"limit\":4}"), 5);
    assert_int_equal(conf_put_ov(s, "api", "", 0, "{\"limit\":0}"), 6); /* the empty key */
    conf_ov_is(s, "api", k1, sizeof(k1), "{\"limit\":1}");
    conf_ov_is(s, "api", k2, sizeof(k2), "{\"limit\":2}");
    conf_ov_is(s, "api", k3, sizeof(k3), "{\"limit\":3}");
    conf_ov_is(s, "api", k4, sizeof(k4), "{\"limit\":4}");
    conf_ov_is(s, "api", NULL, 0, "{\"limit\":0}");
    conf_ov_is(s, "api", "t", 2, NULL); /* "t\0" is none of them */
    conf_ov_is(s, "other", k1, sizeof(k1), NULL);

    /* keys with quotes and SQL; every byte value 1..255 in one key; 1 KiB keys and JSON */
    const char *quoted = "o'brien \"the\" \\ user'; --";
    conf_put_ov(s, "api", quoted, strlen(quoted), "{\"limit\":5}");
    conf_ov_is(s, "api", quoted, strlen(quoted), "{\"limit\":5}");
    char every[255];
    for (int b = 1; b <= 255; b++)
        every[b - 1] = (char)b;
    conf_put_ov(s, "api", every, sizeof(every), "{\"limit\":6}");
    conf_ov_is(s, "api", every, sizeof(every), "{\"limit\":6}");
    conf_ov_is(s, "api", every, sizeof(every) - 1, NULL);
    char big[1024];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(1 + i % 255);
    char *json = conf_json_of(1024);
    conf_put_ov(s, "api", big, sizeof(big), json);
    conf_ov_is(s, "api", big, sizeof(big), json);
    big[1023] ^= 1; /* differs in the last byte only */
    conf_ov_is(s, "api", big, sizeof(big), NULL);
    free(json);
    int64_t before = conf_version(s);

    /* replace; the same JSON again is no change */
    assert_int_equal(conf_put_ov(s, "api", k1, sizeof(k1), "{\"limit\":11}"), before + 1);
    assert_int_equal(conf_put_ov(s, "api", k1, sizeof(k1), "{\"limit\":11}"), before + 1);
    conf_ov_is(s, "api", k1, sizeof(k1), "{\"limit\":11}");

    assert_int_equal(config_store_del_override(s, "api", k2, sizeof(k2), &v, err), 0);
    assert_int_equal(v, before + 2);
    conf_ov_is(s, "api", k2, sizeof(k2), NULL);
    conf_ov_is(s, "api", k1, sizeof(k1), "{\"limit\":11}");
    assert_int_equal(config_store_del_override(s, "api", k2, sizeof(k2), &v, err),
                     CONFIG_STORE_NOTFOUND);
    assert_int_equal(conf_version(s), before + 2);

    /* deleting the rule deletes its overrides: a new rule of that name has none */
    assert_int_equal(config_store_del_rule(s, "api", &v, err), 0);
    assert_int_equal(v, before + 3);
    conf_put(s, "api", "{}");
    conf_ov_is(s, "api", k1, sizeof(k1), NULL);
    conf_ov_is(s, "api", NULL, 0, NULL);
    conf_ov_is(s, "api", quoted, strlen(quoted), NULL);
    config_store_close(s);
}

/* ---- walking overrides --------------------------------------------------------------------- */

typedef struct conf_seen {
    size_t n;
    size_t stop_after; /* 0 = never stop */
    char keys[8][8];
    size_t lens[8];
    char json[8][32];
} conf_seen_t;

static inline int conf_collect(void *arg, const void *key, size_t key_len, const char *json)
{
    conf_seen_t *seen = arg;
    assert_true(seen->n < 8 && key_len <= 8);
    memcpy(seen->keys[seen->n], key, key_len);
    seen->lens[seen->n] = key_len;
    snprintf(seen->json[seen->n], sizeof(seen->json[0]), "%s", json);
    seen->n++;
    return seen->stop_after != 0 && seen->n == seen->stop_after;
}

static inline void conf_foreach_order_and_limit(void **unused)
{
    config_store_t *s = conf_new(NULL);
    char err[CONFIG_STORE_ERR_MAX] = "";
    conf_put(s, "a", "{}");
    conf_put(s, "b", "{}");
    /* inserted out of order; byte order is: "", "\0", "\0\0", "a", "ab", "\xff" */
    conf_put_ov(s, "a", "ab", 2, "5");
    conf_put_ov(s, "a", "\xff", 1, "6");
    conf_put_ov(s, "a", "\0\0", 2, "3");
    conf_put_ov(s, "a", "", 0, "1");
    conf_put_ov(s, "a", "a", 1, "4");
    conf_put_ov(s, "a", "\0", 1, "2");
    conf_put_ov(s, "b", "zz", 2, "other rule");

    conf_seen_t seen = {0};
    assert_int_equal(config_store_foreach_override(s, "a", 0, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 6);
    const char *want_keys[] = {"", "\0", "\0\0", "a", "ab", "\xff"};
    const size_t want_lens[] = {0, 1, 2, 1, 2, 1};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(seen.lens[i], want_lens[i]);
        assert_memory_equal(seen.keys[i], want_keys[i], want_lens[i]);
        char want_json[8];
        snprintf(want_json, sizeof(want_json), "%zu", i + 1);
        assert_string_equal(seen.json[i], want_json);
    }

    seen = (conf_seen_t){0};
    assert_int_equal(config_store_foreach_override(s, "a", 2, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.json[1], "2");

    /* the callback stops the walk, and the store still works afterwards */
    seen = (conf_seen_t){.stop_after = 3};
    assert_int_equal(config_store_foreach_override(s, "a", 0, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 3);
    assert_int_equal(conf_put(s, "c", "{}"), 10);
    assert_int_equal(conf_version(s), 10);

    /* after a key: strictly after it, in order, with a limit */
    seen = (conf_seen_t){0};
    assert_int_equal(
        config_store_foreach_override_after(s, "a", "\0", 1, 2, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.json[0], "3");
    assert_string_equal(seen.json[1], "4");
    seen = (conf_seen_t){0};
    assert_int_equal(
        config_store_foreach_override_after(s, "a", "", 0, 0, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 5); /* after the empty key: all but it */
    seen = (conf_seen_t){0};
    assert_int_equal(
        config_store_foreach_override_after(s, "a", "\xff", 1, 0, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 0);

    seen = (conf_seen_t){0};
    assert_int_equal(config_store_foreach_override(s, "b", 0, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.json[0], "other rule");
    seen = (conf_seen_t){0};
    assert_int_equal(config_store_foreach_override(s, "none", 0, conf_collect, &seen, err), 0);
    assert_int_equal(seen.n, 0);
    config_store_close(s);
}

#define CONF_PAGED 300 /* overrides walked a page at a time */

typedef struct conf_page {
    unsigned char last[2]; /* the last key seen */
    size_t last_len;
    size_t n;      /* keys seen in all */
    bool in_order; /* every key after the one before */
} conf_page_t;

static inline int conf_page_key(void *arg, const void *key, size_t key_len, const char *json)
{
    conf_page_t *p = arg;
    unsigned char k[2];
    if (key_len != 2) {
        p->in_order = false;
        return 1;
    }
    memcpy(k, key, 2);
    if (p->n > 0 && memcmp(k, p->last, 2) <= 0)
        p->in_order = false;
    unsigned want = (unsigned)k[0] << 8 | k[1];
    char expect[16];
    snprintf(expect, sizeof(expect), "%u", want);
    if (strcmp(json, expect) != 0)
        p->in_order = false;
    memcpy(p->last, k, 2);
    p->last_len = 2;
    p->n++;
    return 0;
}

/* Many overrides, walked 7 at a time by the key last seen: each exactly once, in byte order. */
static inline void conf_paging(void **unused)
{
    config_store_t *s = conf_new(NULL);
    char err[CONFIG_STORE_ERR_MAX] = "";
    conf_put(s, "r", "{}");
    config_override_t ovs[CONF_PAGED];
    unsigned char keys[CONF_PAGED][2];
    char json[CONF_PAGED][16];
    for (unsigned i = 0; i < CONF_PAGED; i++) {
        unsigned k = (i * 7919u) % 65536u; /* spread over two bytes, zero bytes included */
        keys[i][0] = (unsigned char)(k >> 8);
        keys[i][1] = (unsigned char)k;
        snprintf(json[i], sizeof(json[i]), "%u", k);
        ovs[i] = (config_override_t){"r", keys[i], 2, json[i]};
    }
    config_rule_t rule = {"r", "{}"};
    config_import_diff_t d;
    assert_int_equal(
        config_store_import(s, &rule, 1, ovs, CONF_PAGED, CONFIG_IMPORT_MERGE, NULL, &d, NULL, err),
        0);
    assert_int_equal(d.overrides_written, CONF_PAGED);
    config_import_diff_free(&d);
    conf_page_t p = {.in_order = true};
    for (int pages = 0; pages < CONF_PAGED; pages++) {
        size_t before = p.n;
        const void *after = p.n > 0 ? p.last : NULL;
        assert_int_equal(config_store_foreach_override_after(s, "r", after, p.last_len, 7,
                                                             conf_page_key, &p, err),
                         0);
        if (p.n == before)
            break;
        assert_true(p.n - before <= 7);
    }
    assert_true(p.in_order);
    assert_int_equal(p.n, CONF_PAGED);
    config_store_close(s);
}

/* ---- imports ------------------------------------------------------------------------------- */

static inline void conf_import(void **unused)
{
    config_store_t *s = conf_new(NULL);
    char err[CONFIG_STORE_ERR_MAX] = "";
    int64_t v = -1;
    conf_put(s, "a", "A1");
    conf_put(s, "b", "B1");
    conf_put(s, "c", "C1");
    conf_put_ov(s, "a", "ka", 2, "oa");
    conf_put_ov(s, "c", "kc", 2, "oc");
    conf_put_ov(s, "b", "kb", 2, "ob");
    assert_int_equal(conf_version(s), 6);

    /* drop a, keep b as is, change c, add d: one bump */
    config_rule_t set[] = {{"d", "D1"}, {"c", "C2"}, {"b", "B1"}};
    assert_int_equal(
        config_store_import(s, set, 3, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 7);
    assert_int_equal(conf_names(s, "b,c,d"), 7);
    conf_rule_is(s, "a", NULL);
    conf_rule_is(s, "b", "B1");
    conf_rule_is(s, "c", "C2");
    conf_rule_is(s, "d", "D1");
    conf_ov_is(s, "a", "ka", 2, NULL); /* dropped with its rule */
    conf_ov_is(s, "b", "kb", 2, NULL); /* a replace makes the overrides those given: none */
    conf_ov_is(s, "c", "kc", 2, NULL);
    /* a re-created "a" does not inherit the old override */
    conf_put(s, "a", "A2");
    conf_ov_is(s, "a", "ka", 2, NULL);
    assert_int_equal(config_store_del_rule(s, "a", &v, err), 0);
    assert_int_equal(v, 9);

    /* the same set again: no change, no bump */
    assert_int_equal(
        config_store_import(s, set, 3, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 9);

    /* overrides given are written in the same step; a replace drops the others of its rules,
     * a merge keeps them */
    conf_put_ov(s, "c", "old", 3, "O");
    config_override_t ovs[] = {{"b", "kb", 2, "ob2"}, {"c", "kc", 2, "oc2"}};
    assert_int_equal(
        config_store_import(s, set, 3, ovs, 2, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 11);
    conf_ov_is(s, "b", "kb", 2, "ob2");
    conf_ov_is(s, "c", "kc", 2, "oc2");
    conf_ov_is(s, "c", "old", 3, NULL);
    assert_int_equal(
        config_store_import(s, set, 3, ovs, 2, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 11); /* the same again: nothing changed */
    conf_put_ov(s, "c", "mine", 4, "M");
    config_override_t one[] = {{"b", "kb", 2, "ob3"}};
    assert_int_equal(
        config_store_import(s, set, 3, one, 1, CONFIG_IMPORT_MERGE, NULL, NULL, &v, err), 0);
    conf_ov_is(s, "b", "kb", 2, "ob3");
    conf_ov_is(s, "c", "mine", 4, "M");
    config_override_t stray[] = {{"zz", "k", 1, "x"}};
    assert_int_equal(
        config_store_import(s, set, 3, stray, 1, CONFIG_IMPORT_MERGE, NULL, NULL, &v, err), -1);
    assert_non_null(strstr(err, "override 0 is not of a rule imported"));
    v = conf_version(s);

    /* a name twice is refused before anything is touched */
    int64_t before = v;
    config_rule_t twice[] = {{"x", "1"}, {"b", "2"}, {"x", "3"}};
    assert_int_equal(
        config_store_import(s, twice, 3, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), -1);
    assert_non_null(strstr(err, "'x' appears twice"));
    config_rule_t no_json[] = {{"x", NULL}};
    assert_int_equal(
        config_store_import(s, no_json, 1, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err),
        -1);
    assert_int_equal(conf_names(s, "b,c,d"), before);

    /* the empty set empties the store */
    assert_int_equal(
        config_store_import(s, NULL, 0, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, before + 1);
    assert_int_equal(conf_names(s, ""), before + 1);
    conf_ov_is(s, "b", "kb", 2, NULL);
    config_store_close(s);
}

/* A rules file owns the rules it imported: a later import of the file changes and removes those,
 * and never touches rules made one at a time; a merge removes nothing; the diff says what
 * happened, by name. */
static inline void conf_import_modes(void **unused)
{
    config_store_t *s = conf_new(NULL);
    char err[CONFIG_STORE_ERR_MAX] = "";
    config_import_diff_t d;
    conf_put(s, "api_made", "X1");
    conf_put_ov(s, "api_made", "k", 1, "ok");

    config_rule_t first[] = {{"f1", "F1"}, {"f2", "F2"}};
    assert_int_equal(
        config_store_import(s, first, 2, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_string_equal(conf_joined(d.added, d.nadded), "f1,f2");
    assert_int_equal(d.nchanged + d.nremoved, 0);
    assert_int_equal(d.kept, 1);
    config_import_diff_free(&d);

    /* the file drops f1, changes f2, adds f3: f1 goes, the API's rule stays */
    config_rule_t second[] = {{"f3", "F3"}, {"f2", "F2b"}};
    assert_int_equal(
        config_store_import(s, second, 2, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_string_equal(conf_joined(d.added, d.nadded), "f3");
    assert_string_equal(conf_joined(d.changed, d.nchanged), "f2");
    assert_string_equal(conf_joined(d.removed, d.nremoved), "f1");
    assert_int_equal(d.kept, 1);
    config_import_diff_free(&d);
    conf_names(s, "api_made,f2,f3");
    conf_ov_is(s, "api_made", "k", 1, "ok");

    /* a rule changed through the API is the API's now: the file no longer removes it */
    conf_put(s, "f3", "F3-api");
    config_rule_t third[] = {{"f2", "F2b"}};
    assert_int_equal(
        config_store_import(s, third, 1, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_int_equal(d.nadded + d.nchanged + d.nremoved, 0);
    assert_int_equal(d.kept, 2);
    config_import_diff_free(&d);
    conf_names(s, "api_made,f2,f3");

    /* an origin given explicitly: an import of API rules is never removed by a file */
    config_rule_t as_api[] = {{"g", "G"}};
    assert_int_equal(
        config_store_import(s, as_api, 1, NULL, 0, CONFIG_IMPORT_FILE, "api", &d, NULL, err), 0);
    config_import_diff_free(&d);
    assert_int_equal(
        config_store_import(s, third, 1, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_int_equal(d.nremoved, 0);
    config_import_diff_free(&d);
    conf_names(s, "api_made,f2,f3,g");

    /* a merge adds and changes, removes nothing; the same merge again changes nothing */
    int64_t v = conf_version(s);
    config_rule_t merge[] = {{"f2", "F2c"}, {"m", "M"}};
    assert_int_equal(
        config_store_import(s, merge, 2, NULL, 0, CONFIG_IMPORT_MERGE, NULL, &d, NULL, err), 0);
    assert_string_equal(conf_joined(d.added, d.nadded), "m");
    assert_string_equal(conf_joined(d.changed, d.nchanged), "f2");
    assert_int_equal(d.nremoved, 0);
    config_import_diff_free(&d);
    assert_int_equal(conf_version(s), v + 1);
    assert_int_equal(
        config_store_import(s, merge, 2, NULL, 0, CONFIG_IMPORT_MERGE, NULL, &d, NULL, err), 0);
    assert_int_equal(conf_version(s), v + 1);
    config_import_diff_free(&d);

    /* replace: exactly the set given, overrides counted */
    config_override_t ov[] = {{"m", "k1", 2, "o1"}};
    assert_int_equal(
        config_store_import(s, merge + 1, 1, ov, 1, CONFIG_IMPORT_REPLACE, NULL, &d, NULL, err), 0);
    assert_string_equal(conf_joined(d.removed, d.nremoved), "api_made,f2,f3,g");
    assert_int_equal(d.overrides_written, 1);
    config_import_diff_free(&d);
    conf_names(s, "m");
    config_override_t ov2[] = {{"m", "k2", 2, "o2"}};
    assert_int_equal(
        config_store_import(s, merge + 1, 1, ov2, 1, CONFIG_IMPORT_REPLACE, NULL, &d, NULL, err),
        0);
    assert_int_equal(d.overrides_written, 1);
    assert_int_equal(d.overrides_removed, 1);
    config_import_diff_free(&d);
    conf_ov_is(s, "m", "k1", 2, NULL);
    conf_ov_is(s, "m", "k2", 2, "o2");
    config_store_close(s);
}

/* A failure halfway through an import (the database refuses one rule) leaves every rule,
 * override and the version as they were; so does a put refused the same way. */
static inline void conf_failed_import_rolls_back(void **unused)
{
    char url[CONFORMANCE_URL_MAX];
    config_store_t *s = conf_new(url);
    char err[CONFIG_STORE_ERR_MAX] = "";
    int64_t v = -1;
    conf_put(s, "a", "A1");
    conf_put(s, "b", "B1");
    conf_put_ov(s, "a", "ka", 2, "oa");
    conformance->refuse_rule(url, "zz");

    /* deletes a and rewrites b before it reaches zz */
    config_rule_t set[] = {{"b", "B2"}, {"zz", "Z"}};
    assert_int_equal(
        config_store_import(s, set, 2, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), -1);
    assert_non_null(strstr(err, "zz refused"));
    assert_int_equal(conf_version(s), 3);
    assert_int_equal(conf_names(s, "a,b"), 3);
    conf_rule_is(s, "b", "B1");
    conf_ov_is(s, "a", "ka", 2, "oa");

    assert_int_equal(config_store_put_rule(s, "zz", "Z", &v, err), -1);
    assert_non_null(strstr(err, "zz refused"));
    assert_int_equal(conf_version(s), 3);
    /* and the handle keeps working */
    assert_int_equal(conf_put(s, "c", "C"), 4);
    config_store_close(s);
}

/* ---- handles ------------------------------------------------------------------------------- */

static inline void conf_second_handle_sees_changes(void **unused)
{
    char url[CONFORMANCE_URL_MAX];
    config_store_t *a = conf_new(url);
    config_store_t *b = conf_open(url);
    assert_int_equal(conf_version(b), 0);
    conf_put(a, "api", "{}");
    conf_put_ov(a, "api", "k\0", 2, "o");
    assert_int_equal(conf_version(b), 2);
    conf_rule_is(b, "api", "{}");
    conf_ov_is(b, "api", "k\0", 2, "o");
    assert_int_equal(conf_put(b, "api", "{\"v\":2}"), 3);
    assert_int_equal(conf_version(a), 3);
    conf_rule_is(a, "api", "{\"v\":2}");
    config_store_close(a);
    config_store_close(b);
}

#define CONF_RACE_WRITES 150 /* puts the writer makes while the reader lists */

typedef struct conf_race {
    const char *url;
    int64_t base;     /* the version when rule r said {"i":0} */
    int done;         /* the writer has finished (atomic) */
    int writer_fails; /* puts that failed */
    int mismatches;   /* lists whose version and rule disagreed */
    int lists;        /* lists made */
    char first_bad[160];
} conf_race_t;

static inline void *conf_race_writer(void *arg)
{
    conf_race_t *r = arg;
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX];
    if (config_store_open(r->url, &s, err) != 0) {
        r->writer_fails = CONF_RACE_WRITES;
    }
    for (int i = 1; s != NULL && i <= CONF_RACE_WRITES; i++) {
        char json[32];
        snprintf(json, sizeof(json), "{\"i\":%d}", i);
        int64_t v = 0;
        if (config_store_put_rule(s, "r", json, &v, err) != 0 || v != r->base + i)
            r->writer_fails++;
    }
    config_store_close(s);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* One list: the rule's i must be exactly the version's distance from base. */
static inline void conf_race_check(conf_race_t *r, config_store_t *s)
{
    config_rule_t *rules = NULL;
    size_t n = 0;
    int64_t v = 0;
    char err[CONFIG_STORE_ERR_MAX];
    if (config_store_list_rules(s, &rules, &n, &v, err) != 0) {
        r->mismatches++;
        snprintf(r->first_bad, sizeof(r->first_bad), "list: %.120s", err);
        return;
    }
    int i = -1;
    if (n == 1)
        sscanf(rules[0].json, "{\"i\":%d}", &i);
    if (i != v - r->base) {
        if (r->mismatches++ == 0)
            snprintf(r->first_bad, sizeof(r->first_bad), "version %lld with rule i=%d",
                     (long long)v, i);
    }
    config_rules_free(rules, n);
    r->lists++;
}

/* A reader listing while a writer changes: every list's version is exactly the one its rules
 * were written with (the bump is in the change's transaction; the list reads one snapshot). */
static inline void conf_version_with_its_change(void **unused)
{
    char url[CONFORMANCE_URL_MAX];
    config_store_t *s = conf_new(url);
    conf_race_t r = {.url = url, .base = conf_put(s, "r", "{\"i\":0}")};
    pthread_t writer;
    assert_int_equal(pthread_create(&writer, NULL, conf_race_writer, &r), 0);
    for (int k = 0; k < 100000 && !__atomic_load_n(&r.done, __ATOMIC_ACQUIRE); k++)
        conf_race_check(&r, s);
    assert_int_equal(pthread_join(writer, NULL), 0);
    conf_race_check(&r, s);
    if (r.mismatches != 0)
        fail_msg("%d of %d lists disagreed; first: %s", r.mismatches, r.lists, r.first_bad);
    assert_int_equal(r.writer_fails, 0);
    assert_int_equal(conf_version(s), r.base + CONF_RACE_WRITES);
    config_store_close(s);
}

static inline void conf_newer_schema_refused(void **unused)
{
    char url[CONFORMANCE_URL_MAX];
    config_store_close(conf_new(url));
    conformance->set_schema(url, 99);
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    assert_int_equal(config_store_open(url, &s, err), -1);
    assert_null(s);
    assert_non_null(strstr(err, "schema version 99"));
    assert_non_null(strstr(err, "newer sluiced"));
}

/* Every case, each wrapped by WRAP (cmocka_unit_test, or one with a setup), for a CMUnitTest
 * array. */
#define CONFORMANCE_CASES(WRAP)                                                                    \
    WRAP(conf_new_store_is_empty), WRAP(conf_rules_and_versions), WRAP(conf_overrides),            \
        WRAP(conf_foreach_order_and_limit), WRAP(conf_paging), WRAP(conf_import),                  \
        WRAP(conf_import_modes), WRAP(conf_failed_import_rolls_back),                              \
        WRAP(conf_second_handle_sees_changes), WRAP(conf_version_with_its_change),                 \
        WRAP(conf_newer_schema_refused)
#define CONFORMANCE_TESTS CONFORMANCE_CASES(cmocka_unit_test)

#endif /* SLUICE_TESTS_CONFIG_CONFORMANCE_H */
