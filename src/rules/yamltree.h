/*
 * yamltree.h - a YAML document read (with libyaml) into a small tree of nodes that remember
 * where they were written, for the YAML files sluice reads: rules files (ruledef_yaml.c) and
 * sluiced.yaml (server/settings.c). Readers walk the tree and name the line and column of a bad
 * value, which a streaming reader could only do with a state machine per file format.
 *
 * Scalars are resolved as YAML 1.2's core schema does, so that `limit: 10` is an integer and
 * `limit: "10"` a string:
 *
 *   quoted ('..', "..") or block (|, >) scalar, or tagged !!str     YT_STRING
 *   plain  ~ null Null NULL or empty                                 YT_NULL
 *   plain  true True TRUE false False FALSE                          YT_BOOL
 *   plain  [-+]?[0-9]+                                               YT_INT (see int_status)
 *   plain  [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)?, .inf, .nan   YT_FLOAT
 *   any other plain scalar                                           YT_STRING
 *
 * Aliases (*name) are refused (no "billion laughs"), as are tags other than the standard ones,
 * more than one document, and nesting deeper than YT_DEPTH_MAX.
 *
 * The node type is also what ruledef_json.c builds from a JSON object, so that rule validation
 * is written once for both formats.
 */
#ifndef SLUICE_RULES_YAMLTREE_H
#define SLUICE_RULES_YAMLTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YT_DEPTH_MAX 32  /* deepest nesting of sequences and mappings accepted */
#define YT_ERR_MAX   256 /* a yt_parse error message fits in this */

typedef enum yt_kind {
    YT_NULL,
    YT_BOOL,
    YT_INT,
    YT_FLOAT,
    YT_STRING,
    YT_SEQ,
    YT_MAP,
} yt_kind_t;

/* How a YT_INT was written. Only YT_INT_OK carries a usable `integer`. */
typedef enum yt_int_status {
    YT_INT_OK = 0,
    YT_INT_OVERFLOW,     /* beyond int64_t */
    YT_INT_PLUS,         /* written with a '+' sign */
    YT_INT_LEADING_ZERO, /* "007": YAML 1.1 would read it as octal, so it is refused */
} yt_int_status_t;

typedef struct yt_node yt_node_t;
struct yt_node {
    yt_kind_t kind;
    unsigned line;   /* where the node starts, 1-based; 0 = unknown */
    unsigned column; /* 1-based, in characters */
    char *text;      /* scalars: the text as parsed (escapes decoded), malloc'ed, NUL-terminated
                        too (it may also contain NULs); NULL for nodes built from JSON numbers */
    size_t len;      /* bytes of text */
    bool boolean;    /* YT_BOOL */
    int64_t integer; /* YT_INT with int_status YT_INT_OK */
    yt_int_status_t int_status;
    size_t n;          /* YT_SEQ: items; YT_MAP: key/value pairs */
    yt_node_t **items; /* YT_SEQ: n items; YT_MAP: 2n nodes, key then value */
};

/*
 * Parses a YAML stream of len bytes holding at most one document. Returns 0 and sets *root to
 * the document's root node (NULL for a stream with no document, e.g. only comments), which the
 * caller frees with yt_free(); or -1 with "line L, column C: problem" in err (err_cap bytes).
 */
int yt_parse(const char *text, size_t len, yt_node_t **root, char *err, size_t err_cap);

/* Frees a node and everything under it. NULL is a no-op. */
void yt_free(yt_node_t *node);

/* Allocates a zeroed node of `kind` at line/column; NULL on allocation failure. */
yt_node_t *yt_node_new(yt_kind_t kind, unsigned line, unsigned column);

/* Appends child to parent's items (a YT_SEQ item, or a YT_MAP key or value: keys and values
 * alternate). Returns 0, or -1 on allocation failure (child is then not owned by parent). */
int yt_append(yt_node_t *parent, yt_node_t *child);

/* A map's value for a plain-text key, or NULL. */
const yt_node_t *yt_map_get(const yt_node_t *map, const char *key);

/* "an integer", "a string", ...: the kind's name with its article, for error messages. */
const char *yt_kind_name(yt_kind_t kind);

#endif /* SLUICE_RULES_YAMLTREE_H */
