/*
 * override_known.c - the overrides the config store's lookups found, remembered engine-wide so
 * that a key's override still applies while the store cannot be read (overrides.c asks here
 * when a lookup fails or times out and the worker's own cache has lost the key's entry).
 *
 * What it holds: (rule name, key) -> the override's JSON, for every lookup that found one; a
 * lookup that found none forgets the pair. Only overrides an administrator wrote can get in, so
 * a client inventing keys cannot fill it; it holds at most `max` (OV_KNOWN_MAX) overrides and
 * one found beyond that is not remembered (the caller counts it). Rules that no longer have
 * overrides are pruned at every reload.
 *
 * Layout: a chained hash table of OV_KNOWN_BUCKETS buckets under one mutex. The mutex is taken
 * once per lookup answered (the config thread) and once per fallback (a loop whose lookup
 * failed): never on a decision's ordinary path and never across I/O.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"

#define OV_KNOWN_BUCKETS 16384 /* a power of two */

typedef struct known_entry {
    struct known_entry *next; /* in its bucket */
    uint64_t hash;
    size_t key_len; /* bytes */
    char *json;     /* in this allocation, after the key and the name */
    char data[];    /* key, then the rule's name (NUL-terminated), then json (NUL-terminated) */
} known_entry_t;

struct ov_known {
    pthread_mutex_t lock;
    size_t n, max;
    known_entry_t *buckets[OV_KNOWN_BUCKETS];
};

ov_known_t *ov_known_create(size_t max)
{
    ov_known_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return NULL;
    }
    pthread_mutex_init(&k->lock, NULL);
    k->max = max;
    return k;
}

void ov_known_free(ov_known_t *k)
{
    if (k == NULL) {
        return;
    }
    for (size_t i = 0; i < OV_KNOWN_BUCKETS; i++) {
        for (known_entry_t *en = k->buckets[i], *next; en != NULL; en = next) {
            next = en->next;
            free(en);
        }
    }
    pthread_mutex_destroy(&k->lock);
    free(k);
}

static uint64_t known_hash(const char *rule, const void *key, size_t key_len)
{
    return sl_hash64(key, key_len, sl_hash64(rule, strlen(rule), 0x6b6e));
}

/* The link to (rule, key)'s entry in its bucket (*link NULL: none). Under the lock. */
static known_entry_t **known_find(ov_known_t *k, uint64_t h, const char *rule, const void *key,
                                  size_t key_len)
{
    known_entry_t **link = &k->buckets[h & (OV_KNOWN_BUCKETS - 1)];
    for (; *link != NULL; link = &(*link)->next) {
        known_entry_t *en = *link;
        if (en->hash == h && en->key_len == key_len && memcmp(en->data, key, key_len) == 0 &&
            strcmp(en->data + key_len, rule) == 0) {
            break;
        }
    }
    return link;
}

static known_entry_t *entry_new(uint64_t h, const char *rule, const void *key, size_t key_len,
                                const char *json)
{
    size_t name_len = strlen(rule) + 1, json_len = strlen(json) + 1;
    known_entry_t *en = malloc(sizeof *en + key_len + name_len + json_len);
    if (en == NULL) {
        return NULL;
    }
    en->next = NULL;
    en->hash = h;
    en->key_len = key_len;
    memcpy(en->data, key, key_len);
    memcpy(en->data + key_len, rule, name_len);
    en->json = en->data + key_len + name_len;
    memcpy(en->json, json, json_len);
    return en;
}

bool ov_known_note(ov_known_t *k, const char *rule, const void *key, size_t key_len,
                   const char *json)
{
    uint64_t h = known_hash(rule, key, key_len);
    pthread_mutex_lock(&k->lock);
    known_entry_t **link = known_find(k, h, rule, key, key_len);
    known_entry_t *old = *link;
    bool ok = true;
    if (json == NULL) { /* none any more */
        if (old != NULL) {
            *link = old->next;
            k->n--;
            free(old);
        }
    } else if (old == NULL || strcmp(old->json, json) != 0) {
        known_entry_t *en =
            old != NULL || k->n < k->max ? entry_new(h, rule, key, key_len, json) : NULL;
        if (en == NULL) {
            ok = false; /* full or out of memory: an older answer, if any, stays */
        } else {
            en->next = old != NULL ? old->next : NULL;
            *link = en;
            k->n += old == NULL;
            free(old);
        }
    }
    pthread_mutex_unlock(&k->lock);
    return ok;
}

char *ov_known_get(ov_known_t *k, const char *rule, const void *key, size_t key_len)
{
    uint64_t h = known_hash(rule, key, key_len);
    pthread_mutex_lock(&k->lock);
    known_entry_t *en = *known_find(k, h, rule, key, key_len);
    char *json = en != NULL ? strdup(en->json) : NULL;
    pthread_mutex_unlock(&k->lock);
    return json;
}

void ov_known_prune(ov_known_t *k, bool (*keep)(void *arg, const char *rule), void *arg)
{
    pthread_mutex_lock(&k->lock);
    for (size_t i = 0; i < OV_KNOWN_BUCKETS && k->n > 0; i++) {
        known_entry_t **link = &k->buckets[i];
        while (*link != NULL) {
            known_entry_t *en = *link;
            if (keep(arg, en->data + en->key_len)) {
                link = &en->next;
                continue;
            }
            *link = en->next;
            k->n--;
            free(en);
        }
    }
    pthread_mutex_unlock(&k->lock);
}

size_t ov_known_count(ov_known_t *k)
{
    pthread_mutex_lock(&k->lock);
    size_t n = k->n;
    pthread_mutex_unlock(&k->lock);
    return n;
}
