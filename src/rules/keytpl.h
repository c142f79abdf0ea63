/*
 * keytpl.h - a rule's key template: how sluiced builds a rate-limit key from an HTTP request
 * (seed 004's client-identifier builder), e.g.
 *
 *   "{ip}"                      the client address
 *   "{ip/24}", "{ip6/64}"       the client's IPv4 /24 network, IPv6 /64 network
 *   "{header:x-api-key}"        a request header (name case-insensitive)
 *   "{header:x-user}:{path}"    literal text between placeholders is kept as written
 *   "{method} {path}", "{query:tenant}"
 *
 * Parsing (keytpl_parse) happens once, when a rule is loaded, and checks everything: unknown
 * placeholders, unbalanced braces, bad prefix lengths are errors naming the byte offset. Building
 * (keytpl_build) is per request and allocates nothing: the caller supplies the request's parts
 * through a small view and a header lookup callback.
 *
 * A literal '{' or '}' is written doubled: "{{" and "}}".
 */
#ifndef SLUICE_RULES_KEYTPL_H
#define SLUICE_RULES_KEYTPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/netaddr.h"

#define KEYTPL_PARTS_MAX 16  /* placeholders + literal runs in one template */
#define KEYTPL_TEXT_MAX  256 /* longest template, bytes */
#define KEYTPL_ERR_MAX   128 /* a keytpl_parse error message fits in this */

typedef enum keytpl_kind {
    KEYTPL_LITERAL, /* text copied as is */
    KEYTPL_IP,      /* the client address; with prefix_bits, its network */
    KEYTPL_HEADER,  /* the named header's value */
    KEYTPL_QUERY,   /* the named query parameter's raw value */
    KEYTPL_PATH,    /* the request path, without the query */
    KEYTPL_METHOD,  /* the request method */
} keytpl_kind_t;

typedef struct keytpl_part {
    keytpl_kind_t kind;
    uint16_t off;   /* literal text or header/query name: offset into keytpl_t.text */
    uint16_t len;   /* its length, bytes */
    uint8_t family; /* KEYTPL_IP with a prefix: 4 or 6; 0 = any address, whole */
    uint8_t prefix; /* KEYTPL_IP: network prefix length in bits (family 4: 0..32, 6: 0..128) */
} keytpl_part_t;

/* A parsed template; owns a copy of the text (literals unescaped). */
typedef struct keytpl {
    char text[KEYTPL_TEXT_MAX];
    size_t nparts;
    keytpl_part_t parts[KEYTPL_PARTS_MAX];
} keytpl_t;

/*
 * Parses a template of len bytes. Returns 0 and fills *out, or -1 with a NUL-terminated message
 * in err naming the byte offset ("offset 9: unknown placeholder '{hostname}'"). An empty
 * template is an error (every request would share one key).
 */
int keytpl_parse(const char *tpl, size_t len, keytpl_t *out, char *err);

/* What keytpl_build needs of a request. Strings are not NUL-terminated; any may be empty. */
typedef struct keytpl_request {
    const netaddr_t *client; /* as it came from the socket or a trusted proxy; NULL: unknown */
    const char *method;
    size_t method_len;
    const char *path; /* may include "?query": the query is split off here */
    size_t path_len;
    /* Looks up a header by name (lower case, name_len bytes); sets *value and *value_len and
     * returns true if present. */
    bool (*header)(void *arg, const char *name, size_t name_len, const char **value,
                   size_t *value_len);
    void *header_arg;
} keytpl_request_t;

enum keytpl_build_status {
    KEYTPL_OK = 0,
    KEYTPL_EMISSING = -1, /* a header/query the template needs is absent, or the IP is unset */
    KEYTPL_EADDR = -2,    /* the client address is not of the prefix's family */
    KEYTPL_ETOOLONG = -3, /* the key would exceed cap bytes */
};

/*
 * Builds the key for req into out (cap bytes; the key is not NUL-terminated) and sets *len.
 * Returns a keytpl_build_status. A request that lacks what the template needs gets
 * KEYTPL_EMISSING: the caller decides (sluiced answers 400 rather than limit everyone with a
 * missing header as one client).
 */
int keytpl_build(const keytpl_t *tpl, const keytpl_request_t *req, char *out, size_t cap,
                 size_t *len);

#endif /* SLUICE_RULES_KEYTPL_H */
