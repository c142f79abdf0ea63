/*
 * test_config_conformance.c - the config store conformance suite (tests/config_conformance.h)
 * run against every store: SQLite on files in a temporary directory.
 */
#define _GNU_SOURCE
#include "config_conformance.h"

#include <sqlite3.h>

#include "tmpdir.h"

/* ---- SQLite -------------------------------------------------------------------------------- */

static int sqlite_fresh(char *url)
{
    tmpdir_file(url, CONFORMANCE_URL_MAX, "store", ".db");
    return 0;
}

/* Runs SQL on the file with a plain SQLite connection (what another program could do). */
static void sqlite_raw(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("raw %s: %s", sql, msg);
    sqlite3_close(db);
}

static void sqlite_refuse_rule(const char *url, const char *name)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "CREATE TRIGGER refuse_ins BEFORE INSERT ON rules WHEN NEW.name = '%s' "
             "BEGIN SELECT RAISE(ABORT, '%s refused'); END;"
             "CREATE TRIGGER refuse_upd BEFORE UPDATE ON rules WHEN NEW.name = '%s' "
             "BEGIN SELECT RAISE(ABORT, '%s refused'); END;",
             name, name, name, name);
    sqlite_raw(url, sql);
}

static void sqlite_set_schema(const char *url, int version)
{
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", version);
    sqlite_raw(url, sql);
}

static const conformance_store_t sqlite_store = {
    .name = "sqlite",
    .fresh = sqlite_fresh,
    .refuse_rule = sqlite_refuse_rule,
    .set_schema = sqlite_set_schema,
};

static int sqlite_setup(void **unused)
{
    conformance_set(&sqlite_store);
    return tmpdir_create("conformance");
}

int main(void)
{
    const struct CMUnitTest tests[] = {CONFORMANCE_TESTS};
    return cmocka_run_group_tests_name("config store conformance: sqlite", tests, sqlite_setup,
                                       tmpdir_remove);
}
