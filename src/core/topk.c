/*
 * topk.c - the Space-Saving heavy-hitter sketch (topk.h).
 *
 * State. c[0..n) are the counters in use. The writer keeps, beside them and for itself only:
 * the Stream-Summary of Metwally et al., buckets each holding the counters of one count, linked
 * in ascending count (bmin the least: its first counter is the one a new key takes once all
 * are in use), so a count grows by one in O(1); and index, an open-addressed table of counter
 * number + 1 by hash (linear probing, deletion by backward shift), so a key is found in about
 * one probe. Invariants: every counter in use is in exactly one bucket, whose bcount is its
 * count; the buckets in the list are non-empty and strictly ascending; every counter in use is
 * in index exactly once, at or after its home slot with no empty slot between. The index has
 * eight slots per counter: a key not counted probes to an empty slot, and a key evicted shifts
 * its cluster back, both short at a load of 1/8 (at 1/2 a new key cost 63 ns, now 30). (A binary
 * min-heap came first: a new key, the common case among many keys, sifted its counter down the
 * whole heap past counters of equal count: 119 ns.)
 *
 * Readers see only c[], n, seq and epoch, all atomics: a counter's fields are written with its
 * seq odd (a seqlock), a count alone is one store (the key does not change), so a copy
 * whose seq did not move is one counter as it was.
 */
#include "core/topk.h"

#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define RELAXED memory_order_relaxed

/* Counter fields are stored with release and loaded with acquire: a seqlock without fences
 * (Boehm, "Can seqlocks get along with programming language memory models?", 2012): the odd
 * sequence is seen before any field written after it, and a reader's second look at the sequence
 * comes after every field it read. On x86 both are plain moves. */
static inline uint64_t load(const _Atomic uint64_t *p)
{
    return atomic_load_explicit(p, memory_order_acquire);
}

static inline void store(_Atomic uint64_t *p, uint64_t v)
{
    atomic_store_explicit(p, v, memory_order_release);
}

/* ---- the writer's index and buckets --------------------------------------------------------- */

static inline unsigned home(uint64_t hash)
{
    return (unsigned)(hash >> 40) & (TOPK_INDEX - 1);
}

/* The index slot holding hash, or the empty slot where it would go. */
static unsigned index_find(const topk_t *s, uint64_t hash, bool *found)
{
    unsigned i = home(hash);
    for (;;) {
        unsigned v = s->index[i];
        if (v == 0) {
            *found = false;
            return i;
        }
        if (s->chash[v - 1] == hash) {
            *found = true;
            return i;
        }
        i = (i + 1) & (TOPK_INDEX - 1);
    }
}

/* Removes slot i, shifting back the entries after it that may move (Knuth's algorithm R). */
static void index_remove(topk_t *s, unsigned i)
{
    unsigned j = i;
    for (;;) {
        s->index[i] = 0;
        for (;;) {
            j = (j + 1) & (TOPK_INDEX - 1);
            if (s->index[j] == 0) {
                return;
            }
            unsigned k = home(s->chash[s->index[j] - 1]);
            /* j's entry stays when its home k lies cyclically in (i, j] */
            bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays) {
                break;
            }
        }
        s->index[i] = s->index[j];
        i = j;
    }
}

/* Stream-Summary (Metwally et al.): buckets of counters of equal count, in a list of ascending
 * count, so a count grows by one and the least count is found in O(1). */

static void counter_unlink(topk_t *s, unsigned i)
{
    unsigned b = s->bucket[i];
    if (s->cprev[i] != TOPK_NIL) {
        s->cnext[s->cprev[i]] = s->cnext[i];
    } else {
        s->bhead[b] = s->cnext[i];
    }
    if (s->cnext[i] != TOPK_NIL) {
        s->cprev[s->cnext[i]] = s->cprev[i];
    }
}

static void counter_link(topk_t *s, unsigned i, unsigned b)
{
    s->bucket[i] = (uint8_t)b;
    s->cprev[i] = TOPK_NIL;
    s->cnext[i] = s->bhead[b];
    if (s->bhead[b] != TOPK_NIL) {
        s->cprev[s->bhead[b]] = (uint8_t)i;
    }
    s->bhead[b] = (uint8_t)i;
}

/* A new empty bucket of count, placed after bucket `after` (TOPK_NIL: first). There is always
 * a free one: buckets in use are never more than counters. */
static unsigned bucket_new(topk_t *s, uint64_t count, unsigned after)
{
    unsigned b = s->bfree;
    s->bfree = s->bnext[b];
    s->bcount[b] = count;
    s->bhead[b] = TOPK_NIL;
    s->bprev[b] = (uint8_t)after;
    s->bnext[b] = after == TOPK_NIL ? s->bmin : s->bnext[after];
    if (s->bnext[b] != TOPK_NIL) {
        s->bprev[s->bnext[b]] = (uint8_t)b;
    }
    if (after == TOPK_NIL) {
        s->bmin = (uint8_t)b;
    } else {
        s->bnext[after] = (uint8_t)b;
    }
    return b;
}

/* Frees bucket b if no counter is left in it. */
static void bucket_drop_empty(topk_t *s, unsigned b)
{
    if (s->bhead[b] != TOPK_NIL) {
        return;
    }
    if (s->bprev[b] != TOPK_NIL) {
        s->bnext[s->bprev[b]] = s->bnext[b];
    } else {
        s->bmin = s->bnext[b];
    }
    if (s->bnext[b] != TOPK_NIL) {
        s->bprev[s->bnext[b]] = s->bprev[b];
    }
    s->bnext[b] = s->bfree;
    s->bfree = (uint8_t)b;
}

/* Counter i's count grows by one (readers see it with one store). */
static void counter_bump(topk_t *s, unsigned i)
{
    unsigned b = s->bucket[i];
    uint64_t count = s->bcount[b] + 1;
    unsigned nb = s->bnext[b];
    store(&s->c[i].count, count);
    bool next_fits = nb != TOPK_NIL && s->bcount[nb] == count;
    if (s->bhead[b] == i && s->cnext[i] == TOPK_NIL && !next_fits) {
        s->bcount[b] = count; /* alone in its bucket: the bucket moves up */
        return;
    }
    counter_unlink(s, i);
    counter_link(s, i, next_fits ? nb : bucket_new(s, count, b));
    bucket_drop_empty(s, b);
}

/* ---- the writer ----------------------------------------------------------------------------- */

/* Every bucket free, none in use (the writer's part of a reset). */
static void buckets_clear(topk_t *s)
{
    for (unsigned b = 0; b < TOPK_CAPACITY; b++) {
        s->bnext[b] = (uint8_t)(b + 1 < TOPK_CAPACITY ? b + 1 : TOPK_NIL);
    }
    s->bfree = 0;
    s->bmin = TOPK_NIL;
}

void topk_init(topk_t *s, uint64_t seed, int64_t epoch)
{
    memset(s, 0, sizeof *s);
    s->seed = seed;
    atomic_store_explicit(&s->epoch, epoch, RELAXED);
    buckets_clear(s);
}

void topk_reset(topk_t *s, int64_t epoch)
{
    uint32_t seq = atomic_load_explicit(&s->seq, RELAXED);
    atomic_store_explicit(&s->seq, seq + 1, RELAXED);
    atomic_store_explicit(&s->n, 0, memory_order_release);
    atomic_store_explicit(&s->epoch, epoch, memory_order_release);
    store(&s->total, 0);
    memset(s->index, 0, sizeof s->index);
    buckets_clear(s);
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

uint64_t topk_hash(const topk_t *s, const void *key, size_t len)
{
    return sl_hash64(key, len, s->seed);
}

/* Gives counter i to key (readers see it whole or not at all). */
static void counter_set(topk_counter_t *c, uint64_t hash, const void *key, size_t len,
                        uint64_t count, uint64_t error)
{
    uint32_t seq = atomic_load_explicit(&c->seq, RELAXED);
    atomic_store_explicit(&c->seq, seq + 1, RELAXED);
    /* The words past a key's end are zero; only those the new key or the old one covers are
     * written (a short key, the common one, writes two of eight). */
    size_t kept = len < TOPK_KEY_INLINE ? len : TOPK_KEY_INLINE;
    size_t old = atomic_load_explicit(&c->key_len, RELAXED);
    old = old < TOPK_KEY_INLINE ? old : TOPK_KEY_INLINE;
    size_t nwords = ((kept > old ? kept : old) + 7) / 8;
    uint64_t words[TOPK_KEY_INLINE / 8] = {0};
    memcpy(words, key, kept);
    for (size_t w = 0; w < nwords; w++) {
        store(&c->key[w], words[w]);
    }
    atomic_store_explicit(&c->key_len, (uint32_t)(len < UINT32_MAX ? len : UINT32_MAX),
                          memory_order_release);
    store(&c->hash, hash);
    store(&c->count, count);
    store(&c->error, error);
    atomic_store_explicit(&c->seq, seq + 2, memory_order_release);
}

void topk_add(topk_t *s, uint64_t hash, const void *key, size_t len)
{
    bool found;
    unsigned slot = index_find(s, hash, &found);
    unsigned n = atomic_load_explicit(&s->n, RELAXED);
    store(&s->total, load(&s->total) + 1);
    if (found) {
        counter_bump(s, s->index[slot] - 1u);
        return;
    }
    if (n < TOPK_CAPACITY) {
        counter_set(&s->c[n], hash, key, len, 1, 0);
        s->chash[n] = hash;
        s->index[slot] = (uint8_t)(n + 1);
        bool fits = s->bmin != TOPK_NIL && s->bcount[s->bmin] == 1;
        counter_link(s, n, fits ? s->bmin : bucket_new(s, 1, TOPK_NIL));
        atomic_store_explicit(&s->n, n + 1, memory_order_release);
        return;
    }
    /* every counter in use: the least one's key is forgotten, the new key takes its count */
    unsigned i = s->bhead[s->bmin];
    uint64_t least = s->bcount[s->bmin];
    bool old_found;
    index_remove(s, index_find(s, s->chash[i], &old_found));
    counter_set(&s->c[i], hash, key, len, least, least);
    s->chash[i] = hash;
    s->index[index_find(s, hash, &found)] = (uint8_t)(i + 1);
    counter_bump(s, i); /* least + 1 */
}

/* ---- readers -------------------------------------------------------------------------------- */

/* Copies counter c into it; false when it was being rewritten throughout a few tries. */
static bool counter_read(const topk_counter_t *c, topk_item_t *it)
{
    for (int tries = 0; tries < 4; tries++) {
        uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        if (seq & 1u) {
            continue;
        }
        uint64_t words[TOPK_KEY_INLINE / 8];
        for (size_t w = 0; w < TOPK_KEY_INLINE / 8; w++) {
            words[w] = load(&c->key[w]);
        }
        it->key_len = atomic_load_explicit(&c->key_len, memory_order_acquire);
        it->hash = load(&c->hash);
        it->count = load(&c->count);
        it->error = load(&c->error);
        if (atomic_load_explicit(&c->seq, RELAXED) == seq) {
            memcpy(it->key, words, sizeof it->key);
            return true;
        }
    }
    return false;
}

size_t topk_read(const topk_t *s, topk_item_t *out, int64_t *epoch, uint64_t *total)
{
    *total = 0;
    uint32_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (seq & 1u) {
        return 0;
    }
    *epoch = atomic_load_explicit(&s->epoch, memory_order_acquire);
    unsigned n = atomic_load_explicit(&s->n, memory_order_acquire);
    size_t got = 0;
    uint64_t least = UINT64_MAX;
    for (unsigned i = 0; i < n && i < TOPK_CAPACITY; i++) {
        if (counter_read(&s->c[i], &out[got])) {
            least = out[got].count < least ? out[got].count : least;
            got++;
        }
    }
    uint64_t added = load(&s->total); /* after the counts: at least what they hold */
    if (atomic_load_explicit(&s->seq, RELAXED) != seq) {
        return 0;
    }
    *total = added;
    /* a counter left out (rewritten while read) may have been the least: the floor is then the
     * least seen, an over-estimate that keeps every merged count an over-estimate */
    uint64_t floor = n >= TOPK_CAPACITY ? least : 0;
    for (size_t i = 0; i < got; i++) {
        out[i].floor = floor;
    }
    return got;
}

/* ---- the merge ------------------------------------------------------------------------------ */

static int by_hash(const void *a, const void *b)
{
    uint64_t x = ((const topk_item_t *)a)->hash, y = ((const topk_item_t *)b)->hash;
    return x < y ? -1 : x > y;
}

static int by_count(const void *a, const void *b)
{
    const topk_item_t *x = a, *y = b;
    if (x->count != y->count) {
        return x->count > y->count ? -1 : 1;
    }
    if (x->error != y->error) {
        return x->error < y->error ? -1 : 1;
    }
    size_t lx = x->key_len < TOPK_KEY_INLINE ? x->key_len : TOPK_KEY_INLINE;
    size_t ly = y->key_len < TOPK_KEY_INLINE ? y->key_len : TOPK_KEY_INLINE;
    int c = memcmp(x->key, y->key, lx < ly ? lx : ly);
    return c != 0 ? c : (lx > ly) - (lx < ly);
}

size_t topk_merge(topk_item_t *items, size_t n, uint64_t floor_sum)
{
    if (n == 0) {
        return 0;
    }
    qsort(items, n, sizeof *items, by_hash);
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        topk_item_t m = items[i];
        uint64_t floors = m.floor;
        size_t j = i + 1;
        for (; j < n && items[j].hash == m.hash; j++) {
            m.count += items[j].count;
            m.error += items[j].error;
            floors += items[j].floor;
        }
        /* the sketches not holding it: what it may have had in each */
        uint64_t missing = floor_sum >= floors ? floor_sum - floors : 0;
        m.count += missing;
        m.error += missing;
        m.floor = 0;
        items[out++] = m;
        i = j;
    }
    qsort(items, out, sizeof *items, by_count);
    return out;
}
