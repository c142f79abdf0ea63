/*
 * config_store_ops.h - what a config store is: a table of functions, chosen by the store URL
 * (config_stores.c keeps the list), so that sluiced never asks which store it has.
 *
 * Stores (one file or group each, and one entry each in config_stores.c's list):
 *   sqlite       a file on this host (config_sqlite.c, config_sqlite_import.c)
 *   postgresql   a PostgreSQL database shared by many hosts (config_pg*.c)
 *
 * Every function keeps the contract config_store.h gives its public twin: config_store_version()
 * calls ops->version(), and so on. A store's handle begins with `struct config_store`, which
 * names its table. An operation a store does not have is NULL, and the public function then says
 * what config_store.h says it does without one.
 *
 * Adding a store: one file defining its config_store_ops_t, its entry in config_stores.c, and the
 * conformance suite run against it (tests/config_conformance.h).
 */
#ifndef SLUICE_RULES_CONFIG_STORE_OPS_H
#define SLUICE_RULES_CONFIG_STORE_OPS_H

#include "rules/config_store.h"

typedef struct config_store_ops config_store_ops_t;

/* What every store's handle begins with. */
struct config_store {
    const config_store_ops_t *ops;
};

/* What every store's watch begins with. */
struct config_watch {
    void (*stop)(config_watch_t *w); /* stops and frees it */
};

struct config_store_ops {
    const char *name;     /* "sqlite", "postgresql" */
    const char *url_form; /* the URLs it takes, for an error naming none */

    /* Whether url names this store (a cheap look at its form; open says what is wrong with it). */
    bool (*accepts)(const char *url);
    int (*open)(const char *url, config_store_t **out, char *err);
    void (*close)(config_store_t *s);
    /* Where the store is, for logs: never a password. buf holds CONFIG_STORE_NAME_MAX bytes. */
    const char *(*describe)(const config_store_t *s, char *buf);

    void (*set_busy_timeout)(config_store_t *s, int ms);
    bool (*busy)(const config_store_t *s);
    int (*check)(config_store_t *s, char *err);    /* NULL: always fine */
    int (*writable)(config_store_t *s, char *err); /* NULL: as long as it can be reached */

    int (*version)(config_store_t *s, int64_t *version, char *err);
    int (*list_rules)(config_store_t *s, config_rule_t **rules, size_t *n, int64_t *version,
                      char *err);
    int (*get_rule)(config_store_t *s, const char *name, char **json, char *err);
    int (*put_rule)(config_store_t *s, const char *name, const char *json, int64_t *version,
                    char *err);
    int (*del_rule)(config_store_t *s, const char *name, int64_t *version, char *err);
    int (*import)(config_store_t *s, const config_rule_t *rules, size_t n,
                  const config_override_t *ovs, size_t nov, config_import_mode_t mode,
                  const char *origin, config_import_diff_t *diff, int64_t *version, char *err);

    int (*get_override)(config_store_t *s, const char *rule, const void *key, size_t key_len,
                        char **json, char *err);
    int (*put_override)(config_store_t *s, const char *rule, const void *key, size_t key_len,
                        const char *json, int64_t *version, char *err);
    int (*del_override)(config_store_t *s, const char *rule, const void *key, size_t key_len,
                        int64_t *version, char *err);
    /* NULL: no push (config_store_watch gives no watch) */
    int (*watch)(config_store_t *s, const config_watch_fns_t *fns, void *arg, config_watch_t **out,
                 char *err);
    /* after NULL: from the first key */
    int (*foreach_override)(config_store_t *s, const char *rule, const void *after,
                            size_t after_len, size_t limit, config_override_fn fn, void *arg,
                            char *err);
};

#endif /* SLUICE_RULES_CONFIG_STORE_OPS_H */
