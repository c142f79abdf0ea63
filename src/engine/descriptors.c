/*
 * descriptors.c - the descriptor trees of a rule set (see descriptors.h).
 */
#include "engine/descriptors.h"

#include <stdlib.h>
#include <string.h>

#include "rules/envoy_config.h"
#include "engine/log.h"

struct descriptors {
    envoy_config_t *domains; /* one tree per domain, n of them; nodes' data are refs' */
    size_t n;
    struct rule_ref *refs; /* the rules, as built from */
};

static envoy_config_t *domain_of(const descriptors_t *d, const char *name, size_t len)
{
    for (size_t i = 0; i < d->n; i++) {
        if (strlen(d->domains[i].domain) == len && memcmp(d->domains[i].domain, name, len) == 0) {
            return &d->domains[i];
        }
    }
    return NULL;
}

/* The tree of a domain, made when it is not there yet; NULL when out of memory. */
static envoy_config_t *domain_tree(descriptors_t *d, const char *name, size_t len)
{
    envoy_config_t *c = domain_of(d, name, len);
    if (c != NULL) {
        return c;
    }
    envoy_config_t *grown = realloc(d->domains, (d->n + 1) * sizeof *grown);
    if (grown == NULL) {
        return NULL;
    }
    d->domains = grown;
    c = &d->domains[d->n];
    *c = (envoy_config_t){.domain = strndup(name, len)};
    if (c->domain == NULL) {
        return NULL;
    }
    d->n++;
    return c;
}

/* A rule and what stands for it, as a node's data. */
typedef struct rule_ref {
    const ruledef_t *def;
    void *data;
} rule_ref_t;

/* Puts rs at the end of the domain's path of n entries. False when out of memory. */
static bool put(descriptors_t *d, rule_ref_t *rs, const char *domain, size_t domain_len,
                const desc_entry_t *entries, size_t n)
{
    envoy_config_t *c = domain_tree(d, domain, domain_len);
    envoy_node_t *node = c != NULL ? envoy_config_add(c, entries, n) : NULL;
    if (node == NULL) {
        return false;
    }
    if (node->data != NULL) {
        const rule_ref_t *first = node->data;
        if (rs->def->desc != NULL) {
            log_warn("rules '%s' and '%s' have the same descriptor: '%s' decides it",
                     first->def->name, rs->def->name, first->def->name);
        }
        return true;
    }
    node->data = rs;
    node->has_limit = true;
    return true;
}

/* A rule named "domain.key1.key2..." without a descriptor: those keys, any values. */
static bool put_by_name(descriptors_t *d, rule_ref_t *rs)
{
    char name[RULE_NAME_MAX + 1];
    memcpy(name, rs->def->name, sizeof name);
    char *dot = strchr(name, '.');
    if (dot == NULL || dot == name) {
        return true; /* not a domain and keys */
    }
    desc_entry_t entries[DESC_ENTRIES_MAX];
    size_t n = 0;
    for (char *key = dot + 1; key != NULL && n < DESC_ENTRIES_MAX; n++) {
        char *next = strchr(key, '.');
        if (next != NULL) {
            *next++ = '\0';
        }
        if (*key == '\0') {
            return true; /* an empty key: not a descriptor */
        }
        entries[n] = (desc_entry_t){.key = key};
        key = next;
    }
    return put(d, rs, name, (size_t)(dot - name), entries, n);
}

descriptors_t *descriptors_build(const ruledef_t *const *defs, void *const *data, size_t n)
{
    descriptors_t *d = calloc(1, sizeof *d);
    bool ok = d != NULL && (d->refs = calloc(n > 0 ? n : 1, sizeof *d->refs)) != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        d->refs[i] = (rule_ref_t){defs[i], data[i]};
    }
    for (size_t i = 0; ok && i < n; i++) { /* descriptors first: they win over names */
        const rule_descriptor_t *desc = defs[i]->desc;
        if (desc != NULL) {
            ok = put(d, &d->refs[i], desc->domain, strlen(desc->domain), desc->entries, desc->n);
        }
    }
    for (size_t i = 0; ok && i < n; i++) {
        if (defs[i]->desc == NULL) {
            ok = put_by_name(d, &d->refs[i]);
        }
    }
    if (!ok) {
        descriptors_free(d);
        return NULL;
    }
    return d;
}

void descriptors_free(descriptors_t *d)
{
    if (d == NULL) {
        return;
    }
    for (size_t i = 0; i < d->n; i++) {
        envoy_config_free(&d->domains[i]);
    }
    free(d->domains);
    free(d->refs);
    free(d);
}

bool descriptors_domain_known(const descriptors_t *d, const char *domain, size_t domain_len)
{
    return d != NULL && domain_of(d, domain, domain_len) != NULL;
}

void *descriptors_match(const descriptors_t *d, const char *domain, size_t domain_len,
                        const rls_entry_t *entries, size_t n, const char **counted)
{
    const envoy_config_t *c = d != NULL ? domain_of(d, domain, domain_len) : NULL;
    const envoy_node_t *path[DESC_ENTRIES_MAX];
    const envoy_node_t *node =
        c != NULL && n <= DESC_ENTRIES_MAX ? envoy_config_match(c, entries, n, path) : NULL;
    for (size_t i = 0; counted != NULL && i < n; i++) {
        counted[i] = node != NULL && path[i]->shared ? path[i]->value : NULL;
    }
    return node != NULL ? ((const rule_ref_t *)node->data)->data : NULL;
}
