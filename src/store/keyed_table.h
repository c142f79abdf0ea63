/*
 * keyed_table.h - a loop's table of entries keyed by (rule name, key), direct-mapped: what the
 * Redis store's leases (redis_lease.c) and approximate counts (redis_approx.c) both keep per
 * loop. One slot per hash of (name, key) under the table's seed; an entry holds a copy of its
 * name and key. The table finds, adds and removes; whether an entry may give its slot to
 * another key, and what it gives back first (a lease's units, a count's sync), is its owner's.
 * One loop's thread; nothing here is thread-safe.
 */
#ifndef SLUICE_STORE_KEYED_TABLE_H
#define SLUICE_STORE_KEYED_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What every entry begins with. */
typedef struct keyed_entry {
    uint64_t hash;            /* of (name, key) under the table's seed */
    size_t name_len, key_len; /* bytes */
    char *bytes;              /* the name, NUL, then the key: in the entry's own allocation */
} keyed_entry_t;

typedef struct keyed_table {
    keyed_entry_t **slots;
    size_t mask;       /* slots - 1 */
    size_t count;      /* entries */
    size_t entry_size; /* bytes of the owner's entry type, which begins with a keyed_entry_t */
    uint64_t seed;
} keyed_table_t;

/* A table of `slots` (a power of two) slots of entries of entry_size bytes (>= sizeof
 * (keyed_entry_t)). Returns 0, or -1 when out of memory. */
int keyed_init(keyed_table_t *t, size_t slots, size_t entry_size, uint64_t seed);

/* Frees the slots; the owner has removed every entry (keyed_remove) first. */
void keyed_destroy(keyed_table_t *t);

/* The entry of (name, key), or NULL; *slot is where it is or would be (another key's entry may
 * be there: keyed_at). */
void *keyed_find(const keyed_table_t *t, const char *name, const void *key, size_t key_len,
                 size_t *slot);

/* The entry in slot i (< slots), or NULL. */
void *keyed_at(const keyed_table_t *t, size_t i);

/* The number of slots. */
size_t keyed_slots(const keyed_table_t *t);

/* A new entry for (name, key), zeroed but for its keyed_entry_t, in *slot of keyed_find, which
 * must be empty (keyed_remove what was there). NULL when out of memory. */
void *keyed_add(keyed_table_t *t, size_t slot, const char *name, const void *key, size_t key_len);

/* Frees the entry in slot i (there must be one). */
void keyed_remove(keyed_table_t *t, size_t i);

/* An entry's name (NUL-terminated) and key (key_len bytes). */
const char *keyed_name(const keyed_entry_t *e);
const char *keyed_key(const keyed_entry_t *e);

#endif /* SLUICE_STORE_KEYED_TABLE_H */
