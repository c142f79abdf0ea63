/*
 * hash.h - the short names the server's files still use for the keyed hash, sl_hash64() and
 * its parts in sluice.h (the code is there, once). New code uses the sluice.h names.
 */
#ifndef SLUICE_HASH_H
#define SLUICE_HASH_H

#include "sluice/sluice.h"

#define HASH_P0    SL_HASH_P0
#define HASH_P1    SL_HASH_P1
#define HASH_P2    SL_HASH_P2
#define hash_mix   sl_hash_mix
#define hash_r64   sl_hash_r64
#define hash_bytes sl_hash64

#endif /* SLUICE_HASH_H */
