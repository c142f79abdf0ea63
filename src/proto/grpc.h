/*
 * grpc.h - gRPC's bytes apart from HTTP/2: the 5-byte framing of a message in a request or
 * response body, the status codes and the grpc-message text that end a call, and the health
 * checking messages (grpc.health.v1). No sockets and no HTTP/2: the server (grpc_front.c) hands
 * a call's body here once the stream has ended, and sends what these encode.
 *
 * A gRPC body is a sequence of messages, each a flag byte (bit 0: compressed), a 4-byte
 * big-endian length and that many bytes of protobuf. A unary call carries exactly one.
 */
#ifndef SLUICE_PROTO_GRPC_H
#define SLUICE_PROTO_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"

#define GRPC_PREFIX_BYTES 5   /* flag byte and 4-byte length before each message */
#define GRPC_ERR_MAX      256 /* room for an error message these functions write */

/* gRPC status codes (grpc-status), as gRPC numbers them. */
typedef enum grpc_status {
    GRPC_STATUS_OK = 0,
    GRPC_STATUS_CANCELLED = 1,
    GRPC_STATUS_UNKNOWN = 2,
    GRPC_STATUS_INVALID_ARGUMENT = 3,
    GRPC_STATUS_NOT_FOUND = 5,
    GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
    GRPC_STATUS_FAILED_PRECONDITION = 9,
    GRPC_STATUS_UNIMPLEMENTED = 12,
    GRPC_STATUS_INTERNAL = 13,
    GRPC_STATUS_UNAVAILABLE = 14,
} grpc_status_t;

/*
 * The one message of a unary call's body[0..len): sets *msg (pointing into body) and *msg_len.
 * Returns GRPC_STATUS_OK, or with a sentence in err[0..cap):
 *   GRPC_STATUS_RESOURCE_EXHAUSTED  the message is longer than max_bytes
 *   GRPC_STATUS_UNIMPLEMENTED       the message is compressed (sluiced accepts identity only)
 *   GRPC_STATUS_INVALID_ARGUMENT    no message, a truncated one, or bytes after it
 */
grpc_status_t grpc_unary_message(const uint8_t *body, size_t len, size_t max_bytes,
                                 const uint8_t **msg, size_t *msg_len, char *err, size_t cap);

/*
 * What the first bytes of a body being received say, before it is complete: GRPC_STATUS_OK
 * while it may still be acceptable (fewer than GRPC_PREFIX_BYTES bytes too), or
 * GRPC_STATUS_RESOURCE_EXHAUSTED with err when the message announced is longer than max_bytes
 * (so the server need not buffer it).
 */
grpc_status_t grpc_body_check(const uint8_t *body, size_t len, size_t max_bytes, char *err,
                              size_t cap);

/* Appends the prefix of an uncompressed message of len bytes (len < 2^32). */
void grpc_prefix(buf_t *out, size_t len);

/*
 * A grpc-message value: msg percent-encoded as gRPC requires (bytes outside 0x20..0x7e, and
 * '%', as %XX), cut to fit out[0..cap) (cap > 0) without splitting an escape. Returns out.
 */
const char *grpc_message_encode(const char *msg, char *out, size_t cap);

/* The status's name as gRPC spells it ("INVALID_ARGUMENT"); "UNKNOWN" for others. */
const char *grpc_status_name(grpc_status_t status);

/*
 * Appends an HTTP/2 GOAWAY frame (last stream 0, error_code, `debug` as its debug data, cut to
 * 256 bytes), after an empty SETTINGS frame (a server's connection preface) when
 * settings_first: what a server says to a connection it will not serve (refused at a client
 * cap, closed for a memory cap) without an HTTP/2 session to say it with.
 */
void grpc_h2_goaway(buf_t *out, bool settings_first, uint32_t error_code, const char *debug);

/* ---- grpc.health.v1 ------------------------------------------------------------------------ */

typedef enum grpc_health {
    GRPC_HEALTH_UNKNOWN = 0,
    GRPC_HEALTH_SERVING = 1,
    GRPC_HEALTH_NOT_SERVING = 2,
    GRPC_HEALTH_SERVICE_UNKNOWN = 3,
} grpc_health_t;

/*
 * Reads a HealthCheckRequest from msg[0..len): the service asked about, copied NUL-terminated
 * into service[0..cap) ("" for the server as a whole). Returns GRPC_STATUS_OK, or
 * GRPC_STATUS_INVALID_ARGUMENT with err (malformed protobuf, a name longer than cap - 1 bytes).
 */
grpc_status_t grpc_health_decode(const uint8_t *msg, size_t len, char *service, size_t cap,
                                 char *err, size_t err_cap);

/* Appends a framed HealthCheckResponse with `status`. */
void grpc_health_encode(buf_t *out, grpc_health_t status);

#endif /* SLUICE_PROTO_GRPC_H */
