/*
 * test_config_conformance.c - the config store conformance suite (tests/config_conformance.h)
 * run against every store: SQLite on files in a temporary directory, and PostgreSQL in a schema
 * of its own per case in the database SLUICE_TEST_PG names (a libpq URL or keyword string; its
 * user may create schemas). Without SLUICE_TEST_PG the PostgreSQL cases are skipped:
 * tests/integration/test_config_pg.sh starts a PostgreSQL and runs this program against it.
 */
#define _GNU_SOURCE
#include "config_conformance.h"

#include <unistd.h>

#include <libpq-fe.h>
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

/* ---- PostgreSQL ---------------------------------------------------------------------------- */

static const char *pg_base; /* SLUICE_TEST_PG, or NULL: the cases are skipped */
static int pg_schemas;      /* schemas made so far */

static void pg_quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Runs SQL (no values) on a connection of its own to url; fails the test on an error. Notices
 * (what DROP ... CASCADE dropped) are not printed. */
static void pg_raw(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect %s: %s", url, PQerrorMessage(c));
    PQsetNoticeProcessor(c, pg_quiet, NULL);
    PGresult *res = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(res);
    PQfinish(c);
}

/* The base URL with its search_path set to schema: the store's tables go there. */
static void pg_url_in(char *url, const char *schema)
{
    if (strstr(pg_base, "://") != NULL)
        snprintf(url, CONFORMANCE_URL_MAX, "%s%coptions=-csearch_path%%3D%s", pg_base,
                 strchr(pg_base, '?') != NULL ? '&' : '?', schema);
    else
        snprintf(url, CONFORMANCE_URL_MAX, "%s options='-csearch_path=%s'", pg_base, schema);
}

static int pg_fresh(char *url)
{
    char schema[64], sql[192];
    snprintf(schema, sizeof(schema), "conformance_%d_%d", (int)getpid(), ++pg_schemas);
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", schema,
             schema);
    pg_raw(pg_base, sql);
    pg_url_in(url, schema);
    return 0;
}

static void pg_refuse_rule(const char *url, const char *name)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "CREATE FUNCTION refuse_%s() RETURNS trigger LANGUAGE plpgsql AS "
             "$$BEGIN IF NEW.name = '%s' THEN RAISE EXCEPTION '%s refused'; END IF; "
             "RETURN NEW; END$$;"
             "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON sluice_rules "
             "FOR EACH ROW EXECUTE FUNCTION refuse_%s()",
             name, name, name, name);
    pg_raw(url, sql);
}

static void pg_set_schema(const char *url, int version)
{
    char sql[64];
    snprintf(sql, sizeof(sql), "UPDATE sluice_schema SET version = %d", version);
    pg_raw(url, sql);
}

static const conformance_store_t pg_store = {
    .name = "postgresql",
    .fresh = pg_fresh,
    .refuse_rule = pg_refuse_rule,
    .set_schema = pg_set_schema,
};

static int pg_setup(void **unused)
{
    conformance_set(&pg_store);
    return 0;
}

/* Drops every schema this run made. */
static int pg_teardown(void **unused)
{
    for (int i = 1; pg_base != NULL && i <= pg_schemas; i++) {
        char sql[96];
        snprintf(sql, sizeof(sql), "DROP SCHEMA conformance_%d_%d CASCADE", (int)getpid(), i);
        pg_raw(pg_base, sql);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest sqlite_tests[] = {CONFORMANCE_TESTS};
    int failed = cmocka_run_group_tests_name("config store conformance: sqlite", sqlite_tests,
                                             sqlite_setup, tmpdir_remove);
    pg_base = getenv("SLUICE_TEST_PG");
    if (pg_base == NULL || pg_base[0] == '\0') {
        printf("SLUICE_TEST_PG is not set: the PostgreSQL cases are not run here "
               "(tests/integration/test_config_pg.sh runs them against a PostgreSQL it starts)\n");
        return failed;
    }
    const struct CMUnitTest pg_tests[] = {CONFORMANCE_TESTS};
    failed += cmocka_run_group_tests_name("config store conformance: postgresql", pg_tests,
                                          pg_setup, pg_teardown);
    return failed;
}
