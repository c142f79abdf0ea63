/*
 * cache.h - the client's local cache of (rule, key) pairs known to be over their limit.
 *
 * When sluiced denies a cost c of (rule, key) with retry_after_ms = r > 0, nothing of cost >= c
 * can be admitted for that (rule, key) before now + r (unless someone resets the key), so the
 * client can answer such calls itself: that is client-side limiting (seed 000), saving a round
 * trip for every request of a client that keeps knocking.
 *
 * Layout: `entries` slots; a (rule, key) whose hash is h may live in any of the P =
 * min(CACHE_PROBE, entries) slots h, h+1, ..., h+P-1 (mod entries). Lookups scan all P slots (so
 * removals need no tombstones); an insert takes a free or expired slot among them, else
 * evicts the one expiring first. Each live slot owns one allocation holding "rule" and "key".
 *
 * Time is an explicit now_ns from a monotonic clock; the cache never reads a clock itself.
 * Not thread-safe (one per client handle).
 */
#ifndef SLUICE_CLIENT_CACHE_H
#define SLUICE_CLIENT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/client.h"

#define CACHE_PROBE SLC_CACHE_PROBE_MAX /* slots one (rule, key) may occupy */

typedef struct cache cache_t;

/* Creates a cache of `entries` slots (0: a cache that never holds anything). Returns NULL when
 * allocation fails or entries > SLC_CACHE_MAX. Free with cache_free(). */
cache_t *cache_create(size_t entries);

/* Frees the cache and every entry. NULL is a no-op. */
void cache_free(cache_t *c);

/* Replaces *c by an empty cache of `entries` slots that keeps the hit count. Returns false (and
 * leaves *c as it was) when allocation fails or entries > SLC_CACHE_MAX. */
bool cache_resize(cache_t **c, size_t entries);

/* Drops every entry; the hit count stays. */
void cache_clear(cache_t *c);

/*
 * Looks (rule, key) up at now_ns for a request of `cost` units. A hit needs a live entry
 * (now_ns < its expiry) whose denied cost is <= cost; then *out is the remembered denial with
 * retry_after_ms and reset_after_ms reduced by the time since it was remembered (rounded up,
 * so retry_after_ms >= 1; reset_after_ms >= 0), from_cache = true, and the hit counter goes up.
 * An expired entry found on the way is dropped. Returns true on a hit; *out is untouched on a
 * miss.
 */
bool cache_lookup(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                  int64_t cost, int64_t now_ns, slc_decision_t *out);

/*
 * Remembers decision d for a request of `cost` units decided at now_ns, if it is a denial with
 * retry_after_ms > 0 (anything else is ignored): until now_ns + retry_after_ms (saturating).
 * Replaces an entry for the same (rule, key). Returns false only when the entry could not be
 * allocated (the cache is then as before, less possibly an evicted entry).
 */
bool cache_remember(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                    int64_t cost, const slc_decision_t *d, int64_t now_ns);

/* Drops (rule, key) if present. */
void cache_forget(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len);

/* Lookups answered so far. */
uint64_t cache_hits(const cache_t *c);

/* Slots currently holding an entry (live or expired but not yet dropped). */
size_t cache_count(const cache_t *c);

#endif /* SLUICE_CLIENT_CACHE_H */
