/*
 * test_rules_walk.c - which files of a directory rules_import_files reads (rules_import.h):
 * RULES_WALK_YAML its *.yaml and *.yml only (not subdirectories, not dot-files; a file with
 * another name is no error); RULES_WALK_ALL every regular file whatever its name, subdirectories
 * too, dot-files left out; RULES_WALK_DOTFILES dot-files too; in every mode a FIFO is never
 * opened (the test would block) and a link to a directory is not followed. The bounds: a tree
 * more than RULES_WALK_DEPTH_MAX directories deep or with more than RULES_WALK_FILES_MAX files
 * is refused naming the bound, and nothing is written.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/rules_import.h"
#include "tmpdir.h"

static char err[512];

/* Writes an envoyproxy/ratelimit file for domain `domain` at dir/name. */
static void domain_file(const char *dir, const char *name, const char *domain)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "domain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
            "requests_per_unit: 1}\n",
            domain);
    fclose(f);
}

static void mkdir_in(const char *dir, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", dir, name);
    assert_int_equal(mkdir(out, 0700), 0);
}

/* Imports dir with `walk` into a fresh store: the rules' names, sorted and joined by spaces, or
 * "error: ..." */
static void import_dir(const char *dir, rules_walk_t walk, char *out, size_t cap)
{
    char db[256];
    tmpdir_file(db, sizeof db, "store", ".db");
    config_store_t *store = NULL;
    char serr[CONFIG_STORE_ERR_MAX];
    assert_int_equal(config_store_open(db, &store, serr), 0);
    char *const paths[] = {(char *)dir};
    rules_import_opts_t opts = {.mode = CONFIG_IMPORT_REPLACE, .walk = walk};
    config_import_diff_t diff;
    if (rules_import_files(store, paths, 1, &opts, &diff, err, sizeof err) != 0) {
        snprintf(out, cap, "error: %s", err);
        config_store_close(store);
        return;
    }
    config_import_diff_free(&diff);
    config_rule_t *rows = NULL;
    size_t n = 0;
    int64_t version = 0;
    assert_int_equal(config_store_list_rules(store, &rows, &n, &version, serr), 0);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) { /* listed in name order */
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", i > 0 ? " " : "", rows[i].name);
    }
    config_rules_free(rows, n);
    config_store_close(store);
}

/* A tree of every kind: a.yaml, b.yml, x.conf, .dot.yaml, sub/deep/y, a FIFO, a link to a
 * directory (whose file must not be read twice) and a broken link. */
static void every_kind(char *top, size_t cap)
{
    char sub[300], deep[400], path[512];
    tmpdir_file(top, cap, "tree", "");
    assert_int_equal(mkdir(top, 0700), 0);
    domain_file(top, "a.yaml", "a");
    domain_file(top, "b.yml", "b");
    domain_file(top, "x.conf", "x");
    domain_file(top, ".dot.yaml", "dot");
    mkdir_in(top, "sub", sub, sizeof sub);
    mkdir_in(sub, "deep", deep, sizeof deep);
    domain_file(deep, "y", "y");
    snprintf(path, sizeof path, "%s/pipe", top);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/sublink", top);
    assert_int_equal(symlink("sub", path), 0);
    snprintf(path, sizeof path, "%s/broken.yaml", top);
    assert_int_equal(symlink("nowhere", path), 0);
}

static void test_which_files(void **unused)
{
    (void)unused;
    char top[256], got[1024];
    every_kind(top, sizeof top);
    import_dir(top, RULES_WALK_YAML, got, sizeof got);
    assert_string_equal(got, "a.k b.k");
    import_dir(top, RULES_WALK_ALL, got, sizeof got);
    assert_string_equal(got, "a.k b.k x.k y.k");
    import_dir(top, RULES_WALK_DOTFILES, got, sizeof got);
    assert_string_equal(got, "a.k b.k dot.k x.k y.k");
}

static void test_too_deep(void **unused)
{
    (void)unused;
    char top[256], dir[4096], got[1024];
    tmpdir_file(top, sizeof top, "deep", "");
    assert_int_equal(mkdir(top, 0700), 0);
    domain_file(top, "a.yaml", "a");
    snprintf(dir, sizeof dir, "%s", top);
    for (int i = 0; i < RULES_WALK_DEPTH_MAX; i++) { /* at the bound: read */
        size_t len = strlen(dir);
        snprintf(dir + len, sizeof dir - len, "/d");
        assert_int_equal(mkdir(dir, 0700), 0);
    }
    domain_file(dir, "z", "z");
    import_dir(top, RULES_WALK_ALL, got, sizeof got);
    assert_string_equal(got, "a.k z.k");
    size_t len = strlen(dir); /* one more: refused */
    snprintf(dir + len, sizeof dir - len, "/d");
    assert_int_equal(mkdir(dir, 0700), 0);
    import_dir(top, RULES_WALK_ALL, got, sizeof got);
    if (strstr(got, "is more than 16 directories deep") == NULL)
        fail_msg("%s", got);
    import_dir(top, RULES_WALK_YAML, got, sizeof got); /* yaml mode does not go down at all */
    assert_string_equal(got, "a.k");
}

static void test_too_many_files(void **unused)
{
    (void)unused;
    char top[256], name[32], got[1024];
    tmpdir_file(top, sizeof top, "many", "");
    assert_int_equal(mkdir(top, 0700), 0);
    for (int i = 0; i <= RULES_WALK_FILES_MAX; i++) {
        snprintf(name, sizeof name, "f%04d.yaml", i);
        domain_file(top, name, name);
    }
    import_dir(top, RULES_WALK_YAML, got, sizeof got);
    if (strstr(got, "error: ") != got || strstr(got, "more than 1000 files in it") == NULL)
        fail_msg("%s", got);
}

static int setup(void **state)
{
    (void)state;
    return tmpdir_create("walk");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_files),
        cmocka_unit_test(test_too_deep),
        cmocka_unit_test(test_too_many_files),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_remove);
}
