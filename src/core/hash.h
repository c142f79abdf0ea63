/*
 * hash.h - the table's key hash: 64 bits from any bytes and a per-table seed.
 *
 * The construction is the multiply-fold mix used by wyhash-style hashes: 64x64 -> 128-bit
 * products folded by xor, reading keys up to 16 bytes with two overlapping loads and longer ones
 * 16 bytes per round. Keys come from the network (IPs, API keys), so the seed is random per table
 * by default: without it an attacker could pick keys that collide and turn every probe into a
 * long scan.
 */
#ifndef SLUICE_HASH_H
#define SLUICE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HASH_P0 UINT64_C(0xa0761d6478bd642f)
#define HASH_P1 UINT64_C(0xe7037ed1a0b428db)
#define HASH_P2 UINT64_C(0x8ebc6af09c88c6e3)

static inline uint64_t hash_mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t hash_r64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t hash_r32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 64-bit hash of len bytes at key under seed. */
static inline uint64_t hash_bytes(const void *key, size_t len, uint64_t seed)
{
    const unsigned char *p = key;
    uint64_t a, b;
    seed ^= HASH_P0;
    if (len <= 16) {
        if (len >= 4) {
            size_t mid = (len >> 3) << 2;
            a = (hash_r32(p) << 32) | hash_r32(p + mid);
            b = (hash_r32(p + len - 4) << 32) | hash_r32(p + len - 4 - mid);
        } else if (len > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) | p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t i = len;
        while (i > 16) {
            seed = hash_mix(hash_r64(p) ^ HASH_P1, hash_r64(p + 8) ^ seed);
            p += 16;
            i -= 16;
        }
        a = hash_r64(p + i - 16);
        b = hash_r64(p + i - 8);
    }
    return hash_mix(HASH_P1 ^ len, hash_mix(a ^ HASH_P1, b ^ seed) ^ HASH_P2);
}

#endif /* SLUICE_HASH_H */
