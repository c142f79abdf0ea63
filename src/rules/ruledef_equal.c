/*
 * ruledef_equal.c - rule definitions compared (two that are equal need no reload of their
 * tables) and freed (see ruledef.h).
 */
#include "rules/ruledef_impl.h"

#include <stdlib.h>
#include <string.h>

static bool rule_equal(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit && a->window_ns == b->window_ns &&
           a->burst == b->burst && a->buckets == b->buckets && a->max_delay_ns == b->max_delay_ns &&
           a->max_debt == b->max_debt && a->interval_ns == b->interval_ns &&
           a->tolerance_ns == b->tolerance_ns && a->bucket_ns == b->bucket_ns &&
           a->capacity == b->capacity && a->state_size == b->state_size &&
           memcmp(&a->adaptive, &b->adaptive, sizeof a->adaptive) == 0;
}

bool override_equal(const rule_override_t *a, const rule_override_t *b)
{
    return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0 &&
           a->blocked == b->blocked && a->fields == b->fields && rule_equal(&a->rule, &b->rule);
}

bool ruledef_equal(const ruledef_t *a, const ruledef_t *b)
{
    if (strcmp(a->name, b->name) != 0 || !rule_equal(&a->rule, &b->rule) ||
        a->has_key != b->has_key || (a->has_key && strcmp(a->key_text, b->key_text) != 0) ||
        a->shadow != b->shadow || a->on_store_error != b->on_store_error ||
        a->cold_start != b->cold_start || a->mode != b->mode || a->lease_ns != b->lease_ns ||
        a->max_debt_given != b->max_debt_given || a->sync_ns != b->sync_ns ||
        a->replicas != b->replicas || a->replica_wait_ns != b->replica_wait_ns ||
        a->unlimited != b->unlimited || a->blocked != b->blocked || !desc_equal(a->desc, b->desc) ||
        a->noverrides != b->noverrides || !prio_equal(&a->prio, &b->prio) ||
        a->has_priority_src != b->has_priority_src ||
        (a->has_priority_src && strcmp(a->priority_text, b->priority_text) != 0))
        return false;
    for (size_t i = 0; i < a->noverrides; i++) {
        if (!override_equal(&a->overrides[i], &b->overrides[i]))
            return false;
    }
    return true;
}

void override_free(rule_override_t *ov)
{
    if (ov == NULL)
        return;
    free(ov->key);
    ov->key = NULL;
    ov->key_len = 0;
}

void ruledef_free(ruledef_t *def)
{
    if (def == NULL)
        return;
    for (size_t i = 0; i < def->noverrides; i++)
        override_free(&def->overrides[i]);
    free(def->overrides);
    def->overrides = NULL;
    def->noverrides = 0;
    desc_free(def->desc);
    def->desc = NULL;
}

void ruledef_list_free(ruledef_list_t *list)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < list->n; i++)
        ruledef_free(&list->rules[i]);
    free(list->rules);
    list->rules = NULL;
    list->n = 0;
    free(list->notes);
    list->notes = NULL;
}
