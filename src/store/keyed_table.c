/*
 * keyed_table.c - a loop's direct-mapped table of (rule name, key) entries (keyed_table.h).
 */
#include "store/keyed_table.h"

#include <stdlib.h>
#include <string.h>

#include "remote/overlimit_cache.h"

int keyed_init(keyed_table_t *t, size_t slots, size_t entry_size, uint64_t seed)
{
    *t = (keyed_table_t){.mask = slots - 1, .entry_size = entry_size, .seed = seed};
    t->slots = calloc(slots, sizeof *t->slots);
    return t->slots != NULL ? 0 : -1;
}

void keyed_destroy(keyed_table_t *t)
{
    free(t->slots);
    t->slots = NULL;
}

static uint64_t hash_of(const keyed_table_t *t, const char *name, const void *key, size_t key_len)
{
    return olc_key_hash(t->seed, name, strlen(name) + 1, key, key_len);
}

static bool entry_is(const keyed_entry_t *e, uint64_t h, const char *name, size_t name_len,
                     const void *key, size_t key_len)
{
    return e->hash == h && e->name_len == name_len && e->key_len == key_len &&
           memcmp(e->bytes, name, name_len) == 0 &&
           memcmp(e->bytes + name_len + 1, key, key_len) == 0;
}

void *keyed_find(const keyed_table_t *t, const char *name, const void *key, size_t key_len,
                 size_t *slot)
{
    uint64_t h = hash_of(t, name, key, key_len);
    *slot = (size_t)(h & t->mask);
    keyed_entry_t *e = t->slots[*slot];
    return e != NULL && entry_is(e, h, name, strlen(name), key, key_len) ? e : NULL;
}

void *keyed_at(const keyed_table_t *t, size_t i)
{
    return t->slots[i];
}

size_t keyed_slots(const keyed_table_t *t)
{
    return t->mask + 1;
}

void *keyed_add(keyed_table_t *t, size_t slot, const char *name, const void *key, size_t key_len)
{
    size_t name_len = strlen(name);
    keyed_entry_t *e = calloc(1, t->entry_size + name_len + 1 + key_len);
    if (e == NULL) {
        return NULL;
    }
    e->hash = hash_of(t, name, key, key_len);
    e->name_len = name_len;
    e->key_len = key_len;
    e->bytes = (char *)e + t->entry_size;
    memcpy(e->bytes, name, name_len + 1);
    memcpy(e->bytes + name_len + 1, key, key_len);
    t->slots[slot] = e;
    t->count++;
    return e;
}

void keyed_remove(keyed_table_t *t, size_t i)
{
    free(t->slots[i]);
    t->slots[i] = NULL;
    t->count--;
}

const char *keyed_name(const keyed_entry_t *e)
{
    return e->bytes;
}

const char *keyed_key(const keyed_entry_t *e)
{
    return e->bytes + e->name_len + 1;
}
