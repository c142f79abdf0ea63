/*
 * topk.h - a heavy-hitter sketch: Space-Saving (Metwally, Agrawal, El Abbadi 2005) over a fixed
 * number of counters, written by one thread and read by others without a lock.
 *
 * A sketch counts keys in TOPK_CAPACITY counters. A key already counted adds one to its counter;
 * a new key takes a free counter, or, when all are taken, the counter with the least count c
 * (its key is forgotten): the new key starts at c + 1 with error c. So for every counted key
 *
 *     count - error <= true count <= count,   error <= N / TOPK_CAPACITY
 *
 * where N is how many keys were added since the last reset, and every key whose true count is
 * above N / TOPK_CAPACITY holds a counter. Keys are told apart by a 64-bit hash seeded by the
 * caller (sl_hash64): two keys with one hash would count together (over-counting, never under);
 * with a seed the client does not know, that takes about 2^64 tries. A key's first
 * TOPK_KEY_INLINE bytes are kept for display; a longer key is counted whole (by its hash) and
 * shown truncated.
 *
 * Sketches merge (Agarwal et al., "Mergeable summaries", 2012): a key's merged count is the sum
 * of its counts where it is counted, plus, for each sketch that does not hold it, that sketch's
 * least count when the sketch is full (what the key may have had there and lost). The bounds
 * above hold for the merge with N the sum of the sketches' N.
 *
 * Threads. topk_reset and topk_add are the writer's (one thread per sketch). topk_read may run
 * on any thread at the same time: each counter is a seqlock of its own (its key changes only
 * with its sequence odd), and the sketch has one for resets, so a reader copies every counter
 * whole or not at all, and a reader that raced a reset sees it and drops the copy. Nothing on
 * the writer's path is a read-modify-write shared with another thread.
 *
 * Pure: no clock, no allocation, no lock, no I/O.
 */
#ifndef SLUICE_CORE_TOPK_H
#define SLUICE_CORE_TOPK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOPK_CAPACITY   128                 /* counters per sketch (at most 255) */
#define TOPK_KEY_INLINE 64                  /* bytes of a key kept for display (a multiple of 8) */
#define TOPK_INDEX      (2 * TOPK_CAPACITY) /* hash index slots (a power of two) */
#define TOPK_NIL        255                 /* no counter, no bucket */

typedef struct topk_counter {
    _Atomic uint32_t seq;                      /* odd while its key is rewritten */
    _Atomic uint32_t key_len;                  /* the whole key's length, bytes */
    _Atomic uint64_t hash;                     /* the key's sl_hash64 under the seed */
    _Atomic uint64_t count;                    /* keys added, an over-estimate */
    _Atomic uint64_t error;                    /* most by which count exceeds the truth */
    _Atomic uint64_t key[TOPK_KEY_INLINE / 8]; /* the key's first bytes */
} topk_counter_t;

typedef struct topk {
    _Atomic uint32_t seq;   /* odd while the sketch is reset */
    _Atomic uint32_t n;     /* counters in use */
    _Atomic int64_t epoch;  /* what the caller counts in it (an interval number) */
    _Atomic uint64_t total; /* keys added since the reset */
    uint64_t seed;          /* the hash seed, the same for sketches that merge */
    topk_counter_t c[TOPK_CAPACITY];
    /* the writer's (Stream-Summary: counters grouped in buckets of equal count) */
    uint8_t index[TOPK_INDEX];      /* counter + 1 by hash (0 empty), linear probing */
    uint64_t chash[TOPK_CAPACITY];  /* counter -> its key's hash (a copy, close at hand) */
    uint8_t bucket[TOPK_CAPACITY];  /* counter -> its bucket */
    uint8_t cnext[TOPK_CAPACITY];   /* the next counter in its bucket (TOPK_NIL: none) */
    uint8_t cprev[TOPK_CAPACITY];   /* the previous one */
    uint8_t bhead[TOPK_CAPACITY];   /* bucket -> its first counter */
    uint8_t bnext[TOPK_CAPACITY];   /* the bucket of the next larger count (or next free) */
    uint8_t bprev[TOPK_CAPACITY];   /* the bucket of the next smaller count */
    uint8_t bmin;                   /* the bucket of the least count (TOPK_NIL: none) */
    uint8_t bfree;                  /* the first free bucket */
    uint64_t bcount[TOPK_CAPACITY]; /* bucket -> the count of its counters */
} topk_t;

/* One counted key, as read or merged. */
typedef struct topk_item {
    uint64_t hash;
    uint64_t count;   /* an over-estimate of the key's true count */
    uint64_t error;   /* count - error <= true count */
    uint64_t floor;   /* read: its sketch's least count if full, else 0 (for the merge) */
    uint32_t key_len; /* the whole key's length, bytes; key holds min(key_len, inline) */
    char key[TOPK_KEY_INLINE];
} topk_item_t;

/* Makes s an empty sketch counting epoch, hashing with seed. Not thread-safe. */
void topk_init(topk_t *s, uint64_t seed, int64_t epoch);

/* Empties s to count epoch (the writer; readers may be reading). */
void topk_reset(topk_t *s, int64_t epoch);

/* Counts one more of key (len bytes, any bytes) whose hash is sl_hash64(key, len, s->seed)
 * (topk_hash): the writer. */
void topk_add(topk_t *s, uint64_t hash, const void *key, size_t len);

/* The hash topk_add takes for key under s's seed. */
uint64_t topk_hash(const topk_t *s, const void *key, size_t len);

/* Copies s's counters into out (room for TOPK_CAPACITY), each with the sketch's floor, and sets
 * *epoch to what s counts and *total to the keys it was given. Any thread. Returns how many
 * were copied: 0 with *total 0 when s was reset while read (a counter being rewritten at that
 * moment is left out). */
size_t topk_read(const topk_t *s, topk_item_t *out, int64_t *epoch, uint64_t *total);

/* Merges n items read from several sketches (topk_read) whose floors sum to floor_sum: one item
 * per key, its count and error as the header says, sorted by count, most first (ties: least
 * error, then key). In place; returns how many distinct keys remain. */
size_t topk_merge(topk_item_t *items, size_t n, uint64_t floor_sum);

#endif /* SLUICE_CORE_TOPK_H */
