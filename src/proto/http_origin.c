/*
 * http_origin.c - Host and Origin headers (see http_origin.h).
 */
#include "proto/http_origin.h"

#include <string.h>
#include <strings.h>

#define PORT_DIGITS_MAX 5

/* A port: 1 to 5 digits, at most 65535; -1 otherwise. */
static int port_parse(const char *s, size_t len)
{
    if (len == 0 || len > PORT_DIGITS_MAX) {
        return -1;
    }
    int port = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        port = port * 10 + (s[i] - '0');
    }
    return port <= 65535 ? port : -1;
}

static bool name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_';
}

/* A bracketed IPv6 literal's inside, s[0..len): an IPv6 address, nothing else. */
static int ipv6_host(const char *s, size_t len, http_authority_t *out)
{
    if (len == 0 || len > NETADDR_STRLEN || memchr(s, ':', len) == NULL ||
        netaddr_parse(s, len, &out->ip) != NETADDR_OK) {
        return -1;
    }
    out->is_ip = true;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        out->host[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
    }
    out->host[len] = '\0';
    out->host_len = len;
    return 0;
}

/* A host name or IPv4 literal, s[0..len): lower-cased, one trailing dot dropped. */
static int name_host(const char *s, size_t len, http_authority_t *out)
{
    if (len > 1 && s[len - 1] == '.') {
        len--;
    }
    if (len == 0 || len > HTTP_HOST_MAX || s[len - 1] == '.') { /* "a..": an empty label */
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!name_char(ch) || (ch == '.' && (i == 0 || s[i - 1] == '.'))) {
            return -1;
        }
        out->host[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
    }
    out->host[len] = '\0';
    out->host_len = len;
    out->is_ip = netaddr_parse(out->host, len, &out->ip) == NETADDR_OK;
    return 0;
}

int http_authority_parse(const char *s, size_t len, http_authority_t *out)
{
    memset(out, 0, sizeof *out);
    out->port = -1;
    if (len == 0) {
        return -1;
    }
    bool bracket = s[0] == '[';
    const char *host = s;
    size_t host_len = len;
    const char *rest = s + len; /* after the host: "" or ":port" */
    if (bracket) {
        const char *close = memchr(s, ']', len);
        if (close == NULL) {
            return -1;
        }
        host = s + 1;
        host_len = (size_t)(close - host);
        rest = close + 1;
    } else {
        const char *colon = memchr(s, ':', len);
        if (colon != NULL) {
            host_len = (size_t)(colon - s);
            rest = colon;
        }
    }
    size_t rest_len = (size_t)(s + len - rest);
    if (rest_len > 0) {
        if (rest[0] != ':' || (out->port = port_parse(rest + 1, rest_len - 1)) < 0) {
            return -1;
        }
    }
    return bracket ? ipv6_host(host, host_len, out) : name_host(host, host_len, out);
}

int http_origin_parse(const char *s, size_t len, http_origin_t *out)
{
    memset(out, 0, sizeof *out);
    static const char http[] = "http://", https[] = "https://";
    size_t skip;
    if (len >= sizeof https - 1 && strncasecmp(s, https, sizeof https - 1) == 0) {
        out->https = true;
        skip = sizeof https - 1;
    } else if (len >= sizeof http - 1 && strncasecmp(s, http, sizeof http - 1) == 0) {
        skip = sizeof http - 1;
    } else {
        return -1;
    }
    return http_authority_parse(s + skip, len - skip, &out->auth);
}

bool http_authority_same_host(const http_authority_t *a, const http_authority_t *b)
{
    if (a->is_ip || b->is_ip) {
        return a->is_ip && b->is_ip && a->ip.family == b->ip.family &&
               memcmp(a->ip.addr, b->ip.addr, a->ip.family == 4 ? 4 : 16) == 0;
    }
    return a->host_len == b->host_len && memcmp(a->host, b->host, a->host_len) == 0;
}

bool http_origin_matches(const http_origin_t *o, const http_authority_t *h)
{
    int dflt = o->https ? 443 : 80;
    int origin_port = o->auth.port >= 0 ? o->auth.port : dflt;
    int host_port = h->port >= 0 ? h->port : dflt;
    return http_authority_same_host(&o->auth, h) && origin_port == host_port;
}
