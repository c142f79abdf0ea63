/*
 * descriptor.c - a rule's descriptor: its entries and replaces as text, both ways (see
 * descriptor.h).
 */
#include "rules/descriptor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/buf.h"
#include "proto/text.h"

/* ---- reading ------------------------------------------------------------------------------- */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/*
 * Decodes one key, value or name (s[0..len), its %XX escapes) into a malloc'ed NUL-terminated
 * string; *star_escaped tells whether its last character was written "%2A". NULL with err on a
 * bad escape, a NUL, text that is not UTF-8, or no memory. `what` names it in messages.
 */
static char *decode(const char *s, size_t len, const char *what, bool *star_escaped, char *err,
                    size_t cap)
{
    char *out = malloc(len + 1);
    if (out == NULL) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    size_t n = 0;
    *star_escaped = false;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        *star_escaped = false;
        if (s[i] != '%') {
            out[n++] = s[i];
            continue;
        }
        if (i + 2 >= len || (hi = hex_digit(s[i + 1])) < 0 || (lo = hex_digit(s[i + 2])) < 0) {
            snprintf(err, cap, "%s: '%%' must start an escape of two hex digits (%%25 is '%%')",
                     what);
            free(out);
            return NULL;
        }
        out[n++] = (char)(hi * 16 + lo);
        *star_escaped = out[n - 1] == '*';
        i += 2;
    }
    out[n] = '\0';
    if (memchr(out, '\0', n) != NULL || !text_is_utf8(out, n)) {
        snprintf(err, cap, "%s: %s", what,
                 memchr(out, '\0', n) != NULL ? "holds a NUL (%00)" : "is not UTF-8");
        free(out);
        return NULL;
    }
    return out;
}

/* Drops the spaces at both ends of s[0..*len). */
static void trim(const char **s, size_t *len)
{
    while (*len > 0 && **s == ' ') {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && (*s)[*len - 1] == ' ') {
        (*len)--;
    }
}

/* Splits text at ',' into trimmed items, calling fn on each; stops at the first failure. */
typedef int (*item_fn)(void *arg, const char *s, size_t len, size_t index, char *err, size_t cap);

static int split(const char *text, size_t len, const char *what, item_fn fn, void *arg, char *err,
                 size_t cap)
{
    if (len > DESC_WRITTEN_MAX) {
        snprintf(err, cap, "longer than %d bytes", DESC_WRITTEN_MAX);
        return -1;
    }
    size_t index = 0;
    for (size_t start = 0; start <= len; index++) {
        const char *comma = memchr(text + start, ',', len - start);
        size_t end = comma != NULL ? (size_t)(comma - text) : len;
        const char *item = text + start;
        size_t n = end - start;
        trim(&item, &n);
        if (n == 0) {
            snprintf(err, cap, "%s %zu is empty", what, index + 1);
            return -1;
        }
        if (fn(arg, item, n, index, err, cap) != 0) {
            return -1;
        }
        start = end + 1;
    }
    return 0;
}

static void entry_free(desc_entry_t *e)
{
    free(e->key);
    free(e->value);
    *e = (desc_entry_t){0};
}

static void entries_free(rule_descriptor_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        entry_free(&d->entries[i]);
    }
    free(d->entries);
    d->entries = NULL;
    d->n = 0;
}

static int entry_item(void *arg, const char *s, size_t len, size_t index, char *err, size_t cap)
{
    rule_descriptor_t *d = arg;
    if (index >= DESC_ENTRIES_MAX) {
        snprintf(err, cap, "more than %d entries", DESC_ENTRIES_MAX);
        return -1;
    }
    const char *eq = memchr(s, '=', len);
    size_t klen = eq != NULL ? (size_t)(eq - s) : len;
    const char *v = eq != NULL ? eq + 1 : s + len;
    size_t vlen = (size_t)(s + len - v);
    trim(&s, &klen);
    trim(&v, &vlen);
    char what[48];
    snprintf(what, sizeof what, "entry %zu", index + 1);
    if (klen == 0) {
        snprintf(err, cap, "%s: the key is empty", what);
        return -1;
    }
    if (eq != NULL && vlen == 0) {
        snprintf(err, cap, "%s: the value is empty (write the key alone to match any value)", what);
        return -1;
    }
    desc_entry_t *e = &d->entries[d->n];
    bool star = false;
    e->key = decode(s, klen, what, &star, err, cap);
    if (e->key == NULL) {
        return -1;
    }
    d->n++;
    if (eq != NULL) {
        e->value = decode(v, vlen, what, &star, err, cap);
        if (e->value == NULL) {
            return -1;
        }
        e->value_len = strlen(e->value);
        e->prefix = e->value[e->value_len - 1] == '*' && !star;
        e->value_len -= e->prefix;
    }
    return 0;
}

int desc_parse_entries(rule_descriptor_t *d, const char *text, size_t len, char *err, size_t cap)
{
    entries_free(d);
    d->entries = calloc(DESC_ENTRIES_MAX, sizeof *d->entries);
    if (d->entries == NULL) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    size_t bytes = 0;
    int rc = split(text, len, "entry", entry_item, d, err, cap);
    for (size_t i = 0; rc == 0 && i < d->n; i++) {
        bytes += strlen(d->entries[i].key) + d->entries[i].value_len;
    }
    if (rc == 0 && bytes > DESC_TEXT_MAX) {
        snprintf(err, cap, "its keys and values hold more than %d bytes", DESC_TEXT_MAX);
        rc = -1;
    }
    if (rc != 0) {
        entries_free(d);
    }
    return rc;
}

static void replaces_free(rule_descriptor_t *d)
{
    for (size_t i = 0; i < d->nreplaces; i++) {
        free(d->replaces[i]);
    }
    free(d->replaces);
    d->replaces = NULL;
    d->nreplaces = 0;
}

static int name_item(void *arg, const char *s, size_t len, size_t index, char *err, size_t cap)
{
    rule_descriptor_t *d = arg;
    char what[48];
    snprintf(what, sizeof what, "name %zu", index + 1);
    char **grown = realloc(d->replaces, (d->nreplaces + 1) * sizeof *grown);
    if (grown == NULL) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    d->replaces = grown;
    bool star = false;
    char *name = decode(s, len, what, &star, err, cap);
    if (name == NULL) {
        return -1;
    }
    d->replaces[d->nreplaces++] = name;
    return 0;
}

int desc_parse_replaces(rule_descriptor_t *d, const char *text, size_t len, char *err, size_t cap)
{
    replaces_free(d);
    size_t bytes = 0;
    int rc = split(text, len, "name", name_item, d, err, cap);
    for (size_t i = 0; rc == 0 && i < d->nreplaces; i++) {
        bytes += strlen(d->replaces[i]);
    }
    if (rc == 0 && bytes > DESC_TEXT_MAX) {
        snprintf(err, cap, "its names hold more than %d bytes", DESC_TEXT_MAX);
        rc = -1;
    }
    if (rc != 0) {
        replaces_free(d);
    }
    return rc;
}

/* A domain or limit name: 1..DESC_NAME_MAX bytes of UTF-8 without NUL, copied into *out. */
static int set_name(char **out, const char *text, size_t len, char *err, size_t cap)
{
    if (len == 0 || len > DESC_NAME_MAX || memchr(text, '\0', len) != NULL ||
        !text_is_utf8(text, len)) {
        snprintf(err, cap, "must be 1..%d bytes of UTF-8 text without NUL", DESC_NAME_MAX);
        return -1;
    }
    char *copy = strndup(text, len);
    if (copy == NULL) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    free(*out);
    *out = copy;
    return 0;
}

int desc_set(rule_descriptor_t **d, const char *field, const char *text, size_t len, char *err,
             size_t cap)
{
    if (*d == NULL && (*d = calloc(1, sizeof **d)) == NULL) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    if (strcmp(field, "domain") == 0) {
        return set_name(&(*d)->domain, text, len, err, cap);
    }
    if (strcmp(field, "limit_name") == 0) {
        return set_name(&(*d)->limit_name, text, len, err, cap);
    }
    return strcmp(field, "descriptor") == 0 ? desc_parse_entries(*d, text, len, err, cap)
                                            : desc_parse_replaces(*d, text, len, err, cap);
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Appends s[0..len) with what the reader would take otherwise escaped; `literal_star` escapes a
 * last '*' (a value that is not a prefix). */
static void encode(buf_t *out, const char *s, size_t len, bool literal_star)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool edge_space = c == ' ' && (i == 0 || i + 1 == len);
        bool star = c == '*' && literal_star && i + 1 == len;
        if (c == '%' || c == ',' || c == '=' || c < 0x20 || c == 0x7f || edge_space || star) {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            buf_add(out, esc, 3);
        } else {
            buf_add(out, &s[i], 1);
        }
    }
}

static char *finish(buf_t *b)
{
    buf_add(b, "", 1);
    if (b->failed) {
        buf_free(b);
        return NULL;
    }
    return b->data;
}

char *desc_entries_text(const rule_descriptor_t *d)
{
    buf_t b = {0};
    for (size_t i = 0; i < d->n; i++) {
        const desc_entry_t *e = &d->entries[i];
        if (i > 0) {
            buf_add(&b, ", ", 2);
        }
        encode(&b, e->key, strlen(e->key), false);
        if (e->value != NULL) {
            buf_add(&b, "=", 1);
            encode(&b, e->value, e->value_len, true);
            if (e->prefix) {
                buf_add(&b, "*", 1);
            }
        }
    }
    return finish(&b);
}

char *desc_replaces_text(const rule_descriptor_t *d)
{
    buf_t b = {0};
    for (size_t i = 0; i < d->nreplaces; i++) {
        if (i > 0) {
            buf_add(&b, ", ", 2);
        }
        encode(&b, d->replaces[i], strlen(d->replaces[i]), false);
    }
    return finish(&b);
}

/* ---- equality and freeing ------------------------------------------------------------------ */

static bool same_text(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

bool desc_equal(const rule_descriptor_t *a, const rule_descriptor_t *b)
{
    if (a == NULL || b == NULL) {
        return a == b;
    }
    if (!same_text(a->domain, b->domain) || !same_text(a->limit_name, b->limit_name) ||
        a->n != b->n || a->nreplaces != b->nreplaces) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        const desc_entry_t *x = &a->entries[i], *y = &b->entries[i];
        if (strcmp(x->key, y->key) != 0 || !same_text(x->value, y->value) ||
            x->prefix != y->prefix) {
            return false;
        }
    }
    for (size_t i = 0; i < a->nreplaces; i++) {
        if (strcmp(a->replaces[i], b->replaces[i]) != 0) {
            return false;
        }
    }
    return true;
}

void desc_free(rule_descriptor_t *d)
{
    if (d == NULL) {
        return;
    }
    entries_free(d);
    replaces_free(d);
    free(d->domain);
    free(d->limit_name);
    free(d);
}
