/*
 * config_sqlite_impl.h - what the SQLite config store's files share: the handle, the statements
 * and the helpers config_sqlite.c defines for running them in transactions (config_sqlite.c:
 * schema, statements, transactions, reads and single changes; config_sqlite_import.c: imports).
 * Every helper returns 0 or -1 with err (CONFIG_STORE_ERR_MAX bytes) filled, unless it says
 * otherwise; `doing` names the operation for the message.
 */
#ifndef SLUICE_RULES_CONFIG_SQLITE_IMPL_H
#define SLUICE_RULES_CONFIG_SQLITE_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "rules/config_store.h"

#define CONFIG_DOING_MAX 160 /* "putting override for rule '...'" */

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
    ST_COUNT
};

struct config_store {
    sqlite3 *db;
    sqlite3_stmt *stmt[ST_COUNT]; /* prepared on first use */
    char *path;                   /* the file opened */
    bool have_id;                 /* dev and ino are the opened file's (not for ":memory:") */
    dev_t dev;
    ino_t ino;
    bool busy; /* the last failure was another connection's lock */
};

/* An override key to bind as a blob (ptr may be NULL when len is 0). */
struct key_ref {
    const void *ptr;
    size_t len;
};

/* Writes the message into err; returns -1. */
int cs_fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "sqlite: <what SQLite said> (<doing>)" into err, noting a lock held by another connection
 * (config_store_busy()); returns -1. */
int cs_fail_db(config_store_t *s, const char *doing, char *err);

/* Statement id (prepared on first use), reset and with no bindings; NULL with err. */
sqlite3_stmt *cs_stmt(config_store_t *s, enum stmt_id id, const char *doing, char *err);

/* Resets a statement after use, so it holds no read lock; NULL (never prepared) does nothing. */
void cs_done(sqlite3_stmt *st);

/* Steps a statement that returns no rows to completion, then resets it. */
int cs_exec_stmt(config_store_t *s, sqlite3_stmt *st, const char *doing, char *err);

/* Binds text to parameter i of st. */
int cs_bind_text(config_store_t *s, sqlite3_stmt *st, int i, const char *text, const char *doing,
                 char *err);

/* Statement id with ?1 = name, then key when not NULL, then json when not NULL bound; NULL with
 * err (the statement reset). */
sqlite3_stmt *cs_bound(config_store_t *s, enum stmt_id id, const char *name,
                       const struct key_ref *key, const char *json, const char *doing, char *err);

/* Runs change statement id bound as cs_bound() binds; *changed says whether a row changed. */
int cs_change(config_store_t *s, enum stmt_id id, const char *name, const struct key_ref *key,
              const char *json, bool *changed, const char *doing, char *err);

/* Deletes a rule and its overrides inside a write transaction; *found says if it was there. */
int cs_delete_rule(config_store_t *s, const char *name, bool *found, const char *doing, char *err);

/* BEGIN (a read) or BEGIN IMMEDIATE (a write, once config_store_check() finds the file is
 * still the one opened). */
int cs_tx_begin(config_store_t *s, bool write, const char *doing, char *err);

/* Undoes the open transaction, if SQLite has not already rolled it back. */
void cs_tx_rollback(config_store_t *s);

/* Ends a write transaction: bumps the version when changed, commits, and reports the version
 * in *version (NULL: not wanted); rolls back on failure. */
int cs_tx_finish(config_store_t *s, bool changed, int64_t *version, const char *doing, char *err);

#endif /* SLUICE_RULES_CONFIG_SQLITE_IMPL_H */
