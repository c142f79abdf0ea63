/*
 * netaddr.h - network addresses as bytes: parsed once (from text or a socket address), masked
 * to a network by prefix length, tested against networks, formatted back to text. No sockets,
 * no allocation, no DNS.
 *
 * An address is IPv4 (family 4, addr[0..4)) or IPv6 (family 6, addr[0..16)). An IPv4-mapped
 * IPv6 address (::ffff:1.2.3.4, what an IPv6 socket reports for an IPv4 client) is always held
 * as the IPv4 address it maps, so one client has one address whichever socket it came through.
 *
 * Users: the server parses each connection's peer once when it connects; HTTP finds the client
 * behind trusted proxies (http_client_addr); key templates take the parsed client address and
 * mask it for "{ip/24}" (rules/keytpl.c); the trusted proxies are networks parsed at start-up.
 */
#ifndef SLUICE_PROTO_NETADDR_H
#define SLUICE_PROTO_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;

#define NETADDR_STRLEN     46 /* a textual IPv6 address + NUL (INET6_ADDRSTRLEN) */
#define NETADDR_NET_STRLEN 50 /* an address, "/128" and a NUL */

typedef struct netaddr {
    uint8_t family; /* 4 or 6 */
    uint8_t addr[16];
} netaddr_t;

/* A network: the first prefix bits of addr (the others are zero). */
typedef struct netaddr_net {
    uint8_t family; /* 4 or 6 */
    uint8_t prefix; /* bits: 0..32 or 0..128 */
    uint8_t addr[16];
} netaddr_net_t;

enum netaddr_status {
    NETADDR_OK = 0,
    NETADDR_EEMPTY = -1,  /* no text */
    NETADDR_ESYNTAX = -2, /* not an IPv4 or IPv6 address (or it holds a NUL, or is too long) */
    NETADDR_EPREFIX = -3, /* a network's prefix is not a number within the address's bits */
    NETADDR_EFAMILY = -4, /* an address of the other family than asked, or not a socket address
                             of AF_INET or AF_INET6 */
};

/* What a netaddr_status means, as a phrase: "not an IPv4 or IPv6 address". */
const char *netaddr_strerror(int status);

/* Parses a bare textual address ("10.1.2.3", "::1", "::ffff:10.1.2.3"; no port, brackets or
 * zone) of len bytes. Returns NETADDR_OK, NETADDR_EEMPTY or NETADDR_ESYNTAX. */
int netaddr_parse(const char *s, size_t len, netaddr_t *out);

/* Converts an AF_INET or AF_INET6 socket address (e.g. from uv_tcp_getpeername). Returns
 * NETADDR_OK, or NETADDR_EFAMILY for another family. */
int netaddr_from_sockaddr(const struct sockaddr *sa, netaddr_t *out);

/* Writes a as text (inet_ntop; mapped addresses as dotted quads) NUL-terminated into
 * out[0..cap); cap >= NETADDR_STRLEN always suffices. Returns out, or NULL if it does not fit. */
const char *netaddr_format(const netaddr_t *a, char *out, size_t cap);

/*
 * Parses "10.0.0.0/8", "fd00::/8", "::ffff:10.0.0.0/104" (an IPv4 network) or a bare address
 * ("127.0.0.1" = /32, "::1" = /128). Address bits beyond the prefix are cleared ("10.1.2.3/8"
 * is 10.0.0.0/8). Returns NETADDR_OK, or NETADDR_EEMPTY, NETADDR_ESYNTAX (the address part) or
 * NETADDR_EPREFIX (the part after '/').
 */
int netaddr_net_parse(const char *s, size_t len, netaddr_net_t *out);

/* A prefix length written in decimal, s[0..len): 1 to 3 digits, at most max. Returns it, or -1
 * if it is not one. */
int netaddr_prefix_parse(const char *s, size_t len, unsigned max);

/* True if a is inside n (an IPv4 address is never inside an IPv6 network and vice versa). */
bool netaddr_net_contains(const netaddr_net_t *n, const netaddr_t *a);

/* True if a is inside one of nets[0..n). */
bool netaddr_in_any(const netaddr_net_t *nets, size_t n, const netaddr_t *a);

/* The network of the first prefix bits of a, which must be of `family` (4 or 6) and prefix at
 * most its bits. Returns NETADDR_OK, NETADDR_EFAMILY or NETADDR_EPREFIX. */
int netaddr_mask(const netaddr_t *a, unsigned family, unsigned prefix, netaddr_net_t *out);

/* Writes n as "address/prefix" ("10.1.2.0/24") NUL-terminated into out[0..cap); cap >=
 * NETADDR_NET_STRLEN always suffices. Returns out, or NULL if it does not fit. */
const char *netaddr_net_format(const netaddr_net_t *n, char *out, size_t cap);

#endif /* SLUICE_PROTO_NETADDR_H */
