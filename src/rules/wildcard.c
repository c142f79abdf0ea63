/*
 * wildcard.c - value wildcards compiled into literal segments (see wildcard.h).
 */
#define _GNU_SOURCE /* memmem */
#include "rules/wildcard.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct wildcard {
    size_t n;     /* segments: wildcards + 1 */
    size_t fixed; /* bytes of all the segments: a value shorter never matches */
    size_t *off;  /* segment i is text[off[i] .. off[i + 1]) */
    char text[];  /* the segments, unescaped, one after the other */
};

bool wildcard_has(const char *pat, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (pat[i] == '\\') {
            i++;
        } else if (pat[i] == '*') {
            return true;
        }
    }
    return false;
}

wildcard_t *wildcard_compile(const char *pat, size_t len)
{
    wildcard_t *w = malloc(sizeof *w + len + 1);
    size_t *off = malloc((len + 2) * sizeof *off); /* at most a segment per byte, and one */
    if (w == NULL || off == NULL) {
        free(w);
        free(off);
        return NULL;
    }
    *w = (wildcard_t){.off = off};
    size_t o = 0;
    off[0] = 0;
    for (size_t i = 0; i < len; i++) {
        if (pat[i] == '\\' && i + 1 < len) {
            w->text[o++] = pat[++i];
        } else if (pat[i] == '*') {
            off[++w->n] = o;
        } else {
            w->text[o++] = pat[i];
        }
    }
    off[++w->n] = o;
    w->fixed = o;
    return w;
}

void wildcard_free(wildcard_t *w)
{
    if (w != NULL) {
        free(w->off);
        free(w);
    }
}

static const char *seg(const wildcard_t *w, size_t i, size_t *len)
{
    *len = w->off[i + 1] - w->off[i];
    return w->text + w->off[i];
}

bool wildcard_match(const wildcard_t *w, const char *s, size_t len)
{
    size_t first_len, last_len;
    const char *first = seg(w, 0, &first_len), *last = seg(w, w->n - 1, &last_len);
    if (w->n == 1) {
        return len == first_len && memcmp(s, first, len) == 0;
    }
    if (len < w->fixed || memcmp(s, first, first_len) != 0 ||
        memcmp(s + len - last_len, last, last_len) != 0) {
        return false;
    }
    const char *at = s + first_len, *end = s + len - last_len;
    for (size_t i = 1; i + 1 < w->n; i++) {
        size_t mid_len;
        const char *mid = seg(w, i, &mid_len);
        const char *found = mid_len == 0 ? at : memmem(at, (size_t)(end - at), mid, mid_len);
        if (found == NULL) {
            return false;
        }
        at = found + mid_len;
    }
    return true;
}

size_t wildcard_quote(const char *s, size_t len, bool stars_wild, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' || (s[i] == '*' && !stars_wild)) {
            out[o++] = '\\';
        }
        out[o++] = s[i];
    }
    out[o] = '\0';
    return o;
}
