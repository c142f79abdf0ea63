/*
 * rls_json.h - Envoy's rate limit service messages as JSON, the way envoyproxy/ratelimit's
 * HTTP route POST /json reads and writes them (Go's protojson): a RateLimitRequest read from
 * JSON into the same rls_request_t a gRPC call decodes to, and a RateLimitResponse written as
 * JSON. No sockets: http_rls.c moves the bytes.
 */
#ifndef SLUICE_PROTO_RLS_JSON_H
#define SLUICE_PROTO_RLS_JSON_H

#include <stddef.h>

#include "proto/buf.h"
#include "proto/grpc.h"
#include "proto/rls.h"

/*
 * Reads a RateLimitRequest from the JSON text body[0..len) into *out (rls_request_free() frees
 * it), as protojson reads one: each field by its JSON name or its proto name ("hitsAddend" or
 * "hits_addend"), integers as numbers or decimal strings, a unit by name or number, null as an
 * absent field; an unknown field, a field twice, a value of the wrong type or out of range is
 * refused. The request is then checked as rls_request_decode() checks a gRPC one, with the same
 * codes. Returns GRPC_STATUS_OK, or the code with a sentence in err[0..cap) naming what is wrong
 * and where ("descriptors[0].entries[1]: unknown field \"val\"").
 */
grpc_status_t rls_request_from_json(const char *body, size_t len, size_t descs_max,
                                    rls_request_t *out, char *err, size_t cap);

/*
 * Appends a RateLimitResponse as protojson writes one: fields by their JSON names
 * (overallCode, statuses[].code, currentLimit{name,requestsPerUnit,unit}, limitRemaining,
 * durationUntilReset as "<seconds>s", responseHeadersToAdd[].key/value), codes and units by
 * name, and fields of their zero value left out. n <= RLS_STATUSES_MAX.
 */
void rls_response_json(buf_t *out, rls_code_t overall, const rls_status_t *st, size_t n,
                       const rls_header_t *headers, size_t nh);

#endif /* SLUICE_PROTO_RLS_JSON_H */
