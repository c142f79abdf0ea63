/*
 * config_sqlite.c - the config store on SQLite (see config_store.h).
 *
 * Schema (PRAGMA user_version = CONFIG_SCHEMA_VERSION):
 *
 *   meta(id = 1, version)                        one row: the version of the whole store
 *   rules(name PRIMARY KEY, json, origin)        WITHOUT ROWID; origin 'api' (made one at a
 *                                                time) or 'file' (imported from a rules file)
 *   overrides(rule, key BLOB, json, PRIMARY KEY(rule, key))   WITHOUT ROWID
 *
 * Text compares with SQLite's BINARY collation and blobs with memcmp, so rules list in byte
 * order of their names and overrides in byte order of their keys.
 *
 * The database runs in WAL mode (readers never block the writer nor the writer the readers),
 * synchronous=NORMAL (a commit is durable once the WAL is checkpointed or the next fsync; a
 * crash never corrupts) and a busy timeout, so several handles and processes may share a file.
 *
 * Every mutation is one BEGIN IMMEDIATE ... COMMIT: the write lock is taken first, the change is
 * made, and the version is bumped in the same transaction only when something changed (a put of
 * the same JSON, or an import of the same rule set, changes nothing and keeps the version). Any
 * failure rolls back, leaving the store as it was. Reads of more than one statement
 * (list_rules) run in one read transaction, so they see one version.
 *
 * Statements are prepared on first use and kept in the handle until config_store_close.
 */
#include "rules/config_sqlite_impl.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#define CONFIG_SCHEMA_VERSION  2    /* PRAGMA user_version this code writes and reads */
#define CONFIG_BUSY_TIMEOUT_MS 5000 /* how long a writer waits for another's transaction */

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN_READ] = "BEGIN",
    [ST_BEGIN_WRITE] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_VERSION] = "SELECT version FROM meta WHERE id = 1",
    [ST_BUMP] = "UPDATE meta SET version = version + 1 WHERE id = 1",
    [ST_LIST_RULES] = "SELECT name, json FROM rules ORDER BY name",
    [ST_LIST_NAMES] = "SELECT name, json, origin FROM rules ORDER BY name",
    [ST_GET_RULE] = "SELECT json FROM rules WHERE name = ?1",
    /* upserts that change nothing (0 rows) when the JSON and the origin are the same */
    [ST_PUT_RULE] = "INSERT INTO rules(name, json, origin) VALUES (?1, ?2, 'api') "
                    "ON CONFLICT(name) DO UPDATE SET json = excluded.json, origin = 'api' "
                    "WHERE json IS NOT excluded.json OR origin IS NOT 'api'",
    [ST_PUT_RULE_FROM] = "INSERT INTO rules(name, json, origin) VALUES (?1, ?2, ?3) "
                         "ON CONFLICT(name) DO UPDATE SET json = excluded.json, "
                         "origin = excluded.origin WHERE json IS NOT excluded.json "
                         "OR origin IS NOT excluded.origin",
    [ST_DEL_RULE] = "DELETE FROM rules WHERE name = ?1",
    [ST_DEL_RULE_OVERRIDES] = "DELETE FROM overrides WHERE rule = ?1",
    [ST_GET_OVERRIDE] = "SELECT json FROM overrides WHERE rule = ?1 AND key = ?2",
    [ST_PUT_OVERRIDE] = "INSERT INTO overrides(rule, key, json) VALUES (?1, ?2, ?3) "
                        "ON CONFLICT(rule, key) DO UPDATE SET json = excluded.json "
                        "WHERE json IS NOT excluded.json",
    [ST_DEL_OVERRIDE] = "DELETE FROM overrides WHERE rule = ?1 AND key = ?2",
    /* LIMIT -1 is no limit */
    [ST_LIST_OVERRIDES] = "SELECT key, json FROM overrides WHERE rule = ?1 ORDER BY key LIMIT ?2",
    [ST_LIST_OVERRIDES_AFTER] = ("SELECT key, json FROM overrides WHERE rule = ?1 AND key > ?3 "
                                 "ORDER BY key LIMIT ?2"),
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(id INTEGER PRIMARY KEY CHECK (id = 1),"
    " version INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO meta(id, version) VALUES (1, 0);"
    "CREATE TABLE IF NOT EXISTS rules(name TEXT NOT NULL PRIMARY KEY, json TEXT NOT NULL,"
    " origin TEXT NOT NULL DEFAULT 'api') WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS overrides(rule TEXT NOT NULL, key BLOB NOT NULL,"
    " json TEXT NOT NULL, PRIMARY KEY(rule, key)) WITHOUT ROWID;";

/* ---- errors ------------------------------------------------------------------------------ */

int cs_fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CONFIG_STORE_ERR_MAX, fmt, ap);
    va_end(ap);
    return -1;
}

/* "sqlite: <what SQLite said> (<what we were doing>)". */
int cs_fail_db(config_store_t *s, const char *doing, char *err)
{
    int code = sqlite3_errcode(s->db) & 0xff;
    s->busy = code == SQLITE_BUSY || code == SQLITE_LOCKED;
    return cs_fail(err, "sqlite: %s (%s)", sqlite3_errmsg(s->db), doing);
}

/* ---- statements -------------------------------------------------------------------------- */

/* Returns the statement, reset and with no bindings, or NULL with err. */
sqlite3_stmt *cs_stmt(config_store_t *s, enum stmt_id id, const char *doing, char *err)
{
    sqlite3_stmt *st = s->stmt[id];
    if (st == NULL) {
        if (sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) !=
            SQLITE_OK) {
            cs_fail_db(s, doing, err);
            return NULL;
        }
        s->stmt[id] = st;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

/* Resets a statement after use, so it holds no read lock. NULL (never prepared) does nothing. */
void cs_done(sqlite3_stmt *st)
{
    if (st == NULL)
        return;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Ends a use of st: `ok` says whether the last call on it (a step, a bind) succeeded; when not,
 * err gets SQLite's message first. Resets st either way. Returns 0 when ok, else -1. */
static int step_end(config_store_t *s, sqlite3_stmt *st, bool ok, const char *doing, char *err)
{
    if (!ok)
        cs_fail_db(s, doing, err);
    cs_done(st);
    return ok ? 0 : -1;
}

/* Steps a statement that returns no rows to completion. Returns 0 or -1 with err. */
int cs_exec_stmt(config_store_t *s, sqlite3_stmt *st, const char *doing, char *err)
{
    int rc = sqlite3_step(st);
    return step_end(s, st, rc == SQLITE_DONE || rc == SQLITE_ROW, doing, err);
}

static int exec_id(config_store_t *s, enum stmt_id id, const char *doing, char *err)
{
    sqlite3_stmt *st = cs_stmt(s, id, doing, err);
    return st == NULL ? -1 : cs_exec_stmt(s, st, doing, err);
}

int cs_bind_text(config_store_t *s, sqlite3_stmt *st, int i, const char *text, const char *doing,
                 char *err)
{
    if (sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC) != SQLITE_OK)
        return cs_fail_db(s, doing, err);
    return 0;
}

/* Binds key bytes as a blob; an empty key is a zero-length blob, never NULL. */
static int bind_key(config_store_t *s, sqlite3_stmt *st, int i, const void *key, size_t key_len,
                    const char *doing, char *err)
{
    if (sqlite3_bind_blob64(st, i, key_len ? key : "", key_len, SQLITE_STATIC) != SQLITE_OK)
        return cs_fail_db(s, doing, err);
    return 0;
}

/* Returns statement id with its parameters bound in order: ?1 = name, then the key when key is
 * not NULL, then json when not NULL (later ones, if any, are the caller's). NULL with err, and
 * the statement reset, when it cannot be prepared or bound. */
sqlite3_stmt *cs_bound(config_store_t *s, enum stmt_id id, const char *name,
                       const struct key_ref *key, const char *json, const char *doing, char *err)
{
    int i = 1;
    sqlite3_stmt *st = cs_stmt(s, id, doing, err);
    if (st == NULL || cs_bind_text(s, st, i++, name, doing, err) != 0 ||
        (key != NULL && bind_key(s, st, i++, key->ptr, key->len, doing, err) != 0) ||
        (json != NULL && cs_bind_text(s, st, i++, json, doing, err) != 0)) {
        cs_done(st);
        return NULL;
    }
    return st;
}

/* ---- transactions ------------------------------------------------------------------------ */

int cs_tx_begin(config_store_t *s, bool write, const char *doing, char *err)
{
    s->busy = false;
    if (write && config_store_check(s, err) != 0)
        return -1;
    return exec_id(s, write ? ST_BEGIN_WRITE : ST_BEGIN_READ, doing, err);
}

/* Undoes the open transaction, if SQLite has not already rolled it back. */
void cs_tx_rollback(config_store_t *s)
{
    if (!sqlite3_get_autocommit(s->db)) {
        char ignored[CONFIG_STORE_ERR_MAX];
        exec_id(s, ST_ROLLBACK, "rolling back", ignored);
    }
}

static int tx_commit(config_store_t *s, const char *doing, char *err)
{
    if (exec_id(s, ST_COMMIT, doing, err) != 0) {
        cs_tx_rollback(s);
        return -1;
    }
    return 0;
}

/* Reads the version inside or outside a transaction. */
static int read_version(config_store_t *s, int64_t *version, const char *doing, char *err)
{
    sqlite3_stmt *st = cs_stmt(s, ST_VERSION, doing, err);
    if (st == NULL)
        return -1;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *version = sqlite3_column_int64(st, 0);
        cs_done(st);
        return 0;
    }
    if (rc == SQLITE_DONE)
        cs_fail(err, "sqlite: the meta table has no version row (%s)", doing);
    else
        cs_fail_db(s, doing, err);
    cs_done(st);
    return -1;
}

/* Ends a write transaction: bumps the version when `changed`, commits, reports the version.
 * Rolls back on failure. */
int cs_tx_finish(config_store_t *s, bool changed, int64_t *version, const char *doing, char *err)
{
    int64_t v = 0;
    if ((changed && exec_id(s, ST_BUMP, doing, err) != 0) || read_version(s, &v, doing, err) != 0) {
        cs_tx_rollback(s);
        return -1;
    }
    if (tx_commit(s, doing, err) != 0)
        return -1;
    if (version != NULL)
        *version = v;
    return 0;
}

/* Ends a delete's write transaction: rolls back and returns CONFIG_STORE_NOTFOUND when `found`
 * is false (nothing was deleted), else bumps the version and commits as tx_finish does. */
static int tx_finish_delete(config_store_t *s, bool found, int64_t *version, const char *doing,
                            char *err)
{
    if (!found) {
        cs_tx_rollback(s);
        return CONFIG_STORE_NOTFOUND;
    }
    return cs_tx_finish(s, true, version, doing, err);
}

/* ---- open and close ---------------------------------------------------------------------- */

/* The file path of a store url: "PATH", "sqlite:PATH" or "sqlite://PATH". NULL for another
 * scheme ("postgres://..."). */
static const char *url_path(const char *url)
{
    if (strncmp(url, "sqlite://", 9) == 0)
        return url + 9;
    if (strncmp(url, "sqlite:", 7) == 0)
        return url + 7;
    const char *scheme_end = strstr(url, "://");
    if (scheme_end != NULL && strcspn(url, "/") > (size_t)(scheme_end - url))
        return NULL; /* "scheme://..." with a scheme that is not ours */
    return url;
}

/* Runs one pragma (or any SQL without bound values) and ignores the rows it returns. */
static int exec_sql(config_store_t *s, const char *sql, const char *doing, char *err)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        cs_fail(err, "sqlite: %s (%s)", msg ? msg : sqlite3_errmsg(s->db), doing);
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int read_user_version(config_store_t *s, int *out, const char *doing, char *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return cs_fail_db(s, doing, err);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int(st, 0);
    else
        cs_fail_db(s, doing, err);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

/* Creates the schema in a new file, or checks the version of an existing one. */
static int schema_ensure(config_store_t *s, const char *path, char *err)
{
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading the schema of '%s'", path);
    int have = 0;
    if (read_user_version(s, &have, doing, err) != 0)
        return -1;
    if (have == CONFIG_SCHEMA_VERSION)
        return 0;
    if (have > CONFIG_SCHEMA_VERSION || have < 0)
        return cs_fail(err,
                       "config store '%s' has schema version %d; this sluiced knows up to %d "
                       "(written by a newer sluiced?)",
                       path, have, CONFIG_SCHEMA_VERSION);

    /* version 0: a new file (or one a crash left before its first commit); version 1: rules
     * have no origin yet (every rule then counts as made through the API) */
    snprintf(doing, sizeof(doing), "creating the schema in '%s'", path);
    if (cs_tx_begin(s, true, doing, err) != 0)
        return -1;
    if (read_user_version(s, &have, doing, err) != 0)
        goto rollback;
    if (have == 0) {
        char sql[sizeof(schema_sql) + 40];
        snprintf(sql, sizeof(sql), "%sPRAGMA user_version = %d;", schema_sql,
                 CONFIG_SCHEMA_VERSION);
        if (exec_sql(s, sql, doing, err) != 0)
            goto rollback;
    } else if (have == 1) {
        snprintf(doing, sizeof(doing), "upgrading the schema of '%s' to version %d", path,
                 CONFIG_SCHEMA_VERSION);
        if (exec_sql(s,
                     "ALTER TABLE rules ADD COLUMN origin TEXT NOT NULL DEFAULT 'api';"
                     "PRAGMA user_version = 2;",
                     doing, err) != 0)
            goto rollback;
    } else if (have != CONFIG_SCHEMA_VERSION) {
        cs_fail(err, "config store '%s' has schema version %d; this sluiced knows up to %d", path,
                have, CONFIG_SCHEMA_VERSION);
        goto rollback;
    }
    return tx_commit(s, doing, err);
rollback:
    cs_tx_rollback(s);
    return -1;
}

int config_store_open(const char *url, config_store_t **out, char *err)
{
    if (url == NULL || out == NULL)
        return cs_fail(err, "config store: no url");
    const char *path = url_path(url);
    if (path == NULL)
        return cs_fail(err, "config store: unsupported url '%s' (want a path or sqlite:PATH)", url);
    if (*path == '\0')
        return cs_fail(err, "config store: empty path in url '%s'", url);

    config_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return cs_fail(err, "config store: out of memory");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "opening '%s'", path);
    int rc = sqlite3_open_v2(
        path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        if (s->db != NULL)
            cs_fail_db(s, doing, err);
        else
            cs_fail(err, "sqlite: %s (%s)", sqlite3_errstr(rc), doing);
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    if ((s->path = strdup(path)) == NULL) {
        cs_fail(err, "config store: out of memory");
        goto fail;
    }
    if (sqlite3_busy_timeout(s->db, CONFIG_BUSY_TIMEOUT_MS) != SQLITE_OK ||
        exec_sql(s, "PRAGMA journal_mode = WAL", doing, err) != 0 ||
        exec_sql(s, "PRAGMA synchronous = NORMAL", doing, err) != 0 ||
        schema_ensure(s, path, err) != 0)
        goto fail;
    struct stat st; /* the file exists now (the schema is in it) */
    if (stat(path, &st) == 0) {
        s->have_id = true;
        s->dev = st.st_dev;
        s->ino = st.st_ino;
    }
    *out = s;
    return 0;
fail:
    config_store_close(s);
    return -1;
}

void config_store_close(config_store_t *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->stmt[i]);
    sqlite3_close_v2(s->db);
    free(s->path);
    free(s);
}

void config_store_set_busy_timeout(config_store_t *s, int ms)
{
    sqlite3_busy_timeout(s->db, ms);
}

bool config_store_busy(const config_store_t *s)
{
    return s->busy;
}

int config_store_check(config_store_t *s, char *err)
{
    if (!s->have_id)
        return 0;
    struct stat st;
    if (stat(s->path, &st) != 0)
        return cs_fail(err,
                       "config store '%s' was deleted while sluiced runs: the rules in force stay, "
                       "changes are refused until the file is back or sluiced restarts",
                       s->path);
    if (st.st_dev != s->dev || st.st_ino != s->ino)
        return cs_fail(
            err,
            "config store '%s' was replaced by another file while sluiced runs: the rules "
            "in force stay, changes are refused until sluiced restarts",
            s->path);
    return 0;
}

/* ---- reads ------------------------------------------------------------------------------- */

int config_store_version(config_store_t *s, int64_t *version, char *err)
{
    return read_version(s, version, "reading the version", err);
}

void config_rules_free(config_rule_t *rules, size_t n)
{
    if (rules == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rules[i].name);
        free(rules[i].json);
    }
    free(rules);
}

/* Copies a text column (never NULL: the schema says NOT NULL; a NULL reads as ""). */
static char *column_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *text = sqlite3_column_text(st, col);
    return strdup(text ? (const char *)text : "");
}

/* Appends the row's (name, json) to a growing array. */
static int rules_push(config_rule_t **rules, size_t *n, size_t *cap, sqlite3_stmt *st)
{
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 16;
        config_rule_t *p = realloc(*rules, grown * sizeof(**rules));
        if (p == NULL)
            return -1;
        *rules = p;
        *cap = grown;
    }
    config_rule_t *r = &(*rules)[*n];
    r->name = column_dup(st, 0);
    r->json = column_dup(st, 1);
    (*n)++;
    return r->name != NULL && r->json != NULL ? 0 : -1;
}

int config_store_list_rules(config_store_t *s, config_rule_t **rules, size_t *n, int64_t *version,
                            char *err)
{
    const char *doing = "listing rules";
    config_rule_t *list = NULL;
    size_t count = 0, cap = 0;
    int64_t v = 0;
    if (cs_tx_begin(s, false, doing, err) != 0)
        return -1;
    sqlite3_stmt *st = NULL;
    if (read_version(s, &v, doing, err) != 0 ||
        (st = cs_stmt(s, ST_LIST_RULES, doing, err)) == NULL)
        goto fail;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (rules_push(&list, &count, &cap, st) != 0) {
            cs_fail(err, "config store: out of memory (%s)", doing);
            cs_done(st);
            goto fail;
        }
    }
    if (step_end(s, st, rc == SQLITE_DONE, doing, err) != 0)
        goto fail;
    if (tx_commit(s, doing, err) != 0)
        goto fail_released;
    *rules = list;
    *n = count;
    if (version != NULL)
        *version = v;
    return 0;
fail:
    cs_tx_rollback(s);
fail_released:
    config_rules_free(list, count);
    return -1;
}

/* Runs a one-row, one-column text query; CONFIG_STORE_NOTFOUND when there is no row. */
static int query_text(config_store_t *s, sqlite3_stmt *st, char **json, const char *doing,
                      char *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        cs_done(st);
        return CONFIG_STORE_NOTFOUND;
    }
    if (rc != SQLITE_ROW)
        return step_end(s, st, false, doing, err);
    char *copy = column_dup(st, 0);
    cs_done(st);
    if (copy == NULL)
        return cs_fail(err, "config store: out of memory (%s)", doing);
    *json = copy;
    return 0;
}

int config_store_get_rule(config_store_t *s, const char *name, char **json, char *err)
{
    if (name == NULL || json == NULL)
        return cs_fail(err, "config store: get rule: no name");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading rule '%.64s'", name);
    sqlite3_stmt *st = cs_bound(s, ST_GET_RULE, name, NULL, NULL, doing, err);
    return st == NULL ? -1 : query_text(s, st, json, doing, err);
}

int config_store_get_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              char **json, char *err)
{
    if (rule == NULL || json == NULL || (key == NULL && key_len > 0))
        return cs_fail(err, "config store: get override: no rule or key");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading an override of rule '%.64s'", rule);
    struct key_ref k = {key, key_len};
    sqlite3_stmt *st = cs_bound(s, ST_GET_OVERRIDE, rule, &k, NULL, doing, err);
    return st == NULL ? -1 : query_text(s, st, json, doing, err);
}

int config_store_foreach_override(config_store_t *s, const char *rule, size_t limit,
                                  config_override_fn fn, void *arg, char *err)
{
    return config_store_foreach_override_after(s, rule, NULL, 0, limit, fn, arg, err);
}

int config_store_foreach_override_after(config_store_t *s, const char *rule, const void *after,
                                        size_t after_len, size_t limit, config_override_fn fn,
                                        void *arg, char *err)
{
    if (rule == NULL || fn == NULL)
        return cs_fail(err, "config store: foreach override: no rule or callback");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "listing the overrides of rule '%.64s'", rule);
    enum stmt_id id = after != NULL ? ST_LIST_OVERRIDES_AFTER : ST_LIST_OVERRIDES;
    sqlite3_stmt *st = cs_bound(s, id, rule, NULL, NULL, doing, err);
    if (st == NULL)
        return -1;
    sqlite3_int64 lim = limit == 0 || limit > (size_t)INT64_MAX ? -1 : (sqlite3_int64)limit;
    if (sqlite3_bind_int64(st, 2, lim) != SQLITE_OK ||
        (after != NULL && bind_key(s, st, 3, after, after_len, doing, err) != 0))
        return step_end(s, st, false, doing, err);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const void *key = sqlite3_column_blob(st, 0);
        size_t key_len = (size_t)sqlite3_column_bytes(st, 0);
        const unsigned char *json = sqlite3_column_text(st, 1);
        if (fn(arg, key_len ? key : "", key_len, json ? (const char *)json : "") != 0) {
            cs_done(st);
            return 0;
        }
    }
    return step_end(s, st, rc == SQLITE_DONE, doing, err);
}

/* ---- changes ----------------------------------------------------------------------------- */

/* Runs change statement id with its parameters bound as cs_bound() does. *changed gets whether it
 * touched a row. Returns 0 or -1 with err; the statement is reset either way. */
int cs_change(config_store_t *s, enum stmt_id id, const char *name, const struct key_ref *key,
              const char *json, bool *changed, const char *doing, char *err)
{
    sqlite3_stmt *st = cs_bound(s, id, name, key, json, doing, err);
    if (st == NULL || cs_exec_stmt(s, st, doing, err) != 0)
        return -1;
    *changed = sqlite3_changes(s->db) > 0;
    return 0;
}

int config_store_put_rule(config_store_t *s, const char *name, const char *json, int64_t *version,
                          char *err)
{
    if (name == NULL || json == NULL)
        return cs_fail(err, "config store: put rule: no name or JSON");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "putting rule '%.64s'", name);
    if (cs_tx_begin(s, true, doing, err) != 0)
        return -1;
    bool changed = false;
    if (cs_change(s, ST_PUT_RULE, name, NULL, json, &changed, doing, err) != 0) {
        cs_tx_rollback(s);
        return -1;
    }
    return cs_tx_finish(s, changed, version, doing, err);
}

/* Deletes one rule and its overrides inside a write transaction; *found says if it was there. */
int cs_delete_rule(config_store_t *s, const char *name, bool *found, const char *doing, char *err)
{
    if (cs_change(s, ST_DEL_RULE, name, NULL, NULL, found, doing, err) != 0)
        return -1;
    if (!*found)
        return 0;
    bool ignored;
    return cs_change(s, ST_DEL_RULE_OVERRIDES, name, NULL, NULL, &ignored, doing, err);
}

int config_store_del_rule(config_store_t *s, const char *name, int64_t *version, char *err)
{
    if (name == NULL)
        return cs_fail(err, "config store: delete rule: no name");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "deleting rule '%.64s'", name);
    if (cs_tx_begin(s, true, doing, err) != 0)
        return -1;
    bool found = false;
    if (cs_delete_rule(s, name, &found, doing, err) != 0) {
        cs_tx_rollback(s);
        return -1;
    }
    return tx_finish_delete(s, found, version, doing, err);
}

/* Whether the rule exists (inside a transaction). */
static int rule_exists(config_store_t *s, const char *name, bool *exists, const char *doing,
                       char *err)
{
    sqlite3_stmt *st = cs_bound(s, ST_GET_RULE, name, NULL, NULL, doing, err);
    if (st == NULL)
        return -1;
    int rc = sqlite3_step(st);
    *exists = rc == SQLITE_ROW;
    return step_end(s, st, rc == SQLITE_ROW || rc == SQLITE_DONE, doing, err);
}

int config_store_put_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              const char *json, int64_t *version, char *err)
{
    if (rule == NULL || json == NULL || (key == NULL && key_len > 0))
        return cs_fail(err, "config store: put override: no rule, key or JSON");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "putting an override of rule '%.64s'", rule);
    if (cs_tx_begin(s, true, doing, err) != 0)
        return -1;
    bool exists = false, changed = false;
    if (rule_exists(s, rule, &exists, doing, err) != 0)
        goto fail;
    if (!exists) {
        cs_fail(err, "config store: put override: no rule '%.64s' in the store", rule);
        goto fail;
    }
    struct key_ref k = {key, key_len};
    if (cs_change(s, ST_PUT_OVERRIDE, rule, &k, json, &changed, doing, err) != 0)
        goto fail;
    return cs_tx_finish(s, changed, version, doing, err);
fail:
    cs_tx_rollback(s);
    return -1;
}

int config_store_del_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              int64_t *version, char *err)
{
    if (rule == NULL || (key == NULL && key_len > 0))
        return cs_fail(err, "config store: delete override: no rule or key");
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "deleting an override of rule '%.64s'", rule);
    if (cs_tx_begin(s, true, doing, err) != 0)
        return -1;
    bool found = false;
    struct key_ref k = {key, key_len};
    if (cs_change(s, ST_DEL_OVERRIDE, rule, &k, NULL, &found, doing, err) != 0) {
        cs_tx_rollback(s);
        return -1;
    }
    return tx_finish_delete(s, found, version, doing, err);
}
