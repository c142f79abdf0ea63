/*
 * ruledef_yaml.c - rules files: a YAML document whose top level is a mapping with one field,
 * `rules:`, a list of rule mappings (see ruledef.h). libyaml reads the text into a yamltree
 * (positions kept); ruledef.c checks each rule; here the file's shape, the number of rules and
 * that names are unique.
 */
#include "rules/ruledef_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rule name and its index, for finding duplicates by sorting. */
typedef struct name_ref {
    const char *name;
    size_t index;
} name_ref_t;

static int name_ref_cmp(const void *pa, const void *pb)
{
    const name_ref_t *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    if (c != 0)
        return c;
    return a->index < b->index ? -1 : (a->index > b->index);
}

/* Fails with the first rule (in file order) whose name an earlier rule already has. */
static int check_unique_names(const ruledef_list_t *list, const yt_node_t *seq, char *err)
{
    if (list->n < 2)
        return 0;
    name_ref_t *refs = malloc(list->n * sizeof(*refs));
    if (refs == NULL)
        return rd_fail(err, seq, "rules", NULL, "out of memory");
    for (size_t i = 0; i < list->n; i++)
        refs[i] = (name_ref_t){list->rules[i].name, i};
    qsort(refs, list->n, sizeof(*refs), name_ref_cmp);
    size_t dup = list->n, first = 0;
    for (size_t i = 1; i < list->n; i++) {
        if (strcmp(refs[i].name, refs[i - 1].name) == 0 && refs[i].index < dup) {
            dup = refs[i].index;
            first = refs[i - 1].index;
        }
    }
    free(refs);
    if (dup == list->n)
        return 0;
    char path[RD_PATH_MAX];
    snprintf(path, sizeof(path), "rules[%zu]", dup);
    const yt_node_t *at = yt_map_get(seq->items[dup], "name");
    return rd_fail(err, at, path, "name", "duplicate rule name '%s' (also rules[%zu])",
                   list->rules[dup].name, first);
}

/* The `rules:` value of a parsed document, or NULL with err set. */
static const yt_node_t *rules_node(const yt_node_t *root, char *err)
{
    if (root == NULL || root->kind != YT_MAP) {
        rd_fail(err, root != NULL ? root : &(yt_node_t){.line = 1, .column = 1}, NULL, NULL,
                "expected a mapping with 'rules:' at the top level");
        return NULL;
    }
    const yt_node_t *rules = NULL;
    for (size_t i = 0; i < root->n; i++) {
        const yt_node_t *k = root->items[2 * i];
        bool is_rules = k->text != NULL && k->len == 5 && memcmp(k->text, "rules", 5) == 0;
        if (!is_rules) {
            char buf[RD_SHOWN_BUF];
            rd_fail(err, k, NULL, NULL, "unknown top-level field '%s' (expected only 'rules:')",
                    k->text != NULL ? rd_shown(k->text, k->len, buf) : "?");
            return NULL;
        }
        if (rules != NULL) {
            rd_fail(err, k, NULL, NULL, "duplicate field 'rules'");
            return NULL;
        }
        rules = root->items[2 * i + 1];
    }
    if (rules == NULL) {
        rd_fail(err, root, NULL, NULL, "missing 'rules:'");
        return NULL;
    }
    return rules;
}

/* Builds every rule of `seq` into out. */
static int build_list(const yt_node_t *seq, ruledef_list_t *out, char *err)
{
    /* An empty list would turn every rule off: what a file cut short, or a mistake, looks like. */
    if (seq->kind == YT_NULL || (seq->kind == YT_SEQ && seq->n == 0))
        return rd_fail(err, seq, "rules", NULL,
                       "is empty: a rules file names at least one rule (to remove rules, delete "
                       "them from the file or with SL.RULE DEL)");
    if (seq->kind != YT_SEQ)
        return rd_fail(err, seq, "rules", NULL, "must be a list of rules, not %s",
                       yt_kind_name(seq->kind));
    if (seq->n > RULES_MAX)
        return rd_fail(err, seq, "rules", NULL, "more than %d rules", RULES_MAX);
    out->rules = calloc(seq->n, sizeof(*out->rules));
    if (out->rules == NULL)
        return rd_fail(err, seq, "rules", NULL, "out of memory");
    for (size_t i = 0; i < seq->n; i++) {
        char path[RD_PATH_MAX];
        snprintf(path, sizeof(path), "rules[%zu]", i);
        if (rd_rule_from_map(seq->items[i], path, NULL, true, &out->rules[i], err) != 0)
            return -1;
        out->n++;
    }
    return check_unique_names(out, seq, err);
}

int ruledef_parse_yaml(const char *text, size_t len, ruledef_list_t *out, char *err)
{
    out->n = 0;
    out->rules = NULL;
    yt_node_t *root = NULL;
    if (yt_parse(text, len, &root, err, RULEDEF_ERR_MAX) != 0)
        return -1;
    const yt_node_t *rules = rules_node(root, err);
    int rc = rules != NULL ? build_list(rules, out, err) : -1;
    yt_free(root);
    if (rc != 0)
        ruledef_list_free(out);
    return rc;
}
