/*
 * envoy_config.h - envoyproxy/ratelimit's configuration (one YAML file per domain) read into a
 * tree, and the lookup of the limit a descriptor gets from it, with envoyproxy/ratelimit's
 * semantics. Pure: no store, no server; how the tree becomes sluice rules is its caller's.
 *
 *   domain: edge
 *   descriptors:
 *     - key: remote_address                 # any value, each value counted apart
 *       rate_limit: {unit: second, requests_per_unit: 10}
 *     - key: path
 *       value: /login                       # this value only ("/log*", "/a*b*c": a pattern)
 *       rate_limit: {unit: minute, requests_per_unit: 5, name: login, replaces: [{name: x}],
 *                    algorithm: sliding_log}   # sluice's addition: any algorithm

 *       shadow_mode: true                   # decided and counted, always allowed
 *     - key: tenant
 *       value: acme
 *       descriptors:                        # nested: the next entry of the descriptor
 *         - key: user
 *           rate_limit: {unlimited: true}
 *
 * Every field of envoyproxy/ratelimit's schema is read: share_threshold (on a value with a
 * '*': every value the pattern matches counted as one), value_to_metric and detailed_metric
 * (metric names: taken, sluice counts per rule), metadata (any YAML: only ever sent as dynamic
 * metadata, which sluice does not send), quota_mode (carried into the rule: rls_plan.c decides
 * it). requests_per_unit: 0 refuses every request.
 *
 * Lookup (envoy_config_match): the descriptor's entries are matched level by level, each
 * against the children of the node the last one matched: a child with the entry's key and
 * value first, then the first whose value is a pattern (any '*' a wildcard, wildcard.h) the
 * entry's value matches, then one with the key and no value. The descriptor gets the limit of
 * the node its last entry matched, if that node has one; no match at some level, or a last
 * node without a limit, is no limit.
 */
#ifndef SLUICE_RULES_ENVOY_CONFIG_H
#define SLUICE_RULES_ENVOY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/rls.h"
#include "rules/descriptor.h"
#include "rules/ruledef.h"
#include "rules/wildcard.h"
#include "sluice/sluice.h"

#define ENVOY_CONFIG_ERR_MAX 256 /* room for an error message (RULEDEF_ERR_MAX) */

typedef struct envoy_limit {
    uint32_t requests_per_unit; /* per unit; 0 with unlimited */
    rls_unit_t unit;            /* SECOND..WEEK; UNKNOWN when unlimited */
    bool unlimited;             /* never limited (and counted as such) */
    sl_algorithm_t algorithm;   /* sluice's addition (`algorithm:`); fixed_window by default */
    char *name;                 /* the limit's name, NUL-terminated; NULL when none */
    char **replaces;            /* names of limits this one replaces, nreplaces of them */
    size_t nreplaces;
} envoy_limit_t;

typedef struct envoy_node envoy_node_t;
struct envoy_node {
    char *key;              /* NUL-terminated, not empty */
    char *value;            /* NUL-terminated; NULL: any value (counted per value); with glob,
                               a pattern as wildcard.h writes it */
    size_t key_len;         /* strlen(key), kept: a request's entries are matched against every
                               child's key */
    size_t value_len;       /* strlen(value); 0 for NULL */
    bool glob;              /* value held a '*': a pattern, matched by wild */
    bool shared;            /* share_threshold: every value glob matches counted as one */
    wildcard_t *wild;       /* with glob: value compiled */
    bool has_limit;         /* `rate_limit` given */
    envoy_limit_t limit;    /* with has_limit */
    bool shadow_mode;       /* decided and counted, always allowed */
    bool quota_mode;        /* with a limit: over it, refuses a request only when every quota
                               descriptor of the request is over */
    bool detailed_metric;   /* metrics per value, not per node */
    bool value_to_metric;   /* metrics named with the value */
    bool metadata;          /* `metadata` given (upstream's dynamic metadata; not kept) */
    envoy_node_t *children; /* nested descriptors, n of them */
    size_t n;
    unsigned line, column; /* where the node is written, for messages */
    void *data;            /* in a tree built with envoy_config_add: the caller's */
};

typedef struct envoy_config {
    char *domain;      /* NUL-terminated, not empty */
    envoy_node_t root; /* its children are the top-level descriptors; no key, no limit */
    bool listed;       /* the file has a `descriptors` field, perhaps empty */
} envoy_config_t;

/*
 * Reads one configuration file's text (len bytes) into *out (zeroed first). Returns 0, or -1
 * with "line L, column C: where: what" in err (ENVOY_CONFIG_ERR_MAX bytes) and nothing held by
 * *out: not YAML, an unknown field, a missing or empty domain or key, a rate_limit with an
 * unknown unit, a unit beside unlimited, a requests_per_unit out of range, an empty or
 * self-naming replaces entry, or two descriptors with the same key and value on one level.
 */
int envoy_config_parse(const char *text, size_t len, envoy_config_t *out, char *err);

/*
 * What c says that sluice takes but that changes nothing here: detailed_metric and
 * value_to_metric (true; they shape upstream's statistics' names, where sluiced counts per rule)
 * and metadata (upstream's dynamic metadata, which sluiced does not send). One line per field, at
 * its first use ("line L, column C: where.field: ..., what sluice does"), '\n' between lines;
 * malloc'ed, or NULL for none (or out of memory: the notes are only told, never needed).
 */
char *envoy_config_notes(const envoy_config_t *c);

/* Frees what envoy_config_parse() allocated; c is then empty. */
void envoy_config_free(envoy_config_t *c);

/*
 * Adds the path of n entries (descriptor.h's: a key with a value, a prefix or any value) to c's
 * tree, making the nodes on the way that are not there, with no limit. Returns the last node,
 * new or not, or NULL when out of memory. For trees built in memory rather than read: the
 * nodes have no position.
 */
envoy_node_t *envoy_config_add(envoy_config_t *c, const desc_entry_t *entries, size_t n);

/* The node whose limit a descriptor of n entries gets (see above), or NULL for no limit. With
 * path (room for n), path[i] is the node entry i matched (a shared pattern's entry is counted on
 * the pattern). */
const envoy_node_t *envoy_config_match(const envoy_config_t *c, const rls_entry_t *entries,
                                       size_t n, const envoy_node_t **path);

/*
 * The sluice rules a configuration stands for: one per descriptor with a rate_limit, in the
 * order written, and an unlimited one for each descriptor with no limit at or under it (which
 * still ends a lookup that reaches it with no limit, where a sibling would have given one). Each
 * carries its domain and the entries from the top level down to it (rule_descriptor_t), its limit's
 * name and replaces; `unlimited: true` is an unlimited rule; otherwise requests_per_unit per unit
 * with the limit's algorithm (fixed_window unless it says) and shadow_mode as shadow. Names are the
 * domain and the entries ("edge.remote_address", "edge.path:_login": a value after ':', characters
 * other than A-Z a-z 0-9 _ - as '_'); a name longer than 64 characters or already taken ends in '-'
 * and 8 hex digits of a hash of the domain and entries instead. Returns 0, or -1 with "line L,
 * column C: where: what" in err (ENVOY_CONFIG_ERR_MAX bytes) and out empty: no `descriptors`
 * field at all (what a file cut short looks like; `descriptors: []` is a domain with none), a limit
 * the algorithm cannot take, descriptors nested deeper than DESC_ENTRIES_MAX, more than RULES_MAX.
 */
int envoy_config_rules(const envoy_config_t *c, ruledef_list_t *out, char *err);

#endif /* SLUICE_RULES_ENVOY_CONFIG_H */
