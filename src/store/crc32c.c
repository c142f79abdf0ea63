/*
 * crc32c.c - CRC-32C (Castagnoli), slicing-by-8, and the shift that lets a writer patch bytes
 * it already counted (see crc32c.h). Tables are built once, on first use.
 */
#include "store/crc32c.h"

#include <pthread.h>

static uint32_t crc_table[8][256];
static uint32_t crc_x8n[64]; /* x^(8 * 2^i) mod P, reflected: shifting by 2^i bytes */
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* a * b mod P over GF(2), both reflected (bit 31 is x^0). */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t product = 0;
    for (uint32_t m = (uint32_t)1 << 31; m != 0; m >>= 1) {
        if (a & m)
            product ^= b;
        b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return product;
}

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    crc_x8n[0] = (uint32_t)1 << (31 - 8); /* x^8 */
    for (int i = 1; i < 64; i++)
        crc_x8n[i] = gf2_mul(crc_x8n[i - 1], crc_x8n[i - 1]);
}

/* Advances a CRC register (no pre- or post-inversion) over n bytes. */
uint32_t crc32c_update(uint32_t reg, const uint8_t *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    while (n >= 8) {
        uint32_t lo = reg ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        reg = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        reg = (reg >> 8) ^ crc_table[0][(reg ^ *p++) & 0xff];
    return reg;
}

/* The register after n zero bytes: reg * x^(8n) mod P. */
uint32_t crc32c_shift(uint32_t reg, uint64_t n)
{
    pthread_once(&crc_once, crc_init);
    for (int i = 0; n != 0; i++, n >>= 1)
        if (n & 1)
            reg = gf2_mul(crc_x8n[i], reg);
    return reg;
}

/* CRC-32C of a whole buffer. */
uint32_t crc32c(const void *p, size_t n)
{
    return ~crc32c_update(~(uint32_t)0, p, n);
}
