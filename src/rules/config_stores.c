/*
 * config_stores.c - the list of config stores, opening the one a URL names, and the public
 * functions of config_store.h, each a call through the handle's table (config_store_ops.h).
 */
#include "rules/config_store_ops.h"

#include <stdio.h>
#include <string.h>

#include "rules/config_common.h"

extern const config_store_ops_t config_pg_ops;     /* config_pg.c */
extern const config_store_ops_t config_sqlite_ops; /* config_sqlite.c */

/* The stores, in the order their URLs are tried: SQLite takes any path, so it comes last. */
static const config_store_ops_t *const stores[] = {
    &config_pg_ops,
    &config_sqlite_ops,
};

#define NSTORES (sizeof stores / sizeof stores[0])

int config_store_open(const char *url, config_store_t **out, char *err)
{
    if (url == NULL || out == NULL)
        return config_fail(err, "config store: no url");
    for (size_t i = 0; i < NSTORES; i++) {
        if (stores[i]->accepts(url))
            return stores[i]->open(url, out, err);
    }
    int n =
        snprintf(err, CONFIG_STORE_ERR_MAX, "config store: unsupported url '%.64s' (want ", url);
    const char *sep = "";
    for (size_t i = 0; i < NSTORES && n > 0 && n < CONFIG_STORE_ERR_MAX; i++) {
        n += snprintf(err + n, CONFIG_STORE_ERR_MAX - (size_t)n, "%s%s", sep, stores[i]->url_form);
        sep = ", or ";
    }
    if (n > 0 && n < CONFIG_STORE_ERR_MAX)
        snprintf(err + n, CONFIG_STORE_ERR_MAX - (size_t)n, ")");
    return -1;
}

void config_store_close(config_store_t *s)
{
    if (s != NULL)
        s->ops->close(s);
}

const char *config_store_describe(const config_store_t *s, char *buf)
{
    return s->ops->describe(s, buf);
}

void config_store_set_busy_timeout(config_store_t *s, int ms)
{
    s->ops->set_busy_timeout(s, ms);
}

bool config_store_busy(const config_store_t *s)
{
    return s->ops->busy(s);
}

int config_store_check(config_store_t *s, char *err)
{
    return s->ops->check != NULL ? s->ops->check(s, err) : 0;
}

int config_store_writable(config_store_t *s, char *err)
{
    return s->ops->writable != NULL ? s->ops->writable(s, err) : 0;
}

int config_store_version(config_store_t *s, int64_t *version, char *err)
{
    return s->ops->version(s, version, err);
}

int config_store_list_rules(config_store_t *s, config_rule_t **rules, size_t *n, int64_t *version,
                            char *err)
{
    return s->ops->list_rules(s, rules, n, version, err);
}

int config_store_get_rule(config_store_t *s, const char *name, char **json, char *err)
{
    if (name == NULL || json == NULL)
        return config_fail(err, "config store: get rule: no name");
    return s->ops->get_rule(s, name, json, err);
}

int config_store_put_rule(config_store_t *s, const char *name, const char *json, int64_t *version,
                          char *err)
{
    if (name == NULL || json == NULL)
        return config_fail(err, "config store: put rule: no name or JSON");
    return s->ops->put_rule(s, name, json, version, err);
}

int config_store_del_rule(config_store_t *s, const char *name, int64_t *version, char *err)
{
    if (name == NULL)
        return config_fail(err, "config store: delete rule: no name");
    return s->ops->del_rule(s, name, version, err);
}

int config_store_import(config_store_t *s, const config_rule_t *rules, size_t n,
                        const config_override_t *ovs, size_t nov, config_import_mode_t mode,
                        const char *origin, config_import_diff_t *diff, int64_t *version, char *err)
{
    return s->ops->import(s, rules, n, ovs, nov, mode, origin, diff, version, err);
}

int config_store_get_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              char **json, char *err)
{
    if (rule == NULL || json == NULL || (key == NULL && key_len > 0))
        return config_fail(err, "config store: get override: no rule or key");
    return s->ops->get_override(s, rule, key, key_len, json, err);
}

int config_store_put_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              const char *json, int64_t *version, char *err)
{
    if (rule == NULL || json == NULL || (key == NULL && key_len > 0))
        return config_fail(err, "config store: put override: no rule, key or JSON");
    return s->ops->put_override(s, rule, key, key_len, json, version, err);
}

int config_store_del_override(config_store_t *s, const char *rule, const void *key, size_t key_len,
                              int64_t *version, char *err)
{
    if (rule == NULL || (key == NULL && key_len > 0))
        return config_fail(err, "config store: delete override: no rule or key");
    return s->ops->del_override(s, rule, key, key_len, version, err);
}

int config_store_foreach_override(config_store_t *s, const char *rule, size_t limit,
                                  config_override_fn fn, void *arg, char *err)
{
    return config_store_foreach_override_after(s, rule, NULL, 0, limit, fn, arg, err);
}

int config_store_foreach_override_after(config_store_t *s, const char *rule, const void *after,
                                        size_t after_len, size_t limit, config_override_fn fn,
                                        void *arg, char *err)
{
    if (rule == NULL || fn == NULL)
        return config_fail(err, "config store: foreach override: no rule or callback");
    return s->ops->foreach_override(s, rule, after, after_len, limit, fn, arg, err);
}

int config_store_watch(config_store_t *s, const config_watch_fns_t *fns, void *arg,
                       config_watch_t **out, char *err)
{
    *out = NULL;
    return s->ops->watch != NULL ? s->ops->watch(s, fns, arg, out, err) : 0;
}

void config_watch_stop(config_watch_t *w)
{
    if (w != NULL)
        w->stop(w);
}
