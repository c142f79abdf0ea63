/*
 * ruledef_impl.h - what ruledef.c shares with the two front ends, ruledef_yaml.c and
 * ruledef_json.c. Both turn their text into yamltree nodes (a YAML rule mapping, or a JSON
 * object's members with the positions they were written at); ruledef.c validates those nodes
 * once for both formats.
 *
 * `path` names where a node sits, for messages: "rules[2]" or "rules[2].overrides[0]" in a
 * rules file, "" for a JSON object on its own (its fields are then named bare: "limit: ...").
 */
#ifndef SLUICE_RULES_RULEDEF_IMPL_H
#define SLUICE_RULES_RULEDEF_IMPL_H

#include "rules/ruledef.h"
#include "rules/yamltree.h"

#define RD_PATH_MAX 64 /* longest path, "rules[4095].overrides[4095]" and room to spare */

#define RD_SHOWN_MAX 40                 /* bytes of user text quoted in a message */
#define RD_SHOWN_BUF (RD_SHOWN_MAX + 4) /* room for rd_shown()'s result */

/* User text made safe to quote in a message: at most RD_SHOWN_MAX bytes, printable ASCII only
 * (other bytes become '?'), "..." when cut. buf holds RD_SHOWN_BUF bytes. Returns buf. */
const char *rd_shown(const char *text, size_t len, char *buf);

/* Writes "line L, column C: path.field: message" into err (RULEDEF_ERR_MAX bytes); the position
 * is left out when at is NULL or has none, path and field when empty / NULL. Returns -1. */
int rd_fail(char *err, const yt_node_t *at, const char *path, const char *field, const char *fmt,
            ...) __attribute__((format(printf, 5, 6)));

/*
 * Builds *out (zeroed first) from a mapping node of rule fields. name_hint (may be NULL) names
 * the rule when the mapping has no name; both given must agree. `inline_overrides` allows the
 * YAML-only `overrides` list. Returns 0, or -1 with err set and nothing held by *out.
 */
int rd_rule_from_map(const yt_node_t *map, const char *path, const char *name_hint,
                     bool inline_overrides, ruledef_t *out, char *err);

/*
 * Builds an override of parent from a mapping node. key (key_len bytes) is the override's key
 * when the caller has it (JSON: from the URL or command; a "key" field must then agree); NULL
 * reads it from the mapping's required "key" field (YAML). Returns 0, or -1 with err set and
 * nothing held by *out.
 */
int rd_override_from_map(const ruledef_t *parent, const yt_node_t *map, const char *path,
                         const char *key, size_t key_len, rule_override_t *out, char *err);

#endif /* SLUICE_RULES_RULEDEF_IMPL_H */
