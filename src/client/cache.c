/*
 * cache.c - the client's over-limit cache: remote/overlimit_cache.c with the client's units,
 * names and slots (see cache.h).
 *
 * Durations are converted between ms and ns with saturation, since the retry times come from
 * the network. The epoch counts forgets and clears: an answer to a request asked before one is
 * not remembered (with slc_async_t a reset can overtake a denial already on its way).
 */
#include "client/cache.h"

#include <stdint.h>
#include <stdlib.h>

#include "client/common.h"
#include "sluice/sluice.h"
#include "remote/overlimit_cache.h"

#define NS_PER_MS INT64_C(1000000)

struct cache {
    olc_t olc;          /* the table, over slots */
    olc_entry_t *slots; /* `entries` of them, owned */
    uint64_t seed;      /* the names' hash seed */
    uint64_t epoch;     /* forgets and clears so far */
    uint64_t hits;      /* lookups answered */
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
    olc_init(&c->olc, c->slots, entries, CACHE_PROBE);
    /* keys come from the caller's users: a seed they cannot guess keeps them from choosing
     * names that share an entry */
    c->seed = sl_hash_mix((uint64_t)common_monotonic_ns(NULL) ^ (uint64_t)(uintptr_t)c, SL_HASH_P2);
    return c;
}

void cache_free(cache_t *c)
{
    if (c == NULL)
        return;
    free(c->slots);
    free(c);
}

bool cache_resize(cache_t **c, size_t entries)
{
    cache_t *fresh = cache_create(entries);
    if (fresh == NULL)
        return false;
    fresh->hits = (*c)->hits;
    fresh->epoch = (*c)->epoch + 1;
    cache_free(*c);
    *c = fresh;
    return true;
}

void cache_clear(cache_t *c)
{
    olc_clear(&c->olc);
    c->epoch++;
}

static uint64_t name_hash(const cache_t *c, const char *rule, size_t rule_len, const char *key,
                          size_t key_len)
{
    return olc_key_hash(c->seed, rule, rule_len, key, key_len);
}

/* ceil(ns / 1 ms) for ns >= 0. */
static int64_t ceil_ms(int64_t ns)
{
    return ns / NS_PER_MS + (ns % NS_PER_MS != 0);
}

/* ms milliseconds in ns, saturating at INT64_MAX (ms >= 0). */
static int64_t ms_to_ns(int64_t ms)
{
    int64_t ns;
    return __builtin_mul_overflow(ms, NS_PER_MS, &ns) ? INT64_MAX : ns;
}

bool cache_lookup(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                  int64_t cost, int64_t now_ns, slc_decision_t *out)
{
    if (c->olc.nslots == 0)
        return false;
    olc_answer_t a;
    if (!olc_lookup(&c->olc, name_hash(c, rule, rule_len, key, key_len), 0, cost, now_ns, &a))
        return false;
    *out = (slc_decision_t){.allowed = false,
                            .limit = a.limit,
                            .remaining = a.remaining,
                            .retry_after_ms = ceil_ms(a.retry_after_ns),
                            .reset_after_ms = ceil_ms(a.reset_after_ns),
                            .from_cache = true};
    c->hits++;
    return true;
}

uint64_t cache_epoch(const cache_t *c)
{
    return c->epoch;
}

void cache_remember(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                    int64_t cost, const slc_decision_t *d, int64_t now_ns, uint64_t epoch)
{
    if (c->olc.nslots == 0 || epoch != c->epoch)
        return;
    olc_answer_t a = {.allowed = d->allowed,
                      .limit = d->limit,
                      .remaining = d->remaining,
                      .retry_after_ns = d->retry_after_ms < 0 ? -1 : ms_to_ns(d->retry_after_ms),
                      .reset_after_ns = d->reset_after_ms < 0 ? 0 : ms_to_ns(d->reset_after_ms)};
    olc_record(&c->olc, name_hash(c, rule, rule_len, key, key_len), 0, cost, &a, now_ns);
}

void cache_forget(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len)
{
    c->epoch++;
    if (c->olc.nslots > 0)
        olc_forget(&c->olc, name_hash(c, rule, rule_len, key, key_len));
}

uint64_t cache_hits(const cache_t *c)
{
    return c->hits;
}

size_t cache_count(const cache_t *c)
{
    return c->olc.count;
}
