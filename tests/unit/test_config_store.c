/*
 * test_config_store.c - what only the SQLite config store does, on real files in a temporary
 * directory: a second process on the same file, a writer waiting out another's transaction,
 * files that are not a store, the first schema upgraded, and URLs no store takes. What every
 * store does is the conformance suite's (test_config_conformance.c).
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

#include "config_conformance.h"
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

/* Opens a store on a fresh file; path[0..size) gets the file's path. */
static config_store_t *open_new(char *path, size_t size)
{
    new_path(path, size);
    return conf_open(path);
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

static void test_second_process_sees_changes(void **unused)
{
    char path[256];
    config_store_t *s = open_new(path, sizeof(path));
    conf_put(s, "a", "A");
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
    assert_int_equal(conf_version(s), 3);
    assert_int_equal(conf_names(s, "a,b"), 3);
    conf_ov_is(s, "a", "\0k", 2, "O");
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
    conf_put(s, "first", "{}");

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
    assert_int_equal(conf_names(s, "first,late,raw"), 3);
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

static void test_bad_urls(void **unused)
{
    config_store_t *s = NULL;
    char err[CONFIG_STORE_ERR_MAX] = "";
    assert_int_equal(config_store_open("mysql://db.example/sluice", &s, err), -1);
    assert_non_null(strstr(err, "unsupported url 'mysql://db.example/sluice'"));
    assert_non_null(strstr(err, "a path or sqlite:PATH"));
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
    config_store_t *s = conf_open(path);
    assert_int_equal(conf_version(s), 7);
    conf_rule_is(s, "old", "O");
    char err[CONFIG_STORE_ERR_MAX] = "";
    config_import_diff_t d;
    config_rule_t file[] = {{"new", "N"}};
    assert_int_equal(
        config_store_import(s, file, 1, NULL, 0, CONFIG_IMPORT_FILE, NULL, &d, NULL, err), 0);
    assert_int_equal(d.nremoved, 0);
    assert_int_equal(d.kept, 1);
    config_import_diff_free(&d);
    conf_names(s, "new,old");
    config_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_1_upgraded),
        cmocka_unit_test(test_second_process_sees_changes),
        cmocka_unit_test(test_writer_waits_for_other_transaction),
        cmocka_unit_test(test_not_a_database),
        cmocka_unit_test(test_missing_directory),
        cmocka_unit_test(test_bad_urls),
    };
    return cmocka_run_group_tests(tests, group_setup, tmpdir_remove);
}
