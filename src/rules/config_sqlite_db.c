/*
 * config_sqlite_db.c - the SQLite config store's statements and transactions (see
 * config_sqlite_impl.h; config_sqlite.c says what the store keeps and how).
 *
 * Statements are prepared on first use and kept in the handle until it is closed. Every mutation
 * is one BEGIN IMMEDIATE ... COMMIT: the write lock is taken first, the change is made, and the
 * version is bumped in the same transaction only when something changed. Any failure rolls back,
 * leaving the store as it was.
 */
#include "rules/config_sqlite_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /* a write that changes nothing: whether writes work again */
    [ST_TOUCH] = "UPDATE meta SET version = version WHERE id = 1",
};

/* ---- errors ------------------------------------------------------------------------------ */

/* "sqlite: <what SQLite said> (<what we were doing>)". */
int cs_fail_db(sqlite_store_t *s, const char *doing, char *err)
{
    if (s->db == NULL) {
        return config_fail(err, "%s", s->closed_why);
    }
    int code = sqlite3_errcode(s->db) & 0xff;
    s->busy = code == SQLITE_BUSY || code == SQLITE_LOCKED;
    config_fail(err, "sqlite: %s (%s)", sqlite3_errmsg(s->db), doing);
    /* a write the file refused (read-only, I/O, full): not writable until a write succeeds */
    if (s->writing && (code == SQLITE_READONLY || code == SQLITE_IOERR || code == SQLITE_FULL ||
                       code == SQLITE_CANTOPEN || code == SQLITE_PERM || code == SQLITE_CORRUPT ||
                       code == SQLITE_NOTADB)) {
        s->write_failed = true;
        snprintf(s->write_why, sizeof s->write_why, "%s", err);
    }
    return -1;
}

/* ---- statements -------------------------------------------------------------------------- */

/* Returns the statement, reset and with no bindings, or NULL with err. */
sqlite3_stmt *cs_stmt(sqlite_store_t *s, enum stmt_id id, const char *doing, char *err)
{
    sqlite3_stmt *st = s->stmt[id];
    if (s->db == NULL) {
        config_fail(err, "%s", s->closed_why);
        return NULL;
    }
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
int cs_step_end(sqlite_store_t *s, sqlite3_stmt *st, bool ok, const char *doing, char *err)
{
    if (!ok)
        cs_fail_db(s, doing, err);
    cs_done(st);
    return ok ? 0 : -1;
}

/* Steps a statement that returns no rows to completion. Returns 0 or -1 with err. */
int cs_exec_stmt(sqlite_store_t *s, sqlite3_stmt *st, const char *doing, char *err)
{
    int rc = sqlite3_step(st);
    return cs_step_end(s, st, rc == SQLITE_DONE || rc == SQLITE_ROW, doing, err);
}

int cs_exec_id(sqlite_store_t *s, enum stmt_id id, const char *doing, char *err)
{
    sqlite3_stmt *st = cs_stmt(s, id, doing, err);
    return st == NULL ? -1 : cs_exec_stmt(s, st, doing, err);
}

int cs_bind_text(sqlite_store_t *s, sqlite3_stmt *st, int i, const char *text, const char *doing,
                 char *err)
{
    if (sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC) != SQLITE_OK)
        return cs_fail_db(s, doing, err);
    return 0;
}

/* Binds key bytes as a blob; an empty key is a zero-length blob, never NULL. */
int cs_bind_key(sqlite_store_t *s, sqlite3_stmt *st, int i, const void *key, size_t key_len,
                const char *doing, char *err)
{
    if (sqlite3_bind_blob64(st, i, key_len ? key : "", key_len, SQLITE_STATIC) != SQLITE_OK)
        return cs_fail_db(s, doing, err);
    return 0;
}

/* Returns statement id with its parameters bound in order: ?1 = name, then the key when key is
 * not NULL, then json when not NULL (later ones, if any, are the caller's). NULL with err, and
 * the statement reset, when it cannot be prepared or bound. */
sqlite3_stmt *cs_bound(sqlite_store_t *s, enum stmt_id id, const char *name,
                       const struct key_ref *key, const char *json, const char *doing, char *err)
{
    int i = 1;
    sqlite3_stmt *st = cs_stmt(s, id, doing, err);
    if (st == NULL || cs_bind_text(s, st, i++, name, doing, err) != 0 ||
        (key != NULL && cs_bind_key(s, st, i++, key->ptr, key->len, doing, err) != 0) ||
        (json != NULL && cs_bind_text(s, st, i++, json, doing, err) != 0)) {
        cs_done(st);
        return NULL;
    }
    return st;
}

/* ---- transactions ------------------------------------------------------------------------ */

int cs_tx_begin(sqlite_store_t *s, bool write, const char *doing, char *err)
{
    s->busy = false;
    if (write && cs_check(s, err) != 0)
        return -1;
    if (write && cs_writable(s, err) != 0)
        return -1;
    s->writing = write;
    int rc = cs_exec_id(s, write ? ST_BEGIN_WRITE : ST_BEGIN_READ, doing, err);
    if (rc != 0)
        s->writing = false;
    return rc;
}

/* Undoes the open transaction, if SQLite has not already rolled it back. */
void cs_tx_rollback(sqlite_store_t *s)
{
    if (s->db != NULL && !sqlite3_get_autocommit(s->db)) {
        char ignored[CONFIG_STORE_ERR_MAX];
        cs_exec_id(s, ST_ROLLBACK, "rolling back", ignored);
    }
    s->writing = false;
}

int cs_tx_commit(sqlite_store_t *s, const char *doing, char *err)
{
    if (cs_exec_id(s, ST_COMMIT, doing, err) != 0) {
        cs_tx_rollback(s);
        return -1;
    }
    if (s->writing) {
        s->write_failed = false; /* a write went through */
        s->writing = false;
    }
    return 0;
}

/* Reads the version inside or outside a transaction. */
int cs_read_version(sqlite_store_t *s, int64_t *version, const char *doing, char *err)
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
        config_fail(err, "sqlite: the meta table has no version row (%s)", doing);
    else
        cs_fail_db(s, doing, err);
    cs_done(st);
    return -1;
}

/* Ends a write transaction: bumps the version when `changed`, commits, reports the version.
 * Rolls back on failure. */
int cs_tx_finish(sqlite_store_t *s, bool changed, int64_t *version, const char *doing, char *err)
{
    int64_t v = 0;
    if ((changed && cs_exec_id(s, ST_BUMP, doing, err) != 0) ||
        cs_read_version(s, &v, doing, err) != 0) {
        cs_tx_rollback(s);
        return -1;
    }
    if (cs_tx_commit(s, doing, err) != 0)
        return -1;
    if (version != NULL)
        *version = v;
    return 0;
}

int cs_check(sqlite_store_t *s, char *err)
{
    if (s->db == NULL)
        return config_fail(err, "%s", s->closed_why);
    if (!s->have_id)
        return 0;
    struct stat st;
    if (stat(s->path, &st) != 0)
        return config_fail(err,
                           "config store '%s' was deleted while sluiced runs: the rules in force "
                           "stay, changes are refused until a store file is put back (it is "
                           "opened at the next poll) or sluiced restarts",
                           s->path);
    if (st.st_dev != s->dev || st.st_ino != s->ino)
        return config_fail(err,
                           "config store '%s' was replaced by another file while sluiced runs: "
                           "the rules in force stay, changes are refused until the new file is "
                           "opened (at the next poll)",
                           s->path);
    return 0;
}

int cs_writable(sqlite_store_t *s, char *err)
{
    if (s->db == NULL)
        return config_fail(err, "%s", s->closed_why);
    if (sqlite3_db_readonly(s->db, "main") == 1)
        return config_fail(err,
                           "config store '%s' was opened read-only (the file was not writable "
                           "then): changes are refused until sluiced restarts with it writable",
                           s->path);
    if (s->have_id && access(s->path, W_OK) != 0)
        return config_fail(err,
                           "config store '%s' is not writable (%s): changes are refused until it "
                           "is",
                           s->path, strerror(errno));
    return 0;
}

/* ---- changes ----------------------------------------------------------------------------- */

int cs_change(sqlite_store_t *s, enum stmt_id id, const char *name, const struct key_ref *key,
              const char *json, bool *changed, const char *doing, char *err)
{
    sqlite3_stmt *st = cs_bound(s, id, name, key, json, doing, err);
    if (st == NULL || cs_exec_stmt(s, st, doing, err) != 0)
        return -1;
    *changed = sqlite3_changes(s->db) > 0;
    return 0;
}

int cs_delete_rule(sqlite_store_t *s, const char *name, bool *found, const char *doing, char *err)
{
    if (cs_change(s, ST_DEL_RULE, name, NULL, NULL, found, doing, err) != 0)
        return -1;
    if (!*found)
        return 0;
    bool ignored;
    return cs_change(s, ST_DEL_RULE_OVERRIDES, name, NULL, NULL, &ignored, doing, err);
}

int cs_foreach_override(sqlite_store_t *s, const char *rule, const void *after, size_t after_len,
                        size_t limit, config_override_fn fn, void *arg, const char *doing,
                        char *err)
{
    enum stmt_id id = after != NULL ? ST_LIST_OVERRIDES_AFTER : ST_LIST_OVERRIDES;
    sqlite3_stmt *st = cs_bound(s, id, rule, NULL, NULL, doing, err);
    if (st == NULL)
        return -1;
    sqlite3_int64 lim = limit == 0 || limit > (size_t)INT64_MAX ? -1 : (sqlite3_int64)limit;
    if (sqlite3_bind_int64(st, 2, lim) != SQLITE_OK ||
        (after != NULL && cs_bind_key(s, st, 3, after, after_len, doing, err) != 0))
        return cs_step_end(s, st, false, doing, err);
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
    return cs_step_end(s, st, rc == SQLITE_DONE, doing, err);
}
