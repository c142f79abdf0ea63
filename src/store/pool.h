/*
 * pool.h - memory a loop's connections take and give back on every request (an HTTP/2
 * session's frames, streams and header buffers), kept in free lists by size class instead of
 * going back to malloc and free each time.
 *
 * Blocks up to POOL_BLOCK_MAX bytes come from eight classes (64 bytes to 8 KiB, a 16-byte
 * header included) and go back to their class's free list, which keeps up to 1 MiB of them;
 * larger ones are malloc's. A zeroed pool_t is ready to use. Not thread-safe: one per loop
 * thread, used by that thread only.
 */
#ifndef SLUICE_STORE_POOL_H
#define SLUICE_STORE_POOL_H

#include <stddef.h>

#include "store/freelist.h"

#define POOL_CLASSES   8
#define POOL_BLOCK_MAX (8192 - 16) /* largest block from a class, bytes */

typedef struct pool {
    freelist_t classes[POOL_CLASSES]; /* 64, 128, .., 8192 bytes, the header included */
} pool_t;

/* size bytes (any, 0 too), aligned as malloc's; NULL when out of memory. */
void *pool_alloc(pool_t *p, size_t size);

/* n * size zeroed bytes; NULL when out of memory or when n * size overflows. */
void *pool_calloc(pool_t *p, size_t n, size_t size);

/* ptr (from this pool, or NULL) resized to size bytes, its contents kept up to the smaller
 * size; NULL when out of memory, ptr then untouched. */
void *pool_realloc(pool_t *p, void *ptr, size_t size);

/* Gives ptr (from this pool, or NULL) back. */
void pool_free(pool_t *p, void *ptr);

/* Frees every block the pool keeps; blocks still taken stay valid. */
void pool_clear(pool_t *p);

#endif /* SLUICE_STORE_POOL_H */
