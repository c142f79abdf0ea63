/*
 * config_sqlite_import.c - config_store_import() on SQLite: a rules file made the store's rules
 * in one write transaction (see config_store.h), with the difference it made reported. What an
 * import does is every store's (config_common.h: config_import_run); here are its steps in
 * SQLite's statements, and the transaction (config_sqlite_db.c's).
 */
#include "rules/config_sqlite_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const doing = "importing rules";

static int walk_rules(void *ctx, config_import_plan_t *p, config_import_diff_t *d, char *err)
{
    sqlite_store_t *s = ctx;
    sqlite3_stmt *st = cs_stmt(s, ST_LIST_NAMES, doing, err);
    if (st == NULL)
        return -1;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (name != NULL && config_import_seen(p, d, name, (const char *)sqlite3_column_text(st, 1),
                                               (const char *)sqlite3_column_text(st, 2)) != 0) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    if (rc == SQLITE_DONE && config_import_unseen(p, d) != 0)
        rc = SQLITE_NOMEM;
    if (rc == SQLITE_NOMEM)
        config_fail(err, "config store: out of memory (%s)", doing);
    else if (rc != SQLITE_DONE)
        cs_fail_db(s, doing, err);
    cs_done(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int delete_rule(void *ctx, const char *name, bool *found, char *err)
{
    return cs_delete_rule(ctx, name, found, doing, err);
}

static int put_rule(void *ctx, const config_rule_t *r, const char *origin, bool *changed, char *err)
{
    sqlite_store_t *s = ctx;
    sqlite3_stmt *st = cs_bound(s, ST_PUT_RULE_FROM, r->name, NULL, r->json, doing, err);
    if (st == NULL || cs_bind_text(s, st, 3, origin, doing, err) != 0 ||
        cs_exec_stmt(s, st, doing, err) != 0) {
        cs_done(st);
        return -1;
    }
    *changed = *changed || sqlite3_changes(s->db) > 0;
    return 0;
}

static int foreach_override(void *ctx, const char *rule, config_override_fn fn, void *arg,
                            char *err)
{
    return cs_foreach_override(ctx, rule, NULL, 0, 0, fn, arg, doing, err);
}

static int delete_override(void *ctx, const char *rule, const void *key, size_t key_len,
                           bool *found, char *err)
{
    struct key_ref k = {key, key_len};
    return cs_change(ctx, ST_DEL_OVERRIDE, rule, &k, NULL, found, doing, err);
}

static int put_override(void *ctx, const config_override_t *o, bool *changed, char *err)
{
    struct key_ref k = {o->key, o->key_len};
    return cs_change(ctx, ST_PUT_OVERRIDE, o->rule, &k, o->json, changed, doing, err);
}

static int begin(void *ctx, char *err)
{
    return cs_tx_begin(ctx, true, doing, err);
}

static void rollback(void *ctx)
{
    cs_tx_rollback(ctx);
}

static int finish(void *ctx, bool changed, int64_t *version, char *err)
{
    return cs_tx_finish(ctx, changed, version, doing, err);
}

static const config_import_steps_t steps = {
    .begin = begin,
    .rollback = rollback,
    .finish = finish,
    .walk_rules = walk_rules,
    .delete_rule = delete_rule,
    .put_rule = put_rule,
    .foreach_override = foreach_override,
    .delete_override = delete_override,
    .put_override = put_override,
};

int cs_import(config_store_t *base, const config_rule_t *rules, size_t n,
              const config_override_t *ovs, size_t nov, config_import_mode_t mode,
              const char *origin, config_import_diff_t *diff, int64_t *version, char *err)
{
    return config_import_run(&steps, base, rules, n, ovs, nov, mode, origin, diff, version, err);
}
