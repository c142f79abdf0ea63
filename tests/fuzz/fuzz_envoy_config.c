/*
 * fuzz_envoy_config.c - libFuzzer target for envoyproxy/ratelimit configuration files from
 * outside bytes (rules/envoy_config.h). Checks: no crash, no sanitizer report, no leak; a file
 * that reads keeps the tree's promises (a domain, every node a non-empty key, a unit with every
 * limit but an unlimited one); a refused file names why; a lookup of descriptors made from
 * the file's own keys and values returns a node that has a limit; and the sluice rules the file
 * becomes (envoy_config_rules) each read back equal from their JSON, or the file is refused
 * with a reason and no rules.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/envoy_config.h"

static void check_node(const envoy_node_t *n, bool root)
{
    if (!root && (n->key == NULL || n->key[0] == '\0'))
        abort();
    if (n->has_limit && !n->limit.unlimited && rls_unit_ns(n->limit.unit) == 0)
        abort();
    for (size_t i = 0; i < n->n; i++)
        check_node(&n->children[i], false);
}

/* Looks up the path to every node, each entry taking the node's own key and value. */
static void walk(const envoy_config_t *c, const envoy_node_t *n, rls_entry_t *path, size_t depth)
{
    for (size_t i = 0; i < n->n && depth < 8; i++) {
        const envoy_node_t *k = &n->children[i];
        const char *v = k->value != NULL ? k->value : "any";
        path[depth] = (rls_entry_t){k->key, strlen(k->key), v, strlen(v)};
        const envoy_node_t *m = envoy_config_match(c, path, depth + 1, NULL);
        if (m != NULL && !m->has_limit)
            abort();
        walk(c, k, path, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    envoy_config_t c;
    char err[ENVOY_CONFIG_ERR_MAX];
    err[0] = '\0';
    if (envoy_config_parse((const char *)data, size, &c, err) != 0) {
        if (err[0] == '\0' || c.domain != NULL)
            abort();
        return 0;
    }
    if (c.domain == NULL || c.domain[0] == '\0')
        abort();
    check_node(&c.root, true);
    rls_entry_t path[8];
    walk(&c, &c.root, path, 0);
    ruledef_list_t rules;
    err[0] = '\0';
    if (envoy_config_rules(&c, &rules, err) != 0) {
        if (err[0] == '\0' || rules.n != 0)
            abort();
    }
    for (size_t i = 0; i < rules.n; i++) {
        const ruledef_t *r = &rules.rules[i];
        char *json = ruledef_to_json(r);
        ruledef_t back;
        char rerr[RULEDEF_ERR_MAX];
        if (json == NULL || r->desc == NULL ||
            ruledef_parse_json(json, strlen(json), NULL, &back, rerr) != 0)
            abort();
        if (!ruledef_equal(r, &back))
            abort();
        ruledef_free(&back);
        free(json);
    }
    ruledef_list_free(&rules);
    envoy_config_free(&c);
    return 0;
}
