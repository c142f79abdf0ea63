/*
 * config_sqlite_import.c - config_store_import() on SQLite: a rules file made the store's rules
 * in one write transaction (see config_store.h), with the difference it made reported. The
 * handle, statements and transactions are config_sqlite.c's (config_sqlite_impl.h).
 */
#include "rules/config_sqlite_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const config_rule_t *const *)a)->name,
                  (*(const config_rule_t *const *)b)->name);
}

static int names_push(char ***names, size_t *n, const char *name)
{
    if ((*n & (*n - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to the next power of two */
        char **grown = realloc(*names, (*n ? 2 * *n : 1) * sizeof(**names));
        if (grown == NULL)
            return -1;
        *names = grown;
    }
    if (((*names)[*n] = strdup(name)) == NULL)
        return -1;
    (*n)++;
    return 0;
}

static void names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

void config_import_diff_free(config_import_diff_t *d)
{
    if (d == NULL)
        return;
    names_free(d->added, d->nadded);
    names_free(d->changed, d->nchanged);
    names_free(d->removed, d->nremoved);
    *d = (config_import_diff_t){0};
}

/* Compares the stored rules with sorted[0..n): which are added, changed, removed (by mode) and
 * kept. Inside the write transaction. */
static int import_diff(config_store_t *s, const config_rule_t **sorted, size_t n,
                       config_import_mode_t mode, config_import_diff_t *d, const char *doing,
                       char *err)
{
    sqlite3_stmt *st = cs_stmt(s, ST_LIST_NAMES, doing, err);
    if (st == NULL)
        return -1;
    bool *stored = calloc(n ? n : 1, sizeof(*stored));
    int rc = stored != NULL ? SQLITE_ROW : SQLITE_NOMEM;
    while (rc == SQLITE_ROW && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        const char *json = (const char *)sqlite3_column_text(st, 1);
        const char *origin = (const char *)sqlite3_column_text(st, 2);
        if (name == NULL)
            continue;
        config_rule_t probe = {.name = (char *)name};
        const config_rule_t *key = &probe;
        const config_rule_t **hit = bsearch(&key, sorted, n, sizeof(*sorted), by_name);
        int pushed = 0;
        if (hit != NULL) {
            stored[hit - sorted] = true;
            if (json == NULL || strcmp(json, (*hit)->json) != 0)
                pushed = names_push(&d->changed, &d->nchanged, name);
        } else if (mode == CONFIG_IMPORT_REPLACE ||
                   (mode == CONFIG_IMPORT_FILE && origin != NULL && strcmp(origin, "file") == 0)) {
            pushed = names_push(&d->removed, &d->nremoved, name);
        } else {
            d->kept++;
        }
        if (pushed != 0)
            rc = SQLITE_NOMEM;
    }
    for (size_t i = 0; rc == SQLITE_DONE && i < n; i++)
        if (!stored[i] && names_push(&d->added, &d->nadded, sorted[i]->name) != 0)
            rc = SQLITE_NOMEM;
    free(stored);
    if (rc == SQLITE_NOMEM)
        cs_fail(err, "config store: out of memory (%s)", doing);
    else if (rc != SQLITE_DONE)
        cs_fail_db(s, doing, err);
    cs_done(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int by_rule_key(const void *a, const void *b)
{
    const config_override_t *x = a, *y = b;
    int c = strcmp(x->rule, y->rule);
    if (c != 0)
        return c;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    c = n > 0 ? memcmp(x->key, y->key, n) : 0;
    return c != 0 ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* A stored override key, collected to delete. */
typedef struct key_list {
    struct key_ref *keys;
    size_t n, cap;
    const config_override_t *keep; /* sorted by (rule, key) */
    size_t nkeep;
    const char *rule;
    bool failed;
} key_list_t;

static int collect_stale(void *arg, const void *key, size_t key_len, const char *json)
{
    (void)json;
    key_list_t *l = arg;
    config_override_t probe = {.rule = l->rule, .key = key, .key_len = key_len};
    if (bsearch(&probe, l->keep, l->nkeep, sizeof(*l->keep), by_rule_key) != NULL)
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

/* REPLACE: every override of an imported rule that ovs (sorted) does not name is deleted. */
static int drop_stale_overrides(config_store_t *s, const config_rule_t **sorted, size_t n,
                                const config_override_t *ovs, size_t nov, config_import_diff_t *d,
                                bool *changed, const char *doing, char *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        key_list_t l = {.keep = ovs, .nkeep = nov, .rule = sorted[i]->name};
        rc = config_store_foreach_override(s, l.rule, 0, collect_stale, &l, err);
        if (rc == 0 && l.failed)
            rc = cs_fail(err, "config store: out of memory (%s)", doing);
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

/* The import's body, inside the write transaction. *changed says whether anything changed. */
static int import_tx(config_store_t *s, const config_rule_t **sorted, size_t n,
                     const config_override_t *ovs, size_t nov, config_import_mode_t mode,
                     const char *origin, config_import_diff_t *d, bool *changed, const char *doing,
                     char *err)
{
    int rc = import_diff(s, sorted, n, mode, d, doing, err);
    for (size_t i = 0; rc == 0 && i < d->nremoved; i++) {
        bool found;
        rc = cs_delete_rule(s, d->removed[i], &found, doing, err);
        *changed = *changed || found;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        sqlite3_stmt *st =
            cs_bound(s, ST_PUT_RULE_FROM, sorted[i]->name, NULL, sorted[i]->json, doing, err);
        if (st == NULL || cs_bind_text(s, st, 3, origin, doing, err) != 0 ||
            cs_exec_stmt(s, st, doing, err) != 0) {
            cs_done(st);
            rc = -1;
            /* name the rule SQLite refused */
            size_t used = strlen(err);
            snprintf(err + used, CONFIG_STORE_ERR_MAX - used, " at rule '%.64s'", sorted[i]->name);
            break;
        }
        *changed = *changed || sqlite3_changes(s->db) > 0;
    }
    if (rc == 0 && mode == CONFIG_IMPORT_REPLACE)
        rc = drop_stale_overrides(s, sorted, n, ovs, nov, d, changed, doing, err);
    for (size_t i = 0; rc == 0 && i < nov; i++) {
        bool put = false;
        struct key_ref k = {ovs[i].key, ovs[i].key_len};
        rc = cs_change(s, ST_PUT_OVERRIDE, ovs[i].rule, &k, ovs[i].json, &put, doing, err);
        d->overrides_written += put;
        *changed = *changed || put;
    }
    return rc;
}

int config_store_import(config_store_t *s, const config_rule_t *rules, size_t n,
                        const config_override_t *ovs, size_t nov, config_import_mode_t mode,
                        const char *origin, config_import_diff_t *diff, int64_t *version, char *err)
{
    const char *doing = "importing rules";
    config_import_diff_t local = {0};
    config_import_diff_t *d = diff != NULL ? diff : &local;
    *d = (config_import_diff_t){0};
    if (rules == NULL && n > 0)
        return cs_fail(err, "config store: import: no rules");
    if (origin == NULL)
        origin = mode == CONFIG_IMPORT_FILE ? "file" : "api";
    const config_rule_t **sorted = malloc((n ? n : 1) * sizeof(*sorted));
    if (sorted == NULL)
        return cs_fail(err, "config store: out of memory (%s)", doing);
    for (size_t i = 0; i < n; i++) {
        if (rules[i].name == NULL || rules[i].json == NULL) {
            free(sorted);
            return cs_fail(err, "config store: import: rule %zu has no name or JSON", i);
        }
        sorted[i] = &rules[i];
    }
    qsort(sorted, n, sizeof(*sorted), by_name);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
            cs_fail(err, "config store: import: rule '%.64s' appears twice", sorted[i]->name);
            free(sorted);
            return -1;
        }
    }
    config_override_t *osorted = malloc((nov ? nov : 1) * sizeof(*osorted));
    if (osorted == NULL) {
        free(sorted);
        return cs_fail(err, "config store: out of memory (%s)", doing);
    }
    for (size_t i = 0; i < nov; i++) {
        config_rule_t probe = {.name = (char *)ovs[i].rule};
        const config_rule_t *key = &probe;
        if (ovs[i].rule == NULL || ovs[i].json == NULL || (ovs[i].key == NULL && ovs[i].key_len) ||
            bsearch(&key, sorted, n, sizeof(*sorted), by_name) == NULL) {
            free(sorted);
            free(osorted);
            return cs_fail(err, "config store: import: override %zu is not of a rule imported", i);
        }
        osorted[i] = ovs[i];
    }
    qsort(osorted, nov, sizeof(*osorted), by_rule_key);
    bool changed = false;
    int rc = cs_tx_begin(s, true, doing, err);
    if (rc == 0 &&
        import_tx(s, sorted, n, osorted, nov, mode, origin, d, &changed, doing, err) != 0) {
        cs_tx_rollback(s);
        rc = -1;
    } else if (rc == 0) {
        rc = cs_tx_finish(s, changed, version, doing, err);
    }
    free(sorted);
    free(osorted);
    if (rc != 0 || diff == NULL)
        config_import_diff_free(d);
    return rc;
}
