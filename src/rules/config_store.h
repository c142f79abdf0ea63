/*
 * config_store.h - where sluiced keeps its rules and per-key overrides (SPEC §3; seeds 001, 002,
 * 004: rules persisted on disk, cached in memory, reloaded by a retriever).
 *
 * The store keeps text: a rule is its canonical JSON (ruledef_to_json), an override is
 * (rule name, key bytes, JSON). It knows nothing of what the JSON means; callers validate before
 * they write. Every change bumps one version number in the same transaction as the change, so a
 * reader that sees version V and then lists the rules sees exactly the rules of some version
 * >= V, never half of a change.
 *
 * Which store is chosen by the URL given to config_store_open (config_store_ops.h is what a store
 * is, config_stores.c the list): SQLite is the embedded default (one file, WAL mode, a busy
 * timeout, so several processes, sluiced and `sluice rules ...` through sluiced, or two sluiced
 * on one host, may share it); PostgreSQL is the store many hosts share, and tells them of each
 * change as it is committed (config_store_watch). Every store passes one conformance suite
 * (tests/config_conformance.h).
 *
 * A store handle is used by one thread at a time (sluiced gives each user its own handle).
 * Every function returns 0 on success, CONFIG_STORE_NOTFOUND where stated, or -1 with a message
 * (NUL-terminated, CONFIG_STORE_ERR_MAX bytes) in err naming what failed
 * ("sqlite: database is locked", "sqlite: unable to open database file './x/sluice.db'").
 */
#ifndef SLUICE_RULES_CONFIG_STORE_H
#define SLUICE_RULES_CONFIG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_STORE_ERR_MAX  256
#define CONFIG_STORE_NAME_MAX 256 /* config_store_describe()'s buffer, bytes */
#define CONFIG_STORE_NOTFOUND 1
#define CONFIG_STORE_REOPENED 2 /* config_store_check: another file was opened in its place */

typedef struct config_store config_store_t;

/* One rule as stored. */
typedef struct config_rule {
    char *name; /* NUL-terminated */
    char *json; /* NUL-terminated */
} config_rule_t;

/* Opens (creating if needed, with its schema) the store at `url`: a path ("./sluice.db"), or
 * "sqlite:PATH" / "sqlite://PATH". Returns 0 and sets *out; a URL no store takes is refused
 * with the forms each store takes. */
int config_store_open(const char *url, config_store_t **out, char *err);
/* NULL is a no-op. */
void config_store_close(config_store_t *s);

/* Where the store is, for a log line ("sqlite ./sluice.db"): never a password. Writes into buf
 * (CONFIG_STORE_NAME_MAX bytes) and returns it. */
const char *config_store_describe(const config_store_t *s, char *buf);

/*
 * Push. A store shared by many hosts (PostgreSQL) can tell of every change committed through any
 * handle, on any host, as it happens, and of its own reachability. A watch does that on a thread
 * of its own with a connection of its own, calling:
 *   changed(arg)          a change was committed, or the watch connected again (a change may
 *                         have been missed meanwhile): read the version
 *   state(arg, up, why)   the store became unreachable (up false, why: the reason) or reachable
 *                         again (up true, why ""); once per change of state
 * Both run on the watch's thread and must not block. While the watch finds the store
 * unreachable, the handle it was started from fails at once instead of trying (its next try is
 * at once when the watch connects again).
 */
typedef struct config_watch config_watch_t;
typedef struct config_watch_fns {
    void (*changed)(void *arg);                         /* read the version (above) */
    void (*state)(void *arg, bool up, const char *why); /* reachable or not, and why not */
} config_watch_fns_t;

/* Starts a watch of the store s opened. 0 with *out (NULL when the store has no push: poll its
 * version), or -1 with err. May run while another thread uses s (it reads only what the open
 * set). Stop the watch before closing s. */
int config_store_watch(config_store_t *s, const config_watch_fns_t *fns, void *arg,
                       config_watch_t **out, char *err);

/* Stops the watch: no callback runs once it returns. NULL is a no-op. */
void config_watch_stop(config_watch_t *w);

/* How long a statement waits for another connection's lock before failing, ms (default 5000). */
void config_store_set_busy_timeout(config_store_t *s, int ms);

/* True when the last call failed because another connection held the lock ("database is
 * locked"): trying again later may succeed. */
bool config_store_busy(const config_store_t *s);

/*
 * Checks that the file this handle opened is still the one at its path (SQLite; 0 for a store
 * without a file). Every write checks it first, and is refused while it is not: what is written
 * to a file no longer at its path would be lost.
 *   - deleted: -1 with err saying so; the handle keeps reading the deleted file.
 *   - another file in its place (restored from a backup, renamed over it, copied back after a
 *     delete): when it is an SQLite file with a schema this code knows, the handle lets go of
 *     the old file and opens the new one, and returns CONFIG_STORE_REOPENED: read everything
 *     again. Not while another program still has the old file open (the old file's -wal file
 *     is still there; SQLite would read it as the new file's, corrupting it): then -1, and the
 *     handle reads nothing until a later call opens the new file. A file of no known schema is
 *     not opened: -1, and the old file is still read.
 * Returns 0, CONFIG_STORE_REOPENED, or -1 with err saying what and what to do.
 */
int config_store_check(config_store_t *s, char *err);

/* Whether changes can be written now: the handle is read-write and (SQLite) its file writable:
 * not read-only, not immutable, not on a file system mounted read-only, and a write that failed
 * for another reason (disk full, I/O error) has been followed by one that worked (one that
 * changes nothing is tried). 0, or -1 with err saying why not. A store without the check: 0. */
int config_store_writable(config_store_t *s, char *err);

/* The current version (0 for a new, empty store). Cheap: one indexed read. */
int config_store_version(config_store_t *s, int64_t *version, char *err);

/* All rules, sorted by name, and the version they belong to (read in one transaction).
 * *rules is malloc'ed (free with config_rules_free). */
int config_store_list_rules(config_store_t *s, config_rule_t **rules, size_t *n, int64_t *version,
                            char *err);
void config_rules_free(config_rule_t *rules, size_t n);

/* One rule's JSON (malloc'ed) or CONFIG_STORE_NOTFOUND. */
int config_store_get_rule(config_store_t *s, const char *name, char **json, char *err);

/* Creates or replaces a rule (its origin becomes 'api': a rule made one at a time); bumps the
 * version. *version (may be NULL) gets the new version. */
int config_store_put_rule(config_store_t *s, const char *name, const char *json, int64_t *version,
                          char *err);

/* Deletes a rule and all its overrides; bumps the version. CONFIG_STORE_NOTFOUND if absent
 * (version unchanged). */
int config_store_del_rule(config_store_t *s, const char *name, int64_t *version, char *err);

/* How an import treats the rules already in the store. */
typedef enum config_import_mode {
    CONFIG_IMPORT_MERGE = 0,   /* adds and changes the rules given; removes nothing */
    CONFIG_IMPORT_FILE = 1,    /* a rules file: as MERGE, and removes the rules an earlier import
                                  of a file made (origin 'file') that it no longer names; rules
                                  made one at a time (origin 'api') are kept */
    CONFIG_IMPORT_REPLACE = 2, /* the store's rules become exactly these */
} config_import_mode_t;

/* What an import did, by rule name: each list malloc'ed, each name malloc'ed, sorted. Free with
 * config_import_diff_free(). */
typedef struct config_import_diff {
    char **added;
    size_t nadded;
    char **changed; /* stored before with other JSON */
    size_t nchanged;
    char **removed; /* deleted, with their overrides */
    size_t nremoved;
    size_t kept;              /* stored rules the import neither named nor removed */
    size_t overrides_written; /* overrides added or changed */
    size_t overrides_removed; /* REPLACE: overrides of imported rules the import did not name */
} config_import_diff_t;

/* One override to import: its rule (one of the rules imported), key bytes and JSON. */
typedef struct config_override {
    const char *rule;
    const void *key;
    size_t key_len;
    const char *json;
} config_override_t;
void config_import_diff_free(config_import_diff_t *d);

/*
 * Imports a rule set and overrides of its rules (ovs, nov; each of a rule in `rules`) in one
 * transaction, one version bump (none when nothing changed). The rules given are written with
 * `origin` ("file" or "api"; NULL: "file" for CONFIG_IMPORT_FILE, else "api"). Overrides given
 * are added or changed; a removed rule's are deleted; the other overrides of rules kept or
 * changed are kept, except with CONFIG_IMPORT_REPLACE, where the overrides of every imported rule
 * become exactly those given (a restore of an export). diff (may be NULL) gets what changed; on
 * error it is empty and nothing was written.
 */
int config_store_import(config_store_t *s, const config_rule_t *rules, size_t n,
                        const config_override_t *ovs, size_t nov, config_import_mode_t mode,
                        const char *origin, config_import_diff_t *diff, int64_t *version,
                        char *err);

/* Overrides: keys are bytes (key_len), any bytes. get returns CONFIG_STORE_NOTFOUND when the
 * rule has no override for the key. put/del bump the version; del of an absent override returns
 * CONFIG_STORE_NOTFOUND. put of an override for a rule not in the store is an error. */
int config_store_get_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              char **json, char *err);
int config_store_put_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              const char *json, int64_t *version, char *err);
int config_store_del_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              int64_t *version, char *err);

/* Calls fn for each override of `rule` (sorted by key), at most `limit` (0 = all). fn returns
 * nonzero to stop. */
typedef int (*config_override_fn)(void *arg, const void *key, size_t key_len, const char *json);
int config_store_foreach_override(config_store_t *s, const char *rule, size_t limit,
                                  config_override_fn fn, void *arg, char *err);

/* The same for the overrides whose key sorts after `after` (after_len bytes; NULL: from the
 * first), for paging through many. */
int config_store_foreach_override_after(config_store_t *s, const char *rule, const void *after,
                                        size_t after_len, size_t limit, config_override_fn fn,
                                        void *arg, char *err);

#endif /* SLUICE_RULES_CONFIG_STORE_H */
