/*
 * ruledef_json.c - a rule or an override as one JSON object (SL.RULE SET, PUT /v1/rules/{name},
 * the config store; see ruledef.h).
 *
 * jansson parses and checks the syntax (duplicate keys refused, its line and column in the
 * message); its tree has no positions, so a second pass walks the already valid text to find
 * where each top-level member's key and value start. jansson iterates an object's members in
 * the order they were written, and duplicates are refused, so the i-th member jansson yields is
 * the i-th the walk meets. The members become yamltree nodes and ruledef.c checks them as it
 * checks a rule in a rules file. The canonical JSON is written here too, from the fields
 * ruledef_write.c lists.
 */
#include "rules/ruledef_impl.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* A position in JSON text that jansson accepted (so the walk need not check syntax). */
typedef struct cursor {
    const char *p;
    size_t len, pos;
    unsigned line, column; /* of p[pos], 1-based, in characters */
} cursor_t;

static void adv(cursor_t *c)
{
    if (c->pos >= c->len)
        return;
    if (c->p[c->pos] == '\n') {
        c->line++;
        c->column = 1;
    } else if (((unsigned char)c->p[c->pos] & 0xC0) != 0x80) {
        c->column++;
    }
    c->pos++;
}

static int peek(const cursor_t *c)
{
    return c->pos < c->len ? (unsigned char)c->p[c->pos] : -1;
}

static void skip_ws(cursor_t *c)
{
    for (int ch = peek(c); ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; ch = peek(c))
        adv(c);
}

static void skip_string(cursor_t *c)
{
    adv(c); /* the opening quote */
    for (int ch = peek(c); ch >= 0 && ch != '"'; ch = peek(c)) {
        if (ch == '\\')
            adv(c);
        adv(c);
    }
    adv(c);
}

static void skip_value(cursor_t *c)
{
    int ch = peek(c);
    if (ch == '"') {
        skip_string(c);
    } else if (ch == '{' || ch == '[') {
        int depth = 0;
        do {
            ch = peek(c);
            if (ch == '"') {
                skip_string(c);
                continue;
            }
            depth += (ch == '{' || ch == '[') - (ch == '}' || ch == ']');
            adv(c);
        } while (depth > 0 && c->pos < c->len);
    } else {
        while ((ch = peek(c)) >= 0 && !strchr(",}] \t\n\r", ch))
            adv(c);
    }
}

static yt_node_t *value_node(const json_t *v, unsigned line, unsigned column);
static yt_node_t *key_node(const char *key, unsigned line, unsigned column);

/* A field's list or mapping (priorities, reserve): its items, one level deep (an item that is a
 * container comes without its contents), at the container's position. Returns n, or NULL (n
 * freed) when out of memory. */
static yt_node_t *with_items(yt_node_t *n, const json_t *v, unsigned line, unsigned column)
{
    const char *key;
    json_t *item;
    size_t i;
    bool ok = true;
    if (json_is_array(v)) {
        json_array_foreach(v, i, item)
        {
            yt_node_t *c = ok ? value_node(item, line, column) : NULL;
            ok = c != NULL && yt_append(n, c) == 0;
            if (!ok)
                yt_free(c);
        }
    } else {
        json_object_foreach((json_t *)v, key, item)
        {
            yt_node_t *k = ok ? key_node(key, line, column) : NULL;
            yt_node_t *c = k != NULL ? value_node(item, line, column) : NULL;
            ok = c != NULL && yt_append(n, k) == 0;
            if (!ok)
                yt_free(k);
            ok = ok && yt_append(n, c) == 0;
            if (!ok)
                yt_free(c);
        }
    }
    if (!ok)
        yt_free(n);
    return ok ? n : NULL;
}

/* A node for a JSON value (a container's items come at its top level only: with_items()). */
static yt_node_t *value_node(const json_t *v, unsigned line, unsigned column)
{
    static const yt_kind_t kinds[] = {
        [JSON_OBJECT] = YT_MAP,  [JSON_ARRAY] = YT_SEQ,  [JSON_STRING] = YT_STRING,
        [JSON_INTEGER] = YT_INT, [JSON_REAL] = YT_FLOAT, [JSON_TRUE] = YT_BOOL,
        [JSON_FALSE] = YT_BOOL,  [JSON_NULL] = YT_NULL,
    };
    yt_node_t *n = yt_node_new(kinds[json_typeof(v)], line, column);
    if (n == NULL)
        return NULL;
    if (json_is_string(v)) {
        n->len = json_string_length(v);
        n->text = malloc(n->len + 1);
        if (n->text == NULL) {
            yt_free(n);
            return NULL;
        }
        memcpy(n->text, json_string_value(v), n->len + 1);
    }
    n->integer = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
    n->boolean = json_is_true(v);
    return n;
}

static yt_node_t *key_node(const char *key, unsigned line, unsigned column)
{
    json_t *s = json_string(key);
    yt_node_t *n = s != NULL ? value_node(s, line, column) : NULL;
    json_decref(s);
    return n;
}

/*
 * Parses text as one JSON object into a mapping node whose members carry the positions they
 * were written at. Returns the node (the caller frees it with yt_free()) or NULL with err set.
 */
static yt_node_t *parse_object(const char *text, size_t len, char *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        rd_fail(err,
                &(yt_node_t){.line = je.line > 0 ? (unsigned)je.line : 1,
                             .column = je.column > 0 ? (unsigned)je.column : 1},
                NULL, NULL, "%s", je.text);
        return NULL;
    }
    cursor_t c = {.p = text, .len = len, .line = 1, .column = 1};
    skip_ws(&c);
    yt_node_t *map = yt_node_new(YT_MAP, c.line, c.column);
    if (map == NULL || !json_is_object(root)) {
        rd_fail(err, map, NULL, NULL,
                map ? "expected a JSON object of rule fields, not an array" : "out of memory");
        yt_free(map);
        json_decref(root);
        return NULL;
    }
    adv(&c); /* '{' */
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        skip_ws(&c);
        unsigned kline = c.line, kcol = c.column;
        skip_string(&c);
        skip_ws(&c);
        adv(&c); /* ':' */
        skip_ws(&c);
        yt_node_t *kn = key_node(k, kline, kcol);
        yt_node_t *vn = value_node(v, c.line, c.column);
        if (vn != NULL && (json_is_array(v) || json_is_object(v)))
            vn = with_items(vn, v, c.line, c.column);
        skip_value(&c);
        skip_ws(&c);
        adv(&c); /* ',' or '}' */
        bool ok = kn != NULL && vn != NULL && yt_append(map, kn) == 0;
        if (ok)
            kn = NULL; /* the map's now */
        ok = ok && yt_append(map, vn) == 0;
        if (ok)
            vn = NULL;
        if (!ok) {
            yt_free(kn);
            yt_free(vn);
            yt_free(map);
            json_decref(root);
            rd_fail(err, NULL, NULL, NULL, "out of memory");
            return NULL;
        }
    }
    json_decref(root);
    return map;
}

int ruledef_parse_json(const char *json, size_t len, const char *name_hint, ruledef_t *out,
                       char *err)
{
    memset(out, 0, sizeof(*out));
    yt_node_t *map = parse_object(json, len, err);
    if (map == NULL)
        return -1;
    int rc = rd_rule_from_map(map, "", name_hint, false, out, err);
    yt_free(map);
    return rc;
}

int override_parse_json(const ruledef_t *parent, const char *key, size_t key_len, const char *json,
                        size_t len, rule_override_t *out, char *err)
{
    memset(out, 0, sizeof(*out));
    yt_node_t *map = parse_object(json, len, err);
    if (map == NULL)
        return -1;
    int rc = rd_override_from_map(parent, map, "", key, key_len, out, err);
    yt_free(map);
    return rc;
}

/* ---- canonical JSON ------------------------------------------------------------------------ */

/* Sets the JSON object arg's member `field` to the value (an rd_field_fn). */
static bool json_field(void *arg, const char *field, const rd_value_t *v)
{
    json_t *value;
    if (v->kind == RD_INT)
        value = json_integer(v->num);
    else if (v->kind == RD_BOOL)
        value = json_boolean(v->num);
    else
        value = json_stringn(v->text, v->len); /* NULL for text that is not UTF-8 */
    return value != NULL && json_object_set_new(arg, field, value) == 0;
}

static char *dump(json_t *o, bool ok)
{
    char *s = ok ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

char *ruledef_to_json(const ruledef_t *def)
{
    json_t *o = json_object();
    return dump(o, o != NULL && rd_rule_fields(def, json_field, o));
}

char *override_to_json(const ruledef_t *parent, const rule_override_t *ov)
{
    (void)parent; /* the override holds every number it names */
    json_t *o = json_object();
    return dump(o, o != NULL && rd_override_fields(ov, json_field, o));
}
