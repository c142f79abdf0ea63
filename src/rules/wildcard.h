/*
 * wildcard.h - envoyproxy/ratelimit's value wildcards: in a pattern, '*' matches any run of bytes
 * (none too) and every other byte matches itself, anywhere and any number of times ("/api*",
 * "bar*b", "foo*bar*baz"). '\' makes the byte after it literal ("\*" a star, "\\" a backslash),
 * so a sluice descriptor can hold a star of its own; a '\' at the end is itself.
 *
 * A pattern is compiled once into its literal segments (the text between wildcards); a match is
 * then the first segment at the start, the last at the end and each one between at its leftmost
 * place after the one before: at most one pass over the value per segment, no allocation, no
 * backtracking whatever the pattern or the value.
 *
 * Pure: no I/O.
 */
#ifndef SLUICE_RULES_WILDCARD_H
#define SLUICE_RULES_WILDCARD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct wildcard wildcard_t;

/* True when pat[0..len) holds a '*' that is a wildcard (not escaped). */
bool wildcard_has(const char *pat, size_t len);

/* The pattern pat[0..len) compiled; NULL when out of memory. Any bytes are a pattern. */
wildcard_t *wildcard_compile(const char *pat, size_t len);

/* Frees what wildcard_compile() made; NULL is fine. */
void wildcard_free(wildcard_t *w);

/* True when the whole of s[0..len) matches w. */
bool wildcard_match(const wildcard_t *w, const char *s, size_t len);

/* Writes s[0..len) as a pattern into out (room for 2 * len + 1 bytes; NUL-terminated): '\'
 * escaped, and '*' escaped unless stars_wild. Returns the bytes written, NUL not counted. */
size_t wildcard_quote(const char *s, size_t len, bool stars_wild, char *out);

#endif /* SLUICE_RULES_WILDCARD_H */
