/*
 * crc32c.h - CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), as snapshots are checked.
 *
 * A running register has no pre- or post-inversion: start it at ~0, pass it through
 * crc32c_update() over the bytes, and the CRC is its complement (crc32c() does all of it for one
 * buffer). crc32c_shift() is what lets a writer change bytes it already counted without reading
 * them back: a CRC is linear over GF(2), so changing 8 zero bytes to D at a point n bytes before
 * the end changes the register by crc32c_shift(crc0(D), n), crc0(D) being the register of D
 * alone from 0. Thread-safe.
 */
#ifndef SLUICE_STORE_CRC32C_H
#define SLUICE_STORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define CRC32C_POLY 0x82f63b78u /* reflected 0x1edc6f41 */

/* The register after n more bytes at p. */
uint32_t crc32c_update(uint32_t reg, const uint8_t *p, size_t n);

/* The register times x^(8n) mod P: what n zero bytes after it make of it. O(log n). */
uint32_t crc32c_shift(uint32_t reg, uint64_t n);

/* The CRC-32C of n bytes at p (the check value of "123456789" is 0xe3069283). */
uint32_t crc32c(const void *p, size_t n);

#endif /* SLUICE_STORE_CRC32C_H */
