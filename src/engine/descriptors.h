/*
 * descriptors.h - where Envoy's rate limit service finds the rule a descriptor is decided by:
 * per domain, a tree of descriptors (rules/envoy_config.h's) built from a rule set, looked up
 * with envoyproxy/ratelimit's semantics (a value before a prefix before any value, level by
 * level).
 *
 * A rule with a descriptor (`domain`, `descriptor`) stands for that descriptor. A rule without
 * one whose name is a domain and keys ("edge.remote_address", "edge.authenticated.path") stands
 * for those keys with any values, unless a rule with a descriptor already stands for them. Two
 * rules with the same descriptor: the first by name decides it, and the other is logged.
 *
 * Built once per rule set, read-only after: any thread may look up at once.
 */
#ifndef SLUICE_ENGINE_DESCRIPTORS_H
#define SLUICE_ENGINE_DESCRIPTORS_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/rls.h"
#include "rules/ruledef.h"

typedef struct descriptors descriptors_t;

/* The index of the rules defs[0..n) (a rule set's, sorted by name), each standing for what
 * data[i] is (a rule state). NULL when out of memory. */
descriptors_t *descriptors_build(const ruledef_t *const *defs, void *const *data, size_t n);

/* Frees what descriptors_build made (not the rules); NULL is fine. */
void descriptors_free(descriptors_t *d);

/* True when some rule stands for a descriptor of the domain (domain_len bytes). */
bool descriptors_domain_known(const descriptors_t *d, const char *domain, size_t domain_len);

/* The data of the rule a descriptor of n entries in the domain is decided by, or NULL when no
 * limit applies (an unknown domain, no match, a match without a rule). With counted (room for
 * n), counted[i] is the pattern entry i is counted as (its value matched a pattern that counts
 * every value it matches as one: share_threshold), or NULL: its own value. The patterns live as
 * long as d. */
void *descriptors_match(const descriptors_t *d, const char *domain, size_t domain_len,
                        const rls_entry_t *entries, size_t n, const char **counted);

#endif /* SLUICE_ENGINE_DESCRIPTORS_H */
