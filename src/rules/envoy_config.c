/*
 * envoy_config.c - envoyproxy/ratelimit's configuration read into a tree, and the lookup of a
 * descriptor's limit in it (see envoy_config.h). The YAML is yamltree's; messages are written
 * as the rules files' are (rd_fail: line, column, where, what).
 */
#include "rules/envoy_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/buf.h"
#include "rules/ruledef_impl.h"
#include "rules/wildcard.h"
#include "rules/yamltree.h"

#define PATH_MAX_LEN 256 /* "descriptors[3].descriptors[12]...", cut when deeper */

static const char *const root_fields[] = {"domain", "descriptors"};
static const char *const node_fields[] = {
    "key",        "value",           "rate_limit",      "descriptors",     "shadow_mode",
    "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata"};
static const char *const limit_fields[] = {"unit", "requests_per_unit", "unlimited",
                                           "name", "replaces",          "algorithm"};
static const char *const replaces_fields[] = {"name"};
/* the units by number (rls_unit_t), as a rate_limit writes them */
static const char *const unit_names[] = {
    [RLS_UNIT_SECOND] = "second", [RLS_UNIT_MINUTE] = "minute", [RLS_UNIT_HOUR] = "hour",
    [RLS_UNIT_DAY] = "day",       [RLS_UNIT_WEEK] = "week",     [RLS_UNIT_MONTH] = "month",
    [RLS_UNIT_YEAR] = "year"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Every key of map is one of names[0..n). */
static int known_fields(const yt_node_t *map, const char *path, const char *const *names, size_t n,
                        char *err)
{
    for (size_t i = 0; i < map->n; i++) {
        const yt_node_t *k = map->items[2 * i];
        bool known = false;
        for (size_t j = 0; j < n && !known && k->kind == YT_STRING; j++) {
            known = strlen(names[j]) == k->len && memcmp(names[j], k->text, k->len) == 0;
        }
        if (!known) {
            char shown[RD_SHOWN_BUF];
            return rd_fail(err, k, path, NULL, "unknown field '%s'",
                           k->text != NULL ? rd_shown(k->text, k->len, shown) : "?");
        }
    }
    return 0;
}

static int need_map(const yt_node_t *v, const char *path, const char *field, char *err)
{
    if (v == NULL || v->kind != YT_MAP) {
        return rd_fail(err, v, path, field, "must be a mapping, not %s",
                       v != NULL ? yt_kind_name(v->kind) : "missing");
    }
    return 0;
}

/* A scalar's text, copied into *out; NULL when absent or null (an error when required). */
static int text_of(const yt_node_t *map, const char *field, const char *path, bool required,
                   char **out, char *err)
{
    const yt_node_t *v = yt_map_get(map, field);
    *out = NULL;
    if (v == NULL || v->kind == YT_NULL) {
        return required ? rd_fail(err, v != NULL ? v : map, path, field, "is required") : 0;
    }
    if (v->kind == YT_SEQ || v->kind == YT_MAP || v->text == NULL) {
        return rd_fail(err, v, path, field, "must be text, not %s", yt_kind_name(v->kind));
    }
    if (v->len == 0 || memchr(v->text, '\0', v->len) != NULL) {
        return rd_fail(err, v, path, field, v->len == 0 ? "must not be empty" : "holds a NUL");
    }
    *out = strndup(v->text, v->len);
    return *out != NULL ? 0 : rd_fail(err, v, path, field, "out of memory");
}

static int bool_of(const yt_node_t *map, const char *field, const char *path, bool *out, char *err)
{
    const yt_node_t *v = yt_map_get(map, field);
    *out = false;
    if (v == NULL || v->kind == YT_NULL) {
        return 0;
    }
    if (v->kind != YT_BOOL) {
        return rd_fail(err, v, path, field, "must be true or false, not %s", yt_kind_name(v->kind));
    }
    *out = v->boolean;
    return 0;
}

static void limit_free(envoy_limit_t *l)
{
    free(l->name);
    for (size_t i = 0; i < l->nreplaces; i++) {
        free(l->replaces[i]);
    }
    free(l->replaces);
    memset(l, 0, sizeof *l);
}

static int unit_parse(const yt_node_t *map, const char *path, envoy_limit_t *out, char *err)
{
    const yt_node_t *v = yt_map_get(map, "unit");
    bool given = v != NULL && v->kind != YT_NULL;
    if (out->unlimited) {
        return given ? rd_fail(err, v, path, "unit", "must not be given with unlimited: true") : 0;
    }
    for (size_t u = RLS_UNIT_SECOND; given && v->kind == YT_STRING && u < COUNT(unit_names); u++) {
        if (strlen(unit_names[u]) == v->len && strncasecmp(unit_names[u], v->text, v->len) == 0) {
            out->unit = (rls_unit_t)u;
            return 0;
        }
    }
    char shown[RD_SHOWN_BUF];
    return rd_fail(err, given ? v : map, path, "unit",
                   "%s%s%s: one of second, minute, hour, day, week, month, year",
                   given ? "unknown unit '" : "is required",
                   given && v->text != NULL ? rd_shown(v->text, v->len, shown) : "",
                   given ? "'" : "");
}

static int replaces_parse(const yt_node_t *seq, const char *path, envoy_limit_t *out, char *err)
{
    if (seq == NULL || seq->kind == YT_NULL) {
        return 0;
    }
    if (seq->kind != YT_SEQ) {
        return rd_fail(err, seq, path, "replaces", "must be a list of {name: ...}");
    }
    out->replaces = calloc(seq->n > 0 ? seq->n : 1, sizeof *out->replaces);
    if (out->replaces == NULL) {
        return rd_fail(err, seq, path, "replaces", "out of memory");
    }
    for (size_t i = 0; i < seq->n; i++) {
        char where[PATH_MAX_LEN];
        snprintf(where, sizeof where, "%.200s.replaces[%zu]", path, i);
        const yt_node_t *m = seq->items[i];
        if (need_map(m, where, NULL, err) != 0 ||
            known_fields(m, where, replaces_fields, COUNT(replaces_fields), err) != 0 ||
            text_of(m, "name", where, true, &out->replaces[i], err) != 0) {
            return -1;
        }
        out->nreplaces++;
        if (out->name != NULL && strcmp(out->replaces[i], out->name) == 0) {
            return rd_fail(err, m, where, "name", "a limit cannot replace itself");
        }
    }
    return 0;
}

static int limit_parse(const yt_node_t *map, const char *node_path, envoy_limit_t *out, char *err)
{
    char path[PATH_MAX_LEN];
    snprintf(path, sizeof path, "%.200s.rate_limit", node_path);
    memset(out, 0, sizeof *out);
    if (need_map(map, path, NULL, err) != 0 ||
        known_fields(map, path, limit_fields, COUNT(limit_fields), err) != 0 ||
        bool_of(map, "unlimited", path, &out->unlimited, err) != 0 ||
        unit_parse(map, path, out, err) != 0 ||
        text_of(map, "name", path, false, &out->name, err) != 0 ||
        replaces_parse(yt_map_get(map, "replaces"), path, out, err) != 0) {
        return -1;
    }
    const yt_node_t *a = yt_map_get(map, "algorithm");
    out->algorithm = rd_unlimited_algorithm(); /* envoyproxy/ratelimit's aligned windows */
    if (a != NULL && a->kind != YT_NULL) {
        if (a->kind != YT_STRING || sl_algorithm_parse(a->text, a->len, &out->algorithm) != SL_OK) {
            return rd_unknown_algorithm(err, a, path, "algorithm", a->text, a->len);
        }
        if (out->unlimited) {
            return rd_fail(err, a, path, "algorithm", "must not be given with unlimited: true");
        }
    }
    const yt_node_t *v = yt_map_get(map, "requests_per_unit");
    if (v != NULL && v->kind != YT_NULL) {
        if (v->kind != YT_INT || v->int_status != YT_INT_OK || v->integer < 0 ||
            v->integer > (int64_t)UINT32_MAX) {
            return rd_fail(err, v, path, "requests_per_unit", "must be an integer 0..%u",
                           (unsigned)UINT32_MAX);
        }
        out->requests_per_unit = out->unlimited ? 0 : (uint32_t)v->integer;
    }
    return 0;
}

static void node_free(envoy_node_t *n)
{
    free(n->key);
    free(n->value);
    wildcard_free(n->wild);
    limit_free(&n->limit);
    for (size_t i = 0; i < n->n; i++) {
        node_free(&n->children[i]);
    }
    free(n->children);
    memset(n, 0, sizeof *n);
}

static bool same_value(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int descriptors_parse(const yt_node_t *seq, const char *path, envoy_node_t *parent,
                             char *err);

/* A value with a '*' is a pattern (any '*' a wildcard, as envoyproxy/ratelimit reads it), kept
 * as wildcard.h writes one; share_threshold needs one. */
static int node_pattern(const yt_node_t *map, const char *path, envoy_node_t *out, char *err)
{
    size_t vlen = out->value != NULL ? strlen(out->value) : 0;
    out->glob = vlen > 0 && memchr(out->value, '*', vlen) != NULL;
    if (out->shared && !out->glob) {
        return rd_fail(err, yt_map_get(map, "share_threshold"), path, "share_threshold",
                       "needs a value with a wildcard ('*'): it counts every value the pattern "
                       "matches as one");
    }
    if (!out->glob) {
        return 0;
    }
    char *quoted = malloc(2 * vlen + 1);
    if (quoted == NULL) {
        return rd_fail(err, map, path, "value", "out of memory");
    }
    wildcard_quote(out->value, vlen, true, quoted);
    free(out->value);
    out->value = quoted;
    out->wild = wildcard_compile(quoted, strlen(quoted));
    return out->wild != NULL ? 0 : rd_fail(err, map, path, "value", "out of memory");
}

static int node_parse(const yt_node_t *map, const char *path, envoy_node_t *out, char *err)
{
    out->line = map != NULL ? map->line : 0;
    out->column = map != NULL ? map->column : 0;
    if (need_map(map, path, NULL, err) != 0 ||
        known_fields(map, path, node_fields, COUNT(node_fields), err) != 0 ||
        text_of(map, "key", path, true, &out->key, err) != 0 ||
        text_of(map, "value", path, false, &out->value, err) != 0 ||
        bool_of(map, "shadow_mode", path, &out->shadow_mode, err) != 0 ||
        bool_of(map, "detailed_metric", path, &out->detailed_metric, err) != 0 ||
        bool_of(map, "value_to_metric", path, &out->value_to_metric, err) != 0 ||
        bool_of(map, "share_threshold", path, &out->shared, err) != 0 ||
        bool_of(map, "quota_mode", path, &out->quota_mode, err) != 0 ||
        node_pattern(map, path, out, err) != 0) {
        return -1;
    }
    out->key_len = strlen(out->key);
    out->value_len = out->value != NULL ? strlen(out->value) : 0;
    const yt_node_t *md = yt_map_get(map, "metadata");
    out->metadata = md != NULL && md->kind != YT_NULL;
    const yt_node_t *rl = yt_map_get(map, "rate_limit");
    if (rl != NULL && rl->kind != YT_NULL) {
        out->has_limit = true;
        if (limit_parse(rl, path, &out->limit, err) != 0) {
            return -1;
        }
    }
    return descriptors_parse(yt_map_get(map, "descriptors"), path, out, err);
}

static int descriptors_parse(const yt_node_t *seq, const char *path, envoy_node_t *parent,
                             char *err)
{
    if (seq == NULL || seq->kind == YT_NULL) {
        return 0;
    }
    if (seq->kind != YT_SEQ) {
        return rd_fail(err, seq, path, "descriptors", "must be a list of descriptors, not %s",
                       yt_kind_name(seq->kind));
    }
    parent->children = calloc(seq->n > 0 ? seq->n : 1, sizeof *parent->children);
    if (parent->children == NULL) {
        return rd_fail(err, seq, path, "descriptors", "out of memory");
    }
    for (size_t i = 0; i < seq->n; i++) {
        char where[PATH_MAX_LEN];
        snprintf(where, sizeof where, "%.200s%sdescriptors[%zu]", path, path[0] != '\0' ? "." : "",
                 i);
        envoy_node_t *n = &parent->children[parent->n++];
        if (node_parse(seq->items[i], where, n, err) != 0) {
            return -1;
        }
        for (size_t j = 0; j + 1 < parent->n; j++) {
            const envoy_node_t *o = &parent->children[j];
            if (strcmp(o->key, n->key) == 0 && same_value(o->value, n->value)) {
                char shown[RD_SHOWN_BUF];
                return rd_fail(err, seq->items[i], where, NULL,
                               "the same key and value as descriptor %zu on this level ('%s')", j,
                               rd_shown(n->key, strlen(n->key), shown));
            }
        }
    }
    return 0;
}

int envoy_config_parse(const char *text, size_t len, envoy_config_t *out, char *err)
{
    memset(out, 0, sizeof *out);
    yt_node_t *root = NULL;
    if (yt_parse(text, len, &root, err, ENVOY_CONFIG_ERR_MAX) != 0) {
        return -1;
    }
    int rc = -1;
    if (root == NULL) {
        rd_fail(err, NULL, NULL, NULL, "the file holds no configuration (domain: ...)");
    } else if (need_map(root, "", NULL, err) == 0 &&
               known_fields(root, "", root_fields, COUNT(root_fields), err) == 0 &&
               text_of(root, "domain", "", true, &out->domain, err) == 0 &&
               descriptors_parse(yt_map_get(root, "descriptors"), "", &out->root, err) == 0) {
        out->listed = yt_map_get(root, "descriptors") != NULL;
        rc = 0;
    }
    yt_free(root);
    if (rc != 0) {
        envoy_config_free(out);
    }
    return rc;
}

/* ---- notes -------------------------------------------------------------------------------- */

/* The fields sluice takes and does nothing with, and what to tell of each. */
static const struct note_row {
    const char *field;
    const char *what;
} note_rows[] = {
    {"detailed_metric", "names envoyproxy/ratelimit's statistics after each value; sluiced counts "
                        "per rule (sluice_decisions_total{rule=...}), so it changes nothing here"},
    {"value_to_metric", "puts values in envoyproxy/ratelimit's statistics' names; sluiced counts "
                        "per rule (sluice_decisions_total{rule=...}), so it changes nothing here"},
    {"metadata", "envoyproxy/ratelimit sends it as a response's dynamic metadata; sluiced sends "
                 "none, so it changes nothing here"},
};
#define NOTE_ROWS COUNT(note_rows)

typedef struct notes {
    size_t count[NOTE_ROWS];             /* nodes saying the field */
    char first[NOTE_ROWS][PATH_MAX_LEN]; /* the first's path */
    unsigned line[NOTE_ROWS], column[NOTE_ROWS];
} notes_t;

static bool node_says(const envoy_node_t *n, size_t row)
{
    return row == 0 ? n->detailed_metric : row == 1 ? n->value_to_metric : n->metadata;
}

static void notes_under(const envoy_node_t *parent, const char *path, notes_t *t)
{
    for (size_t i = 0; i < parent->n; i++) {
        const envoy_node_t *n = &parent->children[i];
        char where[PATH_MAX_LEN];
        snprintf(where, sizeof where, "%.200s%sdescriptors[%zu]", path, path[0] != '\0' ? "." : "",
                 i);
        for (size_t r = 0; r < NOTE_ROWS; r++) {
            if (node_says(n, r) && t->count[r]++ == 0) {
                memcpy(t->first[r], where, sizeof where);
                t->line[r] = n->line;
                t->column[r] = n->column;
            }
        }
        notes_under(n, where, t);
    }
}

char *envoy_config_notes(const envoy_config_t *c)
{
    notes_t t = {0};
    notes_under(&c->root, "", &t);
    buf_t b = {0};
    for (size_t r = 0; r < NOTE_ROWS; r++) {
        if (t.count[r] == 0) {
            continue;
        }
        char more[64] = "";
        if (t.count[r] > 1) {
            snprintf(more, sizeof more, " (and %zu more)", t.count[r] - 1);
        }
        char line[768];
        int len = snprintf(line, sizeof line, "%sline %u, column %u: %s.%s: taken%s: %s",
                           b.len > 0 ? "\n" : "", t.line[r], t.column[r], t.first[r],
                           note_rows[r].field, more, note_rows[r].what);
        buf_add(&b, line, len > 0 && (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    }
    if (b.len > 0) {
        buf_add(&b, "", 1);
    }
    if (b.len == 0 || b.failed) {
        buf_free(&b);
        return NULL;
    }
    return b.data;
}

void envoy_config_free(envoy_config_t *c)
{
    free(c->domain);
    node_free(&c->root);
    memset(c, 0, sizeof *c);
}

/* ---- lookup -------------------------------------------------------------------------------- */

static bool key_is(const envoy_node_t *n, const rls_entry_t *e)
{
    /* the first and last bytes first: a child's key is most often another key, and keys often
     * share a prefix ("d1", "d2"; "x-user", "x-tenant"), which memcmp would be called for */
    return n->key_len == e->key_len && n->key[0] == e->key[0] &&
           n->key[n->key_len - 1] == e->key[e->key_len - 1] &&
           memcmp(n->key, e->key, e->key_len) == 0;
}

/* The child of parent an entry matches: its key and value, the first pattern matching the
 * value, its key. */
static const envoy_node_t *child_for(const envoy_node_t *parent, const rls_entry_t *e)
{
    const envoy_node_t *matched = NULL, *any = NULL;
    for (size_t i = 0; i < parent->n; i++) {
        const envoy_node_t *c = &parent->children[i];
        if (!key_is(c, e)) {
            continue;
        }
        if (c->value == NULL) {
            any = c;
            continue;
        }
        size_t vlen = c->value_len;
        if (!c->glob && vlen == e->value_len && memcmp(c->value, e->value, vlen) == 0) {
            return c;
        }
        if (c->glob && matched == NULL && c->wild != NULL &&
            wildcard_match(c->wild, e->value, e->value_len)) {
            matched = c;
        }
    }
    return matched != NULL ? matched : any;
}

const envoy_node_t *envoy_config_match(const envoy_config_t *c, const rls_entry_t *entries,
                                       size_t n, const envoy_node_t **path)
{
    const envoy_node_t *at = &c->root;
    for (size_t i = 0; i < n; i++) {
        at = child_for(at, &entries[i]);
        if (at == NULL) {
            return NULL;
        }
        if (path != NULL) {
            path[i] = at;
        }
    }
    return n > 0 && at->has_limit ? at : NULL;
}

/* ---- building a tree ----------------------------------------------------------------------- */

/* The child of parent written exactly as e (key, value or none, prefix), or NULL. */
static envoy_node_t *child_written(envoy_node_t *parent, const desc_entry_t *e)
{
    for (size_t i = 0; i < parent->n; i++) {
        envoy_node_t *c = &parent->children[i];
        if (strcmp(c->key, e->key) == 0 && same_value(c->value, e->value) && c->glob == e->glob &&
            c->shared == e->shared) {
            return c;
        }
    }
    return NULL;
}

envoy_node_t *envoy_config_add(envoy_config_t *c, const desc_entry_t *entries, size_t n)
{
    envoy_node_t *at = &c->root;
    for (size_t i = 0; i < n; i++) {
        envoy_node_t *next = child_written(at, &entries[i]);
        if (next == NULL) {
            envoy_node_t *grown = realloc(at->children, (at->n + 1) * sizeof *grown);
            if (grown == NULL) {
                return NULL;
            }
            at->children = grown;
            next = &at->children[at->n];
            const desc_entry_t *e = &entries[i];
            *next = (envoy_node_t){.key = strdup(e->key),
                                   .value = e->value ? strdup(e->value) : NULL,
                                   .glob = e->glob,
                                   .shared = e->shared};
            next->wild = e->glob ? wildcard_compile(e->value, e->value_len) : NULL;
            if (next->key == NULL || (e->value != NULL && next->value == NULL) ||
                (e->glob && next->wild == NULL)) {
                node_free(next);
                return NULL;
            }
            next->key_len = strlen(next->key);
            next->value_len = next->value != NULL ? strlen(next->value) : 0;
            at->n++;
        }
        at = next;
    }
    return at;
}

/* ---- as sluice rules ----------------------------------------------------------------------- */

/* Where a conversion is: the entries from the top level down, and the rules made so far. */
typedef struct to_rules {
    const envoy_config_t *c;
    const envoy_node_t *path[DESC_ENTRIES_MAX]; /* the nodes from the top level down */
    size_t depth;
    ruledef_list_t *out;
    size_t cap; /* rules out has room for */
    char *err;
} to_rules_t;

/* Appends s with every character but A-Z a-z 0-9 _ - as '_', up to cap - 1 bytes in all. */
static void name_add(char *name, size_t cap, const char *s)
{
    size_t n = strlen(name);
    for (; *s != '\0' && n + 1 < cap; s++) {
        char ch = *s;
        bool keep = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
        name[n++] = keep ? ch : '_';
    }
    name[n] = '\0';
}

static bool name_taken(const ruledef_list_t *list, const char *name)
{
    for (size_t i = 0; i < list->n; i++) {
        if (strcmp(list->rules[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

/* The rule's name: the domain and the entries, or, when that is too long or taken, its first
 * characters and a hash of the domain and entries written out exactly. */
static void rule_name(const to_rules_t *t, char *name)
{
    char full[4 * RULE_NAME_MAX] = "";
    uint64_t h = sl_hash64(t->c->domain, strlen(t->c->domain) + 1, 0);
    name_add(full, sizeof full, t->c->domain);
    for (size_t i = 0; i < t->depth; i++) {
        const envoy_node_t *n = t->path[i];
        strncat(full, ".", sizeof full - strlen(full) - 1);
        name_add(full, sizeof full, n->key);
        h = sl_hash64(n->key, strlen(n->key) + 1, h);
        if (n->value != NULL) {
            strncat(full, ":", sizeof full - strlen(full) - 1);
            name_add(full, sizeof full, n->value);
            h = sl_hash64(n->value, strlen(n->value) + 1, h ^ 1);
        }
    }
    if (strlen(full) <= RULE_NAME_MAX && !name_taken(t->out, full)) {
        memcpy(name, full, strlen(full) + 1);
        return;
    }
    snprintf(name, RULE_NAME_MAX + 1, "%.*s-%08x", RULE_NAME_MAX - 9, full, (unsigned)(h >> 32));
}

static char *dup_or_null(const char *s, bool *failed)
{
    char *d = s != NULL ? strdup(s) : NULL;
    *failed = *failed || (s != NULL && d == NULL);
    return d;
}

/* The descriptor of the node at the end of t->path. NULL when out of memory. */
static rule_descriptor_t *descriptor_of(const to_rules_t *t, const envoy_limit_t *l)
{
    rule_descriptor_t *d = calloc(1, sizeof *d);
    bool failed = d == NULL;
    if (failed) {
        return NULL;
    }
    d->domain = dup_or_null(t->c->domain, &failed);
    d->limit_name = dup_or_null(l->name, &failed);
    d->quota = t->path[t->depth - 1]->quota_mode && t->path[t->depth - 1]->has_limit;
    d->entries = calloc(t->depth, sizeof *d->entries);
    d->replaces = calloc(l->nreplaces > 0 ? l->nreplaces : 1, sizeof *d->replaces);
    failed = failed || d->entries == NULL || d->replaces == NULL;
    for (size_t i = 0; !failed && i < t->depth; i++, d->n++) {
        const envoy_node_t *n = t->path[i];
        desc_entry_t *e = &d->entries[i];
        e->key = dup_or_null(n->key, &failed);
        e->value = dup_or_null(n->value, &failed);
        e->value_len = n->value != NULL ? strlen(n->value) : 0;
        e->glob = n->glob;
        e->shared = n->shared;
    }
    for (size_t i = 0; !failed && i < l->nreplaces; i++, d->nreplaces++) {
        d->replaces[i] = dup_or_null(l->replaces[i], &failed);
    }
    if (failed) {
        desc_free(d);
        return NULL;
    }
    return d;
}

/* A rule is made to be stored: what the config store would refuse (a domain, a name or the
 * entries longer than a rule's fields hold) is refused here, where the file can say where. */
static int storable(const ruledef_t *def, const yt_node_t *at, const char *where, char *err)
{
    char *json = ruledef_to_json(def);
    ruledef_t back;
    char why[RULEDEF_ERR_MAX];
    if (json == NULL) {
        return rd_fail(err, at, where, NULL, "out of memory");
    }
    int rc = ruledef_parse_json(json, strlen(json), NULL, &back, why);
    free(json);
    if (rc != 0) {
        const char *bare = strstr(why, ": ") ? strstr(why, ": ") + 2 : why; /* no JSON position */
        return rd_fail(err, at, where, NULL, "cannot be a sluice rule: %s", bare);
    }
    ruledef_free(&back);
    return 0;
}

/* The rule for the node at the end of t->path, appended to t->out: its rate_limit's, or, for a
 * node with no limit at or under it, an unlimited one (see stops_lookup()). */
static int rule_of(to_rules_t *t, const envoy_node_t *n, const char *where)
{
    static const envoy_limit_t none = {.unlimited = true};
    const envoy_limit_t *l = n->has_limit ? &n->limit : &none;
    const yt_node_t at = {.line = n->line, .column = n->column};
    if (t->out->n == t->cap) {
        return rd_fail(t->err, &at, where, NULL, "more than %d descriptors with a limit",
                       RULES_MAX);
    }
    ruledef_t *def = &t->out->rules[t->out->n];
    memset(def, 0, sizeof *def);
    int rc = SL_OK;
    if (l->unlimited) {
        def->unlimited = true;
        rc =
            sl_rule_init(&def->rule, rd_unlimited_algorithm(), RULE_UNLIMITED_LIMIT, SL_NS_PER_SEC);
    } else if (l->requests_per_unit == 0) { /* refuses every request */
        def->blocked = true;
        rc = sl_rule_init(&def->rule, l->algorithm, 1, rls_unit_ns(l->unit));
    } else {
        rc = sl_rule_init(&def->rule, l->algorithm, l->requests_per_unit, rls_unit_ns(l->unit));
    }
    if (rc != SL_OK) {
        return rd_fail(t->err, &at, where, "rate_limit", "%s: %s", sl_algorithm_name(l->algorithm),
                       sl_strerror(rc));
    }
    def->shadow = n->shadow_mode;
    rule_name(t, def->name);
    def->desc = descriptor_of(t, l);
    if (def->desc == NULL) {
        return rd_fail(t->err, &at, where, NULL, "out of memory");
    }
    t->out->n++;
    return storable(def, &at, where, t->err);
}

static size_t limits_under(const envoy_node_t *parent)
{
    size_t n = 0;
    for (size_t i = 0; i < parent->n; i++) {
        n += parent->children[i].has_limit + limits_under(&parent->children[i]);
    }
    return n;
}

/* A node with no limit at or under it still decides a lookup that reaches it: the descriptor has
 * no limit, even where a sibling's prefix or any value would give one. A rule set keeps that as
 * an unlimited rule for the node (and nothing under it). */
static bool stops_lookup(const envoy_node_t *n)
{
    return !n->has_limit && limits_under(n) == 0;
}

/* The rules a tree makes: one per node with a limit or stopping a lookup. */
static size_t rules_needed(const envoy_node_t *parent)
{
    size_t n = 0;
    for (size_t i = 0; i < parent->n; i++) {
        const envoy_node_t *c = &parent->children[i];
        n += stops_lookup(c) ? 1 : c->has_limit + rules_needed(c);
    }
    return n;
}

static int rules_under(to_rules_t *t, const envoy_node_t *parent, const char *path)
{
    for (size_t i = 0; i < parent->n; i++) {
        const envoy_node_t *n = &parent->children[i];
        char where[PATH_MAX_LEN];
        snprintf(where, sizeof where, "%.200s%sdescriptors[%zu]", path, path[0] != '\0' ? "." : "",
                 i);
        if (t->depth == DESC_ENTRIES_MAX) {
            return rd_fail(t->err, &(yt_node_t){.line = n->line, .column = n->column}, where, NULL,
                           "nested deeper than %d descriptors", DESC_ENTRIES_MAX);
        }
        t->path[t->depth++] = n;
        int rc = stops_lookup(n)                                  ? rule_of(t, n, where)
                 : (n->has_limit ? rule_of(t, n, where) : 0) == 0 ? rules_under(t, n, where)
                                                                  : -1;
        t->depth--;
        if (rc != 0) {
            return -1;
        }
    }
    return 0;
}

int envoy_config_rules(const envoy_config_t *c, ruledef_list_t *out, char *err)
{
    *out = (ruledef_list_t){0};
    if (c->root.n == 0 && !c->listed) { /* what a file cut short looks like */
        return rd_fail(err, NULL, NULL, "descriptors",
                       "there are none: a configuration names its descriptors, or "
                       "`descriptors: []` for none (to remove a domain's rules, stop giving its "
                       "file)");
    }
    size_t n = rules_needed(&c->root);
    to_rules_t t = {.c = c, .out = out, .cap = n < RULES_MAX ? n : RULES_MAX, .err = err};
    out->rules = calloc(t.cap > 0 ? t.cap : 1, sizeof *out->rules);
    if (out->rules == NULL) {
        return rd_fail(err, NULL, NULL, NULL, "out of memory");
    }
    if (rules_under(&t, &c->root, "") != 0) {
        ruledef_list_free(out);
        return -1;
    }
    return 0;
}
