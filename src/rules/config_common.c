/*
 * config_common.c - what every config store shares (see config_common.h): messages, lists, and
 * an import's plan and diff.
 */
#include "rules/config_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int config_fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CONFIG_STORE_ERR_MAX, fmt, ap);
    va_end(ap);
    return -1;
}

void config_rules_free(config_rule_t *rules, size_t n)
{
    if (rules == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rules[i].name);
        free(rules[i].json);
    }
    free(rules);
}

int config_rules_push(config_rule_t **rules, size_t *n, size_t *cap, const char *name,
                      const char *json)
{
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 16;
        config_rule_t *p = realloc(*rules, grown * sizeof(**rules));
        if (p == NULL)
            return -1;
        *rules = p;
        *cap = grown;
    }
    config_rule_t *r = &(*rules)[*n];
    r->name = strdup(name);
    r->json = strdup(json);
    (*n)++;
    return r->name != NULL && r->json != NULL ? 0 : -1;
}

/* ---- diffs --------------------------------------------------------------------------------- */

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

/* ---- the plan ------------------------------------------------------------------------------ */

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const config_rule_t *const *)a)->name,
                  (*(const config_rule_t *const *)b)->name);
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

/* The rule named name among the plan's (sorted) rules, or NULL. */
static const config_rule_t **plan_find(const config_import_plan_t *p, const char *name)
{
    config_rule_t probe = {.name = (char *)name};
    const config_rule_t *key = &probe;
    return bsearch(&key, p->sorted, p->n, sizeof(*p->sorted), by_name);
}

void config_import_plan_free(config_import_plan_t *p)
{
    free(p->sorted);
    free(p->ovs);
    free(p->stored);
    *p = (config_import_plan_t){0};
}

/* The rules given, checked and sorted by name. */
static int plan_rules(config_import_plan_t *p, const config_rule_t *rules, size_t n, char *err)
{
    if (rules == NULL && n > 0)
        return config_fail(err, "config store: import: no rules");
    p->sorted = malloc((n ? n : 1) * sizeof(*p->sorted));
    p->stored = calloc(n ? n : 1, sizeof(*p->stored));
    if (p->sorted == NULL || p->stored == NULL)
        return config_fail(err, "config store: out of memory (importing rules)");
    for (size_t i = 0; i < n; i++) {
        if (rules[i].name == NULL || rules[i].json == NULL)
            return config_fail(err, "config store: import: rule %zu has no name or JSON", i);
        p->sorted[i] = &rules[i];
    }
    p->n = n;
    qsort(p->sorted, n, sizeof(*p->sorted), by_name);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(p->sorted[i - 1]->name, p->sorted[i]->name) == 0)
            return config_fail(err, "config store: import: rule '%.64s' appears twice",
                               p->sorted[i]->name);
    }
    return 0;
}

int config_import_plan(const config_rule_t *rules, size_t n, const config_override_t *ovs,
                       size_t nov, config_import_mode_t mode, const char *origin,
                       config_import_plan_t *p, char *err)
{
    *p = (config_import_plan_t){.mode = mode,
                                .origin = origin != NULL               ? origin
                                          : mode == CONFIG_IMPORT_FILE ? "file"
                                                                       : "api"};
    if (plan_rules(p, rules, n, err) != 0)
        goto fail;
    if ((p->ovs = malloc((nov ? nov : 1) * sizeof(*p->ovs))) == NULL) {
        config_fail(err, "config store: out of memory (importing rules)");
        goto fail;
    }
    for (size_t i = 0; i < nov; i++) {
        if (ovs[i].rule == NULL || ovs[i].json == NULL || (ovs[i].key == NULL && ovs[i].key_len) ||
            plan_find(p, ovs[i].rule) == NULL) {
            config_fail(err, "config store: import: override %zu is not of a rule imported", i);
            goto fail;
        }
        p->ovs[i] = ovs[i];
    }
    p->nov = nov;
    qsort(p->ovs, nov, sizeof(*p->ovs), by_rule_key);
    return 0;
fail:
    config_import_plan_free(p);
    return -1;
}

int config_import_seen(config_import_plan_t *p, config_import_diff_t *d, const char *name,
                       const char *json, const char *origin)
{
    const config_rule_t **hit = plan_find(p, name);
    if (hit != NULL) {
        p->stored[hit - p->sorted] = true;
        if (json == NULL || strcmp(json, (*hit)->json) != 0)
            return names_push(&d->changed, &d->nchanged, name);
        return 0;
    }
    if (p->mode == CONFIG_IMPORT_REPLACE ||
        (p->mode == CONFIG_IMPORT_FILE && origin != NULL && strcmp(origin, "file") == 0))
        return names_push(&d->removed, &d->nremoved, name);
    d->kept++;
    return 0;
}

int config_import_unseen(config_import_plan_t *p, config_import_diff_t *d)
{
    for (size_t i = 0; i < p->n; i++)
        if (!p->stored[i] && names_push(&d->added, &d->nadded, p->sorted[i]->name) != 0)
            return -1;
    return 0;
}

bool config_import_names_override(const config_import_plan_t *p, const char *rule, const void *key,
                                  size_t key_len)
{
    config_override_t probe = {.rule = rule, .key = key, .key_len = key_len};
    return bsearch(&probe, p->ovs, p->nov, sizeof(*p->ovs), by_rule_key) != NULL;
}

/* ---- the body ------------------------------------------------------------------------------ */

/* The stored overrides of one rule that the plan does not name, to delete. */
typedef struct stale {
    const config_import_plan_t *plan;
    const char *rule;
    char **keys;  /* [n] copies, malloc'ed */
    size_t *lens; /* [n] their lengths, bytes */
    size_t n, cap;
    bool failed; /* out of memory */
} stale_t;

static int collect_stale(void *arg, const void *key, size_t key_len, const char *json)
{
    (void)json;
    stale_t *l = arg;
    if (config_import_names_override(l->plan, l->rule, key, key_len))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **keys = realloc(l->keys, cap * sizeof(*keys));
        if (keys != NULL)
            l->keys = keys;
        size_t *lens = keys != NULL ? realloc(l->lens, cap * sizeof(*lens)) : NULL;
        if (lens == NULL) {
            l->failed = true;
            return 1;
        }
        l->lens = lens;
        l->cap = cap;
    }
    if ((l->keys[l->n] = malloc(key_len ? key_len : 1)) == NULL) {
        l->failed = true;
        return 1;
    }
    memcpy(l->keys[l->n], key, key_len);
    l->lens[l->n++] = key_len;
    return 0;
}

/* REPLACE: every override of an imported rule that the plan does not name is deleted. */
static int drop_stale(const config_import_steps_t *st, void *ctx, const config_import_plan_t *p,
                      config_import_diff_t *d, bool *changed, char *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        stale_t l = {.plan = p, .rule = p->sorted[i]->name};
        rc = st->foreach_override(ctx, l.rule, collect_stale, &l, err);
        if (rc == 0 && l.failed)
            rc = config_fail(err, "config store: out of memory (importing rules)");
        for (size_t k = 0; rc == 0 && k < l.n; k++) {
            bool found = false;
            rc = st->delete_override(ctx, l.rule, l.keys[k], l.lens[k], &found, err);
            d->overrides_removed += found;
            *changed = *changed || found;
        }
        for (size_t k = 0; k < l.n; k++)
            free(l.keys[k]);
        free(l.keys);
        free(l.lens);
    }
    return rc;
}

/* The import's body, in the write transaction. */
static int import_body(const config_import_steps_t *st, void *ctx, config_import_plan_t *p,
                       config_import_diff_t *d, bool *changed, char *err)
{
    int rc = st->walk_rules(ctx, p, d, err);
    for (size_t i = 0; rc == 0 && i < d->nremoved; i++) {
        bool found = false;
        rc = st->delete_rule(ctx, d->removed[i], &found, err);
        *changed = *changed || found;
    }
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        if ((rc = st->put_rule(ctx, p->sorted[i], p->origin, changed, err)) != 0) {
            /* name the rule the store refused */
            size_t used = strlen(err);
            snprintf(err + used, CONFIG_STORE_ERR_MAX - used, " at rule '%.64s'",
                     p->sorted[i]->name);
        }
    }
    if (rc == 0 && p->mode == CONFIG_IMPORT_REPLACE)
        rc = drop_stale(st, ctx, p, d, changed, err);
    for (size_t i = 0; rc == 0 && i < p->nov; i++) {
        bool put = false;
        rc = st->put_override(ctx, &p->ovs[i], &put, err);
        d->overrides_written += put;
        *changed = *changed || put;
    }
    return rc;
}

int config_import_run(const config_import_steps_t *st, void *ctx, const config_rule_t *rules,
                      size_t n, const config_override_t *ovs, size_t nov, config_import_mode_t mode,
                      const char *origin, config_import_diff_t *diff, int64_t *version, char *err)
{
    config_import_diff_t local = {0};
    config_import_diff_t *d = diff != NULL ? diff : &local;
    *d = (config_import_diff_t){0};
    config_import_plan_t plan;
    if (config_import_plan(rules, n, ovs, nov, mode, origin, &plan, err) != 0)
        return -1;
    bool changed = false;
    int rc = st->begin(ctx, err);
    if (rc == 0 && import_body(st, ctx, &plan, d, &changed, err) != 0) {
        st->rollback(ctx);
        rc = -1;
    } else if (rc == 0) {
        rc = st->finish(ctx, changed, version, err);
    }
    config_import_plan_free(&plan);
    if (rc != 0 || diff == NULL)
        config_import_diff_free(d);
    return rc;
}
