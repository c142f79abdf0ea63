/*
 * config_pg_import.c - config_store_import() on PostgreSQL: a rules file made the store's rules
 * in one write transaction (see config_store.h), with the difference it made reported. What an
 * import does is every store's (config_common.h: config_import_run); here are its steps in
 * PostgreSQL's statements, and the transaction (config_pg_conn.c's).
 */
#include "rules/config_pg_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const doing = "importing rules";

static int walk_rules(void *ctx, config_import_plan_t *p, config_import_diff_t *d, char *err)
{
    PGresult *res = pg_exec(ctx, "SELECT name, json, origin FROM sluice_rules ORDER BY name", 0,
                            NULL, false, doing, err);
    if (res == NULL)
        return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < PQntuples(res); i++)
        rc = config_import_seen(p, d, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                                PQgetvalue(res, i, 2));
    PQclear(res);
    if (rc == 0)
        rc = config_import_unseen(p, d);
    return rc == 0 ? 0 : config_fail(err, "config store: out of memory (%s)", doing);
}

static int delete_rule(void *ctx, const char *name, bool *found, char *err)
{
    return pg_delete_rule(ctx, name, found, doing, err);
}

static int put_rule(void *ctx, const config_rule_t *r, const char *origin, bool *changed, char *err)
{
    pg_param_t q[] = {PG_TEXT(r->name), PG_TEXT(r->json), PG_TEXT(origin)};
    long rows = 0;
    int rc = pg_run(ctx,
                    "INSERT INTO sluice_rules AS r(name, json, origin) VALUES ($1, $2, $3)"
                    " ON CONFLICT (name) DO UPDATE SET json = excluded.json,"
                    " origin = excluded.origin WHERE r.json IS DISTINCT FROM excluded.json"
                    " OR r.origin IS DISTINCT FROM excluded.origin",
                    3, q, &rows, doing, err);
    *changed = *changed || rows > 0;
    return rc;
}

static int foreach_override(void *ctx, const char *rule, config_override_fn fn, void *arg,
                            char *err)
{
    return pg_foreach_override(ctx, rule, NULL, 0, 0, fn, arg, doing, err);
}

static int delete_override(void *ctx, const char *rule, const void *key, size_t key_len,
                           bool *found, char *err)
{
    pg_param_t q[] = {PG_TEXT(rule), PG_BYTES(key, key_len)};
    long rows = 0;
    int rc = pg_run(ctx, "DELETE FROM sluice_overrides WHERE rule = $1 AND key = $2", 2, q, &rows,
                    doing, err);
    *found = rows > 0;
    return rc;
}

static int put_override(void *ctx, const config_override_t *o, bool *changed, char *err)
{
    pg_param_t q[] = {PG_TEXT(o->rule), PG_BYTES(o->key, o->key_len), PG_TEXT(o->json)};
    long rows = 0;
    int rc = pg_run(ctx,
                    "INSERT INTO sluice_overrides AS o(rule, key, json) VALUES ($1, $2, $3)"
                    " ON CONFLICT (rule, key) DO UPDATE SET json = excluded.json"
                    " WHERE o.json IS DISTINCT FROM excluded.json",
                    3, q, &rows, doing, err);
    *changed = rows > 0;
    return rc;
}

static int begin(void *ctx, char *err)
{
    pg_store_t *s = ctx;
    return pg_tx_begin(s, true, &s->locked_version, doing, err);
}

static void rollback(void *ctx)
{
    pg_tx_rollback(ctx);
}

static int finish(void *ctx, bool changed, int64_t *version, char *err)
{
    pg_store_t *s = ctx;
    return pg_tx_finish(s, changed, s->locked_version, version, doing, err);
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

int pg_import(config_store_t *base, const config_rule_t *rules, size_t n,
              const config_override_t *ovs, size_t nov, config_import_mode_t mode,
              const char *origin, config_import_diff_t *diff, int64_t *version, char *err)
{
    return config_import_run(&steps, base, rules, n, ovs, nov, mode, origin, diff, version, err);
}
