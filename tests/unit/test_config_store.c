/*
 * test_config_store.c - what only the SQLite config store does, on real files in a temporary
 * directory: a second process on the same file, a writer waiting out another's transaction,
 * files that are not a store, the first schema upgraded, URLs no store takes, and the file under
 * the store put back, replaced or made unwritable while it is open. What every
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
#include <sys/stat.h>
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

/* ---- the file under the store: put back, replaced, not writable ---------------------------- */

/* A copy of the store at path, made as a backup is (SQLite's VACUUM INTO, through a connection of
 * its own), at out. */
static void backup_to(const char *path, const char *out)
{
    char sql[600];
    snprintf(sql, sizeof sql, "VACUUM INTO '%s'", out);
    raw_exec(path, sql);
}

static int check_of(config_store_t *s, char *err)
{
    err[0] = '\0';
    return config_store_check(s, err);
}

/* A backup renamed over the store file: the next check opens it (CONFIG_STORE_REOPENED), its
 * rules are what is read, and a change goes into it, not into the old file. */
static void test_file_put_back_is_opened(void **unused)
{
    char path[256], backup[300], err[CONFIG_STORE_ERR_MAX];
    config_store_t *s = open_new(path, sizeof path);
    conf_put(s, "a", "A");
    snprintf(backup, sizeof backup, "%s.backup", path);
    backup_to(path, backup);
    conf_put(s, "b", "B"); /* after the backup */
    assert_int_equal(check_of(s, err), 0);
    assert_int_equal(rename(backup, path), 0);
    assert_int_equal(check_of(s, err), CONFIG_STORE_REOPENED);
    conf_names(s, "a");
    assert_int_equal(check_of(s, err), 0);
    conf_put(s, "c", "C");
    config_store_t *other = conf_open(path); /* what is in the file at the path now */
    conf_names(other, "a,c");
    config_store_close(other);
    config_store_close(s);
}

/* Deleted: -1, the rules in the deleted file are still read, no change is written; a file copied
 * back to the path: opened. */
static void test_deleted_then_put_back(void **unused)
{
    char path[256], backup[300], err[CONFIG_STORE_ERR_MAX];
    config_store_t *s = open_new(path, sizeof path);
    conf_put(s, "a", "A");
    snprintf(backup, sizeof backup, "%s.backup", path);
    backup_to(path, backup);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(check_of(s, err), -1);
    assert_non_null(strstr(err, "was deleted while sluiced runs"));
    conf_names(s, "a");
    int64_t v = 0;
    assert_int_equal(config_store_put_rule(s, "b", "B", &v, err), -1);
    assert_non_null(strstr(err, "was deleted while sluiced runs"));
    assert_int_equal(access(path, F_OK), -1); /* nothing made it again */
    assert_int_equal(link(backup, path), 0);
    assert_int_equal(check_of(s, err), CONFIG_STORE_REOPENED);
    conf_names(s, "a");
    conf_put(s, "b", "B");
    config_store_close(s);
}

/* A file that is no sluice store put in its place is not opened: the old file is still read,
 * changes are refused, saying why. */
static void test_foreign_file_not_opened(void **unused)
{
    char path[256], other[300], err[CONFIG_STORE_ERR_MAX];
    config_store_t *s = open_new(path, sizeof path);
    conf_put(s, "a", "A");
    snprintf(other, sizeof other, "%s.other", path);
    raw_exec(other, "CREATE TABLE t(x)");
    assert_int_equal(rename(other, path), 0);
    assert_int_equal(check_of(s, err), -1);
    assert_non_null(strstr(err, "which sluiced does not open: it holds no sluice config store"));
    conf_names(s, "a");
    int64_t v = 0;
    assert_int_equal(config_store_put_rule(s, "b", "B", &v, err), -1);
    assert_non_null(strstr(err, "was replaced by another file"));
    config_store_close(s);
}

/* Another program still has the old file open (its -wal is still there): the new file is not
 * opened, which would pair it with the old -wal; nothing is read meanwhile, each failure saying
 * why; once that program lets go, the next check opens it. */
static void test_put_back_waits_for_old_readers(void **unused)
{
    char path[256], backup[300], err[CONFIG_STORE_ERR_MAX];
    config_store_t *s = open_new(path, sizeof path);
    conf_put(s, "a", "A");
    snprintf(backup, sizeof backup, "%s.backup", path);
    backup_to(path, backup);
    conf_put(s, "b", "B");
    /* another program with the old file open: python3's sqlite3 holding a connection until
     * its stdin ends (a program of its own: SQLite's locks do not survive a fork) */
    int to[2], from[2];
    assert_int_equal(pipe(to), 0);
    assert_int_equal(pipe(from), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        execlp("python3", "python3", "-c",
               "import sqlite3, sys\n"
               "c = sqlite3.connect(sys.argv[1])\n"
               "c.execute('SELECT count(*) FROM rules').fetchall()\n"
               "print('ready', flush=True)\n"
               "sys.stdin.read()\n"
               "c.close()\n",
               path, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    char ready[8] = "";
    size_t got = 0;
    for (ssize_t n = 1; got < 6 && n > 0; got += (size_t)(n > 0 ? n : 0)) {
        n = read(from[0], ready + got, 6 - got); /* "ready\n", however it is written */
    }
    if (got != 6 || memcmp(ready, "ready\n", 6) != 0) {
        close(to[1]);
        waitpid(child, NULL, 0);
        print_message("skipped: python3 with sqlite3 could not hold the file open\n");
        config_store_close(s);
        return;
    }
    assert_int_equal(rename(backup, path), 0);
    assert_int_equal(check_of(s, err), -1);
    assert_non_null(strstr(err, "not opened while another program still has the old one open"));
    config_rule_t *rules = NULL;
    size_t n = 0;
    assert_int_equal(config_store_list_rules(s, &rules, &n, NULL, err), -1);
    assert_non_null(strstr(err, "still has the old one open"));
    assert_int_equal(check_of(s, err), -1); /* still held */
    close(to[1]);
    close(from[0]);
    int status = -1;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_int_equal(status, 0);
    assert_int_equal(check_of(s, err), CONFIG_STORE_REOPENED);
    conf_names(s, "a");
    config_store_close(s);
}

/* Makes the file unwritable (on) or writable again: its immutable flag (chattr +i), or where
 * that is not permitted and this process is not root, its mode. False when neither binds. */
static bool set_immutable(const char *path, bool on)
{
    static bool by_mode;
    char cmd[400];
    if (by_mode) {
        by_mode = on;
        return chmod(path, on ? 0444 : 0644) == 0;
    }
    snprintf(cmd, sizeof cmd, "chattr %si '%s' 2>/dev/null", on ? "+" : "-", path);
    if (system(cmd) == 0) {
        return true;
    }
    by_mode = on && geteuid() != 0 && chmod(path, 0444) == 0;
    return by_mode;
}

/* An immutable file (or, without the right to set that, a read-only mode): not writable, saying
 * why; a change is refused with that reason and nothing is written; writable again once the flag
 * is cleared. Skipped, and said so, as root without the right to use chattr. */
static void test_not_writable(void **unused)
{
    char path[256], err[CONFIG_STORE_ERR_MAX];
    config_store_t *s = open_new(path, sizeof path);
    conf_put(s, "a", "A");
    assert_int_equal(config_store_writable(s, err), 0);
    if (!set_immutable(path, true)) {
        print_message("skipped: chattr +i is not permitted here, and root writes any mode\n");
        config_store_close(s);
        return;
    }
    assert_int_equal(config_store_writable(s, err), -1);
    assert_true(strstr(err, "is not writable (Operation not permitted)") != NULL ||
                strstr(err, "is not writable (Permission denied)") != NULL);
    int64_t v = 0;
    assert_int_equal(config_store_put_rule(s, "b", "B", &v, err), -1);
    assert_non_null(strstr(err, "is not writable"));
    conf_names(s, "a");
    assert_true(set_immutable(path, false));
    assert_int_equal(config_store_writable(s, err), 0);
    conf_put(s, "b", "B");
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
        cmocka_unit_test(test_file_put_back_is_opened),
        cmocka_unit_test(test_deleted_then_put_back),
        cmocka_unit_test(test_foreign_file_not_opened),
        cmocka_unit_test(test_put_back_waits_for_old_readers),
        cmocka_unit_test(test_not_writable),
    };
    return cmocka_run_group_tests(tests, group_setup, tmpdir_remove);
}
