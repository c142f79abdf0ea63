/*
 * config_pg.c - the config store on PostgreSQL (see config_store.h): the store many sluiced on
 * many hosts share.
 *
 * URLs: "postgresql://..." and "postgres://..." URIs and "host=... dbname=..." keyword strings,
 * read by libpq as every libpq program reads them (sslmode, passfile, PGPASSWORD and the other
 * PG* variables, service files).
 *
 * Schema, in the first schema of the connection's search_path (all names start with sluice_):
 *
 *   sluice_schema(version)                     one row: the schema version written
 *   sluice_meta(id = 1, version)               one row: the version of the whole store
 *   sluice_rules(name PRIMARY KEY, json, origin)            name COLLATE "C": byte order
 *   sluice_overrides(rule, key bytea, json, PRIMARY KEY(rule, key))   bytea: byte order
 *
 * sluiced creates and migrates it at open: under a transaction-scoped advisory lock (two
 * sluiced starting at once take turns), every migration the database has not had runs in order
 * in one transaction, and the version is written with them; a schema newer than this code knows
 * is refused. Only sluiced writes the schema; a database user who may not create tables gets a
 * message saying so.
 *
 * Every change is one transaction that first locks the version row (writers take turns, as
 * SQLite's BEGIN IMMEDIATE makes them), makes the change, and when something changed bumps the
 * version and sends NOTIFY sluice_config with it, both of which take effect at the commit. A
 * list of the rules is one statement, so it reads one snapshot: the rules and their version.
 */
#include "rules/config_pg_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/sluice.h"

#define PG_LOCK_TIMEOUT_MS 5000 /* how long a writer waits for another's transaction */

/* Migrations, in order: migration i takes the schema from version i to i + 1. Each statement is
 * run on its own (no values in any of them). Append, never edit. */
static const char *const migration_1[] = {
    "CREATE TABLE sluice_meta(id integer PRIMARY KEY CHECK (id = 1), version bigint NOT NULL)",
    "INSERT INTO sluice_meta(id, version) VALUES (1, 0)",
    "CREATE TABLE sluice_rules(name text COLLATE \"C\" PRIMARY KEY, json text NOT NULL,"
    " origin text NOT NULL DEFAULT 'api')",
    "CREATE TABLE sluice_overrides(rule text COLLATE \"C\" NOT NULL, key bytea NOT NULL,"
    " json text NOT NULL, PRIMARY KEY (rule, key))",
    NULL,
};

static const char *const *const migrations[] = {migration_1};

#define PG_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))
#define PG_SCHEMA_LOCK    "7526393411437891405" /* the advisory lock taken while migrating */

/* The handle behind a config_store_t of this store. */
static pg_store_t *of(config_store_t *base)
{
    return (pg_store_t *)base;
}

/* ---- the schema ---------------------------------------------------------------------------- */

/* The schema version written in the database: 0 when there is none (no sluice_schema table, or
 * no row yet), -1 with err when it cannot be read. `locked`: inside the migration's
 * transaction, where the table is created when missing. */
static int schema_read(pg_store_t *s, bool locked, const char *doing, char *err)
{
    if (locked && pg_run(s, "CREATE TABLE IF NOT EXISTS sluice_schema(version integer NOT NULL)", 0,
                         NULL, NULL, doing, err) != 0)
        return -1;
    PGresult *res =
        pg_exec(s, "SELECT to_regclass('sluice_schema') IS NOT NULL", 0, NULL, !locked, doing, err);
    if (res == NULL)
        return -1;
    bool exists = PQgetlength(res, 0, 0) == 1 && PQgetvalue(res, 0, 0)[0] != 0;
    PQclear(res);
    if (!exists)
        return 0;
    res =
        pg_exec(s, "SELECT max(version)::bigint FROM sluice_schema", 0, NULL, !locked, doing, err);
    if (res == NULL)
        return -1;
    int64_t v = PQgetisnull(res, 0, 0) ? 0 : pg_int8(res, 0, 0);
    PQclear(res);
    return v > INT32_MAX ? INT32_MAX : (int)v;
}

static int schema_newer(pg_store_t *s, int have, char *err)
{
    return config_fail(err,
                       "postgresql: %s has schema version %d; this sluiced knows up to %d "
                       "(written by a newer sluiced?)",
                       s->where, have, PG_SCHEMA_VERSION);
}

/* Runs the migrations from version `have` on, and records the new version. In the
 * transaction. */
static int schema_migrate(pg_store_t *s, int have, const char *doing, char *err)
{
    for (int m = have; m < PG_SCHEMA_VERSION; m++) {
        for (const char *const *sql = migrations[m]; *sql != NULL; sql++) {
            if (pg_run(s, *sql, 0, NULL, NULL, doing, err) != 0)
                return -1;
        }
    }
    char version[16];
    snprintf(version, sizeof(version), "%d", PG_SCHEMA_VERSION);
    pg_param_t p[] = {PG_TEXT(version)};
    if (pg_run(s, "DELETE FROM sluice_schema", 0, NULL, NULL, doing, err) != 0)
        return -1;
    return pg_run(s, "INSERT INTO sluice_schema(version) VALUES ($1::integer)", 1, p, NULL, doing,
                  err);
}

/* Creates or migrates the schema, or checks that it is the one this code knows. */
static int schema_ensure(pg_store_t *s, char *err)
{
    const char *doing = "reading the schema";
    int have = schema_read(s, false, doing, err);
    if (have < 0)
        return -1;
    if (have == PG_SCHEMA_VERSION)
        return 0;
    if (have > PG_SCHEMA_VERSION)
        return schema_newer(s, have, err);
    doing = "creating the schema";
    pg_param_t lock[] = {PG_TEXT(PG_SCHEMA_LOCK)};
    if (pg_tx_begin(s, false, NULL, doing, err) != 0)
        return -1;
    if (pg_run(s, "SELECT pg_advisory_xact_lock($1::bigint)", 1, lock, NULL, doing, err) != 0 ||
        (have = schema_read(s, true, doing, err)) < 0)
        goto fail;
    if (have > PG_SCHEMA_VERSION) {
        schema_newer(s, have, err);
        goto fail;
    }
    if (have < PG_SCHEMA_VERSION && schema_migrate(s, have, doing, err) != 0)
        goto fail;
    return pg_tx_finish(s, false, 0, NULL, doing, err);
fail:
    pg_tx_rollback(s);
    return -1;
}

/* ---- open and close ------------------------------------------------------------------------ */

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* postgresql:// and postgres:// URIs, and keyword strings libpq reads ("host=h dbname=d"); a
 * file path with '=' in it is none of these (libpq would not read it). */
static bool pg_accepts(const char *url)
{
    if (has_prefix(url, "postgresql://") || has_prefix(url, "postgres://"))
        return true;
    if (strchr(url, '=') == NULL || has_prefix(url, "sqlite:"))
        return false;
    PQconninfoOption *opts = PQconninfoParse(url, NULL);
    PQconninfoFree(opts);
    return opts != NULL;
}

static void pg_close(config_store_t *base)
{
    pg_store_t *s = of(base);
    pg_disconnect(s);
    free(s->conninfo);
    free(s);
}

extern const config_store_ops_t config_pg_ops;

static int pg_open(const char *url, config_store_t **out, char *err)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &perr);
    if (opts == NULL) {
        char line[160];
        snprintf(line, sizeof(line), "%s", perr != NULL ? perr : "out of memory");
        line[strcspn(line, "\n")] = '\0';
        PQfreemem(perr);
        return config_fail(err, "config store: postgresql: %s", line);
    }
    PQconninfoFree(opts);
    pg_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->conninfo = strdup(url)) == NULL) {
        free(s);
        return config_fail(err, "config store: out of memory");
    }
    s->base.ops = &config_pg_ops;
    s->lock_timeout_ms = PG_LOCK_TIMEOUT_MS;
    s->rng = (uint64_t)sl_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)s;
    s->rng |= 1;
    pg_describe_conninfo(s);
    if (pg_connect(s, "opening the config store", err) != 0) {
        pg_close(&s->base);
        return -1;
    }
    pg_describe_conninfo(s); /* what libpq connected to; fixed from now on (the watch reads it) */
    if (schema_ensure(s, err) != 0) {
        pg_close(&s->base);
        return -1;
    }
    *out = &s->base;
    return 0;
}

static const char *pg_describe(const config_store_t *base, char *buf)
{
    snprintf(buf, CONFIG_STORE_NAME_MAX, "%s", ((const pg_store_t *)base)->where);
    return buf;
}

static void pg_set_busy_timeout(config_store_t *base, int ms)
{
    pg_store_t *s = of(base);
    s->lock_timeout_ms = ms;
    if (s->conn != NULL) {
        char text[16], ignored[CONFIG_STORE_ERR_MAX];
        snprintf(text, sizeof(text), "%d", ms);
        pg_param_t p[] = {PG_TEXT(text)};
        pg_run(s, "SELECT set_config('lock_timeout', $1, false)", 1, p, NULL,
               "setting lock_timeout", ignored);
    }
}

static bool pg_busy(const config_store_t *s)
{
    return ((const pg_store_t *)s)->busy;
}

/* ---- reads --------------------------------------------------------------------------------- */

static int pg_version(config_store_t *base, int64_t *version, char *err)
{
    PGresult *res = pg_exec(of(base), "SELECT version FROM sluice_meta WHERE id = 1", 0, NULL, true,
                            "reading the version", err);
    if (res == NULL)
        return -1;
    int rows = PQntuples(res);
    if (rows == 1)
        *version = pg_int8(res, 0, 0);
    PQclear(res);
    return rows == 1 ? 0 : config_fail(err, "postgresql: sluice_meta has no version row");
}

static int pg_list_rules(config_store_t *base, config_rule_t **rules, size_t *n, int64_t *version,
                         char *err)
{
    const char *doing = "listing rules";
    /* one statement, one snapshot: the version and the rules of that version */
    PGresult *res = pg_exec(of(base),
                            "SELECT m.version, r.name, r.json FROM sluice_meta m"
                            " LEFT JOIN sluice_rules r ON true WHERE m.id = 1 ORDER BY r.name",
                            0, NULL, true, doing, err);
    if (res == NULL)
        return -1;
    int rows = PQntuples(res);
    config_rule_t *list = NULL;
    size_t count = 0, cap = 0;
    int rc = rows >= 1 ? 0 : config_fail(err, "postgresql: sluice_meta has no version row");
    for (int i = 0; rc == 0 && i < rows; i++) {
        if (!PQgetisnull(res, i, 1) && config_rules_push(&list, &count, &cap, PQgetvalue(res, i, 1),
                                                         PQgetvalue(res, i, 2)) != 0)
            rc = config_fail(err, "config store: out of memory (%s)", doing);
    }
    if (rc == 0) {
        *rules = list;
        *n = count;
        if (version != NULL)
            *version = pg_int8(res, 0, 0);
    } else {
        config_rules_free(list, count);
    }
    PQclear(res);
    return rc;
}

/* A one-row, one-column text query: its copy in *json, or CONFIG_STORE_NOTFOUND. */
static int query_text(pg_store_t *s, const char *sql, int n, const pg_param_t *p, char **json,
                      const char *doing, char *err)
{
    PGresult *res = pg_exec(s, sql, n, p, !s->in_tx, doing, err);
    if (res == NULL)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return CONFIG_STORE_NOTFOUND;
    }
    char *copy = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (copy == NULL)
        return config_fail(err, "config store: out of memory (%s)", doing);
    *json = copy;
    return 0;
}

static int pg_get_rule(config_store_t *base, const char *name, char **json, char *err)
{
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading rule '%.64s'", name);
    pg_param_t p[] = {PG_TEXT(name)};
    return query_text(of(base), "SELECT json FROM sluice_rules WHERE name = $1", 1, p, json, doing,
                      err);
}

static int pg_get_override(config_store_t *base, const char *rule, const void *key, size_t key_len,
                           char **json, char *err)
{
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading an override of rule '%.64s'", rule);
    pg_param_t p[] = {PG_TEXT(rule), PG_BYTES(key, key_len)};
    return query_text(of(base), "SELECT json FROM sluice_overrides WHERE rule = $1 AND key = $2", 2,
                      p, json, doing, err);
}

static int pg_foreach(config_store_t *base, const char *rule, const void *after, size_t after_len,
                      size_t limit, config_override_fn fn, void *arg, char *err)
{
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "listing the overrides of rule '%.64s'", rule);
    return pg_foreach_override(of(base), rule, after, after_len, limit, fn, arg, doing, err);
}

/* ---- changes ------------------------------------------------------------------------------- */

/* Runs a change statement in the open write transaction and ends it: bumped and committed when
 * it changed a row; for a delete (`notfound_if_none`) that found nothing, rolled back and
 * CONFIG_STORE_NOTFOUND. */
static int change_and_finish(pg_store_t *s, const char *sql, int n, const pg_param_t *p,
                             int64_t locked, bool notfound_if_none, int64_t *version,
                             const char *doing, char *err)
{
    long rows = 0;
    if (pg_run(s, sql, n, p, &rows, doing, err) != 0) {
        pg_tx_rollback(s);
        return -1;
    }
    if (rows == 0 && notfound_if_none) {
        pg_tx_rollback(s);
        return CONFIG_STORE_NOTFOUND;
    }
    return pg_tx_finish(s, rows > 0, locked, version, doing, err);
}

static int pg_put_rule(config_store_t *base, const char *name, const char *json, int64_t *version,
                       char *err)
{
    pg_store_t *s = of(base);
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "putting rule '%.64s'", name);
    int64_t locked = 0;
    if (pg_tx_begin(s, true, &locked, doing, err) != 0)
        return -1;
    pg_param_t p[] = {PG_TEXT(name), PG_TEXT(json)};
    /* an upsert that changes nothing (0 rows) when the JSON and the origin are the same */
    return change_and_finish(s,
                             "INSERT INTO sluice_rules AS r(name, json, origin)"
                             " VALUES ($1, $2, 'api') ON CONFLICT (name) DO UPDATE"
                             " SET json = excluded.json, origin = 'api'"
                             " WHERE r.json IS DISTINCT FROM excluded.json OR r.origin <> 'api'",
                             2, p, locked, false, version, doing, err);
}

static int pg_del_rule(config_store_t *base, const char *name, int64_t *version, char *err)
{
    pg_store_t *s = of(base);
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "deleting rule '%.64s'", name);
    int64_t locked = 0;
    bool found = false;
    if (pg_tx_begin(s, true, &locked, doing, err) != 0)
        return -1;
    if (pg_delete_rule(s, name, &found, doing, err) != 0) {
        pg_tx_rollback(s);
        return -1;
    }
    if (!found) {
        pg_tx_rollback(s);
        return CONFIG_STORE_NOTFOUND;
    }
    return pg_tx_finish(s, true, locked, version, doing, err);
}

static int pg_put_override(config_store_t *base, const char *rule, const void *key, size_t key_len,
                           const char *json, int64_t *version, char *err)
{
    pg_store_t *s = of(base);
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "putting an override of rule '%.64s'", rule);
    int64_t locked = 0;
    if (pg_tx_begin(s, true, &locked, doing, err) != 0)
        return -1;
    char *ignored = NULL;
    pg_param_t r[] = {PG_TEXT(rule)};
    int rc =
        query_text(s, "SELECT json FROM sluice_rules WHERE name = $1", 1, r, &ignored, doing, err);
    free(ignored);
    if (rc != 0) {
        if (rc == CONFIG_STORE_NOTFOUND)
            config_fail(err, "config store: put override: no rule '%.64s' in the store", rule);
        pg_tx_rollback(s);
        return -1;
    }
    pg_param_t p[] = {PG_TEXT(rule), PG_BYTES(key, key_len), PG_TEXT(json)};
    return change_and_finish(
        s,
        "INSERT INTO sluice_overrides AS o(rule, key, json) VALUES ($1, $2, $3)"
        " ON CONFLICT (rule, key) DO UPDATE SET json = excluded.json"
        " WHERE o.json IS DISTINCT FROM excluded.json",
        3, p, locked, false, version, doing, err);
}

static int pg_del_override(config_store_t *base, const char *rule, const void *key, size_t key_len,
                           int64_t *version, char *err)
{
    pg_store_t *s = of(base);
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "deleting an override of rule '%.64s'", rule);
    int64_t locked = 0;
    if (pg_tx_begin(s, true, &locked, doing, err) != 0)
        return -1;
    pg_param_t p[] = {PG_TEXT(rule), PG_BYTES(key, key_len)};
    return change_and_finish(s, "DELETE FROM sluice_overrides WHERE rule = $1 AND key = $2", 2, p,
                             locked, true, version, doing, err);
}

const config_store_ops_t config_pg_ops = {
    .name = "postgresql",
    .url_form = "postgresql://USER@HOST:PORT/DB or a libpq keyword string (\"host=H dbname=D\")",
    .accepts = pg_accepts,
    .open = pg_open,
    .close = pg_close,
    .describe = pg_describe,
    .set_busy_timeout = pg_set_busy_timeout,
    .busy = pg_busy,
    .check = NULL,
    .version = pg_version,
    .list_rules = pg_list_rules,
    .get_rule = pg_get_rule,
    .put_rule = pg_put_rule,
    .del_rule = pg_del_rule,
    .import = pg_import,
    .get_override = pg_get_override,
    .put_override = pg_put_override,
    .del_override = pg_del_override,
    .foreach_override = pg_foreach,
    .watch = pg_watch,
};
