/*
 * cache.c - the over-limit cache (see cache.h for the layout and the contract).
 *
 * Invariants: a slot is free iff its name is NULL; a used slot's hash is hash_of(its rule, its
 * key); a (rule, key) occupies at most one slot, within its probe window. Durations are
 * converted between ms and ns with saturation, since the retry times come from the network.
 */
#include "client/cache.h"

#include <stdlib.h>
#include <string.h>

#define NS_PER_MS INT64_C(1000000)

typedef struct slot {
    char *name;       /* malloc'ed: rule bytes then key bytes; NULL when free */
    size_t rule_len;  /* bytes of the rule at name[0..) */
    size_t key_len;   /* bytes of the key at name[rule_len..) */
    uint64_t hash;    /* hash_of(rule, key) */
    int64_t cost;     /* the denied cost, units */
    int64_t at_ns;    /* when the denial was remembered */
    int64_t until_ns; /* the denial holds while now < until_ns */
    slc_decision_t d; /* the denial as the server sent it */
} slot_t;

struct cache {
    slot_t *slots;  /* `entries` slots */
    size_t entries; /* table size */
    size_t probe;   /* min(CACHE_PROBE, entries) */
    size_t count;   /* used slots */
    uint64_t hits;  /* lookups answered */
};

cache_t *cache_create(size_t entries)
{
    if (entries > SLC_CACHE_MAX)
        return NULL;
    cache_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (entries > 0 && (c->slots = calloc(entries, sizeof *c->slots)) == NULL) {
        free(c);
        return NULL;
    }
    c->entries = entries;
    c->probe = entries < CACHE_PROBE ? entries : CACHE_PROBE;
    return c;
}

static void slot_clear(cache_t *c, slot_t *s)
{
    free(s->name);
    memset(s, 0, sizeof *s);
    c->count--;
}

void cache_free(cache_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->entries; i++)
        free(c->slots[i].name);
    free(c->slots);
    free(c);
}

bool cache_resize(cache_t **c, size_t entries)
{
    cache_t *fresh = cache_create(entries);
    if (fresh == NULL)
        return false;
    fresh->hits = (*c)->hits;
    cache_free(*c);
    *c = fresh;
    return true;
}

void cache_clear(cache_t *c)
{
    for (size_t i = 0; i < c->entries; i++) {
        if (c->slots[i].name != NULL)
            slot_clear(c, &c->slots[i]);
    }
}

/* FNV-1a over the rule, a separator that no length can fake (the rule's length), the key. */
static uint64_t hash_of(const char *rule, size_t rule_len, const char *key, size_t key_len)
{
    uint64_t h = UINT64_C(14695981039346656037);
    const uint64_t prime = UINT64_C(1099511628211);
    for (size_t i = 0; i < rule_len; i++)
        h = (h ^ (unsigned char)rule[i]) * prime;
    for (size_t i = 0; i < sizeof rule_len; i++)
        h = (h ^ ((rule_len >> (8 * i)) & 0xff)) * prime;
    for (size_t i = 0; i < key_len; i++)
        h = (h ^ (unsigned char)key[i]) * prime;
    return h;
}

static bool slot_is(const slot_t *s, uint64_t h, const char *rule, size_t rule_len, const char *key,
                    size_t key_len)
{
    return s->name != NULL && s->hash == h && s->rule_len == rule_len && s->key_len == key_len &&
           memcmp(s->name, rule, rule_len) == 0 && memcmp(s->name + rule_len, key, key_len) == 0;
}

/* The slot holding (rule, key), or NULL. */
static slot_t *find(cache_t *c, uint64_t h, const char *rule, size_t rule_len, const char *key,
                    size_t key_len)
{
    for (size_t i = 0; i < c->probe; i++) {
        slot_t *s = &c->slots[(h + i) % c->entries];
        if (slot_is(s, h, rule, rule_len, key, key_len))
            return s;
    }
    return NULL;
}

/* ceil(ns / 1 ms) for ns >= 0. */
static int64_t ceil_ms(int64_t ns)
{
    return ns / NS_PER_MS + (ns % NS_PER_MS != 0);
}

/* now_ns + ms milliseconds, saturating at INT64_MAX (ms >= 0). */
static int64_t add_ms(int64_t now_ns, int64_t ms)
{
    int64_t ns, sum;
    if (__builtin_mul_overflow(ms, NS_PER_MS, &ns) || __builtin_add_overflow(now_ns, ns, &sum))
        return INT64_MAX;
    return sum;
}

bool cache_lookup(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                  int64_t cost, int64_t now_ns, slc_decision_t *out)
{
    if (c->entries == 0)
        return false;
    uint64_t h = hash_of(rule, rule_len, key, key_len);
    slot_t *s = find(c, h, rule, rule_len, key, key_len);
    if (s == NULL)
        return false;
    if (now_ns >= s->until_ns) {
        slot_clear(c, s);
        return false;
    }
    if (cost < s->cost)
        return false;
    int64_t reset_until_ns = add_ms(s->at_ns, s->d.reset_after_ms);
    *out = s->d;
    out->retry_after_ms = ceil_ms(s->until_ns - now_ns);
    out->reset_after_ms = now_ns < reset_until_ns ? ceil_ms(reset_until_ns - now_ns) : 0;
    out->from_cache = true;
    c->hits++;
    return true;
}

/* The slot a new entry for hash h goes to: a free or expired one in its window, else the one
 * expiring first (cleared). */
static slot_t *claim(cache_t *c, uint64_t h, int64_t now_ns)
{
    slot_t *victim = NULL;
    for (size_t i = 0; i < c->probe; i++) {
        slot_t *s = &c->slots[(h + i) % c->entries];
        if (s->name == NULL)
            return s;
        if (now_ns >= s->until_ns) {
            slot_clear(c, s);
            return s;
        }
        if (victim == NULL || s->until_ns < victim->until_ns)
            victim = s;
    }
    slot_clear(c, victim);
    return victim;
}

bool cache_remember(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                    int64_t cost, const slc_decision_t *d, int64_t now_ns)
{
    if (c->entries == 0 || d->allowed || d->retry_after_ms <= 0)
        return true;
    uint64_t h = hash_of(rule, rule_len, key, key_len);
    slot_t *s = find(c, h, rule, rule_len, key, key_len);
    if (s == NULL) {
        char *name = malloc(rule_len + key_len + 1);
        if (name == NULL)
            return false;
        memcpy(name, rule, rule_len);
        memcpy(name + rule_len, key, key_len);
        name[rule_len + key_len] = '\0';
        s = claim(c, h, now_ns);
        s->name = name;
        s->rule_len = rule_len;
        s->key_len = key_len;
        s->hash = h;
        c->count++;
    }
    s->cost = cost;
    s->at_ns = now_ns;
    s->until_ns = add_ms(now_ns, d->retry_after_ms);
    s->d = *d;
    s->d.from_cache = false;
    return true;
}

void cache_forget(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len)
{
    if (c->entries == 0)
        return;
    slot_t *s = find(c, hash_of(rule, rule_len, key, key_len), rule, rule_len, key, key_len);
    if (s != NULL)
        slot_clear(c, s);
}

uint64_t cache_hits(const cache_t *c)
{
    return c->hits;
}

size_t cache_count(const cache_t *c)
{
    return c->count;
}
