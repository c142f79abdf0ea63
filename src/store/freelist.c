/*
 * freelist.c - a free list of objects of one size (freelist.h).
 */
#include "store/freelist.h"

#include <stdlib.h>
#include <string.h>

void *freelist_get(freelist_t *f)
{
    void *obj = f->head;
    if (obj == NULL) {
        return malloc(f->size);
    }
    memcpy(&f->head, obj, sizeof f->head); /* the next one, kept in obj's first bytes */
    f->n--;
    return obj;
}

void freelist_put(freelist_t *f, void *obj)
{
    if (f->n >= f->keep) {
        free(obj);
        return;
    }
    memcpy(obj, &f->head, sizeof f->head);
    f->head = obj;
    f->n++;
}

void freelist_clear(freelist_t *f)
{
    while (f->head != NULL) {
        free(freelist_get(f));
    }
}
