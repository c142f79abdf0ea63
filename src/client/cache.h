/*
 * cache.h - the client's local cache of (rule, key) pairs known to be over their limit.
 *
 * When sluiced denies a cost c of (rule, key) with retry_after_ms = r > 0, nothing of cost >= c
 * can be admitted for that (rule, key) before now + r (unless someone resets the key), so the
 * client can answer such calls itself: that is client-side limiting (seed 000), saving a round
 * trip for every request of a client that keeps knocking.
 *
 * This is the client's face of the over-limit cache that sluiced's Redis store uses too
 * (remote/overlimit_cache.h, which has the contract): it names a (rule, key) by a hash of its
 * bytes under a seed random per cache, converts the client's milliseconds to the cache's
 * nanoseconds and back (rounding what it reports up), owns the slots, and counts hits. A
 * (rule, key) may live in any of CACHE_PROBE slots; an insert takes a free or expired one, else
 * evicts the one expiring first.
 *
 * Time is an explicit now_ns from a monotonic clock; the cache never reads a clock itself
 * (except once, for its hash seed). Not thread-safe (one per client handle).
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

/* Replaces *c by an empty cache of `entries` slots that keeps the hit count (and ignores
 * answers to requests asked of the old one). Returns false (and leaves *c as it was) when
 * allocation fails or entries > SLC_CACHE_MAX. */
bool cache_resize(cache_t **c, size_t entries);

/* Drops every entry; the hit count stays. Answers to requests asked before are ignored. */
void cache_clear(cache_t *c);

/*
 * Looks (rule, key) up at now_ns for a request of `cost` units. A hit needs a live entry
 * (now_ns before its expiry) whose denied cost is <= cost; then *out is a denial with limit
 * and remaining as the server last reported them for the key, retry_after_ms and reset_after_ms
 * reduced by the time since they were asked (rounded up, so retry_after_ms >= 1;
 * reset_after_ms >= 0), from_cache = true, and the hit counter goes up. An expired entry found
 * on the way is dropped. Returns true on a hit; *out is untouched on a miss.
 */
bool cache_lookup(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                  int64_t cost, int64_t now_ns, slc_decision_t *out);

/* The cache's epoch, to give cache_remember for a request asked now. */
uint64_t cache_epoch(const cache_t *c);

/*
 * Tells the cache the server's decision d for a request of `cost` units asked at now_ns when
 * the cache's epoch was `epoch` (ignored if the key was forgotten or the cache cleared since).
 * A denial of cost > 0 with retry_after_ms > 0 is remembered until now_ns + retry_after_ms
 * (saturating), unless a smaller cost is remembered already; an admission of a cost at least
 * the remembered one drops the entry; any other decision only updates a remembered entry's
 * limit, remaining and reset time.
 */
void cache_remember(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len,
                    int64_t cost, const slc_decision_t *d, int64_t now_ns, uint64_t epoch);

/* Drops (rule, key) if present; answers to requests asked before are ignored. */
void cache_forget(cache_t *c, const char *rule, size_t rule_len, const char *key, size_t key_len);

/* Lookups answered so far. */
uint64_t cache_hits(const cache_t *c);

/* Slots currently holding an entry (live or expired but not yet dropped). */
size_t cache_count(const cache_t *c);

#endif /* SLUICE_CLIENT_CACHE_H */
