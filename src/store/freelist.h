/*
 * freelist.h - a free list of objects of one size, for objects a loop makes and drops on every
 * decision.
 */
#ifndef SLUICE_STORE_FREELIST_H
#define SLUICE_STORE_FREELIST_H

#include <stddef.h>

/*
 * A free list of objects of one size: per-loop objects (the Redis client's requests and
 * reply objects, the Redis store's pending decisions, the engine's decisions in flight) are reused
 * instead of allocated for every decision. A freed object is linked through its first bytes, so
 * whoever gets one initializes it whole. Zero-initialize, then set size and keep. Not thread-safe.
 */
typedef struct freelist {
    void *head;  /* freed objects */
    size_t n;    /* how many */
    size_t keep; /* most kept; more are freed */
    size_t size; /* bytes of one object, at least a pointer */
} freelist_t;

/* A freed object, or a new allocation of f->size bytes; NULL when out of memory. */
void *freelist_get(freelist_t *f);

/* Keeps obj (from freelist_get) for reuse, or frees it when f holds keep already. */
void freelist_put(freelist_t *f, void *obj);

/* Frees every object f keeps. */
void freelist_clear(freelist_t *f);

#endif /* SLUICE_STORE_FREELIST_H */
