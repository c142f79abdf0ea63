/*
 * pool.c - size classes of free lists (see pool.h).
 */
#include "store/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_BYTES 16 /* before each block: its class, and keeps the block 16-aligned */
#define SMALLEST     64 /* bytes of class 0, the header included */
#define LARGE        SIZE_MAX
#define KEEP_BYTES   (1024 * 1024) /* most bytes one class keeps */

typedef struct header {
    size_t cls;  /* its class, or LARGE */
    size_t size; /* LARGE: bytes after the header */
} header_t;

_Static_assert(sizeof(header_t) == HEADER_BYTES, "the header keeps blocks 16-aligned");

/* The class whose blocks hold size bytes and the header, or LARGE. */
static size_t class_of(size_t size)
{
    if (size > POOL_BLOCK_MAX) {
        return LARGE;
    }
    size_t cls = 0;
    for (size_t bytes = SMALLEST; bytes < size + HEADER_BYTES; bytes *= 2) {
        cls++;
    }
    return cls;
}

static freelist_t *list(pool_t *p, size_t cls)
{
    freelist_t *f = &p->classes[cls];
    if (f->size == 0) { /* a zeroed pool: set up on first use */
        f->size = (size_t)SMALLEST << cls;
        f->keep = KEEP_BYTES / f->size;
    }
    return f;
}

void *pool_alloc(pool_t *p, size_t size)
{
    size_t cls = class_of(size);
    header_t *h = cls == LARGE ? malloc(HEADER_BYTES + size) : freelist_get(list(p, cls));
    if (h == NULL) {
        return NULL;
    }
    *h = (header_t){cls, size};
    return (char *)h + HEADER_BYTES;
}

void *pool_calloc(pool_t *p, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        return NULL;
    }
    void *ptr = pool_alloc(p, bytes);
    if (ptr != NULL) {
        memset(ptr, 0, bytes);
    }
    return ptr;
}

/* The bytes a block can hold. */
static size_t capacity(const header_t *h)
{
    return h->cls == LARGE ? h->size : ((size_t)SMALLEST << h->cls) - HEADER_BYTES;
}

void *pool_realloc(pool_t *p, void *ptr, size_t size)
{
    if (ptr == NULL) {
        return pool_alloc(p, size);
    }
    header_t *h = (header_t *)((char *)ptr - HEADER_BYTES);
    if (h->cls != LARGE && size <= capacity(h)) {
        return ptr; /* it fits where it is */
    }
    void *grown = pool_alloc(p, size);
    if (grown != NULL) {
        size_t keep = capacity(h) < size ? capacity(h) : size;
        memcpy(grown, ptr, keep);
        pool_free(p, ptr);
    }
    return grown;
}

void pool_free(pool_t *p, void *ptr)
{
    if (ptr == NULL) {
        return;
    }
    header_t *h = (header_t *)((char *)ptr - HEADER_BYTES);
    if (h->cls == LARGE) {
        free(h);
    } else {
        freelist_put(list(p, h->cls), h);
    }
}

void pool_clear(pool_t *p)
{
    for (size_t i = 0; i < POOL_CLASSES; i++) {
        freelist_clear(&p->classes[i]);
    }
}
