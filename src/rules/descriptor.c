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
#include "rules/wildcard.h"

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
 * string. With `pattern` (a value), a '*' written as such is a wildcard: when there is one,
 * *wild is set and the string is a pattern of wildcard.h (every other '*' and every '\\'
 * escaped by a '\\'); when there is none, the text as it is. NULL with err on a bad escape, a
 * NUL, text that is not UTF-8, or no memory. `what` names it in messages.
 */
static char *decode(const char *s, size_t len, const char *what, bool pattern, bool *wild,
                    char *err, size_t cap)
{
    char *text = malloc(len + 1), *out = malloc(2 * len + 1);
    bool *star = calloc(len + 1, sizeof *star); /* text[i] is a wildcard */
    size_t n = 0;
    *wild = false;
    for (size_t i = 0; text != NULL && out != NULL && star != NULL && i < len; i++, n++) {
        int hi, lo;
        if (s[i] != '%') {
            star[n] = pattern && s[i] == '*';
            *wild = *wild || star[n];
            text[n] = s[i];
            continue;
        }
        if (i + 2 >= len || (hi = hex_digit(s[i + 1])) < 0 || (lo = hex_digit(s[i + 2])) < 0) {
            snprintf(err, cap, "%s: '%%' must start an escape of two hex digits (%%25 is '%%')",
                     what);
            goto fail;
        }
        text[n] = (char)(hi * 16 + lo);
        i += 2;
    }
    if (text == NULL || out == NULL || star == NULL) {
        snprintf(err, cap, "out of memory");
        goto fail;
    }
    text[n] = '\0';
    if (memchr(text, '\0', n) != NULL || !text_is_utf8(text, n)) {
        snprintf(err, cap, "%s: %s", what,
                 memchr(text, '\0', n) != NULL ? "holds a NUL (%00)" : "is not UTF-8");
        goto fail;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (*wild && !star[i] && (text[i] == '*' || text[i] == '\\')) {
            out[o++] = '\\';
        }
        out[o++] = text[i];
    }
    out[o] = '\0';
    free(text);
    free(star);
    return out;
fail:
    free(text);
    free(out);
    free(star);
    return NULL;
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
    bool shared = vlen > 0 && v[0] == '=';
    if (shared) {
        v++;
        vlen--;
        trim(&v, &vlen);
    }
    if (eq != NULL && vlen == 0) {
        snprintf(err, cap, "%s: the value is empty (write the key alone to match any value)", what);
        return -1;
    }
    desc_entry_t *e = &d->entries[d->n];
    bool wild = false;
    e->key = decode(s, klen, what, false, &wild, err, cap);
    if (e->key == NULL) {
        return -1;
    }
    d->n++;
    if (eq != NULL) {
        e->value = decode(v, vlen, what, true, &e->glob, err, cap);
        if (e->value == NULL) {
            return -1;
        }
        e->value_len = strlen(e->value);
        e->shared = shared;
    }
    if (shared && !e->glob) {
        snprintf(err, cap,
                 "%s: '==' counts every value a pattern matches as one: the value needs "
                 "a wildcard ('*')",
                 what);
        return -1;
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
    bool wild = false;
    char *name = decode(s, len, what, false, &wild, err, cap);
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

/* Appends s[0..len) with what the reader would take otherwise escaped. With `value`, every '*'
 * is escaped (a literal star); with `glob` too, s is a pattern (wildcard.h): its wildcards are
 * written as '*', the bytes its '\\' escapes as themselves. */
static void encode(buf_t *out, const char *s, size_t len, bool value, bool glob)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        if (glob && s[i] == '*') {
            buf_add(out, "*", 1);
            continue;
        }
        i += glob && s[i] == '\\' && i + 1 < len;
        unsigned char c = (unsigned char)s[i];
        bool edge_space = c == ' ' && (i == 0 || i + 1 == len);
        bool star = c == '*' && value;
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
        encode(&b, e->key, strlen(e->key), false, false);
        if (e->value != NULL) {
            buf_add(&b, e->shared ? "==" : "=", e->shared ? 2 : 1);
            encode(&b, e->value, e->value_len, true, e->glob);
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
        encode(&b, d->replaces[i], strlen(d->replaces[i]), false, false);
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
        a->n != b->n || a->nreplaces != b->nreplaces || a->quota != b->quota) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        const desc_entry_t *x = &a->entries[i], *y = &b->entries[i];
        if (strcmp(x->key, y->key) != 0 || !same_text(x->value, y->value) || x->glob != y->glob ||
            x->shared != y->shared) {
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
