/*
 * descriptor.h - the descriptor a rule answers for Envoy's rate limit service: a domain and a
 * list of entries, each a key with a value, a value prefix or any value, as envoyproxy/ratelimit
 * configures its limits (rules/envoy_config.h reads that format; ruledef.h keeps a rule's).
 *
 * In a rule the entries are one line of text (a rule's fields are flat, in YAML and JSON alike):
 *
 *   descriptor: "tenant=acme, user"      tenant must be acme; any user, counted per user
 *   descriptor: "path=/api*"             any path starting with /api
 *   descriptor: "path=/a*-v1*"           wildcards anywhere, any number of them (wildcard.h)
 *   descriptor: "file==f*.pdf"           every file matching f*.pdf counted as one value
 *                                        (envoyproxy/ratelimit's share_threshold)
 *
 * Entries are separated by ','; spaces around an entry, a key or a value are not part of it. In
 * keys and values, '%', ',', '=', a space at either end and control characters are written %XX
 * (hex), so any UTF-8 text can be said; in a value, '*' is a wildcard and "%2A" a literal '*'.
 * A value written after "==" must hold a wildcard: every value it matches is counted on the
 * pattern itself. A rule's `replaces` is a list of limit names written the same way ("a, b").
 *
 * Pure: no I/O. Every function that fails writes a sentence into err (cap bytes).
 */
#ifndef SLUICE_RULES_DESCRIPTOR_H
#define SLUICE_RULES_DESCRIPTOR_H

#include <stdbool.h>
#include <stddef.h>

#define DESC_TEXT_MAX    2048 /* most bytes of keys and values, or of names, in one field */
#define DESC_WRITTEN_MAX (4 * DESC_TEXT_MAX) /* longest field as written (escapes included) */
#define DESC_ENTRIES_MAX 32                  /* most entries in one descriptor */
#define DESC_NAME_MAX    255                 /* longest domain or limit name, bytes */

typedef struct desc_entry {
    char *key;        /* NUL-terminated, not empty */
    char *value;      /* NUL-terminated, not empty; NULL: any value (counted per value); with
                         glob, a pattern of wildcard.h ('*' any run, '\\' makes the next literal) */
    size_t value_len; /* bytes of value */
    bool glob;        /* value is a pattern holding a wildcard */
    bool shared;      /* with glob: every value it matches counted as one (share_threshold) */
} desc_entry_t;

typedef struct rule_descriptor {
    char *domain; /* NUL-terminated, 1..DESC_NAME_MAX bytes */
    desc_entry_t *entries;
    size_t n;         /* entries, 1..DESC_ENTRIES_MAX */
    char *limit_name; /* the limit's name (statuses, replaces); NULL: none */
    char **replaces;  /* names of limits this one replaces when both apply */
    size_t nreplaces;
    bool quota; /* quota_mode: over its limit, it refuses a request only when every
                   quota descriptor of the request is (envoyproxy/ratelimit's) */
} rule_descriptor_t;

/* Parses entries text (len bytes) into d->entries, replacing any there. Returns 0, or -1 with
 * err: an empty entry or key, a value of '=' alone, "==" before a value without a wildcard, a
 * bad %XX, text that is not UTF-8, more
 * than DESC_ENTRIES_MAX entries, more than DESC_TEXT_MAX bytes of keys and values, or more
 * than DESC_WRITTEN_MAX bytes of text. */
int desc_parse_entries(rule_descriptor_t *d, const char *text, size_t len, char *err, size_t cap);

/* Parses a list of names ("a, b") into d->replaces, replacing any there; errors as above. */
int desc_parse_replaces(rule_descriptor_t *d, const char *text, size_t len, char *err, size_t cap);

/* Sets one field of *d, made when it is NULL: "domain" or "limit_name" (1..DESC_NAME_MAX bytes
 * of UTF-8 without NUL), "descriptor" (desc_parse_entries) or "replaces" (desc_parse_replaces),
 * from text[0..len). Returns 0, or -1 with err. */
int desc_set(rule_descriptor_t **d, const char *field, const char *text, size_t len, char *err,
             size_t cap);

/* The canonical text of d's entries / replaces (entries joined by ", "), which the parsers read
 * back as equal. malloc'ed; NULL on allocation failure. */
char *desc_entries_text(const rule_descriptor_t *d);
char *desc_replaces_text(const rule_descriptor_t *d);

/* True when a and b (either may be NULL) describe the same descriptor, name, replaces and
 * quota mode. */
bool desc_equal(const rule_descriptor_t *a, const rule_descriptor_t *b);

/* Frees d and what it holds; NULL is fine. */
void desc_free(rule_descriptor_t *d);

#endif /* SLUICE_RULES_DESCRIPTOR_H */
