/*
 * keytpl.c - key templates: parse once per rule, build once per request (see keytpl.h).
 */
#include "rules/keytpl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t offset, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(err, KEYTPL_ERR_MAX, "offset %zu: ", offset);
    vsnprintf(err + n, KEYTPL_ERR_MAX - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Appends len bytes to out->text; returns the offset, or -1 when full (cannot happen for a
 * template shorter than KEYTPL_TEXT_MAX: the text never grows beyond the template). */
static int text_add(keytpl_t *out, size_t *used, const char *p, size_t len)
{
    if (*used + len > sizeof(out->text))
        return -1;
    memcpy(out->text + *used, p, len);
    *used += len;
    return (int)(*used - len);
}

static bool is_token_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static bool starts(const char *p, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len >= n && memcmp(p, word, n) == 0;
}

/* Parses the placeholder name p[0..len) (between the braces) into *part. */
static int parse_placeholder(const char *p, size_t len, size_t offset, keytpl_t *out, size_t *used,
                             keytpl_part_t *part, char *err)
{
    *part = (keytpl_part_t){0};
    if (len == 2 && memcmp(p, "ip", 2) == 0) {
        part->kind = KEYTPL_IP;
    } else if (starts(p, len, "ip/") || starts(p, len, "ip6/")) {
        bool v6 = p[2] == '6';
        size_t skip = v6 ? 4 : 3;
        int bits = netaddr_prefix_parse(p + skip, len - skip, v6 ? 128 : 32);
        if (bits < 0)
            return fail(err, offset, "prefix length must be 0..%d in '{%.*s}'", v6 ? 128 : 32,
                        (int)len, p);
        *part = (keytpl_part_t){.kind = KEYTPL_IP, .family = v6 ? 6 : 4, .prefix = (uint8_t)bits};
    } else if (len == 4 && memcmp(p, "path", 4) == 0) {
        part->kind = KEYTPL_PATH;
    } else if (len == 6 && memcmp(p, "method", 6) == 0) {
        part->kind = KEYTPL_METHOD;
    } else if (starts(p, len, "header:") || starts(p, len, "query:")) {
        bool header = p[0] == 'h';
        size_t skip = header ? 7 : 6;
        if (len == skip)
            return fail(err, offset, "'{%.*s}' needs a name", (int)len, p);
        for (size_t i = skip; i < len; i++)
            if (!is_token_char(p[i]))
                return fail(err, offset + 1 + i, "'%c' is not allowed in a %s name", p[i],
                            header ? "header" : "query");
        int at = text_add(out, used, p + skip, len - skip);
        if (at < 0)
            return fail(err, offset, "template too long");
        if (header) /* header names are case-insensitive: stored lower case */
            for (size_t i = 0; i < len - skip; i++)
                if (out->text[at + i] >= 'A' && out->text[at + i] <= 'Z')
                    out->text[at + i] = (char)(out->text[at + i] - 'A' + 'a');
        *part = (keytpl_part_t){.kind = header ? KEYTPL_HEADER : KEYTPL_QUERY,
                                .off = (uint16_t)at,
                                .len = (uint16_t)(len - skip)};
    } else {
        return fail(err, offset,
                    "unknown placeholder '{%.*s}' (expected ip, ip/N, ip6/N, header:NAME, "
                    "query:NAME, path or method)",
                    (int)(len > 40 ? 40 : len), p);
    }
    return 0;
}

static int add_part(keytpl_t *out, keytpl_part_t part, size_t offset, char *err)
{
    if (out->nparts == KEYTPL_PARTS_MAX)
        return fail(err, offset, "more than %d parts", KEYTPL_PARTS_MAX);
    out->parts[out->nparts++] = part;
    return 0;
}

int keytpl_parse(const char *tpl, size_t len, keytpl_t *out, char *err)
{
    memset(out, 0, sizeof(*out));
    if (len == 0)
        return fail(err, 0, "empty key template (every request would share one key)");
    if (len >= KEYTPL_TEXT_MAX)
        return fail(err, KEYTPL_TEXT_MAX - 1, "template longer than %d bytes", KEYTPL_TEXT_MAX - 1);
    size_t used = 0, i = 0;
    keytpl_part_t lit = {.kind = KEYTPL_LITERAL};
    bool in_lit = false;
    while (i < len) {
        char c = tpl[i];
        bool escaped = (c == '{' || c == '}') && i + 1 < len && tpl[i + 1] == c;
        if (c == '}' && !escaped)
            return fail(err, i, "'}' without an opening '{' (write '}}' for a literal '}')");
        if (c != '{' || escaped) { /* literal byte */
            if (!in_lit) {
                lit = (keytpl_part_t){.kind = KEYTPL_LITERAL, .off = (uint16_t)used};
                in_lit = true;
            }
            text_add(out, &used, &c, 1);
            lit.len++;
            i += escaped ? 2 : 1;
            continue;
        }
        if (in_lit) {
            if (add_part(out, lit, i, err) < 0)
                return -1;
            in_lit = false;
        }
        const char *close = memchr(tpl + i + 1, '}', len - i - 1);
        const char *open = memchr(tpl + i + 1, '{', len - i - 1);
        if (close == NULL || (open != NULL && open < close))
            return fail(err, i, "'{' without a closing '}' (write '{{' for a literal '{')");
        keytpl_part_t part;
        size_t name_len = (size_t)(close - (tpl + i + 1));
        if (parse_placeholder(tpl + i + 1, name_len, i, out, &used, &part, err) < 0 ||
            add_part(out, part, i, err) < 0)
            return -1;
        i += name_len + 2;
    }
    if (in_lit && add_part(out, lit, len, err) < 0)
        return -1;
    return 0;
}

/* ---- building ---------------------------------------------------------------------------- */

typedef struct sink {
    char *out;
    size_t cap, len;
    bool overflow;
} sink_t;

static void put(sink_t *s, const char *p, size_t n)
{
    if (s->len + n > s->cap) {
        s->overflow = true;
        return;
    }
    memcpy(s->out + s->len, p, n);
    s->len += n;
}

/* The query's raw value for name, or false. */
static bool query_value(const char *path, size_t len, const char *name, size_t name_len,
                        const char **value, size_t *value_len)
{
    const char *q = memchr(path, '?', len);
    if (q == NULL)
        return false;
    const char *p = q + 1, *end = path + len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - p) > name_len && memcmp(p, name, name_len) == 0 && p[name_len] == '=') {
            *value = p + name_len + 1;
            *value_len = (size_t)(stop - *value);
            return true;
        }
        p = stop + 1;
    }
    return false;
}

/* Appends the client address, or its network "addr/bits" when the part has a prefix. */
static int put_ip(sink_t *s, const keytpl_part_t *part, const netaddr_t *client)
{
    char text[NETADDR_NET_STRLEN];
    if (client == NULL)
        return KEYTPL_EMISSING;
    if (part->family == 0) {
        if (netaddr_format(client, text, sizeof(text)) == NULL)
            return KEYTPL_EADDR;
        put(s, text, strlen(text));
        return KEYTPL_OK;
    }
    netaddr_net_t net;
    if (netaddr_mask(client, part->family, part->prefix, &net) != NETADDR_OK ||
        netaddr_net_format(&net, text, sizeof(text)) == NULL)
        return KEYTPL_EADDR;
    put(s, text, strlen(text));
    return KEYTPL_OK;
}

int keytpl_build(const keytpl_t *tpl, const keytpl_request_t *req, char *out, size_t cap,
                 size_t *len)
{
    sink_t s = {.out = out, .cap = cap};
    for (size_t i = 0; i < tpl->nparts; i++) {
        const keytpl_part_t *part = &tpl->parts[i];
        const char *name = tpl->text + part->off, *v;
        size_t vlen;
        int rc = KEYTPL_OK;
        switch (part->kind) {
        case KEYTPL_LITERAL:
            put(&s, name, part->len);
            break;
        case KEYTPL_METHOD:
            put(&s, req->method, req->method_len);
            break;
        case KEYTPL_PATH: {
            const char *q = req->path_len ? memchr(req->path, '?', req->path_len) : NULL;
            put(&s, req->path, q ? (size_t)(q - req->path) : req->path_len);
            break;
        }
        case KEYTPL_QUERY:
            if (req->path_len == 0 ||
                !query_value(req->path, req->path_len, name, part->len, &v, &vlen))
                return KEYTPL_EMISSING;
            put(&s, v, vlen);
            break;
        case KEYTPL_HEADER:
            if (req->header == NULL || !req->header(req->header_arg, name, part->len, &v, &vlen))
                return KEYTPL_EMISSING;
            put(&s, v, vlen);
            break;
        case KEYTPL_IP:
            rc = put_ip(&s, part, req->client);
            break;
        }
        if (rc != KEYTPL_OK)
            return rc;
        if (s.overflow)
            return KEYTPL_ETOOLONG;
    }
    *len = s.len;
    return KEYTPL_OK;
}
