/*
 * codec.h - small byte helpers shared by the codecs (internal to src/proto).
 */
#ifndef SLUICE_PROTO_CODEC_H
#define SLUICE_PROTO_CODEC_H

#include <stdbool.h>

/* The value 0-15 of the hex digit c (0-9, a-f, A-F), or -1 when c is anything else (including a
 * negative value such as a past-the-end marker or a sign-extended char). */
static inline int codec_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* True for HTTP's optional whitespace (RFC 9110 §5.6.3): a space or a tab. */
static inline bool codec_is_ows(int c)
{
    return c == ' ' || c == '\t';
}

#endif /* SLUICE_PROTO_CODEC_H */
