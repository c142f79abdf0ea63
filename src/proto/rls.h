/*
 * rls.h - Envoy's rate limit service messages (envoy.service.ratelimit.v3) in sluice's terms:
 * a ShouldRateLimit request decoded and checked into a domain and descriptors, each with its
 * entries, its cost and any limit the caller asks for; the rule and key a descriptor names;
 * and the response encoded from sluice decisions. No sockets: grpc_front.c moves the bytes.
 *
 * The protobuf messages are protoc-c's, generated at build time from grpc/rls.proto.
 */
#ifndef SLUICE_PROTO_RLS_H
#define SLUICE_PROTO_RLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"
#include "proto/grpc.h"

#define RLS_NAME_MAX     256 /* room for a rule name rls_rule_name writes, NUL included */
#define RLS_STATUSES_MAX 64  /* statuses in one response (rls_response_encode) */

/* RateLimitResponse.Code */
typedef enum rls_code {
    RLS_CODE_UNKNOWN = 0,
    RLS_CODE_OK = 1,
    RLS_CODE_OVER_LIMIT = 2,
} rls_code_t;

/* RateLimitResponse.RateLimit.Unit */
typedef enum rls_unit {
    RLS_UNIT_UNKNOWN = 0,
    RLS_UNIT_SECOND = 1,
    RLS_UNIT_MINUTE = 2,
    RLS_UNIT_HOUR = 3,
    RLS_UNIT_DAY = 4,
    RLS_UNIT_MONTH = 5,
    RLS_UNIT_YEAR = 6,
    RLS_UNIT_WEEK = 7, /* numbered after YEAR, as Envoy added it */
} rls_unit_t;
#define RLS_UNIT_LAST RLS_UNIT_WEEK /* the highest unit's number */

typedef struct rls_entry {
    const char *key;   /* key_len bytes, not empty, UTF-8 */
    size_t key_len;    /* bytes */
    const char *value; /* value_len bytes, UTF-8 */
    size_t value_len;  /* bytes */
} rls_entry_t;

typedef struct rls_descriptor {
    const rls_entry_t *entries; /* n_entries of them, at least one */
    size_t n_entries;           /* entries */
    uint64_t cost;              /* hits: its own hits_addend, else the request's, else 1 */
    bool has_override;          /* the caller asks for the limit below instead */
    uint32_t override_per_unit; /* requests per override_unit */
    rls_unit_t override_unit;   /* SECOND..WEEK */
} rls_descriptor_t;

typedef struct rls_request {
    const char *domain;      /* domain_len bytes, not empty, UTF-8 */
    size_t domain_len;       /* bytes */
    rls_descriptor_t *descs; /* n of them, at least one */
    size_t n;                /* descriptors */
    void *owned;             /* the decoded message and the arrays above (rls_request_free) */
} rls_request_t;

/*
 * Decodes a RateLimitRequest from msg[0..len) into *out, whose strings point into memory
 * rls_request_free() releases. Returns GRPC_STATUS_OK, or with a sentence in err[0..cap)
 * naming what is wrong and where ("descriptors[1].entries[0]: key is empty"), nothing to free:
 *   GRPC_STATUS_INVALID_ARGUMENT    malformed protobuf, an empty domain, no descriptors, a
 *                                   descriptor without entries, an empty key, text that is
 *                                   not UTF-8, an override with no limit or an unknown unit
 *   GRPC_STATUS_RESOURCE_EXHAUSTED  more than descs_max descriptors
 */
grpc_status_t rls_request_decode(const uint8_t *msg, size_t len, size_t descs_max,
                                 rls_request_t *out, char *err, size_t cap);

/* The methods of limitador's Kuadrant extension (kuadrant.service.ratelimit.v1), which carry
 * Envoy's RateLimitRequest. */
typedef enum rls_kuadrant {
    RLS_KUADRANT_CHECK,  /* CheckRateLimit: is there room for one more hit? nothing is counted */
    RLS_KUADRANT_REPORT, /* Report: count what the request cost, past the limit if need be */
} rls_kuadrant_t;

/*
 * Decodes a CheckRateLimit or Report request as rls_request_decode() does (the same errors),
 * each descriptor's cost being what the method counts, as limitador counts it: 0 for
 * CheckRateLimit (a peek: limitador's check ignores hits_addend and asks about one hit, which
 * the caller tells from the peek's remaining units), hits_addend for Report (a descriptor's own
 * in its place; 0 or absent: 1).
 */
grpc_status_t rls_kuadrant_decode(const uint8_t *msg, size_t len, rls_kuadrant_t method,
                                  size_t descs_max, rls_request_t *out, char *err, size_t cap);

/* Frees what rls_request_decode() allocated; r is then empty. */
void rls_request_free(rls_request_t *r);

/*
 * The name of the sluice rule a descriptor of `domain` is decided by: the domain and the
 * entries' keys joined by '.' ("edge.remote_address", "edge.authenticated.path"), written
 * NUL-terminated into out[0..cap). Returns false when it does not fit.
 */
bool rls_rule_name(const char *domain, size_t domain_len, const rls_descriptor_t *d, char *out,
                   size_t cap);

/*
 * Appends the sluice key a descriptor is counted under: its entries' values joined by '|',
 * with '|' and '\' in a value escaped by '\' (so distinct value lists never share a key).
 */
void rls_key(const rls_descriptor_t *d, buf_t *out);

/*
 * Appends the key a descriptor's limit override is counted under: its rule name
 * (rls_rule_name), ':' and its key (rls_key), so descriptors that ask for the same limit count
 * apart. False, with nothing appended, when the rule name does not fit RLS_NAME_MAX.
 */
bool rls_override_key(const char *domain, size_t domain_len, const rls_descriptor_t *d, buf_t *out);

/* The length of one unit, ns; 0 for RLS_UNIT_UNKNOWN and for anything not a unit. WEEK is
 * 7 days, MONTH 30 and YEAR 365, as envoyproxy/ratelimit counts them. */
int64_t rls_unit_ns(rls_unit_t unit);

/* One descriptor's status in a response. */
typedef struct rls_status {
    rls_code_t code;    /* OK or OVER_LIMIT */
    bool has_limit;     /* a limit applies: the fields below are reported */
    const char *name;   /* the limit's name, NUL-terminated; "" for an unnamed limit */
    const char *policy; /* what the RateLimit fields call it (a name always), NUL-terminated */
    uint64_t limit;     /* units per window */
    int64_t window_ns;  /* reported as a unit when it is exactly one, else UNKNOWN */
    uint64_t remaining; /* units left (capped at 2^32 - 1 on the wire) */
    int64_t reset_ns;   /* until the key is back to a fresh state, ns */
} rls_status_t;

/* A header for the caller to add to its client's response (response_headers_to_add). */
typedef struct rls_header {
    const char *name;  /* NUL-terminated, lower case */
    const char *value; /* value_len bytes */
    size_t value_len;  /* bytes */
} rls_header_t;

/* Appends a framed RateLimitResponse: overall code, the n statuses (n <= RLS_STATUSES_MAX; more
 * set out->failed) in request order, and nh headers to add to the client's response. */
void rls_response_encode(buf_t *out, rls_code_t overall, const rls_status_t *st, size_t n,
                         const rls_header_t *headers, size_t nh);

/*
 * The IETF RateLimit fields (RateLimit-Policy, RateLimit) of the status with the fewest units
 * left (the first of them on a tie), written as sluiced's HTTP responses write them, into out[0]
 * and out[1], their values in policy and limit (which the caller frees). Returns the headers
 * written: 2, or 0 when no status has a limit.
 */
size_t rls_ratelimit_headers(const rls_status_t *st, size_t n, buf_t *policy, buf_t *limit,
                             rls_header_t *out);

#endif /* SLUICE_PROTO_RLS_H */
