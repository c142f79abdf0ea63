/*
 * varint.h - unsigned LEB128 varints (7 bits a byte, low first, the top bit saying another byte
 * follows), as sliding_log's packed form (sliding_log.c) and sluice.so's value headers
 * (module/value.c) write numbers. Inline: both read and write them on every command.
 */
#ifndef SLUICE_CORE_VARINT_H
#define SLUICE_CORE_VARINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VARINT_MAX 10 /* bytes of the longest varint of 64 bits */

/* Writes v at p in its shortest form (1 to VARINT_MAX bytes); returns the byte after it. */
static inline uint8_t *varint_put(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Reads one varint from [*p, end) into *v and moves *p past it. False when it is cut short by
 * end or longer than 64 bits; with `shortest`, also when it is not in its shortest form (a
 * last byte of 0 after others), so that one number has one encoding. */
static inline bool varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v, bool shortest)
{
    uint64_t out = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        if (shift == 63 && b > 1)
            return false; /* beyond 64 bits */
        out |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            if (shortest && b == 0 && shift > 0)
                return false; /* a trailing zero byte: not the shortest form */
            *v = out;
            return true;
        }
    }
    return false;
}

#endif /* SLUICE_CORE_VARINT_H */
