/*
 * overlimit_cache.h - remembered refusals: per (rule, key), the latest cost a rate-limit store
 * refused and until when that refusal holds, so that the same request, which the store would
 * refuse anyway with the same retry time, is answered without asking it. One implementation for
 * sluiced's Redis store (one cache per loop, direct-mapped) and libsluice-client (one per handle, a
 * few slots per key).
 *
 * Why an answer from here is never wrong, only possibly stale: the algorithms are monotone. If
 * the store refused `cost` units at time t saying they fit no sooner than t + retry_after, then
 * before that time it refuses `cost` again, with that retry time less the time since, unless
 * the key's usage moves: a reset, a refund, the key's state lost, other rule parameters, or an
 * admission (after which the retry time is later). The caller forgets the entry on the first
 * ones (olc_forget, or a new epoch: an epoch may also carry the parameters a refusal was learnt
 * under, so that a request under others meets another epoch), an admission drops it, and the cache
 * answers nothing else: another cost (a smaller one may fit; a larger one fits later than
 * `cost`, when only the store knows), a peek (cost 0), or a time past the hold always goes to
 * the store. A
 * rule with a max_delay admits, with a delay, up to max_delay before retry_after: the hold ends
 * that much earlier (olc_answer_t.max_delay_ns).
 *
 * An answer reports what the store last said about the key (limit, remaining), never a number
 * made up here; retry_after and reset_after are the store's, less the time since (so never 0
 * for a refusal: the hold ends before the retry time).
 *
 * Layout: the caller's array of nslots entries, 64 bytes each. A (rule, key) is named by a
 * 64-bit seeded hash (olc_key_hash); it may live in any of the `probe` slots starting at the
 * hash's place (wrapping), 1 for a direct-mapped cache. A lookup scans them all (so removal needs
 * no tombstones); an insert takes a free or expired slot among them, else the one whose hold
 * ends first. Two different keys with the same 64-bit hash would share an entry: with a seed
 * the caller keeps to itself that takes about 2^32 live keys to become likely.
 *
 * Pure: time is the caller's now_ns (any monotonic origin), nothing is allocated, nothing
 * locked, no clock read. One owner thread per cache.
 */
#ifndef SLUICE_STORE_OVERLIMIT_CACHE_H
#define SLUICE_STORE_OVERLIMIT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OLC_PROBE_MAX 8 /* most slots one (rule, key) may occupy */

/* What the store answered for a request, and what a cache hit answers. */
typedef struct olc_answer {
    bool allowed;
    int64_t limit;          /* the rule's capacity, units */
    int64_t remaining;      /* units left, as the store reported */
    int64_t retry_after_ns; /* refused: until this cost can be admitted; -1: never */
    int64_t reset_after_ns; /* until the key is back to a fresh quota, ns */
    int64_t max_delay_ns;   /* the rule's max_delay when known, else 0 (input only), ns */
} olc_answer_t;

typedef struct olc_entry {
    uint64_t hash;       /* olc_key_hash of the (rule, key) */
    uint64_t epoch;      /* the caller's epoch when the refusal was asked */
    int64_t cost;        /* the smallest cost known refused, units; 0: a free slot */
    int64_t hold_ns;     /* every cost >= `cost` is refused while now < hold_ns */
    int64_t retry_at_ns; /* when `cost` fits: the store's retry_after from when it was asked */
    int64_t reset_at_ns; /* when the key is fresh, likewise */
    int64_t limit;       /* the store's last report for the key, units */
    int64_t remaining;   /* likewise, units */
} olc_entry_t;

typedef struct olc {
    olc_entry_t *slots; /* the caller's, nslots of them */
    size_t nslots;      /* table size; 0: a cache that holds nothing */
    size_t probe;       /* slots a key may occupy: min(probe asked, nslots) */
    size_t count;       /* slots in use (live, or expired and not yet reused) */
} olc_t;

/* Makes c an empty cache over slots[0..nslots) (cleared here; the caller keeps ownership), each
 * key in one of `probe` slots (1..OLC_PROBE_MAX; 1 is direct-mapped). */
void olc_init(olc_t *c, olc_entry_t *slots, size_t nslots, size_t probe);

/* Drops every entry. */
void olc_clear(olc_t *c);

/* The hash naming a key: the bytes a[0..a_len) then b[0..b_len) (b may be NULL with b_len 0)
 * under seed; ("ab", "c") and ("a", "bc") are different keys. */
uint64_t olc_key_hash(uint64_t seed, const void *a, size_t a_len, const void *b, size_t b_len);

/*
 * Answers a request of `cost` units for key h at now_ns from the cache, when it can: a live entry
 * for h (same epoch, now_ns before its hold) of that very cost. Then *out is a refusal:
 * limit and remaining as the store last reported them, retry_after_ns and reset_after_ns the
 * store's less the time since they were asked (retry_after_ns >= 1, reset_after_ns >= 0), and
 * the result is true. Otherwise false and *out untouched; an entry found expired or of another
 * epoch is dropped on the way.
 */
bool olc_lookup(olc_t *c, uint64_t h, uint64_t epoch, int64_t cost, int64_t now_ns,
                olc_answer_t *out);

/*
 * Tells the cache what the store answered for a request of `cost` units for key h, asked at
 * asked_ns (when the request was sent: the hold and the times reported later count from then,
 * which errs on the early side) under epoch. The caller gives only answers whose epoch is still
 * current.
 *   - A refusal of cost >= 1 with retry_after_ns > max_delay_ns is remembered until asked_ns +
 *     retry_after_ns - max_delay_ns, in place of the key's entry if it had one.
 *   - An admission of cost >= 1 drops the key's entry: its usage moved, so the store's retry
 *     time for the entry's cost is not what it was (and room may have come back unseen).
 *   - Any other answer (a peek's) only updates a live entry's limit, remaining and reset time.
 */
void olc_record(olc_t *c, uint64_t h, uint64_t epoch, int64_t cost, const olc_answer_t *a,
                int64_t asked_ns);

/* Drops key h's entry, if any. */
void olc_forget(olc_t *c, uint64_t h);

#endif /* SLUICE_STORE_OVERLIMIT_CACHE_H */
