/*
 * http.c - what sluiced reads from a parsed HTTP request (see http.h): header fields, query
 * parameters, path segments, and the client's address behind trusted proxies. The parser is in
 * http_parse.c, the responses in http_response.c.
 */
#include "proto/http.h"

#include "proto/codec.h"

#include <string.h>
#include <strings.h>

/* ---- request helpers ------------------------------------------------------------------------ */

bool http_header_get(const http_request_t *r, const char *name, const char **v, size_t *vlen)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < r->nheaders; i++) {
        const http_header_t *h = &r->headers[i];
        if (h->name_len == n && strncasecmp(h->name, name, n) == 0) {
            *v = h->value;
            *vlen = h->value_len;
            return true;
        }
    }
    return false;
}

static long decode(const char *src, size_t len, char *out, size_t cap, bool plus_is_space)
{
    if (len < cap && memchr(src, '%', len) == NULL &&
        (!plus_is_space || memchr(src, '+', len) == NULL)) {
        memcpy(out, src, len); /* nothing to decode: the usual key or value */
        out[len] = '\0';
        return (long)len;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = src[i];
        if (ch == '%') {
            int hi = i + 2 < len ? codec_hex_digit((unsigned char)src[i + 1]) : -1;
            int lo = hi >= 0 ? codec_hex_digit((unsigned char)src[i + 2]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0))
                return -1;
            ch = (char)(hi * 16 + lo);
            i += 2;
        } else if (ch == '+' && plus_is_space) {
            ch = ' ';
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = ch;
    }
    if (cap == 0)
        return -1;
    out[n] = '\0';
    return (long)n;
}

long http_pct_decode(const char *src, size_t len, char *out, size_t cap)
{
    return decode(src, len, out, cap, false);
}

bool http_query_get(const http_request_t *r, const char *name, char *out, size_t cap, size_t *len)
{
    const char *q = r->query;
    size_t n = r->query_len, name_len = strlen(name), i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && q[j] != '&')
            j++;
        const char *eq = memchr(q + i, '=', j - i);
        size_t key_len = eq != NULL ? (size_t)(eq - (q + i)) : j - i;
        char key[HTTP_QUERY_KEY_MAX + 1];
        const char *raw = q + i; /* compared as it is when it has nothing to decode */
        bool plain = memchr(raw, '%', key_len) == NULL && memchr(raw, '+', key_len) == NULL;
        long k = plain ? (long)key_len : decode(raw, key_len, key, sizeof(key), true);
        if (k == (long)name_len && memcmp(plain ? raw : key, name, name_len) == 0) {
            const char *v = eq != NULL ? eq + 1 : q + j;
            long d = decode(v, (size_t)(q + j - v), out, cap, true);
            if (d < 0)
                return false;
            *len = (size_t)d;
            return true;
        }
        i = j + 1;
    }
    return false;
}

long http_path_segments(const char *path, size_t path_len, char *storage, size_t cap,
                        http_segment_t *segs, size_t max)
{
    if (path_len == 0 || path[0] != '/')
        return -1;
    size_t used = 0, n = 0, i = 1;
    if (cap >= path_len && memchr(path, '%', path_len) == NULL) { /* nothing to decode: */
        memcpy(storage, path + 1, path_len - 1);                  /* one copy, cut at '/' */
        storage[path_len - 1] = '\0';
        for (size_t start = 0;; i++) {
            if (i < path_len && path[i] != '/')
                continue;
            if (n == max)
                return -1;
            storage[i - 1] = '\0';
            segs[n++] = (http_segment_t){.ptr = storage + start, .len = i - 1 - start};
            if (i >= path_len)
                return (long)n;
            start = i;
        }
    }
    for (;;) {
        size_t j = i;
        while (j < path_len && path[j] != '/')
            j++;
        if (n == max)
            return -1;
        long d = decode(path + i, j - i, storage + used, cap - used, false);
        if (d < 0)
            return -1;
        segs[n++] = (http_segment_t){.ptr = storage + used, .len = (size_t)d};
        used += (size_t)d + 1;
        if (j >= path_len)
            break;
        i = j + 1;
    }
    return (long)n;
}

/* ---- client addresses ----------------------------------------------------------------------- */

static bool port_ok(const char *s, size_t len)
{
    unsigned port = 0;
    if (len == 0 || len > 5)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        port = port * 10 + (unsigned)(s[i] - '0');
    }
    return port <= 65535;
}

/* One X-Forwarded-For entry (already trimmed): "a.b.c.d[:port]", "v6", "[v6][:port]". */
static bool xff_entry(const char *s, size_t len, netaddr_t *ip)
{
    if (s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return false;
        size_t rest = len - (size_t)(close + 1 - s);
        if (rest > 0 && (close[1] != ':' || !port_ok(close + 2, rest - 1)))
            return false;
        return netaddr_parse(s + 1, (size_t)(close - s - 1), ip) == 0 && ip->family == 6;
    }
    const char *colon = memchr(s, ':', len);
    if (colon != NULL && memchr(colon + 1, ':', len - (size_t)(colon + 1 - s)) == NULL) {
        size_t host = (size_t)(colon - s);
        return port_ok(colon + 1, len - host - 1) && netaddr_parse(s, host, ip) == 0 &&
               memchr(s, ':', host) == NULL;
    }
    return netaddr_parse(s, len, ip) == 0;
}

int http_client_addr(const http_request_t *r, const netaddr_t *peer, const netaddr_net_t *trusted,
                     size_t ntrusted, netaddr_t *client)
{
    if (ntrusted > 0 && trusted == NULL)
        return -1;
    *client = *peer;
    if (!netaddr_in_any(trusted, ntrusted, client))
        return 0;
    for (size_t h = r->nheaders; h-- > 0;) {
        const http_header_t *hd = &r->headers[h];
        if (hd->name_len != 15 || strncasecmp(hd->name, "x-forwarded-for", 15) != 0)
            continue;
        size_t end = hd->value_len;
        for (;;) { /* entries from the right */
            size_t start = end;
            while (start > 0 && hd->value[start - 1] != ',')
                start--;
            size_t a = start, b = end;
            while (a < b && codec_is_ows(hd->value[a]))
                a++;
            while (b > a && codec_is_ows(hd->value[b - 1]))
                b--;
            if (a < b) {
                netaddr_t ip;
                if (!xff_entry(hd->value + a, b - a, &ip))
                    return 0; /* not an address: the last trusted hop is all we know */
                *client = ip;
                if (!netaddr_in_any(trusted, ntrusted, &ip))
                    return 0;
            }
            if (start == 0)
                break;
            end = start - 1;
        }
    }
    return 0;
}
