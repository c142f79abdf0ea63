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
 * Statements and transactions are config_sqlite_db.c's, imports config_sqlite_import.c's.
 */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "rules/config_sqlite_impl.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_SCHEMA_VERSION  2    /* PRAGMA user_version this code writes and reads */
#define CONFIG_BUSY_TIMEOUT_MS 5000 /* how long a writer waits for another's transaction */

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(id INTEGER PRIMARY KEY CHECK (id = 1),"
    " version INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO meta(id, version) VALUES (1, 0);"
    "CREATE TABLE IF NOT EXISTS rules(name TEXT NOT NULL PRIMARY KEY, json TEXT NOT NULL,"
    " origin TEXT NOT NULL DEFAULT 'api') WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS overrides(rule TEXT NOT NULL, key BLOB NOT NULL,"
    " json TEXT NOT NULL, PRIMARY KEY(rule, key)) WITHOUT ROWID;";

/* The handle behind a config_store_t of this store. */
static sqlite_store_t *of(config_store_t *base)
{
    return (sqlite_store_t *)base;
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

static bool sqlite_accepts(const char *url)
{
    return url_path(url) != NULL;
}

/* Runs one pragma (or any SQL without bound values) and ignores the rows it returns. */
static int exec_sql(sqlite_store_t *s, const char *sql, const char *doing, char *err)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        config_fail(err, "sqlite: %s (%s)", msg ? msg : sqlite3_errmsg(s->db), doing);
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int read_user_version(sqlite_store_t *s, int *out, const char *doing, char *err)
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
static int schema_ensure(sqlite_store_t *s, const char *path, char *err)
{
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading the schema of '%s'", path);
    int have = 0;
    if (read_user_version(s, &have, doing, err) != 0)
        return -1;
    if (have == CONFIG_SCHEMA_VERSION)
        return 0;
    if (have > CONFIG_SCHEMA_VERSION || have < 0)
        return config_fail(err,
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
        config_fail(err, "config store '%s' has schema version %d; this sluiced knows up to %d",
                    path, have, CONFIG_SCHEMA_VERSION);
        goto rollback;
    }
    return cs_tx_commit(s, doing, err);
rollback:
    cs_tx_rollback(s);
    return -1;
}

/* Closes the connection (its statements first). */
static void db_disconnect(sqlite_store_t *s)
{
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(s->stmt[i]);
        s->stmt[i] = NULL;
    }
    sqlite3_close_v2(s->db);
    s->db = NULL;
    s->writing = false;
}

static void sqlite_close(config_store_t *base)
{
    sqlite_store_t *s = of(base);
    db_disconnect(s);
    free(s->path);
    free(s);
}

/* Connects to the file at s->path (create: it may be made, with the schema; else it must be
 * there with the schema, and none is made) and records which file it is. */
static int db_connect(sqlite_store_t *s, bool create, char *err)
{
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "opening '%s'", s->path);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        if (s->db != NULL)
            cs_fail_db(s, doing, err);
        else
            config_fail(err, "sqlite: %s (%s)", sqlite3_errstr(rc), doing);
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    int have = 0;
    if (sqlite3_busy_timeout(s->db, s->busy_ms) != SQLITE_OK ||
        exec_sql(s, "PRAGMA journal_mode = WAL", doing, err) != 0 ||
        exec_sql(s, "PRAGMA synchronous = NORMAL", doing, err) != 0 ||
        (!create && read_user_version(s, &have, doing, err) != 0))
        goto fail;
    if (!create && have == 0) {
        config_fail(err, "'%s' holds no sluice config store (no schema)", s->path);
        goto fail;
    }
    if (schema_ensure(s, s->path, err) != 0)
        goto fail;
    struct stat st; /* the file exists now (the schema is in it) */
    s->have_id = stat(s->path, &st) == 0;
    s->dev = s->have_id ? st.st_dev : 0;
    s->ino = s->have_id ? st.st_ino : 0;
    return 0;
fail:
    db_disconnect(s);
    return -1;
}

extern const config_store_ops_t config_sqlite_ops;

static int sqlite_open(const char *url, config_store_t **out, char *err)
{
    const char *path = url_path(url);
    if (path == NULL)
        return config_fail(err, "config store: unsupported url '%s' (want a path or sqlite:PATH)",
                           url);
    if (*path == '\0')
        return config_fail(err, "config store: empty path in url '%s'", url);

    sqlite_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->path = strdup(path)) == NULL) {
        free(s);
        return config_fail(err, "config store: out of memory");
    }
    s->base.ops = &config_sqlite_ops;
    s->busy_ms = CONFIG_BUSY_TIMEOUT_MS;
    if (db_connect(s, true, err) != 0) {
        sqlite_close(&s->base);
        return -1;
    }
    *out = &s->base;
    return 0;
}

static const char *sqlite_describe(const config_store_t *base, char *buf)
{
    snprintf(buf, CONFIG_STORE_NAME_MAX, "sqlite %s", ((const sqlite_store_t *)base)->path);
    return buf;
}

static void sqlite_set_busy_timeout(config_store_t *s, int ms)
{
    of(s)->busy_ms = ms;
    if (of(s)->db != NULL)
        sqlite3_busy_timeout(of(s)->db, ms);
}

static bool sqlite_busy(const config_store_t *s)
{
    return ((const sqlite_store_t *)s)->busy;
}

/* ---- a file put in the store's place ------------------------------------------------------ */

/* The inode of path's "-wal" file, or 0 when there is none. */
static ino_t wal_inode(const char *path)
{
    char wal[4096];
    struct stat st;
    if (snprintf(wal, sizeof wal, "%s-wal", path) >= (int)sizeof wal || stat(wal, &st) != 0)
        return 0;
    return st.st_ino;
}

/* Whether the file at path is a store this code opens, read from its header without SQLite
 * (which would pair it with the old file's -wal): "SQLite format 3", and a user_version (bytes
 * 60..63, big-endian) of 1..CONFIG_SCHEMA_VERSION. */
static int header_check(const char *path, char *why, size_t cap)
{
    unsigned char h[64];
    FILE *f = fopen(path, "rb");
    size_t n = f != NULL ? fread(h, 1, sizeof h, f) : 0;
    if (f != NULL)
        fclose(f);
    if (n < sizeof h || memcmp(h, "SQLite format 3", 16) != 0) {
        snprintf(why, cap, "it is not an SQLite database");
        return -1;
    }
    uint32_t v = (uint32_t)h[60] << 24 | (uint32_t)h[61] << 16 | (uint32_t)h[62] << 8 | h[63];
    if (v < 1 || v > CONFIG_SCHEMA_VERSION) {
        snprintf(why, cap,
                 "it holds no sluice config store of a schema this sluiced knows "
                 "(schema version %u)",
                 v);
        return -1;
    }
    return 0;
}

/*
 * Whether the old file's -wal and -shm (still at the path's names: SQLite does not checkpoint
 * and delete them when it closes a file that was moved or deleted) are used by no connection
 * any more; if so they are deleted, so that SQLite does not read them as the new file's (which
 * would corrupt it). Every SQLite connection holds a read lock on the -shm's "dead man switch"
 * byte, offset 128 (sqlite.org/walformat.html) while it has the file open: a write lock there,
 * taken as an open file description lock (which conflicts with every other lock, this
 * process's included), proves there is none.
 */
static bool old_wal_released(const char *path)
{
#ifdef F_OFD_SETLK
    char wal[4096], shm[4096];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    int fd = open(shm, O_RDWR | O_CLOEXEC);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 128, .l_len = 1};
    if (fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        close(fd);
        return false;
    }
    unlink(wal);
    unlink(shm);
    if (fd >= 0)
        close(fd); /* the lock goes with it */
    return true;
#else
    (void)path;
    return false;
#endif
}

/*
 * The file put in the old one's place is opened, once the old file's -wal (its inode recorded
 * when the old file was let go) is gone, is another file, or is used by no connection any more
 * (then deleted): while another program still has the old file open, SQLite opening the new
 * one would read the old -wal as the new file's.
 */
static int reconnect(sqlite_store_t *s, char *err)
{
    ino_t wal = wal_inode(s->path);
    if (wal != 0 && wal == s->old_wal && !old_wal_released(s->path)) {
        config_fail(s->closed_why,
                    "config store '%s' was replaced by another file, not opened while another "
                    "program still has the old one open (its '%s-wal' is still there): the "
                    "rules in force stay, changes are refused; close that program (sluiced "
                    "opens the new file at its next poll)",
                    s->path, s->path);
        return config_fail(err, "%s", s->closed_why);
    }
    char cerr[CONFIG_STORE_ERR_MAX];
    if (db_connect(s, false, cerr) != 0) {
        config_fail(s->closed_why,
                    "config store '%s' was replaced by another file, which could not be opened "
                    "(%s): the rules in force stay, changes are refused",
                    s->path, cerr);
        return config_fail(err, "%s", s->closed_why);
    }
    s->old_wal = 0;
    return CONFIG_STORE_REOPENED;
}

/* config_store_check: the file opened still at its path (0); deleted (-1: the old file is read
 * still); another file in its place: opened instead, when it is a store this code opens. */
static int sqlite_check(config_store_t *base, char *err)
{
    sqlite_store_t *s = of(base);
    if (s->db == NULL)
        return reconnect(s, err);
    if (cs_check(s, err) == 0)
        return 0;
    struct stat st;
    if (stat(s->path, &st) != 0)
        return -1; /* deleted (err says so): the old file is still read */
    char why[CONFIG_STORE_ERR_MAX];
    if (header_check(s->path, why, sizeof why) != 0)
        return config_fail(err,
                           "config store '%s' was replaced by another file, which sluiced does "
                           "not open: %s; the rules in force stay, changes are refused",
                           s->path, why);
    s->old_wal = wal_inode(s->path);
    db_disconnect(s); /* checkpoints the old file and deletes its -wal, if it is the last */
    return reconnect(s, err);
}

static int sqlite_writable(config_store_t *base, char *err)
{
    sqlite_store_t *s = of(base);
    if (cs_check(s, err) != 0 || cs_writable(s, err) != 0)
        return -1;
    if (!s->write_failed)
        return 0;
    /* the last write failed: try one that changes nothing, to know when it works again */
    const char *doing = "trying a write";
    if (cs_tx_begin(s, true, doing, err) != 0 || cs_exec_id(s, ST_TOUCH, doing, err) != 0 ||
        cs_tx_commit(s, doing, err) != 0) {
        cs_tx_rollback(s);
        if (s->busy)
            return config_fail(err, "%s", s->write_why); /* locked: nothing learnt */
        return -1;
    }
    return 0;
}

/* ---- reads ------------------------------------------------------------------------------- */

static int sqlite_version(config_store_t *s, int64_t *version, char *err)
{
    return cs_read_version(of(s), version, "reading the version", err);
}

/* A text column (never NULL: the schema says NOT NULL; a NULL reads as ""). */
static const char *column_text(sqlite3_stmt *st, int col)
{
    const unsigned char *text = sqlite3_column_text(st, col);
    return text ? (const char *)text : "";
}

static int sqlite_list_rules(config_store_t *base, config_rule_t **rules, size_t *n,
                             int64_t *version, char *err)
{
    sqlite_store_t *s = of(base);
    const char *doing = "listing rules";
    config_rule_t *list = NULL;
    size_t count = 0, cap = 0;
    int64_t v = 0;
    if (cs_tx_begin(s, false, doing, err) != 0)
        return -1;
    sqlite3_stmt *st = NULL;
    if (cs_read_version(s, &v, doing, err) != 0 ||
        (st = cs_stmt(s, ST_LIST_RULES, doing, err)) == NULL)
        goto fail;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (config_rules_push(&list, &count, &cap, column_text(st, 0), column_text(st, 1)) != 0) {
            config_fail(err, "config store: out of memory (%s)", doing);
            cs_done(st);
            goto fail;
        }
    }
    if (cs_step_end(s, st, rc == SQLITE_DONE, doing, err) != 0)
        goto fail;
    if (cs_tx_commit(s, doing, err) != 0)
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
static int query_text(sqlite_store_t *s, sqlite3_stmt *st, char **json, const char *doing,
                      char *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        cs_done(st);
        return CONFIG_STORE_NOTFOUND;
    }
    if (rc != SQLITE_ROW)
        return cs_step_end(s, st, false, doing, err);
    char *copy = strdup(column_text(st, 0));
    cs_done(st);
    if (copy == NULL)
        return config_fail(err, "config store: out of memory (%s)", doing);
    *json = copy;
    return 0;
}

static int sqlite_get_rule(config_store_t *base, const char *name, char **json, char *err)
{
    sqlite_store_t *s = of(base);
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading rule '%.64s'", name);
    sqlite3_stmt *st = cs_bound(s, ST_GET_RULE, name, NULL, NULL, doing, err);
    return st == NULL ? -1 : query_text(s, st, json, doing, err);
}

static int sqlite_get_override(config_store_t *base, const char *rule, const void *key,
                               size_t key_len, char **json, char *err)
{
    sqlite_store_t *s = of(base);
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "reading an override of rule '%.64s'", rule);
    struct key_ref k = {key, key_len};
    sqlite3_stmt *st = cs_bound(s, ST_GET_OVERRIDE, rule, &k, NULL, doing, err);
    return st == NULL ? -1 : query_text(s, st, json, doing, err);
}

static int sqlite_foreach_override(config_store_t *base, const char *rule, const void *after,
                                   size_t after_len, size_t limit, config_override_fn fn, void *arg,
                                   char *err)
{
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "listing the overrides of rule '%.64s'", rule);
    return cs_foreach_override(of(base), rule, after, after_len, limit, fn, arg, doing, err);
}

/* ---- changes ----------------------------------------------------------------------------- */

/* Ends a delete's write transaction: rolls back and returns CONFIG_STORE_NOTFOUND when `found`
 * is false (nothing was deleted), else bumps the version and commits as cs_tx_finish does. */
static int tx_finish_delete(sqlite_store_t *s, bool found, int64_t *version, const char *doing,
                            char *err)
{
    if (!found) {
        cs_tx_rollback(s);
        return CONFIG_STORE_NOTFOUND;
    }
    return cs_tx_finish(s, true, version, doing, err);
}

static int sqlite_put_rule(config_store_t *base, const char *name, const char *json,
                           int64_t *version, char *err)
{
    sqlite_store_t *s = of(base);
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

static int sqlite_del_rule(config_store_t *base, const char *name, int64_t *version, char *err)
{
    sqlite_store_t *s = of(base);
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
static int rule_exists(sqlite_store_t *s, const char *name, bool *exists, const char *doing,
                       char *err)
{
    sqlite3_stmt *st = cs_bound(s, ST_GET_RULE, name, NULL, NULL, doing, err);
    if (st == NULL)
        return -1;
    int rc = sqlite3_step(st);
    *exists = rc == SQLITE_ROW;
    return cs_step_end(s, st, rc == SQLITE_ROW || rc == SQLITE_DONE, doing, err);
}

static int sqlite_put_override(config_store_t *base, const char *rule, const void *key,
                               size_t key_len, const char *json, int64_t *version, char *err)
{
    sqlite_store_t *s = of(base);
    char doing[CONFIG_DOING_MAX];
    snprintf(doing, sizeof(doing), "putting an override of rule '%.64s'", rule);
    if (cs_tx_begin(s, true, doing, err) != 0)
        return -1;
    bool exists = false, changed = false;
    if (rule_exists(s, rule, &exists, doing, err) != 0)
        goto fail;
    if (!exists) {
        config_fail(err, "config store: put override: no rule '%.64s' in the store", rule);
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

static int sqlite_del_override(config_store_t *base, const char *rule, const void *key,
                               size_t key_len, int64_t *version, char *err)
{
    sqlite_store_t *s = of(base);
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

const config_store_ops_t config_sqlite_ops = {
    .name = "sqlite",
    .url_form = "a path or sqlite:PATH",
    .accepts = sqlite_accepts,
    .open = sqlite_open,
    .close = sqlite_close,
    .describe = sqlite_describe,
    .set_busy_timeout = sqlite_set_busy_timeout,
    .busy = sqlite_busy,
    .check = sqlite_check,
    .writable = sqlite_writable,
    .version = sqlite_version,
    .list_rules = sqlite_list_rules,
    .get_rule = sqlite_get_rule,
    .put_rule = sqlite_put_rule,
    .del_rule = sqlite_del_rule,
    .import = cs_import,
    .get_override = sqlite_get_override,
    .put_override = sqlite_put_override,
    .del_override = sqlite_del_override,
    .foreach_override = sqlite_foreach_override,
};
