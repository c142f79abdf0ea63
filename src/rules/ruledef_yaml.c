/*
 * ruledef_yaml.c - rules files: a YAML document whose top level is a mapping with one field,
 * `rules:`, a list of rule mappings (see ruledef.h). libyaml reads the text into a yamltree
 * (positions kept); ruledef.c checks each rule; here the file's shape, the number of rules and
 * that names are unique.
 *
 * Files are written with libyaml's emitter, from the fields ruledef_write.c lists: names, key
 * templates and override keys as double-quoted scalars (which hold any UTF-8 text, escaped
 * where YAML needs it), our words, numbers and durations plain, no line folding.
 */
#include "proto/text.h"
#include "rules/ruledef_impl.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

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
            rd_fail(err, k, NULL, NULL,
                    "unknown top-level field '%s' (expected 'rules:', or 'domain:' for an "
                    "envoyproxy/ratelimit configuration)",
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
    *out = (ruledef_list_t){0};
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

/* ---- writing a rules file ------------------------------------------------------------------ */

typedef struct writer {
    yaml_emitter_t emitter;
    bool ok; /* false from the first failure on: nothing more is emitted */
} writer_t;

/* Emits the event ev that an initializer made (made != 0); false at the first failure. */
static bool emit(writer_t *w, int made, yaml_event_t *ev)
{
    if (!made)
        return w->ok = false;
    if (!w->ok) {
        yaml_event_delete(ev);
        return false;
    }
    return w->ok = yaml_emitter_emit(&w->emitter, ev) != 0; /* takes ev either way */
}

/* A scalar; libyaml refuses text that is not UTF-8 (made == 0). */
static bool scalar(writer_t *w, const char *text, size_t len, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    if (len > INT_MAX)
        return w->ok = false;
    return emit(w,
                yaml_scalar_event_initialize(&ev, NULL, NULL, (const yaml_char_t *)text, (int)len,
                                             1, 1, style),
                &ev);
}

static bool mapping(writer_t *w, bool start)
{
    yaml_event_t ev;
    return emit(
        w,
        start ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE)
              : yaml_mapping_end_event_initialize(&ev),
        &ev);
}

static bool sequence(writer_t *w, bool start, yaml_sequence_style_t style)
{
    yaml_event_t ev;
    return emit(w,
                start ? yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, style)
                      : yaml_sequence_end_event_initialize(&ev),
                &ev);
}

/* One `field: value` of a mapping (an rd_field_fn). User text must be UTF-8 as
 * text_is_utf8() defines it (libyaml's own check lets surrogates through). */
static bool yaml_field(void *arg, const char *field, const rd_value_t *v)
{
    writer_t *w = arg;
    if (v->kind == RD_TEXT && !text_is_utf8(v->text, v->len))
        return w->ok = false;
    yaml_scalar_style_t style =
        v->kind == RD_TEXT ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE;
    return scalar(w, field, strlen(field), YAML_PLAIN_SCALAR_STYLE) &&
           scalar(w, v->text, v->len, style);
}

static bool write_override(writer_t *w, const rule_override_t *ov)
{
    const rd_value_t key = {RD_TEXT, ov->key, ov->key_len, 0};
    return mapping(w, true) && yaml_field(w, "key", &key) &&
           rd_override_fields(ov, yaml_field, w) && mapping(w, false);
}

static bool write_rule(writer_t *w, const ruledef_t *def)
{
    if (!mapping(w, true) || !rd_rule_fields(def, yaml_field, w))
        return w->ok = false;
    if (def->noverrides > 0) {
        if (!scalar(w, "overrides", 9, YAML_PLAIN_SCALAR_STYLE) ||
            !sequence(w, true, YAML_BLOCK_SEQUENCE_STYLE))
            return false;
        for (size_t i = 0; i < def->noverrides; i++) {
            if (!write_override(w, &def->overrides[i]))
                return false;
        }
        if (!sequence(w, false, 0))
            return false;
    }
    return mapping(w, false);
}

/* The whole stream: `rules:` and the list (`[]` when empty). */
static bool write_file(writer_t *w, const ruledef_list_t *list)
{
    yaml_event_t ev;
    if (!emit(w, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING), &ev) ||
        !emit(w, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1), &ev) ||
        !mapping(w, true) || !scalar(w, "rules", 5, YAML_PLAIN_SCALAR_STYLE) ||
        !sequence(w, true, list->n == 0 ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE))
        return false;
    for (size_t i = 0; i < list->n; i++) {
        if (!write_rule(w, &list->rules[i]))
            return false;
    }
    return sequence(w, false, 0) && mapping(w, false) &&
           emit(w, yaml_document_end_event_initialize(&ev, 1), &ev) &&
           emit(w, yaml_stream_end_event_initialize(&ev), &ev);
}

char *ruledef_list_to_yaml(const ruledef_list_t *list)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL)
        return NULL;
    writer_t w = {.ok = true};
    if (!yaml_emitter_initialize(&w.emitter)) {
        fclose(out);
        free(text);
        return NULL;
    }
    yaml_emitter_set_output_file(&w.emitter, out);
    yaml_emitter_set_unicode(&w.emitter, 1); /* UTF-8 as is, not \u escapes */
    yaml_emitter_set_width(&w.emitter, -1);  /* never fold a line */
    yaml_emitter_set_indent(&w.emitter, 2);
    yaml_emitter_set_break(&w.emitter, YAML_LN_BREAK);
    bool ok = write_file(&w, list) && yaml_emitter_flush(&w.emitter);
    yaml_emitter_delete(&w.emitter);
    if (fclose(out) != 0 || !ok) {
        free(text);
        return NULL;
    }
    return text;
}
