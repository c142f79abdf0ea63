/*
 * config_sqlite_impl.h - what the SQLite config store's files share: the handle, the statements
 * and the helpers for running them in transactions. config_sqlite_db.c: statements,
 * transactions and the changes an import makes too; config_sqlite_import.c: imports;
 * config_sqlite.c: schema, open, reads, single changes and the store's table of functions.
 * Every helper returns 0 or -1 with err (CONFIG_STORE_ERR_MAX bytes) filled, unless it says
 * otherwise; `doing` names the operation for the message.
 */
#ifndef SLUICE_RULES_CONFIG_SQLITE_IMPL_H
#define SLUICE_RULES_CONFIG_SQLITE_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "rules/config_common.h"
#include "rules/config_store_ops.h"

/* Every statement the store runs, prepared once per handle. */
enum stmt_id {
    ST_BEGIN_READ,
    ST_BEGIN_WRITE,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_VERSION,
    ST_BUMP,
    ST_LIST_RULES,
    ST_LIST_NAMES,
    ST_GET_RULE,
    ST_PUT_RULE,
    ST_PUT_RULE_FROM,
    ST_DEL_RULE,
    ST_DEL_RULE_OVERRIDES,
    ST_GET_OVERRIDE,
    ST_PUT_OVERRIDE,
    ST_DEL_OVERRIDE,
    ST_LIST_OVERRIDES,
    ST_LIST_OVERRIDES_AFTER,
    ST_TOUCH,
    ST_COUNT
};

typedef struct sqlite_store {
    config_store_t base;          /* first: its table */
    sqlite3 *db;                  /* the connection; NULL between a file put in the store's place
                                     being found and its opening (closed_why says why) */
    sqlite3_stmt *stmt[ST_COUNT]; /* prepared on first use */
    char *path;                   /* the file opened */
    bool have_id;                 /* dev and ino are the opened file's (not for ":memory:") */
    dev_t dev;                    /* the opened file's device */
    ino_t ino;                    /* and inode */
    bool busy;                    /* the last failure was another connection's lock */
    int busy_ms;                  /* the busy timeout set, ms (set again on a new connection) */
    ino_t old_wal;                /* db NULL: the inode of the old file's -wal when it was
                                     closed (0: none): while it is there, another program still
                                     has the old file open */
    char closed_why[CONFIG_STORE_ERR_MAX]; /* db NULL: why */
    bool writing;                          /* in a write transaction */
    bool write_failed; /* the last write failed for another reason than a lock: write_why */
    char write_why[CONFIG_STORE_ERR_MAX];
} sqlite_store_t;

/* An override key to bind as a blob (ptr may be NULL when len is 0). */
struct key_ref {
    const void *ptr; /* len bytes */
    size_t len;      /* bytes */
};

/* "sqlite: <what SQLite said> (<doing>)" into err, noting a lock held by another connection
 * (config_store_busy()); returns -1. */
int cs_fail_db(sqlite_store_t *s, const char *doing, char *err);

/* Statement id (prepared on first use), reset and with no bindings; NULL with err. */
sqlite3_stmt *cs_stmt(sqlite_store_t *s, enum stmt_id id, const char *doing, char *err);

/* Resets a statement after use, so it holds no read lock; NULL (never prepared) does nothing. */
void cs_done(sqlite3_stmt *st);

/* Ends a use of st: `ok` says whether the last call on it (a step, a bind) succeeded; when not,
 * err gets SQLite's message first. Resets st either way. Returns 0 when ok, else -1. */
int cs_step_end(sqlite_store_t *s, sqlite3_stmt *st, bool ok, const char *doing, char *err);

/* Steps a statement that returns no rows to completion, then resets it. */
int cs_exec_stmt(sqlite_store_t *s, sqlite3_stmt *st, const char *doing, char *err);

/* Runs statement id (no parameters, no rows) to completion. */
int cs_exec_id(sqlite_store_t *s, enum stmt_id id, const char *doing, char *err);

/* Binds text to parameter i of st. */
int cs_bind_text(sqlite_store_t *s, sqlite3_stmt *st, int i, const char *text, const char *doing,
                 char *err);

/* Binds key bytes as a blob to parameter i; an empty key is a zero-length blob, never NULL. */
int cs_bind_key(sqlite_store_t *s, sqlite3_stmt *st, int i, const void *key, size_t key_len,
                const char *doing, char *err);

/* Statement id with ?1 = name, then key when not NULL, then json when not NULL bound; NULL with
 * err (the statement reset). */
sqlite3_stmt *cs_bound(sqlite_store_t *s, enum stmt_id id, const char *name,
                       const struct key_ref *key, const char *json, const char *doing, char *err);

/* Runs change statement id bound as cs_bound() binds; *changed says whether a row changed. */
int cs_change(sqlite_store_t *s, enum stmt_id id, const char *name, const struct key_ref *key,
              const char *json, bool *changed, const char *doing, char *err);

/* Deletes a rule and its overrides inside a write transaction; *found says if it was there. */
int cs_delete_rule(sqlite_store_t *s, const char *name, bool *found, const char *doing, char *err);

/* Checks that the file the handle opened is still the one at its path (config_store_check's
 * first half: a file put in its place is opened by config_sqlite.c's check). */
int cs_check(sqlite_store_t *s, char *err);

/* Whether a change may be written: the connection is read-write and the file writable (not
 * read-only, not immutable, not on a file system mounted read-only). */
int cs_writable(sqlite_store_t *s, char *err);

/* BEGIN (a read) or BEGIN IMMEDIATE (a write, once cs_check() finds the file is still the one
 * opened). */
int cs_tx_begin(sqlite_store_t *s, bool write, const char *doing, char *err);

/* Undoes the open transaction, if SQLite has not already rolled it back. */
void cs_tx_rollback(sqlite_store_t *s);

/* COMMIT; rolls back when it fails. */
int cs_tx_commit(sqlite_store_t *s, const char *doing, char *err);

/* Reads the version, inside or outside a transaction. */
int cs_read_version(sqlite_store_t *s, int64_t *version, const char *doing, char *err);

/* Ends a write transaction: bumps the version when changed, commits, and reports the version
 * in *version (NULL: not wanted); rolls back on failure. */
int cs_tx_finish(sqlite_store_t *s, bool changed, int64_t *version, const char *doing, char *err);

/* Calls fn for the overrides of rule after `after` (NULL: from the first), at most limit (0: all),
 * as config_store_foreach_override_after does. */
int cs_foreach_override(sqlite_store_t *s, const char *rule, const void *after, size_t after_len,
                        size_t limit, config_override_fn fn, void *arg, const char *doing,
                        char *err);

/* config_store_import() on SQLite (config_sqlite_import.c). */
int cs_import(config_store_t *base, const config_rule_t *rules, size_t n,
              const config_override_t *ovs, size_t nov, config_import_mode_t mode,
              const char *origin, config_import_diff_t *diff, int64_t *version, char *err);

#endif /* SLUICE_RULES_CONFIG_SQLITE_IMPL_H */
