/*
 * config_pg_impl.h - what the PostgreSQL config store's files share: the handle, and running a
 * statement on its connection with a deadline. config_pg_conn.c: connecting (with backoff and
 * jitter while the database is unreachable), statements, transactions and messages;
 * config_pg_import.c: imports; config_pg.c: the schema and its migrations, open, reads, single
 * changes and the store's table of functions.
 *
 * Every statement is parameterized (PQsendQueryParams; values never enter the SQL text) and
 * asks for binary results: keys are bytea, sent and read as their bytes; text columns are read as
 * their bytes. A statement is sent and waited for with poll() up to a deadline, so a database
 * that stops answering fails the call instead of holding the thread (the connection is then
 * dropped and made again later).
 *
 * config_pg_watch.c: the watch's thread (LISTEN), which shares with the handle only what the
 * open set and two atomics (up_epoch, watch_down).
 *
 * Every helper returns 0 or -1 with err (CONFIG_STORE_ERR_MAX bytes) filled, unless it says
 * otherwise; `doing` names the operation for the message.
 */
#ifndef SLUICE_RULES_CONFIG_PG_IMPL_H
#define SLUICE_RULES_CONFIG_PG_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "rules/config_common.h"
#include "rules/config_store_ops.h"

#define PG_STATEMENT_TIMEOUT_MS 5000 /* the longest one statement may take, client and server */
#define PG_CONNECT_TIMEOUT_MS   5000 /* the longest a connection attempt may take */
#define PG_BACKOFF_MIN_MS       50   /* first wait after a failed connection attempt */
#define PG_BACKOFF_MAX_MS       2000 /* longest wait between attempts (before jitter) */
#define PG_CHANNEL              "sluice_config" /* what every change NOTIFYs, with its version */

typedef struct pg_store {
    config_store_t base;               /* first: its table */
    PGconn *conn;                      /* NULL while there is no connection */
    char *conninfo;                    /* the URL or keywords, as given */
    char where[CONFIG_STORE_NAME_MAX]; /* "postgresql://user@host:port/db", no password; set by
                                          the open, then only read */
    int lock_timeout_ms;               /* how long a statement waits for a row lock */
    bool busy;                         /* the last failure was a lock or a conflict */
    bool in_tx;                        /* a transaction is open on conn */
    int64_t locked_version;            /* the version an import's transaction locked */
    int64_t retry_at_ns;               /* no connection attempt before this */
    int64_t backoff_ns;                /* the wait after the next failure (0: none yet) */
    char down[CONFIG_STORE_ERR_MAX];   /* why the last connection attempt failed, or "" */
    uint64_t rng;                      /* jitter's generator state */
    _Atomic uint64_t up_epoch;         /* bumped by the watch each time it connects */
    _Atomic bool watch_down;           /* the watch finds the database unreachable */
    uint64_t failed_epoch;             /* up_epoch when the last attempt failed */
} pg_store_t;

/* A statement's parameter: text (NUL-terminated; len ignored), bytes (binary, len bytes), or
 * SQL NULL (value NULL). */
typedef struct pg_param {
    const char *value; /* text or bytes, the caller's until the statement returns */
    int len;           /* bytes, for binary */
    bool binary;       /* bytea bytes rather than text */
} pg_param_t;

#define PG_TEXT(s) ((pg_param_t){.value = (s)})
#define PG_BYTES(p, n)                                                                             \
    ((pg_param_t){.value = (n) ? (const char *)(p) : "", .len = (int)(n), .binary = true})

/* The first line of a libpq message (what follows is a hint), tabs as spaces, trimmed. */
void pg_one_line(char *out, size_t cap, const char *msg);

/* A wait between half and one and a half of backoff_ns, drawn from *rng (xorshift; never 0). */
int64_t pg_jittered(uint64_t *rng, int64_t backoff_ns);

/* The backoff after one more failed attempt: PG_BACKOFF_MIN_MS, then doubling up to
 * PG_BACKOFF_MAX_MS. */
int64_t pg_backoff_next(int64_t backoff_ns);

/* Connects to conninfo (a URL or keywords) within PG_CONNECT_TIMEOUT_MS, or sooner when stop_fd
 * (if >= 0) becomes readable: the connection, in non-blocking mode, or NULL with why (cap bytes).
 */
PGconn *pg_dial(const char *conninfo, int stop_fd, char *why, size_t cap);

/* Waits until c's socket is ready for `events`, deadline_ns passes, stop_fd (if >= 0) becomes
 * readable or *abort (if not NULL) becomes true. 1 ready, 0 deadline, -1 error, 2 stopped. */
int pg_wait(PGconn *c, short events, int64_t deadline_ns, int stop_fd, _Atomic bool *abort);

/* Fills s->where from the connection info (the host, port, database and user libpq would use;
 * never the password). */
void pg_describe_conninfo(pg_store_t *s);

/* Makes the connection if there is none: at once when no attempt failed lately, else only once
 * the backoff has passed (failing at once, with why the last attempt failed, before that). A new
 * connection gets this handle's statement and lock timeouts. */
int pg_connect(pg_store_t *s, const char *doing, char *err);

/* Drops the connection (a transaction open on it is rolled back by the server). */
void pg_disconnect(pg_store_t *s);

/* Runs one statement with params[0..n) and returns its result (rows or a command's), or NULL
 * with err. `retry`: when the statement fails because the connection was lost before it ran (a
 * database restarted under an idle connection), connect again and run it once more; only for a
 * statement that starts a transaction or reads outside one. The caller PQclear()s the result. */
PGresult *pg_exec(pg_store_t *s, const char *sql, int n, const pg_param_t *params, bool retry,
                  const char *doing, char *err);

/* pg_exec for a statement whose result is not needed; *rows (may be NULL) gets the rows it
 * changed. */
int pg_run(pg_store_t *s, const char *sql, int n, const pg_param_t *params, long *rows,
           const char *doing, char *err);

/* A bigint (int8) column of a binary result. */
int64_t pg_int8(const PGresult *res, int row, int col);

/* BEGIN; for a write, the version row is locked first (`SELECT ... FOR UPDATE`), so writers take
 * turns as SQLite's BEGIN IMMEDIATE makes them, and *version (may be NULL) gets it. */
int pg_tx_begin(pg_store_t *s, bool write, int64_t *version, const char *doing, char *err);

/* Rolls back the open transaction, if any (a lost connection has none left). */
void pg_tx_rollback(pg_store_t *s);

/* Ends a write transaction: when `changed`, bumps the version and NOTIFYs it (both take effect
 * with the commit), commits, and reports the version (NULL: not wanted); rolls back on failure.
 * `version` in: the version pg_tx_begin read. */
int pg_tx_finish(pg_store_t *s, bool changed, int64_t locked_version, int64_t *version,
                 const char *doing, char *err);

/* Deletes a rule and its overrides inside a write transaction; *found says if it was there. */
int pg_delete_rule(pg_store_t *s, const char *name, bool *found, const char *doing, char *err);

/* Calls fn for the overrides of rule after `after` (NULL: from the first), at most limit (0: all),
 * in byte order of their keys, a page of rows at a time. */
int pg_foreach_override(pg_store_t *s, const char *rule, const void *after, size_t after_len,
                        size_t limit, config_override_fn fn, void *arg, const char *doing,
                        char *err);

/* config_store_watch() on PostgreSQL (config_pg_watch.c). */
int pg_watch(config_store_t *base, const config_watch_fns_t *fns, void *arg, config_watch_t **out,
             char *err);

/* config_store_import() on PostgreSQL (config_pg_import.c). */
int pg_import(config_store_t *base, const config_rule_t *rules, size_t n,
              const config_override_t *ovs, size_t nov, config_import_mode_t mode,
              const char *origin, config_import_diff_t *diff, int64_t *version, char *err);

#endif /* SLUICE_RULES_CONFIG_PG_IMPL_H */
