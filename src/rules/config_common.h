/*
 * config_common.h - what every config store shares, so that no store writes it again: error
 * messages, growing the lists it returns, and an import's plan (checking the rules and
 * overrides given, sorting them, and telling, stored rule by stored rule, what the import does
 * to it). Every function returns 0 or -1 with err (CONFIG_STORE_ERR_MAX bytes) filled unless it
 * says otherwise.
 */
#ifndef SLUICE_RULES_CONFIG_COMMON_H
#define SLUICE_RULES_CONFIG_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rules/config_store.h"

#define CONFIG_DOING_MAX 160 /* "putting override for rule '...'" */

/* Writes the message into err; returns -1. */
int config_fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends (name, json) copies to a growing array (*cap entries allocated). 0, or -1 when out
 * of memory (the entry is then counted, its missing strings NULL, so config_rules_free frees
 * what was made). */
int config_rules_push(config_rule_t **rules, size_t *n, size_t *cap, const char *name,
                      const char *json);

/* An import checked and sorted (config_import_plan), with what the walk over the stored rules
 * found so far. */
typedef struct config_import_plan {
    const config_rule_t **sorted; /* [n] the rules given, by name */
    size_t n;
    config_override_t *ovs; /* [nov] the overrides given, by (rule, key) */
    size_t nov;
    config_import_mode_t mode;
    const char *origin; /* what the rules are written with */
    bool *stored;       /* [n] sorted[i] was seen in the store */
} config_import_plan_t;

/* Checks an import's arguments as config_store_import documents them (no rule twice, every
 * override of a rule given, nothing NULL) and sorts them into *p. Nothing is stored yet. */
int config_import_plan(const config_rule_t *rules, size_t n, const config_override_t *ovs,
                       size_t nov, config_import_mode_t mode, const char *origin,
                       config_import_plan_t *p, char *err);
void config_import_plan_free(config_import_plan_t *p);

/* One stored rule (json and origin may be NULL): the diff gets it as changed, removed (by the
 * plan's mode) or kept. -1 only when out of memory. */
int config_import_seen(config_import_plan_t *p, config_import_diff_t *d, const char *name,
                       const char *json, const char *origin);

/* After every stored rule was seen: the rules given that were not are added. -1 only when out
 * of memory. */
int config_import_unseen(config_import_plan_t *p, config_import_diff_t *d);

/* Whether the import gives an override of rule for key (REPLACE keeps only those). */
bool config_import_names_override(const config_import_plan_t *p, const char *rule, const void *key,
                                  size_t key_len);

/* What an import asks of a store (ctx is the store's handle): a write transaction, and inside
 * it the steps below. Each returns 0 or -1 with err; found / changed say whether a row was there
 * / changed. */
typedef struct config_import_steps {
    int (*begin)(void *ctx, char *err); /* a write transaction */
    void (*rollback)(void *ctx);
    /* bumps the version when changed, commits, *version (may be NULL) gets the version */
    int (*finish)(void *ctx, bool changed, int64_t *version, char *err);
    /* Calls config_import_seen() for every stored rule (name, JSON, origin). */
    int (*walk_rules)(void *ctx, config_import_plan_t *p, config_import_diff_t *d, char *err);
    int (*delete_rule)(void *ctx, const char *name, bool *found, char *err); /* and overrides */
    int (*put_rule)(void *ctx, const config_rule_t *r, const char *origin, bool *changed,
                    char *err);
    int (*foreach_override)(void *ctx, const char *rule, config_override_fn fn, void *arg,
                            char *err);
    int (*delete_override)(void *ctx, const char *rule, const void *key, size_t key_len,
                           bool *found, char *err);
    int (*put_override)(void *ctx, const config_override_t *o, bool *changed, char *err);
} config_import_steps_t;

/* config_store_import() through a store's steps: the arguments checked and sorted (nothing is
 * written when they are wrong), then in one write transaction the diff, the removed rules
 * deleted, the rules given written with their origin, for REPLACE the overrides of the imported
 * rules it does not name deleted, then the overrides given written; the version bumped when
 * anything changed. On failure everything is rolled back and diff is empty. */
int config_import_run(const config_import_steps_t *st, void *ctx, const config_rule_t *rules,
                      size_t n, const config_override_t *ovs, size_t nov, config_import_mode_t mode,
                      const char *origin, config_import_diff_t *diff, int64_t *version, char *err);

#endif /* SLUICE_RULES_CONFIG_COMMON_H */
