/*
 * yamltree.c - libyaml's event stream folded into a tree of positioned nodes (see yamltree.h).
 *
 * The builder keeps a stack of the open collections (at most YT_DEPTH_MAX); every node is
 * attached to its parent as soon as it is created, so on any error freeing the root frees
 * everything.
 */
#include "rules/yamltree.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

static int fail(char *err, size_t cap, unsigned line, unsigned column, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fail(char *err, size_t cap, unsigned line, unsigned column, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(err, cap, "line %u, column %u: ", line, column);
    if (n >= 0 && (size_t)n < cap)
        vsnprintf(err + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

yt_node_t *yt_node_new(yt_kind_t kind, unsigned line, unsigned column)
{
    yt_node_t *n = calloc(1, sizeof(*n));
    if (n != NULL) {
        n->kind = kind;
        n->line = line;
        n->column = column;
    }
    return n;
}

/* Items held: a map holding an odd number has a key waiting for its value. */
static size_t held(const yt_node_t *n)
{
    if (n->kind != YT_MAP)
        return n->n;
    size_t count = 2 * n->n;
    return n->items != NULL && n->items[count] != NULL ? count + 1 : count;
}

void yt_free(yt_node_t *node)
{
    if (node == NULL)
        return;
    size_t count = held(node);
    for (size_t i = 0; i < count; i++)
        yt_free(node->items[i]);
    free(node->items);
    free(node->text);
    free(node);
}

int yt_append(yt_node_t *parent, yt_node_t *child)
{
    size_t count = held(parent);
    /* items always has room for one more plus a NULL sentinel */
    yt_node_t **grown = realloc(parent->items, (count + 2) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    parent->items = grown;
    grown[count] = child;
    grown[count + 1] = NULL;
    if (parent->kind != YT_MAP || count % 2 == 1)
        parent->n++;
    return 0;
}

const yt_node_t *yt_map_get(const yt_node_t *map, const char *key)
{
    if (map == NULL || map->kind != YT_MAP)
        return NULL;
    size_t klen = strlen(key);
    for (size_t i = 0; i < map->n; i++) {
        const yt_node_t *k = map->items[2 * i];
        if (k->text != NULL && k->len == klen && memcmp(k->text, key, klen) == 0)
            return map->items[2 * i + 1];
    }
    return NULL;
}

const char *yt_kind_name(yt_kind_t kind)
{
    switch (kind) {
    case YT_NULL:
        return "null";
    case YT_BOOL:
        return "a boolean";
    case YT_INT:
        return "an integer";
    case YT_FLOAT:
        return "a fractional number";
    case YT_STRING:
        return "a string";
    case YT_SEQ:
        return "a list";
    case YT_MAP:
        return "a mapping";
    }
    return "?";
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool text_is(const char *t, size_t len, const char *const *words)
{
    for (; *words != NULL; words++) {
        if (strlen(*words) == len && memcmp(*words, t, len) == 0)
            return true;
    }
    return false;
}

/* [-+]?[0-9]+ into n (kind, integer, int_status). Returns false when t is not one. */
static bool resolve_int(yt_node_t *n, const char *t, size_t len)
{
    size_t i = (len > 0 && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
    if (i == len)
        return false;
    for (size_t j = i; j < len; j++) {
        if (!is_digit(t[j]))
            return false;
    }
    n->kind = YT_INT;
    n->int_status = YT_INT_OK;
    int64_t v = 0;
    for (size_t j = i; j < len; j++) {
        int d = t[j] - '0';
        if (__builtin_mul_overflow(v, 10, &v) ||
            (t[0] == '-' ? __builtin_sub_overflow(v, d, &v) : __builtin_add_overflow(v, d, &v))) {
            n->int_status = YT_INT_OVERFLOW;
            return true;
        }
    }
    n->integer = v;
    if (t[0] == '+')
        n->int_status = YT_INT_PLUS;
    else if (len - i > 1 && t[i] == '0')
        n->int_status = YT_INT_LEADING_ZERO;
    return true;
}

/* YAML 1.2 core schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool is_float(const char *t, size_t len)
{
    static const char *const special[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf",
                                          "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                                          ".NaN",  ".NAN",  NULL};
    if (text_is(t, len, special))
        return true;
    size_t i = 0;
    if (i < len && (t[i] == '-' || t[i] == '+'))
        i++;
    size_t int_digits = 0, frac_digits = 0;
    while (i < len && is_digit(t[i])) {
        i++;
        int_digits++;
    }
    if (i < len && t[i] == '.') {
        i++;
        while (i < len && is_digit(t[i])) {
            i++;
            frac_digits++;
        }
    }
    if (int_digits == 0 && frac_digits == 0)
        return false;
    if (i < len && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < len && (t[i] == '-' || t[i] == '+'))
            i++;
        size_t exp_digits = 0;
        while (i < len && is_digit(t[i])) {
            i++;
            exp_digits++;
        }
        if (exp_digits == 0)
            return false;
    }
    return i == len;
}

static void resolve_plain(yt_node_t *n)
{
    static const char *const nulls[] = {"~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    const char *t = n->text;
    size_t len = n->len;
    if (len == 0 || text_is(t, len, nulls)) {
        n->kind = YT_NULL;
    } else if (text_is(t, len, trues) || text_is(t, len, falses)) {
        n->kind = YT_BOOL;
        n->boolean = t[0] == 't' || t[0] == 'T';
    } else if (resolve_int(n, t, len)) {
        /* kind set */
    } else if (is_float(t, len)) {
        n->kind = YT_FLOAT;
    } else {
        n->kind = YT_STRING;
    }
}

/* A collection's tag may be absent or the standard one for its kind. */
static bool tag_ok(const yaml_char_t *tag, const char *standard)
{
    return tag == NULL || strcmp((const char *)tag, "!") == 0 ||
           strcmp((const char *)tag, standard) == 0;
}

static yt_node_t *scalar_node(const yaml_event_t *ev, char *err, size_t cap)
{
    unsigned line = (unsigned)ev->start_mark.line + 1, col = (unsigned)ev->start_mark.column + 1;
    const char *tag = (const char *)ev->data.scalar.tag;
    if (tag != NULL && strcmp(tag, "!") != 0 && strcmp(tag, YAML_STR_TAG) != 0) {
        fail(err, cap, line, col, "unsupported tag '%.64s'", tag);
        return NULL;
    }
    yt_node_t *n = yt_node_new(YT_STRING, line, col);
    char *text = malloc(ev->data.scalar.length + 1);
    if (n == NULL || text == NULL) {
        free(n);
        free(text);
        fail(err, cap, line, col, "out of memory");
        return NULL;
    }
    memcpy(text, ev->data.scalar.value, ev->data.scalar.length);
    text[ev->data.scalar.length] = '\0';
    n->text = text;
    n->len = ev->data.scalar.length;
    if (tag == NULL && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        resolve_plain(n);
    return n;
}

/* Line and column (1-based, in characters) of byte offset `off` in text. */
static void position_of(const char *text, size_t len, size_t off, unsigned *line, unsigned *column)
{
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *column = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            (*column)++;
        }
    }
}

static int parser_error(const yaml_parser_t *p, const char *text, size_t len, char *err, size_t cap)
{
    unsigned line, col;
    if (p->error == YAML_MEMORY_ERROR)
        return fail(err, cap, 1, 1, "out of memory");
    if (p->error == YAML_READER_ERROR) {
        position_of(text, len, p->problem_offset, &line, &col);
        return fail(err, cap, line, col, "%s", p->problem ? p->problem : "unreadable input");
    }
    line = (unsigned)p->problem_mark.line + 1;
    col = (unsigned)p->problem_mark.column + 1;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->context != NULL)
        return fail(err, cap, line, col, "%s (%s at line %u, column %u)", problem, p->context,
                    (unsigned)p->context_mark.line + 1, (unsigned)p->context_mark.column + 1);
    return fail(err, cap, line, col, "%s", problem);
}

typedef struct builder {
    yt_node_t *root;
    yt_node_t *stack[YT_DEPTH_MAX];
    size_t depth;
    unsigned docs;
    char *err;
    size_t cap;
} builder_t;

/* Attaches n under the innermost open collection (or as the root); on failure frees n. */
static int attach(builder_t *b, yt_node_t *n)
{
    if (b->depth == 0) {
        b->root = n;
        return 0;
    }
    if (yt_append(b->stack[b->depth - 1], n) != 0) {
        unsigned line = n->line, column = n->column;
        yt_free(n);
        return fail(b->err, b->cap, line, column, "out of memory");
    }
    return 0;
}

static int open_collection(builder_t *b, const yaml_event_t *ev, yt_kind_t kind)
{
    unsigned line = (unsigned)ev->start_mark.line + 1, col = (unsigned)ev->start_mark.column + 1;
    const yaml_char_t *tag =
        kind == YT_MAP ? ev->data.mapping_start.tag : ev->data.sequence_start.tag;
    if (!tag_ok(tag, kind == YT_MAP ? YAML_MAP_TAG : YAML_SEQ_TAG))
        return fail(b->err, b->cap, line, col, "unsupported tag '%.64s'", (const char *)tag);
    if (b->depth == YT_DEPTH_MAX)
        return fail(b->err, b->cap, line, col, "nested more than %d levels deep", YT_DEPTH_MAX);
    yt_node_t *n = yt_node_new(kind, line, col);
    if (n == NULL)
        return fail(b->err, b->cap, line, col, "out of memory");
    if (attach(b, n) != 0)
        return -1;
    b->stack[b->depth++] = n;
    return 0;
}

/* Handles one event; returns 1 at the end of the stream, 0 to go on, -1 on error. */
static int on_event(builder_t *b, const yaml_event_t *ev)
{
    unsigned line = (unsigned)ev->start_mark.line + 1, col = (unsigned)ev->start_mark.column + 1;
    switch (ev->type) {
    case YAML_STREAM_END_EVENT:
        return 1;
    case YAML_DOCUMENT_START_EVENT:
        if (++b->docs > 1)
            return fail(b->err, b->cap, line, col, "expected one YAML document, found another");
        return 0;
    case YAML_ALIAS_EVENT:
        return fail(b->err, b->cap, line, col, "aliases (*%.64s) are not supported",
                    (const char *)ev->data.alias.anchor);
    case YAML_SCALAR_EVENT: {
        yt_node_t *n = scalar_node(ev, b->err, b->cap);
        return n == NULL ? -1 : attach(b, n);
    }
    case YAML_SEQUENCE_START_EVENT:
        return open_collection(b, ev, YT_SEQ);
    case YAML_MAPPING_START_EVENT:
        return open_collection(b, ev, YT_MAP);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        b->depth--; /* libyaml balances start and end events */
        return 0;
    default:
        return 0;
    }
}

int yt_parse(const char *text, size_t len, yt_node_t **root, char *err, size_t err_cap)
{
    *root = NULL;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return fail(err, err_cap, 1, 1, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    builder_t b = {.err = err, .cap = err_cap};
    int rc = 0;
    while (rc == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = parser_error(&parser, text, len, err, err_cap);
            break;
        }
        rc = on_event(&b, &ev);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    if (rc < 0) {
        yt_free(b.root);
        return -1;
    }
    *root = b.root;
    return 0;
}
