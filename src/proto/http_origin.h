/*
 * http_origin.h - where a browser says a request is going and where it comes from: the Host
 * header ("host[:port]") and the Origin header ("scheme://host[:port]"), parsed and compared.
 * No sockets, no allocation, no DNS.
 *
 * sluiced refuses a change that a page of another site made a browser send (its Origin is not
 * the server's own), and a request to a name that is not one of the server's (DNS rebinding:
 * a page whose name the attacker points at 127.0.0.1 is same-origin with itself, not with
 * sluiced, and its Host says so). Both need the header as the browser wrote it, parsed strictly:
 * anything that is not a plain host name, an IPv4 literal or a bracketed IPv6 literal with an
 * optional decimal port is refused rather than guessed at.
 *
 * Host names are compared without regard to ASCII case and to one trailing dot
 * ("Example.COM." is "example.com"); IP literals by their bytes ("[0::1]" is "[::1]", and
 * "[::ffff:127.0.0.1]" is "127.0.0.1": an IPv4-mapped literal is held as the IPv4 it maps).
 */
#ifndef SLUICE_PROTO_HTTP_ORIGIN_H
#define SLUICE_PROTO_HTTP_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/netaddr.h"

#define HTTP_HOST_MAX 253 /* longest host name, bytes (RFC 1035, without the trailing dot) */

/* A host and an optional port, as a Host header or the end of an Origin writes them. */
typedef struct http_authority {
    char host[HTTP_HOST_MAX + 1]; /* lower case, no trailing dot, an IPv6 literal without its
                                     brackets; NUL-terminated */
    size_t host_len;              /* bytes */
    int port;                     /* 0..65535, or -1 when none was written */
    bool is_ip;                   /* host is an IPv4 or IPv6 literal, held in ip */
    netaddr_t ip;
} http_authority_t;

/* An Origin: http or https and its authority. */
typedef struct http_origin {
    bool https;
    http_authority_t auth;
} http_origin_t;

/*
 * Parses s[0..len) as a Host header value: "example.com", "Example.com:8390", "127.0.0.1",
 * "[::1]:8390". A host name holds letters, digits, '-', '.' and '_' (1 to HTTP_HOST_MAX bytes);
 * a port is 1 to 5 digits up to 65535. Returns 0, or -1 for anything else (empty, a space, a
 * userinfo '@', a bracketed text that is not IPv6, a zone, a port that is not a number).
 */
int http_authority_parse(const char *s, size_t len, http_authority_t *out);

/* Parses s[0..len) as an Origin header value: "http://" or "https://" (any case) and an
 * authority as above, with nothing after it. "null" (sandboxed pages, files) and every other
 * scheme are refused: -1. Returns 0 or -1. */
int http_origin_parse(const char *s, size_t len, http_origin_t *out);

/* True when a and b name the same host (names by text, IP literals by bytes). Ports are not
 * compared. */
bool http_authority_same_host(const http_authority_t *a, const http_authority_t *b);

/*
 * True when a page of origin o is the site the request's Host header h names: the same host,
 * and the same port, where a port left out is the origin scheme's default (80 for http, 443 for
 * https) on either side. The scheme itself is not compared: behind a proxy that ends TLS a
 * page of https://name arrives over plain HTTP with Host "name".
 */
bool http_origin_matches(const http_origin_t *o, const http_authority_t *h);

#endif /* SLUICE_PROTO_HTTP_ORIGIN_H */
