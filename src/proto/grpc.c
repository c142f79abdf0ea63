/*
 * grpc.c - gRPC's framing, status texts and health messages (see grpc.h). The protobuf
 * messages are protoc-c's, generated at build time from grpc/health.proto.
 */
#include "proto/grpc.h"

#include <stdio.h>
#include <string.h>

#include "grpc/health.pb-c.h"
#include "proto/text.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static grpc_status_t prefix_check(const uint8_t *body, size_t max_bytes, char *err, size_t cap)
{
    if (body[0] & 1u) {
        return text_error(GRPC_STATUS_UNIMPLEMENTED, err, cap,
                          "compressed messages are not accepted (grpc-encoding identity only)");
    }
    if (body[0] != 0) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          "message flags 0x%02x: only bit 0 (compressed) is defined", body[0]);
    }
    uint32_t n = be32(body + 1);
    if (n > max_bytes) {
        return text_error(GRPC_STATUS_RESOURCE_EXHAUSTED, err, cap,
                          "message of %u bytes is larger than the largest accepted, %zu bytes",
                          (unsigned)n, max_bytes);
    }
    return GRPC_STATUS_OK;
}

grpc_status_t grpc_body_check(const uint8_t *body, size_t len, size_t max_bytes, char *err,
                              size_t cap)
{
    if (len < GRPC_PREFIX_BYTES) {
        return GRPC_STATUS_OK;
    }
    grpc_status_t st = prefix_check(body, max_bytes, err, cap);
    /* flags are judged once the body is whole: only the size is worth stopping early for */
    return st == GRPC_STATUS_RESOURCE_EXHAUSTED ? st : GRPC_STATUS_OK;
}

grpc_status_t grpc_unary_message(const uint8_t *body, size_t len, size_t max_bytes,
                                 const uint8_t **msg, size_t *msg_len, char *err, size_t cap)
{
    if (len < GRPC_PREFIX_BYTES) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          len == 0 ? "the request has no message"
                                   : "the request ends inside a message's 5-byte prefix");
    }
    grpc_status_t st = prefix_check(body, max_bytes, err, cap);
    if (st != GRPC_STATUS_OK) {
        return st;
    }
    size_t n = be32(body + 1);
    if (len - GRPC_PREFIX_BYTES < n) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          "the message announces %zu bytes, the request has %zu", n,
                          len - GRPC_PREFIX_BYTES);
    }
    if (len - GRPC_PREFIX_BYTES > n) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          "%zu bytes after the message: a unary call carries one message",
                          len - GRPC_PREFIX_BYTES - n);
    }
    *msg = body + GRPC_PREFIX_BYTES;
    *msg_len = n;
    return GRPC_STATUS_OK;
}

void grpc_prefix(buf_t *out, size_t len)
{
    uint8_t p[GRPC_PREFIX_BYTES] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                                    (uint8_t)(len >> 8), (uint8_t)len};
    buf_add(out, p, sizeof p);
}

const char *grpc_message_encode(const char *msg, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
        bool plain = *p >= 0x20 && *p <= 0x7e && *p != '%';
        size_t need = plain ? 1 : 3;
        if (o + need >= cap) {
            break;
        }
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return out;
}

const char *grpc_status_name(grpc_status_t status)
{
    switch (status) {
    case GRPC_STATUS_OK:
        return "OK";
    case GRPC_STATUS_CANCELLED:
        return "CANCELLED";
    case GRPC_STATUS_INVALID_ARGUMENT:
        return "INVALID_ARGUMENT";
    case GRPC_STATUS_NOT_FOUND:
        return "NOT_FOUND";
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        return "RESOURCE_EXHAUSTED";
    case GRPC_STATUS_FAILED_PRECONDITION:
        return "FAILED_PRECONDITION";
    case GRPC_STATUS_UNIMPLEMENTED:
        return "UNIMPLEMENTED";
    case GRPC_STATUS_INTERNAL:
        return "INTERNAL";
    case GRPC_STATUS_UNAVAILABLE:
        return "UNAVAILABLE";
    default:
        return "UNKNOWN";
    }
}

/* An HTTP/2 frame header: 24-bit length, type, flags, stream 0. */
static void h2_frame_header(buf_t *out, size_t len, uint8_t type)
{
    uint8_t h[9] = {(uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, 0, 0, 0, 0, 0};
    buf_add(out, h, sizeof h);
}

void grpc_h2_goaway(buf_t *out, bool settings_first, uint32_t error_code, const char *debug)
{
    enum { H2_SETTINGS = 4, H2_GOAWAY = 7, DEBUG_MAX = 256 };
    if (settings_first) {
        h2_frame_header(out, 0, H2_SETTINGS);
    }
    size_t n = strlen(debug);
    n = n > DEBUG_MAX ? DEBUG_MAX : n;
    h2_frame_header(out, 8 + n, H2_GOAWAY);
    uint8_t body[8] = {0,
                       0,
                       0,
                       0,
                       (uint8_t)(error_code >> 24),
                       (uint8_t)(error_code >> 16),
                       (uint8_t)(error_code >> 8),
                       (uint8_t)error_code};
    buf_add(out, body, sizeof body);
    buf_add(out, debug, n);
}

/* ---- grpc.health.v1 ------------------------------------------------------------------------ */

grpc_status_t grpc_health_decode(const uint8_t *msg, size_t len, char *service, size_t cap,
                                 char *err, size_t err_cap)
{
    Grpc__Health__V1__HealthCheckRequest *req =
        grpc__health__v1__health_check_request__unpack(NULL, len, msg);
    if (req == NULL) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, err_cap,
                          "malformed HealthCheckRequest (not valid protobuf for its fields)");
    }
    size_t n = strlen(req->service);
    grpc_status_t st = GRPC_STATUS_OK;
    if (n >= cap) {
        st = text_error(GRPC_STATUS_INVALID_ARGUMENT, err, err_cap,
                        "service name of %zu bytes is longer than %zu", n, cap - 1);
    } else {
        memcpy(service, req->service, n + 1);
    }
    grpc__health__v1__health_check_request__free_unpacked(req, NULL);
    return st;
}

void grpc_health_encode(buf_t *out, grpc_health_t status)
{
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    resp.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    size_t n = grpc__health__v1__health_check_response__get_packed_size(&resp);
    grpc_prefix(out, n);
    if (buf_reserve(out, n)) {
        out->len +=
            grpc__health__v1__health_check_response__pack(&resp, (uint8_t *)out->data + out->len);
    }
}
