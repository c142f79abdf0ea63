/*
 * netaddr.c - network addresses (see netaddr.h). Text goes through inet_pton/inet_ntop, which
 * accept exactly the dotted quads and RFC 4291 forms and nothing else (no octal, no short
 * forms such as "10.1").
 */
#include "proto/netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

const char *netaddr_strerror(int status)
{
    switch (status) {
    case NETADDR_OK:
        return "ok";
    case NETADDR_EEMPTY:
        return "empty address";
    case NETADDR_ESYNTAX:
        return "not an IPv4 or IPv6 address";
    case NETADDR_EPREFIX:
        return "prefix length out of range for the address";
    case NETADDR_EFAMILY:
        return "address of the wrong family";
    default:
        return "unknown address error";
    }
}

/* Parses a bare address; *mapped says it was written as ::ffff:a.b.c.d (held as IPv4). */
static int parse(const char *s, size_t len, netaddr_t *out, bool *mapped)
{
    char tmp[64];
    *mapped = false;
    if (len == 0)
        return NETADDR_EEMPTY;
    if (len >= sizeof(tmp) || memchr(s, '\0', len) != NULL)
        return NETADDR_ESYNTAX;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, tmp, out->addr) == 1) {
        out->family = 4;
        return NETADDR_OK;
    }
    if (inet_pton(AF_INET6, tmp, out->addr) != 1)
        return NETADDR_ESYNTAX;
    out->family = 6;
    if (memcmp(out->addr, v4_mapped_prefix, 12) == 0) {
        memmove(out->addr, out->addr + 12, 4);
        memset(out->addr + 4, 0, 12);
        out->family = 4;
        *mapped = true;
    }
    return NETADDR_OK;
}

int netaddr_parse(const char *s, size_t len, netaddr_t *out)
{
    bool mapped;
    return parse(s, len, out, &mapped);
}

int netaddr_from_sockaddr(const struct sockaddr *sa, netaddr_t *out)
{
    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        memcpy(out->addr, &in->sin_addr, 4);
        out->family = 4;
        return NETADDR_OK;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *a = (const uint8_t *)&in6->sin6_addr;
        bool mapped = memcmp(a, v4_mapped_prefix, 12) == 0;
        memcpy(out->addr, mapped ? a + 12 : a, mapped ? 4 : 16);
        out->family = mapped ? 4 : 6;
        return NETADDR_OK;
    }
    return NETADDR_EFAMILY;
}

const char *netaddr_format(const netaddr_t *a, char *out, size_t cap)
{
    if (a->family != 4 && a->family != 6)
        return NULL;
    if (cap > (size_t)INT32_MAX)
        cap = INT32_MAX;
    return inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->addr, out, (socklen_t)cap);
}

int netaddr_prefix_parse(const char *s, size_t len, unsigned max)
{
    if (len == 0 || len > 3)
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    return v <= max ? (int)v : -1;
}

int netaddr_mask(const netaddr_t *a, unsigned family, unsigned prefix, netaddr_net_t *out)
{
    if (a->family != family)
        return NETADDR_EFAMILY;
    if (prefix > (family == 4 ? 32u : 128u))
        return NETADDR_EPREFIX;
    memset(out, 0, sizeof(*out));
    out->family = a->family;
    out->prefix = (uint8_t)prefix;
    memcpy(out->addr, a->addr, prefix / 8);
    if (prefix % 8)
        out->addr[prefix / 8] = a->addr[prefix / 8] & (uint8_t)(0xff << (8 - prefix % 8));
    return NETADDR_OK;
}

int netaddr_net_parse(const char *s, size_t len, netaddr_net_t *out)
{
    const char *slash = memchr(s, '/', len);
    size_t addr_len = slash != NULL ? (size_t)(slash - s) : len;
    netaddr_t a;
    bool mapped;
    int rc = parse(s, addr_len, &a, &mapped);
    if (rc != NETADDR_OK)
        return rc;
    int prefix = a.family == 4 ? 32 : 128;
    if (slash != NULL) {
        prefix = netaddr_prefix_parse(slash + 1, len - addr_len - 1, 999);
        if (mapped) /* ::ffff:10.0.0.0/104 is 10.0.0.0/8 */
            prefix = prefix < 96 || prefix > 128 ? -1 : prefix - 96;
        if (prefix < 0)
            return NETADDR_EPREFIX;
    }
    return netaddr_mask(&a, a.family, (unsigned)prefix, out);
}

bool netaddr_net_contains(const netaddr_net_t *n, const netaddr_t *a)
{
    if (n->family != a->family)
        return false;
    unsigned full = n->prefix / 8, rest = n->prefix % 8;
    if (memcmp(n->addr, a->addr, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a->addr[full] & mask) == n->addr[full];
}

bool netaddr_in_any(const netaddr_net_t *nets, size_t n, const netaddr_t *a)
{
    for (size_t i = 0; i < n; i++)
        if (netaddr_net_contains(&nets[i], a))
            return true;
    return false;
}

const char *netaddr_net_format(const netaddr_net_t *n, char *out, size_t cap)
{
    netaddr_t a = {.family = n->family};
    memcpy(a.addr, n->addr, sizeof(a.addr));
    if (netaddr_format(&a, out, cap) == NULL)
        return NULL;
    size_t used = strlen(out);
    int w = snprintf(out + used, cap - used, "/%u", n->prefix);
    return w > 0 && (size_t)w < cap - used ? out : NULL;
}
