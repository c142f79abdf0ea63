/*
 * config_sqlite_import.c - config_store_import() on SQLite: a rules file made the store's rules
 * in one write transaction (see config_store.h), with the difference it made reported. The plan
 * (what is checked, what each stored rule becomes) is every store's (config_common.h); the
 * handle, statements and transactions are config_sqlite_db.c's.
 */
#include "rules/config_sqlite_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Walks the stored rules into the diff (config_import_seen). Inside the write transaction. */
static int import_diff(sqlite_store_t *s, config_import_plan_t *p, config_import_diff_t *d,
                       const char *doing, char *err)
{
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

/* A stored override key, collected to delete. */
typedef struct key_list {
    struct key_ref *keys; /* [n] copies, malloc'ed */
    size_t n, cap;
    const config_import_plan_t *plan;
    const char *rule;
    bool failed; /* out of memory */
} key_list_t;

static int collect_stale(void *arg, const void *key, size_t key_len, const char *json)
{
    (void)json;
    key_list_t *l = arg;
    if (config_import_names_override(l->plan, l->rule, key, key_len))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct key_ref *grown = realloc(l->keys, cap * sizeof(*grown));
        if (grown == NULL) {
            l->failed = true;
            return 1;
        }
        l->keys = grown;
        l->cap = cap;
    }
    void *copy = malloc(key_len ? key_len : 1);
    if (copy == NULL) {
        l->failed = true;
        return 1;
    }
    memcpy(copy, key, key_len);
    l->keys[l->n++] = (struct key_ref){copy, key_len};
    return 0;
}

/* REPLACE: every override of an imported rule that the plan does not name is deleted. */
static int drop_stale_overrides(sqlite_store_t *s, const config_import_plan_t *p,
                                config_import_diff_t *d, bool *changed, const char *doing,
                                char *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        key_list_t l = {.plan = p, .rule = p->sorted[i]->name};
        rc = cs_foreach_override(s, l.rule, NULL, 0, 0, collect_stale, &l, doing, err);
        if (rc == 0 && l.failed)
            rc = config_fail(err, "config store: out of memory (%s)", doing);
        for (size_t k = 0; rc == 0 && k < l.n; k++) {
            bool found = false;
            rc = cs_change(s, ST_DEL_OVERRIDE, l.rule, &l.keys[k], NULL, &found, doing, err);
            d->overrides_removed += found;
            *changed = *changed || found;
        }
        for (size_t k = 0; k < l.n; k++)
            free((void *)l.keys[k].ptr);
        free(l.keys);
    }
    return rc;
}

/* Writes rule i of the plan with its origin; *changed is set when a row changed. */
static int put_rule_from(sqlite_store_t *s, const config_import_plan_t *p, size_t i, bool *changed,
                         const char *doing, char *err)
{
    const config_rule_t *r = p->sorted[i];
    sqlite3_stmt *st = cs_bound(s, ST_PUT_RULE_FROM, r->name, NULL, r->json, doing, err);
    if (st == NULL || cs_bind_text(s, st, 3, p->origin, doing, err) != 0 ||
        cs_exec_stmt(s, st, doing, err) != 0) {
        cs_done(st);
        /* name the rule SQLite refused */
        size_t used = strlen(err);
        snprintf(err + used, CONFIG_STORE_ERR_MAX - used, " at rule '%.64s'", r->name);
        return -1;
    }
    *changed = *changed || sqlite3_changes(s->db) > 0;
    return 0;
}

/* The import's body, inside the write transaction. *changed says whether anything changed. */
static int import_tx(sqlite_store_t *s, config_import_plan_t *p, config_import_diff_t *d,
                     bool *changed, const char *doing, char *err)
{
    int rc = import_diff(s, p, d, doing, err);
    for (size_t i = 0; rc == 0 && i < d->nremoved; i++) {
        bool found;
        rc = cs_delete_rule(s, d->removed[i], &found, doing, err);
        *changed = *changed || found;
    }
    for (size_t i = 0; rc == 0 && i < p->n; i++)
        rc = put_rule_from(s, p, i, changed, doing, err);
    if (rc == 0 && p->mode == CONFIG_IMPORT_REPLACE)
        rc = drop_stale_overrides(s, p, d, changed, doing, err);
    for (size_t i = 0; rc == 0 && i < p->nov; i++) {
        bool put = false;
        struct key_ref k = {p->ovs[i].key, p->ovs[i].key_len};
        rc = cs_change(s, ST_PUT_OVERRIDE, p->ovs[i].rule, &k, p->ovs[i].json, &put, doing, err);
        d->overrides_written += put;
        *changed = *changed || put;
    }
    return rc;
}

int cs_import(config_store_t *base, const config_rule_t *rules, size_t n,
              const config_override_t *ovs, size_t nov, config_import_mode_t mode,
              const char *origin, config_import_diff_t *diff, int64_t *version, char *err)
{
    sqlite_store_t *s = (sqlite_store_t *)base;
    const char *doing = "importing rules";
    config_import_diff_t local = {0};
    config_import_diff_t *d = diff != NULL ? diff : &local;
    *d = (config_import_diff_t){0};
    config_import_plan_t plan;
    if (config_import_plan(rules, n, ovs, nov, mode, origin, &plan, err) != 0)
        return -1;
    bool changed = false;
    int rc = cs_tx_begin(s, true, doing, err);
    if (rc == 0 && import_tx(s, &plan, d, &changed, doing, err) != 0) {
        cs_tx_rollback(s);
        rc = -1;
    } else if (rc == 0) {
        rc = cs_tx_finish(s, changed, version, doing, err);
    }
    config_import_plan_free(&plan);
    if (rc != 0 || diff == NULL)
        config_import_diff_free(d);
    return rc;
}
