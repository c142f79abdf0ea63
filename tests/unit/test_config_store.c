/*
 * test_config_store.c - the SQLite config store on real files in a temporary directory: CRUD,
 * not-found cases, one version bump per change (none for a failed or no-op change), atomic
 * import, binary override keys, a second handle and a second process on the same file, a writer
 * waiting out another's transaction, and files that are not a store.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "rules/config_store.h"
#include "tmpdir.h"

static int group_setup(void **unused)
{
    return tmpdir_create("config");
}

/* A fresh database path for one test. */
static void new_path(char *path, size_t size)
{
    tmpdir_file(path, size, "store", ".db");
}

static config_store_t *open_ok(const char *url)
{
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    int rc = config_store_open(url, &s, err);
    if (rc != 0)
        fail_msg("open %s: %s", url, err);
    assert_non_null(s);
    return s;
}

/* Opens a store on a fresh file; path[0..size) gets the file's path. */
static config_store_t *open_new(char *path, size_t size)
{
    new_path(path, size);
    return open_ok(path);
}

static int64_t version_of(config_store_t *s)
{
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX];
    assert_int_equal(config_store_version(s, &v, err), 0);
    return v;
}

static int64_t put_rule(config_store_t *s, const char *name, const char *json)
{
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_put_rule(s, name, json, &v, err) != 0)
        fail_msg("put %s: %s", name, err);
    return v;
}

static int64_t put_override(config_store_t *s, const char *rule, const void *key, size_t len,
                            const char *json)
{
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_put_override(s, rule, key, len, json, &v, err) != 0)
        fail_msg("put override %s: %s", rule, err);
    return v;
}

/* Asserts the result of a get (rc and the JSON it returned, which it frees): want's JSON, or
 * CONFIG_STORE_NOTFOUND and no JSON when want is NULL. */
static void assert_got(int rc, char *json, const char *want)
{
    if (want == NULL) {
        assert_int_equal(rc, CONFIG_STORE_NOTFOUND);
        assert_null(json);
        return;
    }
    assert_int_equal(rc, 0);
    assert_string_equal(json, want);
    free(json);
}

/* Asserts the rule's JSON, or that it is absent (want NULL). */
static void assert_rule(config_store_t *s, const char *name, const char *want)
{
    char *json = NULL;
    char err[CONFIG_STORE_ERR_MAX];
    int rc = config_store_get_rule(s, name, &json, err);
    assert_got(rc, json, want);
}

static void assert_override(config_store_t *s, const char *rule, const void *key, size_t len,
                            const char *want)
{
    char *json = NULL;
    char err[CONFIG_STORE_ERR_MAX];
    int rc = config_store_get_override(s, rule, key, len, &json, err);
    assert_got(rc, json, want);
}

/* Asserts the stored rule names, in order, joined by ',' (and returns the list's version). */
static int64_t assert_names(config_store_t *s, const char *want)
{
    config_rule_t *rules = NULL;
    size_t n = 99;
    int64_t v = -1;
    char err[CONFIG_STORE_ERR_MAX] = "";
    if (config_store_list_rules(s, &rules, &n, &v, err) != 0)
        fail_msg("list: %s", err);
    char got[512] = "";
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(got, ",");
        strcat(got, rules[i].name);
    }
    assert_string_equal(got, want);
    config_rules_free(rules, n);
    return v;
}

static void test_new_store_is_empty(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    assert_int_equal(version_of(s), 0);
    assert_int_equal(assert_names(s, ""), 0);
    assert_rule(s, "api", NULL);
    assert_override(s, "api", "k", 1, NULL);
    config_store_close(s);
    /* reopening an existing store keeps its schema and version */
    s = open_ok(path);
    assert_int_equal(version_of(s), 0);
    config_store_close(s);
}

static void test_rule_crud_and_versions(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    char err[CONFIG_STORE_ERR_MAX];
    int64_t v = -1;

    assert_int_equal(put_rule(s, "login", "{\"limit\":10}"), 1);
    assert_int_equal(put_rule(s, "api", "{\"limit\":100}"), 2);
    assert_int_equal(version_of(s), 2);
    assert_rule(s, "api", "{\"limit\":100}");
    assert_rule(s, "login", "{\"limit\":10}");
    assert_rule(s, "Api", NULL); /* names are case-sensitive */
    assert_int_equal(assert_names(s, "api,login"), 2);

    assert_int_equal(put_rule(s, "api", "{\"limit\":200}"), 3);
    assert_rule(s, "api", "{\"limit\":200}");
    /* the same JSON again changes nothing: same version */
    assert_int_equal(put_rule(s, "api", "{\"limit\":200}"), 3);
    assert_int_equal(version_of(s), 3);

    assert_int_equal(config_store_del_rule(s, "api", &v, err), 0);
    assert_int_equal(v, 4);
    assert_rule(s, "api", NULL);
    v = -1;
    assert_int_equal(config_store_del_rule(s, "api", &v, err), CONFIG_STORE_NOTFOUND);
    assert_int_equal(v, -1);
    assert_int_equal(version_of(s), 4);
    assert_int_equal(assert_names(s, "login"), 4);

    /* NULL version pointers are allowed */
    assert_int_equal(config_store_put_rule(s, "x", "{}", NULL, err), 0);
    assert_int_equal(config_store_del_rule(s, "x", NULL, err), 0);
    assert_int_equal(version_of(s), 6);
    /* a rule name that is not plain ASCII round-trips */
    assert_int_equal(put_rule(s, "r\xc3\xa9gle 'quoted'", "{\"a\":\"\\u0000\"}"), 7);
    assert_rule(s, "r\xc3\xa9gle 'quoted'", "{\"a\":\"\\u0000\"}");
    config_store_close(s);
}

static void test_overrides(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    char err[CONFIG_STORE_ERR_MAX] = "";
    int64_t v = -1;

    /* an override needs its rule */
    assert_int_equal(config_store_put_override(s, "api", "k", 1, "{}", &v, err), -1);
    assert_non_null(strstr(err, "no rule 'api'"));
    assert_int_equal(version_of(s), 0);

    put_rule(s, "api", "{}");
    const char k1[] = {'t', 0, 'x'};      /* NUL inside */
    const char k2[] = {'t', 0, 'y'};      /* same prefix up to the NUL */
    const char k3[] = {'t'};              /* a prefix of both */
    const char k4[] = {(char)0xff, 0, 0}; /* high bytes */
    assert_int_equal(put_override(s, "api", k1, sizeof(k1), "{\"limit\":1}"), 2);
    assert_int_equal(put_override(s, "api", k2, sizeof(k2), "{\"limit\":2}"), 3);
    assert_int_equal(put_override(s, "api", k3, sizeof(k3), "{\"limit\":3}"), 4);
    assert_int_equal(put_override(s, "api", k4, sizeof(k4), "{\"limit\":4}"), 5);
    assert_int_equal(put_override(s, "api", "", 0, "{\"limit\":0}"), 6); /* the empty key */
    assert_override(s, "api", k1, sizeof(k1), "{\"limit\":1}");
    assert_override(s, "api", k2, sizeof(k2), "{\"limit\":2}");
    assert_override(s, "api", k3, sizeof(k3), "{\"limit\":3}");
    assert_override(s, "api", k4, sizeof(k4), "{\"limit\":4}");
    assert_override(s, "api", NULL, 0, "{\"limit\":0}");
    assert_override(s, "api", "t", 2, NULL); /* "t\0" is none of them */
    assert_override(s, "other", k1, sizeof(k1), NULL);

    /* replace; the same JSON again is no change */
    assert_int_equal(put_override(s, "api", k1, sizeof(k1), "{\"limit\":11}"), 7);
    assert_int_equal(put_override(s, "api", k1, sizeof(k1), "{\"limit\":11}"), 7);
    assert_override(s, "api", k1, sizeof(k1), "{\"limit\":11}");

    assert_int_equal(config_store_del_override(s, "api", k2, sizeof(k2), &v, err), 0);
    assert_int_equal(v, 8);
    assert_override(s, "api", k2, sizeof(k2), NULL);
    assert_override(s, "api", k1, sizeof(k1), "{\"limit\":11}");
    assert_int_equal(config_store_del_override(s, "api", k2, sizeof(k2), &v, err),
                     CONFIG_STORE_NOTFOUND);
    assert_int_equal(version_of(s), 8);

    /* deleting the rule deletes its overrides: a new rule of that name has none */
    assert_int_equal(config_store_del_rule(s, "api", &v, err), 0);
    assert_int_equal(v, 9);
    put_rule(s, "api", "{}");
    assert_override(s, "api", k1, sizeof(k1), NULL);
    assert_override(s, "api", NULL, 0, NULL);
    config_store_close(s);
}

typedef struct seen {
    size_t n;
    size_t stop_after; /* 0 = never stop */
    char keys[8][8];
    size_t lens[8];
    char json[8][32];
} seen_t;

static int collect(void *arg, const void *key, size_t key_len, const char *json)
{
    seen_t *seen = arg;
    assert_true(seen->n < 8 && key_len <= 8);
    memcpy(seen->keys[seen->n], key, key_len);
    seen->lens[seen->n] = key_len;
    snprintf(seen->json[seen->n], sizeof(seen->json[0]), "%s", json);
    seen->n++;
    return seen->stop_after != 0 && seen->n == seen->stop_after;
}

static void test_foreach_override_order_and_limit(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    char err[CONFIG_STORE_ERR_MAX] = "";
    put_rule(s, "a", "{}");
    put_rule(s, "b", "{}");
    /* inserted out of order; byte order is: "", "\0", "\0\0", "a", "ab", "\xff" */
    put_override(s, "a", "ab", 2, "5");
    put_override(s, "a", "\xff", 1, "6");
    put_override(s, "a", "\0\0", 2, "3");
    put_override(s, "a", "", 0, "1");
    put_override(s, "a", "a", 1, "4");
    put_override(s, "a", "\0", 1, "2");
    put_override(s, "b", "zz", 2, "other rule");

    seen_t seen = {0};
    assert_int_equal(config_store_foreach_override(s, "a", 0, collect, &seen, err), 0);
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

    seen = (seen_t){0};
    assert_int_equal(config_store_foreach_override(s, "a", 2, collect, &seen, err), 0);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.json[1], "2");

    /* the callback stops the walk */
    seen = (seen_t){.stop_after = 3};
    assert_int_equal(config_store_foreach_override(s, "a", 0, collect, &seen, err), 0);
    assert_int_equal(seen.n, 3);
    /* and the store still works afterwards (the statement was reset) */
    assert_int_equal(put_rule(s, "c", "{}"), 10);
    assert_int_equal(version_of(s), 10);

    seen = (seen_t){0};
    assert_int_equal(config_store_foreach_override(s, "b", 0, collect, &seen, err), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.json[0], "other rule");
    seen = (seen_t){0};
    assert_int_equal(config_store_foreach_override(s, "none", 0, collect, &seen, err), 0);
    assert_int_equal(seen.n, 0);
    config_store_close(s);
}

static void test_import(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    char err[CONFIG_STORE_ERR_MAX] = "";
    int64_t v = -1;
    put_rule(s, "a", "A1");
    put_rule(s, "b", "B1");
    put_rule(s, "c", "C1");
    put_override(s, "a", "ka", 2, "oa");
    put_override(s, "c", "kc", 2, "oc");
    put_override(s, "b", "kb", 2, "ob");
    assert_int_equal(version_of(s), 6);

    /* drop a, keep b as is, change c, add d: one bump */
    config_rule_t set[] = {{"d", "D1"}, {"c", "C2"}, {"b", "B1"}};
    assert_int_equal(
        config_store_import(s, set, 3, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 7);
    assert_int_equal(assert_names(s, "b,c,d"), 7);
    assert_rule(s, "a", NULL);
    assert_rule(s, "b", "B1");
    assert_rule(s, "c", "C2");
    assert_rule(s, "d", "D1");
    assert_override(s, "a", "ka", 2, NULL); /* dropped with its rule */
    assert_override(s, "b", "kb", 2, NULL); /* a replace makes the overrides those given: none */
    assert_override(s, "c", "kc", 2, NULL);
    /* a re-created "a" does not inherit the old override */
    put_rule(s, "a", "A2");
    assert_override(s, "a", "ka", 2, NULL);
    assert_int_equal(config_store_del_rule(s, "a", &v, err), 0);
    assert_int_equal(v, 9);

    /* the same set again: no change, no bump */
    assert_int_equal(
        config_store_import(s, set, 3, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 9);

    /* overrides given are written in the same step; a replace drops the others of its rules,
     * a merge keeps them */
    put_override(s, "c", "old", 3, "O");
    config_override_t ovs[] = {{"b", "kb", 2, "ob2"}, {"c", "kc", 2, "oc2"}};
    assert_int_equal(
        config_store_import(s, set, 3, ovs, 2, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 11);
    assert_override(s, "b", "kb", 2, "ob2");
    assert_override(s, "c", "kc", 2, "oc2");
    assert_override(s, "c", "old", 3, NULL);
    assert_int_equal(
        config_store_import(s, set, 3, ovs, 2, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, 11); /* the same again: nothing changed */
    put_override(s, "c", "mine", 4, "M");
    config_override_t one[] = {{"b", "kb", 2, "ob3"}};
    assert_int_equal(
        config_store_import(s, set, 3, one, 1, CONFIG_IMPORT_MERGE, NULL, NULL, &v, err), 0);
    assert_override(s, "b", "kb", 2, "ob3");
    assert_override(s, "c", "mine", 4, "M");
    config_override_t stray[] = {{"zz", "k", 1, "x"}};
    assert_int_equal(
        config_store_import(s, set, 3, stray, 1, CONFIG_IMPORT_MERGE, NULL, NULL, &v, err), -1);
    assert_non_null(strstr(err, "override 0 is not of a rule imported"));
    v = version_of(s);

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
    assert_int_equal(assert_names(s, "b,c,d"), before);

    /* the empty set empties the store */
    assert_int_equal(
        config_store_import(s, NULL, 0, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), 0);
    assert_int_equal(v, before + 1);
    assert_int_equal(assert_names(s, ""), before + 1);
    assert_override(s, "b", "kb", 2, NULL);
    config_store_close(s);
}

/* "a,b" of a diff's list, for assertions. */
static const char *joined(char *const *names, size_t n)
{
    static char buf[256];
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "", names[i]);
    return buf;
}

/* A rules file owns the rules it imported: a later import of the file changes and removes those,
 * and never touches rules made one at a time; a merge removes nothing; the diff says what
 * happened, by name. */
static void test_import_modes(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    char err[CONFIG_STORE_ERR_MAX] = "";
    config_import_diff_t d;
    put_rule(s, "api_made", "X1");
    put_override(s, "api_made", "k", 1, "ok");

    config_rule_t first[] = {{"f1", "F1"}, {"f2", "F2"}};
    assert_int_equal(
        config_store_import(s, first, 2, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_string_equal(joined(d.added, d.nadded), "f1,f2");
    assert_int_equal(d.nchanged + d.nremoved, 0);
    assert_int_equal(d.kept, 1);
    config_import_diff_free(&d);

    /* the file drops f1, changes f2, adds f3: f1 goes, the API's rule stays */
    config_rule_t second[] = {{"f3", "F3"}, {"f2", "F2b"}};
    assert_int_equal(
        config_store_import(s, second, 2, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_string_equal(joined(d.added, d.nadded), "f3");
    assert_string_equal(joined(d.changed, d.nchanged), "f2");
    assert_string_equal(joined(d.removed, d.nremoved), "f1");
    assert_int_equal(d.kept, 1);
    config_import_diff_free(&d);
    assert_names(s, "api_made,f2,f3");
    assert_override(s, "api_made", "k", 1, "ok");

    /* a rule changed through the API is the API's now: the file no longer removes it */
    put_rule(s, "f3", "F3-api");
    config_rule_t third[] = {{"f2", "F2b"}};
    assert_int_equal(
        config_store_import(s, third, 1, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_int_equal(d.nadded + d.nchanged + d.nremoved, 0);
    assert_int_equal(d.kept, 2);
    config_import_diff_free(&d);
    assert_names(s, "api_made,f2,f3");

    /* a merge adds and changes, removes nothing; the same merge again changes nothing */
    int64_t v = version_of(s);
    config_rule_t merge[] = {{"f2", "F2c"}, {"m", "M"}};
    assert_int_equal(
        config_store_import(s, merge, 2, NULL, 0, CONFIG_IMPORT_MERGE, NULL, &d, NULL, err), 0);
    assert_string_equal(joined(d.added, d.nadded), "m");
    assert_string_equal(joined(d.changed, d.nchanged), "f2");
    assert_int_equal(d.nremoved, 0);
    config_import_diff_free(&d);
    assert_int_equal(version_of(s), v + 1);
    assert_int_equal(
        config_store_import(s, merge, 2, NULL, 0, CONFIG_IMPORT_MERGE, NULL, &d, NULL, err), 0);
    assert_int_equal(version_of(s), v + 1);
    config_import_diff_free(&d);

    /* replace: exactly the set given */
    config_rule_t only[] = {{"m", "M"}};
    assert_int_equal(
        config_store_import(s, only, 1, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, &d, NULL, err), 0);
    assert_string_equal(joined(d.removed, d.nremoved), "api_made,f2,f3");
    config_import_diff_free(&d);
    assert_names(s, "m");
    config_store_close(s);
}

/* Runs SQL on the file with a plain SQLite connection (what another program could do). */
static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("raw %s: %s", sql, msg);
    sqlite3_close(db);
}

/* A failure halfway through an import (a trigger refuses one rule) leaves every rule, override
 * and the version as they were. */
static void test_failed_import_rolls_back(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    char err[CONFIG_STORE_ERR_MAX] = "";
    int64_t v = -1;
    put_rule(s, "a", "A1");
    put_rule(s, "b", "B1");
    put_override(s, "a", "ka", 2, "oa");
    raw_exec(path, "CREATE TRIGGER refuse BEFORE INSERT ON rules WHEN NEW.name = 'zz' "
                   "BEGIN SELECT RAISE(ABORT, 'zz refused'); END;");

    /* deletes a and rewrites b before it reaches zz */
    config_rule_t set[] = {{"b", "B2"}, {"zz", "Z"}};
    assert_int_equal(
        config_store_import(s, set, 2, NULL, 0, CONFIG_IMPORT_REPLACE, NULL, NULL, &v, err), -1);
    assert_non_null(strstr(err, "sqlite: zz refused"));
    assert_non_null(strstr(err, "'zz'"));
    assert_int_equal(version_of(s), 3);
    assert_int_equal(assert_names(s, "a,b"), 3);
    assert_rule(s, "b", "B1");
    assert_override(s, "a", "ka", 2, "oa");

    /* a put refused the same way changes nothing either */
    assert_int_equal(config_store_put_rule(s, "zz", "Z", &v, err), -1);
    assert_non_null(strstr(err, "zz refused"));
    assert_int_equal(version_of(s), 3);
    /* and the handle keeps working */
    assert_int_equal(put_rule(s, "c", "C"), 4);
    config_store_close(s);
}

static void test_second_handle_sees_changes(void **unused)
{
    char path[256];
    config_store_t *a = open_new(path, sizeof(path));
    char url[300];
    snprintf(url, sizeof(url), "sqlite:%s", path);
    config_store_t *b = open_ok(url);
    assert_int_equal(version_of(b), 0);
    put_rule(a, "api", "{}");
    put_override(a, "api", "k\0", 2, "o");
    assert_int_equal(version_of(b), 2);
    assert_rule(b, "api", "{}");
    assert_override(b, "api", "k\0", 2, "o");
    assert_int_equal(put_rule(b, "api", "{\"v\":2}"), 3);
    assert_int_equal(version_of(a), 3);
    assert_rule(a, "api", "{\"v\":2}");
    config_store_close(a);
    config_store_close(b);
}

static void test_second_process_sees_changes(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    put_rule(s, "a", "A");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* the child: its own handle on the file (never the parent's connection) */
        char url[300], err[CONFIG_STORE_ERR_MAX];
        snprintf(url, sizeof(url), "sqlite://%s", path);
        config_store_t *c = NULL;
        int64_t v = 0;
        int ok = config_store_open(url, &c, err) == 0 && config_store_version(c, &v, err) == 0 &&
                 v == 1 && config_store_put_rule(c, "b", "B", &v, err) == 0 && v == 2 &&
                 config_store_put_override(c, "a", "\0k", 2, "O", &v, err) == 0 && v == 3;
        config_store_close(c);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(version_of(s), 3);
    assert_int_equal(assert_names(s, "a,b"), 3);
    assert_override(s, "a", "\0k", 2, "O");
    config_store_close(s);
}

typedef struct writer {
    const char *path;
    int rc;
    int64_t version;
    char err[CONFIG_STORE_ERR_MAX];
    int finished; /* set by the thread when its put returned */
} writer_t;

static void *write_rule(void *arg)
{
    writer_t *w = arg;
    config_store_t *s = NULL;
    w->rc = config_store_open(w->path, &s, w->err);
    if (w->rc == 0)
        w->rc = config_store_put_rule(s, "late", "{}", &w->version, w->err);
    config_store_close(s);
    __atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Another connection holds the write lock; our writer waits (busy timeout) and then succeeds,
 * after the other's change. */
static void test_writer_waits_for_other_transaction(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    put_rule(s, "first", "{}");

    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "BEGIN IMMEDIATE; INSERT INTO rules(name, json) VALUES ('raw', '{}');"
                     "UPDATE meta SET version = version + 1;",
                     NULL, NULL, NULL),
        SQLITE_OK);
    writer_t w = {.path = path, .rc = -9};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, write_rule, &w), 0);
    usleep(200 * 1000);
    /* it cannot have succeeded while the lock is held; it cannot have timed out yet either */
    assert_int_equal(__atomic_load_n(&w.finished, __ATOMIC_ACQUIRE), 0);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(pthread_join(thread, NULL), 0);
    sqlite3_close(db);

    if (w.rc != 0)
        fail_msg("writer: %s", w.err);
    assert_int_equal(w.version, 3); /* after the other connection's bump */
    assert_int_equal(assert_names(s, "first,late,raw"), 3);
    config_store_close(s);
}

static void test_not_a_database(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++)
        fputs("this is a rules file, not a database\n", f);
    fclose(f);
    config_store_t *s = (config_store_t *)&s;
    char err[CONFIG_STORE_ERR_MAX] = "";
    assert_int_equal(config_store_open(path, &s, err), -1);
    assert_non_null(strstr(err, "sqlite: "));
    assert_non_null(strstr(err, "not a database"));
    assert_non_null(strstr(err, path));
}

static void test_missing_directory(void **unused)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/no/such/dir/sluice.db", tmpdir);
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    assert_int_equal(config_store_open(path, &s, err), -1);
    assert_null(s);
    assert_non_null(strstr(err, "sqlite: unable to open database file"));
    assert_non_null(strstr(err, path));
}

static void test_newer_schema_refused(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    config_store_close(open_ok(path));
    raw_exec(path, "PRAGMA user_version = 99");
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    assert_int_equal(config_store_open(path, &s, err), -1);
    assert_non_null(strstr(err, "schema version 99"));
}

static void test_bad_urls(void **unused)
{
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    assert_int_equal(config_store_open("postgres://db.example/sluice", &s, err), -1);
    assert_non_null(strstr(err, "unsupported url"));
    assert_int_equal(config_store_open("sqlite:", &s, err), -1);
    assert_non_null(strstr(err, "empty path"));
    assert_int_equal(config_store_open("", &s, err), -1);
    assert_null(s);
}

/* A store written by a sluiced before rules had an origin opens and is upgraded: its rules
 * count as made through the API (a rules file never removes them). */
static void test_schema_1_upgraded(void **unused)
{
    char path[256];
    new_path(path, sizeof(path));
    raw_exec(path, "CREATE TABLE meta(id INTEGER PRIMARY KEY CHECK (id = 1),"
                   " version INTEGER NOT NULL);"
                   "INSERT INTO meta(id, version) VALUES (1, 7);"
                   "CREATE TABLE rules(name TEXT NOT NULL PRIMARY KEY, json TEXT NOT NULL)"
                   " WITHOUT ROWID;"
                   "CREATE TABLE overrides(rule TEXT NOT NULL, key BLOB NOT NULL,"
                   " json TEXT NOT NULL, PRIMARY KEY(rule, key)) WITHOUT ROWID;"
                   "INSERT INTO rules VALUES ('old', 'O');"
                   "PRAGMA user_version = 1;");
    config_store_t *s = open_ok(path);
    assert_int_equal(version_of(s), 7);
    assert_rule(s, "old", "O");
    char err[CONFIG_STORE_ERR_MAX] = "";
    config_import_diff_t d;
    config_rule_t file[] = {{"new", "N"}};
    assert_int_equal(
        config_store_import(s, file, 1, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_int_equal(d.nremoved, 0);
    assert_int_equal(d.kept, 1);
    config_import_diff_free(&d);
    assert_names(s, "new,old");
    config_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_store_is_empty),
        cmocka_unit_test(test_rule_crud_and_versions),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_foreach_override_order_and_limit),
        cmocka_unit_test(test_import),
        cmocka_unit_test(test_import_modes),
        cmocka_unit_test(test_schema_1_upgraded),
        cmocka_unit_test(test_failed_import_rolls_back),
        cmocka_unit_test(test_second_handle_sees_changes),
        cmocka_unit_test(test_second_process_sees_changes),
        cmocka_unit_test(test_writer_waits_for_other_transaction),
        cmocka_unit_test(test_not_a_database),
        cmocka_unit_test(test_missing_directory),
        cmocka_unit_test(test_newer_schema_refused),
        cmocka_unit_test(test_bad_urls),
    };
    return cmocka_run_group_tests(tests, group_setup, tmpdir_remove);
}
