/*
 * rulesfile.c - a rules file in sluice's format or envoyproxy/ratelimit's (see rulesfile.h).
 */
#include "rules/rulesfile.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rules/envoy_config.h"
#include "rules/yamltree.h"

_Static_assert(ENVOY_CONFIG_ERR_MAX == RULEDEF_ERR_MAX, "one error buffer serves both formats");

/* True when the text is a YAML mapping with a top-level `domain`; anything else, broken YAML
 * included, is left to the sluice format's parser and its messages. */
static bool is_envoy(const char *text, size_t len)
{
    yt_node_t *root = NULL;
    char err[YT_ERR_MAX];
    if (yt_parse(text, len, &root, err, sizeof err) != 0) {
        return false;
    }
    bool envoy = root != NULL && root->kind == YT_MAP && yt_map_get(root, "domain") != NULL;
    yt_free(root);
    return envoy;
}

int rulesfile_parse(const char *text, size_t len, ruledef_list_t *out, char **domain, char *err)
{
    *out = (ruledef_list_t){0};
    if (domain != NULL) {
        *domain = NULL;
    }
    if (!is_envoy(text, len)) {
        return ruledef_parse_yaml(text, len, out, err);
    }
    envoy_config_t c;
    if (envoy_config_parse(text, len, &c, err) != 0) {
        return -1;
    }
    int rc = envoy_config_rules(&c, out, err);
    if (rc == 0) {
        out->notes = envoy_config_notes(&c);
    }
    if (rc == 0 && domain != NULL) {
        *domain = c.domain;
        c.domain = NULL;
    }
    envoy_config_free(&c);
    return rc;
}
