/*
 * table.c - the per-key table: string key -> algorithm state, for one rule, thread-safe.
 *
 * long because: the chunk and entry layout is private to this file, and the hot path (lookup,
 * placement, decisions) needs its helpers static in one translation unit to inline them.
 *
 * Layout. The table is a power of two of shards, each guarded by one spinlock. A key's 64-bit
 * hash picks the shard (bits 40..55), the home chunk inside it (bits 0..31, fastrange: (h32 *
 * nchunks) >> 32, so a shard's size need not be a power of two) and a 7-bit tag (bits 32..38).
 * A shard is an array of chunks of CHUNK_ENTRIES entries:
 *
 *   chunk = [ tags (4 bytes: 0 = empty, else 0x80 | tag) | overflow (uint32) | 4 entries ]
 *   entry = [ state area | klen (1 byte) | key area ]
 *
 * A lookup reads the home chunk's tags, compares the key only where the tag matches, and moves
 * to the next chunk only if the home chunk's `overflow` says some key that hashed here was
 * placed further on. At 7/8 load almost every key is in its home chunk, so a decision touches one
 * chunk (120 bytes for 8-byte states: two cache lines, fetched together) with one predictable
 * branch, instead of a probe run of slots with a mispredicted branch per slot. (The idea is
 * that of Swiss tables and folly's F14: tags to skip compares, overflow counts to stop early.)
 *
 * Small states (<= STATE_INLINE_MAX bytes) live in the entry; larger ones (a sliding_log's
 * entries) are a separate allocation and the state area holds the pointer. An out-of-line state
 * says the size of its buffer (core.h, "States of variable size"): it is kept with room for one
 * more operation before each one that writes (growing by half again at least), and shrunk when
 * it holds a quarter of that, so a sliding_log key weighs what its admissions take. Keys up to the
 * key area's size (19 bytes) live in the entry; longer ones are a separate allocation described by
 * the key area (klen KLEN_LONG). An 8-byte state and a short key take one 28-byte entry, 30 bytes
 * with the chunk header.
 *
 * Invariants (per shard, under its lock):
 *   - chunk c's overflow = the number of stored keys whose probe passed c, i.e. whose home
 *     chunk is before c's successor on the way to the chunk holding them (wrapping around);
 *   - a tag byte is 0 exactly when its entry is free;
 *   - count <= grow_at < nchunks * CHUNK_ENTRIES, grow_at = capacity * 7/8;
 *   - bytes = the chunk array + the sizes of the out-of-line keys and states.
 *
 * Growth and reclamation happen together, when an insert finds the shard at grow_at: the shard
 * is rebuilt once without the keys whose state is fresh (they decide as an absent key would),
 * at the same size if that freed enough room, else 1.25x larger (small steps keep memory per
 * key close to entry size / load). If the larger array would pass the memory cap the insert
 * fails with SL_EFULL instead: a key that still holds usage is never evicted (docs/dev/design.md).
 *
 * Locking: every path holds one shard lock at a time, except sl_table_decide_all(), which holds
 * the locks of all the shards it needs (of any tables), taken once each in ascending address
 * order, so two such calls cannot deadlock. No lock is held while caller code runs:
 * sl_table_foreach() copies a shard, a piece per lock hold, and visits the copy after unlocking,
 * so a visitor that writes a snapshot to disk holds up no decision, and may call into any table.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <errno.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define FUTEX_WAIT_PRIVATE 0
#define FUTEX_WAKE_PRIVATE 0
#endif

#include "core/budget.h"
#include "core/core.h"

#define STATE_INLINE_MAX 128u  /* larger states are allocated out of line, bytes */
#define KEY_AREA_MIN     19u   /* inline key capacity at least, bytes */
#define KLEN_MASK        0x7Fu /* the klen byte's length bits */
#define KLEN_LONG        0x7Fu /* klen of a key stored out of line */
#define KLEN_USED        0x80u /* in klen: decided on since the eviction hand last passed */
#define CHUNK_ENTRIES    4u    /* entries per chunk */
#define CHUNK_HEADER     8u    /* tags + overflow, bytes */
#define MAX_LOAD_NUM     7u    /* grow when count reaches 7/8 of capacity */
#define MAX_LOAD_DEN     8u
#define MIN_CHUNKS       4u                /* chunks in a new shard */
#define PROBE_LONG       8u                /* chunks a lookup may walk before the shard is tidied */
#define HUGE_ALLOC_MIN   ((size_t)2 << 20) /* huge page size; larger arrays are mmap'ed */
#define SHARDS_DEFAULT   64u
#define BATCH_AHEAD      16u /* batch: requests hashed and prefetched ahead */
#define EVICT_SCAN       64u /* entries the eviction hand passes at most to evict one key */
#define EVICT_SAMPLE     8u  /* idle keys it compares: the one with the most units left goes */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* An out-of-line key, described in the entry's key area. */
typedef struct long_key {
    unsigned char *bytes; /* malloc'ed copy of the key */
    uint32_t len;         /* key length, bytes */
    uint32_t hash_lo;     /* low 32 bits of the key's hash, checked before memcmp */
} long_key_t;

/*
 * A shard is two cache lines. The first holds the lock, which bounces between cores on every
 * decision, and the housekeeping fields only touched while holding it (and rarely). The second
 * holds the array's address and size, which every decision reads and only a rebuild or insert
 * writes, so it stays cached in every core; the batch path's unlocked prefetch peek reads it.
 * A shard of exactly two lines also keeps its address a shift away (a 192-byte shard measured
 * 1.2 ns slower per hot-key decision).
 */
typedef struct shard {
    /* line 1: the lock, and what is only touched while holding it and rarely */
    atomic_uint lock;       /* 0 free, 1 held */
    uint32_t removed;       /* keys removed since the last rebuild (their overflow may be stale) */
    atomic_uint napping;    /* lockers asleep on the lock (shard_lock_contended) */
    uint32_t hand;          /* the eviction hand: the entry slot it looks at next */
    bool long_probe;        /* a lookup walked PROBE_LONG chunks or more since the last rebuild */
    atomic_bool walking;    /* the holder is a long walk (shard_copy): waiters sleep at once */
    atomic_bool handoff;    /* a waiter waited HANDOFF_NAPS naps: the lock is kept for it */
    uint8_t handoffs;       /* claims of handoff that got the lock (saturating at 255) */
    _Atomic uint16_t takes; /* acquisitions, mod 2^16 (stored under the lock, no RMW) */
    uint8_t passed_max;     /* the most acquisitions by others between a handoff's claim and
                               the claimant's own (saturating; sl_table_lock_counts) */
    int64_t reclaimed_ns; /* keys fresh at this time were dropped; absent keys decide no earlier */
    int64_t rescan_ns;    /* at the memory cap: no new reclaim scan before this time */
    int64_t latest_ns;    /* the latest time a call or a reclaim on the shard used (shard_now) */
    uint64_t reclaimed;   /* fresh keys dropped */
    uint64_t refused;     /* inserts refused at the cap */
    /* line 2: what every decision reads */
    unsigned char *chunks __attribute__((aligned(64))); /* nchunks * chunk_size bytes */
    uint32_t nchunks;                                   /* chunks in the array */
    uint32_t grow_at;                                   /* count that triggers a rebuild */
    uint32_t count;                                     /* stored keys */
    size_t bytes;      /* chunk array + out-of-line keys and states, bytes */
    uint64_t evicted;  /* idle keys evicted at the memory cap (their usage forgotten) */
    uint64_t holds;    /* sl_table_acquire() calls on the shard: the entropy of each differs */
    uint64_t rebuilds; /* rebuilds of this shard, for sl_table_stats() (rare: a rebuild writes
                          this line anyway) */
} __attribute__((aligned(64))) shard_t;
_Static_assert(sizeof(shard_t) == 128, "a shard is two cache lines");

struct sl_table {
    sl_rule_t rule;      /* prepared, owned copy */
    uint32_t state_size; /* bytes of state per key (rule.state_size) */
    uint32_t state_area; /* bytes the state takes in an entry: state_size or a pointer */
    bool state_external; /* states are out-of-line allocations */
    uint32_t entry_size; /* bytes per entry, a multiple of 4 */
    uint32_t chunk_size; /* CHUNK_HEADER + CHUNK_ENTRIES * entry_size, bytes */
    uint32_t key_area;   /* inline key capacity, bytes */
    size_t key_max;      /* longest key accepted, bytes */
    size_t shard_budget; /* max bytes per shard; SIZE_MAX = no cap */
    sl_budget_t *budget; /* the cap shared with other tables, or NULL */
    bool evict_idle;     /* at the cap, evict idle keys before refusing a new one */
    int64_t skew_ns;     /* a now this far behind its shard's latest is taken as the latest */
    uint64_t seed;       /* hash seed */
    uint64_t hold_key;   /* random, never configured: keys the entropy of hold ids */
    int64_t rescan_ns;   /* at the memory cap, the least time between two reclaim scans, ns */
    uint64_t shard_mask; /* nshards - 1 */
    unsigned nshards;    /* power of two, <= 2^16 */
    shard_t shards[];
};

/* ---- the shared budget -------------------------------------------------------------------- */

/* Whether `bytes` more fit under the budget the table shares (always, without one). Checked
 * before a change and counted after it, with no lock between: tables growing at once on other
 * threads can pass the cap by what each takes in one step (an array's growth, a key). */
static inline bool budget_fits(const sl_table_t *t, size_t bytes)
{
    if (t->budget == NULL)
        return true;
    size_t used = atomic_load_explicit(&t->budget->used, memory_order_relaxed);
    return used <= t->budget->max && bytes <= t->budget->max - used;
}

/* Counts a change of the table's bytes in the budget it shares. */
static inline void budget_add(const sl_table_t *t, size_t before, size_t after)
{
    if (t->budget == NULL || before == after)
        return;
    if (after > before)
        atomic_fetch_add_explicit(&t->budget->used, after - before, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&t->budget->used, before - after, memory_order_relaxed);
}

/* ---- locking ----------------------------------------------------------------------------- */

/* futex(2) on `word` with a timeout in this libc's struct timespec: where time_t is wider than
 * long (32-bit systems with 64-bit time), that is futex_time64's. -1 where there is none. */
static long lock_futex(atomic_uint *word, int op, unsigned val, const struct timespec *timeout)
{
#if defined(__linux__) && defined(SYS_futex_time64)
    if (sizeof(time_t) > sizeof(long))
        return syscall(SYS_futex_time64, (unsigned *)word, op, val, timeout, NULL, 0);
#endif
#if defined(__linux__) && defined(SYS_futex)
    return syscall(SYS_futex, (unsigned *)word, op, val, timeout, NULL, 0);
#else
    (void)word, (void)op, (void)val, (void)timeout;
    errno = ENOSYS;
    return -1;
#endif
}

/* Sleeps until the lock word `word` may no longer be 1, or about 10 us have passed (plus the
 * timer's slack). */
static void lock_nap(atomic_uint *word)
{
    struct timespec nap = {0, 10000};
    if (lock_futex(word, FUTEX_WAIT_PRIVATE, 1u, &nap) != 0 && errno == ENOSYS)
        nanosleep(&nap, NULL);
}

#define LOCK_SPIN_NS 20000 /* a waiter spins this long before it sleeps, ns */

static int64_t lock_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define HANDOFF_NAPS 8u /* naps a waiter takes before the lock is kept for it */

/* Sleeps about 10 us while the lock is held, or kept for another waiter (it may be free). */
static void wait_nap(shard_t *s)
{
    if (atomic_load_explicit(&s->lock, memory_order_relaxed) != 0) {
        lock_nap(&s->lock);
        return;
    }
    struct timespec nap = {0, 10000};
    nanosleep(&nap, NULL);
}

/*
 * Spins for up to LOCK_SPIN_NS, then sleeps on the lock word, counted in `napping`. A holder on
 * another core lets go within the spin (a batch of decisions holds a shard for microseconds);
 * a long walk holds it longer, and may be waiting for our core: its waiters sleep at once.
 * One that is not running (more threads than cores) runs while we sleep; we never yield, since a
 * holder of lower priority than ours (a snapshot's thread at SCHED_IDLE on our core) is not run
 * by sched_yield but by the scheduler's next tick, milliseconds later. A long walk
 * (shard_unlock_walk) wakes the sleepers as it lets go and lets them in before it takes the lock
 * again; any other holder is waited for by naps of about 10 us.
 *
 * Fairness: the lock is not FIFO, but no waiter waits unboundedly while others take it back at
 * once. A waiter that has napped HANDOFF_NAPS times claims `handoff` (one at a time); while it is
 * set, nobody else takes the lock (shard_lock's fast path comes here, and waits), so the claimant
 * has it as soon as the holder lets go, behind at most the lockers that had already passed the
 * check (one per thread). tests/prop/tool_shard_lock_wait.c counts it.
 */
static __attribute__((noinline)) void shard_lock_contended(shard_t *s)
{
    unsigned spins = 0, naps = 0;
    uint16_t claimed_at = 0;
    int64_t spin_until_ns = 0;
    bool asleep = false, mine = false;
    for (;;) {
        while (atomic_load_explicit(&s->lock, memory_order_relaxed) != 0 ||
               (!mine && atomic_load_explicit(&s->handoff, memory_order_relaxed))) {
            if (++spins < 128) {
                cpu_relax();
                continue;
            }
            if (spin_until_ns == 0)
                spin_until_ns = lock_clock_ns() + LOCK_SPIN_NS;
            if (!asleep && !atomic_load_explicit(&s->walking, memory_order_relaxed) &&
                lock_clock_ns() < spin_until_ns) {
                cpu_relax();
                continue;
            }
            if (!asleep) {
                asleep = true;
                atomic_fetch_add_explicit(&s->napping, 1, memory_order_seq_cst);
            }
            bool unclaimed = false;
            if (!mine && ++naps >= HANDOFF_NAPS &&
                atomic_compare_exchange_strong_explicit(
                    &s->handoff, &unclaimed, true, memory_order_relaxed, memory_order_relaxed)) {
                mine = true;
                claimed_at = atomic_load_explicit(&s->takes, memory_order_relaxed);
            }
            wait_nap(s);
        }
        if (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire) == 0)
            break;
    }
    if (mine) {
        /* takes was counted by shard_lock for the lockers in between, not yet for us */
        unsigned passed =
            (uint16_t)(atomic_load_explicit(&s->takes, memory_order_relaxed) - claimed_at);
        if (passed > s->passed_max)
            s->passed_max = passed > 255 ? 255 : (uint8_t)passed;
        if (s->handoffs < 255)
            s->handoffs++;
        atomic_store_explicit(&s->handoff, false, memory_order_relaxed);
    }
    if (asleep)
        atomic_fetch_sub_explicit(&s->napping, 1, memory_order_relaxed);
}

static inline void shard_lock(shard_t *s)
{
    if (__builtin_expect(atomic_load_explicit(&s->handoff, memory_order_relaxed) ||
                             atomic_exchange_explicit(&s->lock, 1, memory_order_acquire) != 0,
                         0))
        shard_lock_contended(s);
    /* a plain store under the lock, on the lock's own line (a relaxed atomic for the waiter that
     * reads it without the lock) */
    atomic_store_explicit(&s->takes,
                          (uint16_t)(atomic_load_explicit(&s->takes, memory_order_relaxed) + 1),
                          memory_order_relaxed);
}

static inline void shard_unlock(shard_t *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

#define GIVE_WAY_NAPS 100u /* a long walk waits at most this many naps for a sleeper to get in */

/*
 * Unlocks after a piece of a long walk over a shard (a copy for a snapshot). Wakes the lockers
 * asleep on the lock and, when the walk will take the lock `again`, sleeps until they have had
 * it: a walk whose thread has a lower priority than a loop on its core runs only while the loop
 * sleeps, and would otherwise take the lock back before the loop woke, again and again until the
 * whole shard was walked.
 */
static void shard_unlock_walk(shard_t *s, bool again)
{
    atomic_store_explicit(&s->walking, false, memory_order_relaxed);
    atomic_store_explicit(&s->lock, 0, memory_order_seq_cst);
    if (atomic_load_explicit(&s->napping, memory_order_seq_cst) == 0)
        return;
    lock_futex(&s->lock, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
    for (unsigned n = 0;
         again && n < GIVE_WAY_NAPS && atomic_load_explicit(&s->napping, memory_order_relaxed) != 0;
         n++) {
        struct timespec nap = {0, 10000};
        nanosleep(&nap, NULL);
    }
}

/* ---- chunks and entries ------------------------------------------------------------------ */

/* Bits 40..55 pick the shard, bits 0..31 the home chunk, bits 32..38 the tag. */
static inline shard_t *shard_of(sl_table_t *t, uint64_t h)
{
    return &t->shards[(h >> 40) & t->shard_mask];
}

static inline uint32_t home_of(uint64_t h, uint32_t nchunks)
{
    return (uint32_t)(((h & 0xffffffffu) * (uint64_t)nchunks) >> 32);
}

static inline uint8_t tag_of(uint64_t h)
{
    return (uint8_t)(0x80 | ((h >> 32) & 0x7f));
}

static inline unsigned char *chunk_at(const sl_table_t *t, unsigned char *chunks, uint32_t c)
{
    return chunks + (size_t)c * t->chunk_size;
}

static inline uint32_t next_chunk(uint32_t c, uint32_t nchunks)
{
    return c + 1 == nchunks ? 0 : c + 1;
}

static inline unsigned char *entry_at(const sl_table_t *t, unsigned char *chunk, unsigned e)
{
    return chunk + CHUNK_HEADER + e * t->entry_size;
}

/* The four tag bytes, tag e in bits 8e..8e+7 whatever the byte order. */
static inline uint32_t chunk_tags(const unsigned char *chunk)
{
    uint32_t v;
    memcpy(&v, chunk, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint32_t chunk_overflow(const unsigned char *chunk)
{
    uint32_t v;
    memcpy(&v, chunk + 4, sizeof(v));
    return v;
}

static inline void chunk_add_overflow(unsigned char *chunk, int32_t delta)
{
    uint32_t v = chunk_overflow(chunk) + (uint32_t)delta;
    memcpy(chunk + 4, &v, sizeof(v));
}

/* 0x80 in each byte of `tags` that equals `tag` (exact: no false positives). */
static inline uint32_t tag_matches(uint32_t tags, uint8_t tag)
{
    uint32_t x = tags ^ (tag * 0x01010101u);
    return ~(((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x | 0x7f7f7f7fu);
}

static inline unsigned char *entry_klen(const sl_table_t *t, unsigned char *entry)
{
    return entry + t->state_area; /* [0] klen, [1..] key area */
}

/* Equal bytes, for short keys with overlapping word loads (len bytes readable in both). */
static inline bool bytes_equal(const unsigned char *a, const unsigned char *b, size_t len)
{
    if (len >= 8 && len <= 16)
        return sl_hash_r64(a) == sl_hash_r64(b) &&
               sl_hash_r64(a + len - 8) == sl_hash_r64(b + len - 8);
    if (len >= 4 && len < 8)
        return sl_hash_r32(a) == sl_hash_r32(b) &&
               sl_hash_r32(a + len - 4) == sl_hash_r32(b + len - 4);
    return memcmp(a, b, len) == 0;
}

static inline bool entry_key_equal(const sl_table_t *t, unsigned char *entry,
                                   const unsigned char *key, size_t len, uint64_t h)
{
    unsigned char *kl = entry_klen(t, entry);
    if (len <= t->key_area)
        return (kl[0] & KLEN_MASK) == len && bytes_equal(kl + 1, key, len);
    if ((kl[0] & KLEN_MASK) != KLEN_LONG)
        return false;
    long_key_t lk;
    memcpy(&lk, kl + 1, sizeof(lk));
    return lk.len == len && lk.hash_lo == (uint32_t)h && memcmp(lk.bytes, key, len) == 0;
}

/* The key stored in an entry. */
static const unsigned char *entry_key(const sl_table_t *t, unsigned char *entry, size_t *len)
{
    unsigned char *kl = entry_klen(t, entry);
    if ((kl[0] & KLEN_MASK) != KLEN_LONG) {
        *len = kl[0] & KLEN_MASK;
        return kl + 1;
    }
    long_key_t lk;
    memcpy(&lk, kl + 1, sizeof(lk));
    *len = lk.len;
    return lk.bytes;
}

/* Marks the entry as decided on: the eviction hand passes it over once (it is not idle). A
 * store only when the mark is not there yet, so a hot key's line is not written for it. */
static inline void entry_touch(const sl_table_t *t, unsigned char *entry)
{
    unsigned char *kl = entry_klen(t, entry);
    if (!(kl[0] & KLEN_USED))
        kl[0] |= KLEN_USED;
}

static uint64_t entry_hash(const sl_table_t *t, unsigned char *entry)
{
    size_t len;
    const unsigned char *key = entry_key(t, entry, &len);
    return sl_hash64(key, len, t->seed);
}

/* Pointer to the entry's state: in the entry, or the out-of-line allocation. */
static inline void *entry_state(const sl_table_t *t, unsigned char *entry)
{
    if (!t->state_external)
        return entry;
    void *p;
    memcpy(&p, entry, sizeof(p));
    return p;
}

static size_t entry_external_bytes(const sl_table_t *t, unsigned char *entry)
{
    size_t n = t->state_external ? core_state_bytes(&t->rule, entry_state(t, entry)) : 0;
    unsigned char *kl = entry_klen(t, entry);
    if ((kl[0] & KLEN_MASK) == KLEN_LONG) {
        long_key_t lk;
        memcpy(&lk, kl + 1, sizeof(lk));
        n += lk.len;
    }
    return n;
}

static void entry_free_external(const sl_table_t *t, unsigned char *entry)
{
    if (t->state_external)
        free(entry_state(t, entry));
    unsigned char *kl = entry_klen(t, entry);
    if ((kl[0] & KLEN_MASK) == KLEN_LONG) {
        long_key_t lk;
        memcpy(&lk, kl + 1, sizeof(lk));
        free(lk.bytes);
    }
}

/* Calls fn(t, entry, arg) for every stored entry of shard s. */
#define SHARD_FOREACH_ENTRY(t, chunks, nchunks, entry, body)                                       \
    for (uint32_t c_ = 0; c_ < (nchunks); c_++) {                                                  \
        unsigned char *chunk_ = chunk_at((t), (chunks), c_);                                       \
        uint32_t tags_ = chunk_tags(chunk_);                                                       \
        for (unsigned e_ = 0; e_ < CHUNK_ENTRIES; e_++) {                                          \
            if (((tags_ >> (8 * e_)) & 0xff) == 0)                                                 \
                continue;                                                                          \
            unsigned char *entry = entry_at((t), chunk_, e_);                                      \
            body                                                                                   \
        }                                                                                          \
    }

/* ---- chunk arrays ------------------------------------------------------------------------ */

static size_t array_bytes(const sl_table_t *t, uint32_t nchunks)
{
    return (size_t)nchunks * t->chunk_size;
}

static size_t page_round(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

/*
 * Large arrays are mapped at a 2 MiB boundary and offered transparent huge pages: at millions
 * of keys every random lookup would otherwise also miss the TLB and walk the page tables. The
 * length is not rounded up to 2 MiB (that would make the tail resident for nothing); the tail
 * simply stays on small pages. Small arrays are cache-line aligned.
 */
static unsigned char *array_alloc(const sl_table_t *t, uint32_t nchunks)
{
    size_t n = array_bytes(t, nchunks);
    if (n < HUGE_ALLOC_MIN) {
        unsigned char *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
        if (p != NULL)
            memset(p, 0, n);
        return p;
    }
    size_t len = page_round(n), span = len + HUGE_ALLOC_MIN;
    unsigned char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)p + HUGE_ALLOC_MIN - 1) & ~(uintptr_t)(HUGE_ALLOC_MIN - 1);
    size_t head = start - (uintptr_t)p;
    if (head > 0)
        munmap(p, head);
    munmap((unsigned char *)start + len, span - head - len);
    madvise((void *)start, len, MADV_HUGEPAGE); /* advice only: fine if THP is off */
    return (unsigned char *)start;
}

static void array_free(const sl_table_t *t, unsigned char *chunks, uint32_t nchunks)
{
    if (chunks == NULL)
        return;
    if (array_bytes(t, nchunks) < HUGE_ALLOC_MIN)
        free(chunks);
    else
        munmap(chunks, page_round(array_bytes(t, nchunks)));
}

static uint32_t grow_threshold(uint32_t nchunks)
{
    return (uint32_t)((uint64_t)nchunks * CHUNK_ENTRIES * MAX_LOAD_NUM / MAX_LOAD_DEN);
}

/* Publishes a new array; relaxed atomics because batch prefetching peeks without the lock. */
static void shard_set_array(shard_t *s, unsigned char *chunks, uint32_t nchunks)
{
    __atomic_store_n(&s->chunks, chunks, __ATOMIC_RELAXED);
    __atomic_store_n(&s->nchunks, nchunks, __ATOMIC_RELAXED);
    s->grow_at = grow_threshold(nchunks);
}

/* ---- lookup, placement, removal ---------------------------------------------------------- */

/*
 * The entry holding key in shard s, or NULL. Walks on from the home chunk only while the chunk
 * says keys overflowed it, and never more than the whole array. Removals leave overflow counts
 * that are true but can chain through chunks that no longer help an absent key's lookup; a walk
 * of PROBE_LONG chunks or more after removals leads to a tidying rebuild (shard_decide_absent).
 */
static inline __attribute__((always_inline)) unsigned char *
shard_find(const sl_table_t *t, shard_t *s, const unsigned char *key, size_t len, uint64_t h)
{
    uint32_t nchunks = s->nchunks, c = home_of(h, nchunks);
    const uint8_t tag = tag_of(h);
    for (uint32_t probed = 1;; probed++) {
        unsigned char *chunk = chunk_at(t, s->chunks, c);
        __builtin_prefetch(chunk + 64); /* the chunk's other lines, with its first */
        __builtin_prefetch(chunk + t->chunk_size - 1);
        for (uint32_t m = tag_matches(chunk_tags(chunk), tag); m != 0; m &= m - 1) {
            unsigned char *entry = entry_at(t, chunk, (unsigned)__builtin_ctz(m) / 8);
            if (entry_key_equal(t, entry, key, len, h))
                return entry;
        }
        if (__builtin_expect(chunk_overflow(chunk) == 0, 1))
            return NULL;
        if (probed >= PROBE_LONG) {
            s->long_probe = true;
            if (probed >= nchunks)
                return NULL;
        }
        c = next_chunk(c, nchunks);
    }
}

/*
 * Stores a prepared entry image (entry_size bytes) with hash h into an array that has a free
 * entry, counting overflow on every chunk passed. Returns the stored entry.
 */
static unsigned char *chunks_place(const sl_table_t *t, unsigned char *chunks, uint32_t nchunks,
                                   const unsigned char *image, uint64_t h)
{
    for (uint32_t c = home_of(h, nchunks);; c = next_chunk(c, nchunks)) {
        unsigned char *chunk = chunk_at(t, chunks, c);
        uint32_t free_mask = tag_matches(chunk_tags(chunk), 0);
        if (free_mask == 0) {
            chunk_add_overflow(chunk, 1);
            continue;
        }
        unsigned e = (unsigned)__builtin_ctz(free_mask) / 8;
        unsigned char *entry = entry_at(t, chunk, e);
        memcpy(entry, image, t->entry_size);
        chunk[e] = tag_of(h);
        return entry;
    }
}

/* Removes `entry` (holding a key of hash h) from shard s: frees its tag and undoes the
 * overflow counts its placement added. Its out-of-line parts must be freed by the caller. */
static void shard_remove(const sl_table_t *t, shard_t *s, unsigned char *entry, uint64_t h)
{
    size_t offset = (size_t)(entry - s->chunks);
    uint32_t holder = (uint32_t)(offset / t->chunk_size);
    unsigned e = (unsigned)((offset % t->chunk_size - CHUNK_HEADER) / t->entry_size);
    for (uint32_t c = home_of(h, s->nchunks); c != holder; c = next_chunk(c, s->nchunks))
        chunk_add_overflow(chunk_at(t, s->chunks, c), -1);
    unsigned char *chunk = chunk_at(t, s->chunks, holder);
    chunk[e] = 0;
    memset(entry, 0, t->entry_size);
    s->count--;
    s->removed++;
}

/* ---- growth and reclamation -------------------------------------------------------------- */

static bool is_fresh(const sl_table_t *t, unsigned char *entry, int64_t now_ns)
{
    return now_ns >= 0 && sl_state_is_fresh(&t->rule, entry_state(t, entry), now_ns);
}

/* Keys fresh at `at` were dropped from s (locked): an absent key decides no earlier, and a call
 * behind `at` within the table's skew is made at it (shard_now), as one behind a call would be:
 * `at` is a time the clock has reached too. */
static inline void shard_reclaimed_at(shard_t *s, int64_t at)
{
    if (at > s->reclaimed_ns)
        s->reclaimed_ns = at;
    if (at > s->latest_ns)
        s->latest_ns = at;
}

/*
 * Rebuilds shard s into an array of new_chunks chunks, dropping the keys whose state is fresh
 * at now_ns (none when now_ns < 0). Returns SL_OK, or SL_ENOMEM with s unchanged.
 */
static int shard_rebuild(sl_table_t *t, shard_t *s, uint32_t new_chunks, int64_t now_ns)
{
    unsigned char *fresh = array_alloc(t, new_chunks);
    if (fresh == NULL)
        return SL_ENOMEM;
    uint32_t kept = 0;
    size_t external = 0;
    SHARD_FOREACH_ENTRY(t, s->chunks, s->nchunks, entry, {
        if (is_fresh(t, entry, now_ns)) {
            entry_free_external(t, entry);
            s->reclaimed++;
            continue;
        }
        chunks_place(t, fresh, new_chunks, entry, entry_hash(t, entry));
        kept++;
        external += entry_external_bytes(t, entry);
    })
    array_free(t, s->chunks, s->nchunks);
    shard_set_array(s, fresh, new_chunks);
    s->count = kept;
    budget_add(t, s->bytes, array_bytes(t, new_chunks) + external);
    s->bytes = array_bytes(t, new_chunks) + external;
    s->long_probe = false;
    s->removed = 0;
    s->rebuilds++;
    shard_reclaimed_at(s, now_ns);
    return SL_OK;
}

/* The next size when growing, or 0 past the largest a shard may have. */
static uint32_t next_size(uint32_t nchunks)
{
    uint64_t bigger = (uint64_t)nchunks + nchunks / 4 + MIN_CHUNKS;
    return bigger > UINT32_MAX / CHUNK_ENTRIES ? 0 : (uint32_t)bigger;
}

static uint32_t shard_count_fresh(const sl_table_t *t, shard_t *s, int64_t now_ns)
{
    uint32_t fresh = 0;
    SHARD_FOREACH_ENTRY(t, s->chunks, s->nchunks, entry, { fresh += is_fresh(t, entry, now_ns); })
    return fresh;
}

/* Room for `keys` more keys with `extra` out-of-line bytes between them. */
static bool shard_has_room(const sl_table_t *t, const shard_t *s, uint32_t keys, size_t extra)
{
    return s->count + keys <= s->grow_at && s->bytes + extra <= t->shard_budget &&
           budget_fits(t, extra);
}

/* Removes a key and frees its out-of-line parts. */
static void shard_forget(sl_table_t *t, shard_t *s, unsigned char *entry, uint64_t h)
{
    size_t external = entry_external_bytes(t, entry);
    budget_add(t, s->bytes, s->bytes - external);
    s->bytes -= external;
    entry_free_external(t, entry);
    shard_remove(t, s, entry, h);
}

/* Removes a key, as reclamation does. */
static void shard_drop(sl_table_t *t, shard_t *s, unsigned char *entry)
{
    s->reclaimed++;
    shard_forget(t, s, entry, entry_hash(t, entry)); /* the hash before its key is freed */
}

/*
 * Evicts one idle key of shard s: the hand walks on, unmarking the keys decided on since it last
 * passed (they are not idle), until it has seen EVICT_SAMPLE idle keys, or passed EVICT_SCAN
 * entry slots having seen one, or passed *passes slots (which it counts down); of the idle keys
 * it saw, the one with the most units left at now_ns goes (the one whose forgotten usage admits
 * the least more). Returns false when it saw no idle key. A caller that passes each slot at most
 * once (*passes starting at the shard's slots) never evicts a key marked when it began; after
 * such a lap that found no idle key, every key is unmarked, so the next lap finds one at once
 * unless it was decided on meanwhile.
 */
static bool shard_evict_one(sl_table_t *t, shard_t *s, int64_t now_ns, uint32_t *passes)
{
    const uint32_t slots = s->nchunks * CHUNK_ENTRIES;
    unsigned char *victim = NULL;
    int64_t most_left = -1;
    unsigned idle = 0;
    if (s->hand >= slots)
        s->hand = 0; /* the array shrank or was rebuilt */
    for (uint32_t n = 0; *passes > 0 && idle < EVICT_SAMPLE && (n < EVICT_SCAN || idle == 0);
         n++, (*passes)--) {
        unsigned char *chunk = chunk_at(t, s->chunks, s->hand / CHUNK_ENTRIES);
        unsigned e = s->hand % CHUNK_ENTRIES;
        s->hand = s->hand + 1 == slots ? 0 : s->hand + 1;
        if (((chunk_tags(chunk) >> (8 * e)) & 0xff) == 0)
            continue;
        unsigned char *entry = entry_at(t, chunk, e);
        unsigned char *kl = entry_klen(t, entry);
        if (kl[0] & KLEN_USED) {
            kl[0] &= (unsigned char)~KLEN_USED;
            continue;
        }
        sl_decision_t peek; /* a peek writes nothing */
        core_decide(&t->rule, entry_state(t, entry), 0, max_i64(now_ns, 0), &peek);
        idle++;
        if (peek.remaining > most_left) {
            most_left = peek.remaining;
            victim = entry;
        }
    }
    if (victim == NULL)
        return false;
    s->evicted++;
    shard_forget(t, s, victim, entry_hash(t, victim));
    return true;
}

/* Removes the keys whose state is fresh at now_ns, in place (no allocation). */
static void shard_drop_fresh(sl_table_t *t, shard_t *s, int64_t now_ns)
{
    SHARD_FOREACH_ENTRY(t, s->chunks, s->nchunks, entry, {
        if (is_fresh(t, entry, now_ns))
            shard_drop(t, s, entry);
    })
    shard_reclaimed_at(s, now_ns);
}

/*
 * Makes room for `keys` more keys with `extra` out-of-line bytes in shard s (one, except for
 * sl_table_decide_all()). Grows (one rebuild that also drops the fresh keys) unless reclaiming
 * alone leaves an eighth of the room free or the cap forbids it; otherwise drops the fresh keys
 * in place. At the cap, a scan that found too little is not repeated for t->rescan_ns, so a
 * stream of new keys costs O(1) each, not a scan of the shard each. Returns SL_OK, SL_EFULL or
 * SL_ENOMEM.
 */
static int shard_make_room(sl_table_t *t, shard_t *s, uint32_t keys, size_t extra, int64_t now_ns)
{
    if (shard_has_room(t, s, keys, extra))
        return SL_OK;
    uint32_t bigger = next_size(s->nchunks);
    while (bigger != 0 && grow_threshold(bigger) < s->count + keys) /* several keys at once */
        bigger = next_size(bigger);
    size_t external = s->bytes - array_bytes(t, s->nchunks); /* counts fresh keys: an upper bound */
    bool can_grow = bigger != 0 && array_bytes(t, bigger) + external + extra <= t->shard_budget &&
                    budget_fits(t, array_bytes(t, bigger) - array_bytes(t, s->nchunks) + extra);
    if (can_grow || now_ns >= s->rescan_ns) {
        uint32_t fresh = shard_count_fresh(t, s, now_ns);
        uint32_t after = s->count - fresh + keys - 1; /* live keys, and all but the last new one */
        if (can_grow && after + after / 8 >= s->grow_at) {
            int rc = shard_rebuild(t, s, bigger, now_ns);
            if (rc != SL_OK)
                return rc;
        } else if (fresh > 0) {
            shard_drop_fresh(t, s, now_ns);
        }
        if (shard_has_room(t, s, keys, extra))
            return SL_OK;
        s->rescan_ns = sat_add(now_ns, t->rescan_ns);
    }
    /* one lap of the hand at most: a key the caller marked (sl_table_decide_all()'s) stays */
    uint32_t passes = s->nchunks * CHUNK_ENTRIES;
    while (t->evict_idle && !shard_has_room(t, s, keys, extra) &&
           shard_evict_one(t, s, now_ns, &passes))
        ;
    if (shard_has_room(t, s, keys, extra))
        return SL_OK;
    s->refused++;
    return SL_EFULL;
}

/* Out-of-line bytes a new key of len bytes takes with `state` (an out-of-line state's buffer). */
static size_t key_extra(const sl_table_t *t, size_t len, const void *state)
{
    return (t->state_external ? core_state_bytes(&t->rule, state) : 0) +
           (len > t->key_area ? len : 0);
}

/* Bytes of a buffer for an out-of-line state with room for one more operation: what
 * core_state_need() asks, or a half again as much as the buffer it had, so that a key growing
 * by an entry at a time is moved O(log n) times, not n. */
static size_t ext_room_bytes(const sl_table_t *t, const void *state)
{
    size_t have = core_state_bytes(&t->rule, state), need = core_state_need(&t->rule, state);
    size_t want = have + have / 2 > need ? have + have / 2 : need;
    return want < t->state_size ? want : t->state_size; /* need <= state_size */
}

/* A copy of an out-of-line state in a new buffer of `bytes` (>= what it holds), or NULL. */
static void *ext_moved(const sl_table_t *t, const void *state, size_t bytes)
{
    void *p = malloc(bytes);
    if (p != NULL)
        core_state_move(&t->rule, state, p, bytes);
    return p;
}

/* Puts `state` (a malloc'ed out-of-line state, now the table's) in entry's place, freeing the
 * one there and counting the change of bytes. */
static void ext_replace(sl_table_t *t, shard_t *s, unsigned char *entry, void *state)
{
    void *old = entry_state(t, entry);
    size_t before = s->bytes, was = core_state_bytes(&t->rule, old);
    s->bytes = s->bytes - was + core_state_bytes(&t->rule, state);
    budget_add(t, before, s->bytes);
    memcpy(entry, &state, sizeof(state));
    free(old);
}

/*
 * Makes room in entry's out-of-line state for one more operation that writes (a charge, a
 * refund), under the caps: evicts idle keys of the shard when the bigger buffer does not fit
 * (the entry is marked: it stays; no entry moves), unless `anyway` (a refund, which gives back
 * usage, is not refused for the few bytes it may need). Returns SL_OK, SL_EFULL or SL_ENOMEM,
 * with the state as it was on error.
 */
static int ext_room(sl_table_t *t, shard_t *s, unsigned char *entry, int64_t now_ns, bool anyway)
{
    void *state = entry_state(t, entry);
    if (core_state_need(&t->rule, state) <= core_state_bytes(&t->rule, state))
        return SL_OK;
    size_t want = ext_room_bytes(t, state), extra = want - core_state_bytes(&t->rule, state);
    uint32_t passes = s->nchunks * CHUNK_ENTRIES;
    while (!anyway && (s->bytes + extra > t->shard_budget || !budget_fits(t, extra))) {
        if (!t->evict_idle || !shard_evict_one(t, s, now_ns, &passes)) {
            s->refused++;
            return SL_EFULL;
        }
    }
    void *grown = ext_moved(t, state, want);
    if (grown == NULL)
        return SL_ENOMEM;
    ext_replace(t, s, entry, grown);
    return SL_OK;
}

/* Moves entry's out-of-line state to a smaller buffer when it holds a quarter of its buffer or
 * less (what an operation left: expired entries dropped, units refunded). Best effort. */
static void ext_shrink(sl_table_t *t, shard_t *s, unsigned char *entry)
{
    void *state = entry_state(t, entry);
    size_t have = core_state_bytes(&t->rule, state), need = core_state_need(&t->rule, state);
    if (have / 4 < need || have <= core_state_min(&t->rule))
        return;
    void *smaller = ext_moved(t, state, need + need / 2);
    if (smaller != NULL)
        ext_replace(t, s, entry, smaller);
}

/*
 * Places a new entry for key (hash h) in shard s, which has room and does not hold it. `state`
 * is the state's bytes, or for out-of-line states a malloc'ed block the table keeps; a key too
 * long for the entry is kept in `key_copy`, a malloc'ed block of len bytes (else NULL).
 */
static void shard_place(sl_table_t *t, shard_t *s, const unsigned char *key, size_t len, uint64_t h,
                        void *state, unsigned char *key_copy)
{
    unsigned char image[STATE_INLINE_MAX + 64];
    memset(image, 0, t->entry_size);
    unsigned char *kl = entry_klen(t, image);
    if (len > t->key_area) {
        memcpy(key_copy, key, len);
        long_key_t lk = {.bytes = key_copy, .len = (uint32_t)len, .hash_lo = (uint32_t)h};
        kl[0] = KLEN_LONG | KLEN_USED;
        memcpy(kl + 1, &lk, sizeof(lk));
    } else {
        kl[0] = (unsigned char)(len | KLEN_USED);
        if (len > 0)
            memcpy(kl + 1, key, len);
    }
    if (t->state_external)
        memcpy(image, &state, sizeof(state));
    else
        memcpy(image, state, t->state_size);
    chunks_place(t, s->chunks, s->nchunks, image, h);
    s->count++;
    budget_add(t, s->bytes, s->bytes + key_extra(t, len, state));
    s->bytes += key_extra(t, len, state);
}

/*
 * Inserts key with `state` into shard s, which does not hold it: an inline state's bytes, or an
 * out-of-line state the table keeps (malloc'ed, with room for one more operation). Returns SL_OK,
 * SL_EFULL or SL_ENOMEM; on error nothing changed and an out-of-line state is still the
 * caller's to free.
 */
static int shard_insert(sl_table_t *t, shard_t *s, const unsigned char *key, size_t len, uint64_t h,
                        void *state, int64_t now_ns)
{
    int rc = shard_make_room(t, s, 1, key_extra(t, len, state), now_ns);
    if (rc != SL_OK)
        return rc;
    unsigned char *key_copy = NULL;
    if (len > t->key_area && (key_copy = malloc(len)) == NULL)
        return SL_ENOMEM;
    shard_place(t, s, key, len, h, state, key_copy);
    return SL_OK;
}

/* ---- creation ---------------------------------------------------------------------------- */

static uint64_t random_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)&ts;
    return sl_hash_mix(x ^ SL_HASH_P0, SL_HASH_P2) | 1;
}

bool sl_table_can_hold(const sl_rule_t *rule, const sl_table_config_t *cfg, size_t keys)
{
    if (rule == NULL || rule->state_size == 0)
        return false;
    sl_table_config_t c = cfg ? *cfg : (sl_table_config_t){0};
    if (c.max_bytes == 0)
        return true;
    unsigned nshards = c.shards ? c.shards : SHARDS_DEFAULT;
    /* a shard's share of the cap, against its smallest array and keys' out-of-line states (keys
     * short enough to live in their entry) */
    sl_table_t t = {.state_size = rule->state_size};
    t.state_external = rule->state_size > STATE_INLINE_MAX;
    t.state_area = t.state_external ? (uint32_t)sizeof(void *) : rule->state_size;
    t.entry_size = (t.state_area + 1 + KEY_AREA_MIN + 3) / 4 * 4;
    t.chunk_size = CHUNK_HEADER + CHUNK_ENTRIES * t.entry_size;
    uint64_t per_key = t.state_external ? core_state_min(rule) : 0;
    uint32_t chunks = MIN_CHUNKS;
    while ((uint64_t)chunks * CHUNK_ENTRIES * MAX_LOAD_NUM / MAX_LOAD_DEN < keys && chunks != 0)
        chunks = next_size(chunks);
    uint64_t need = (uint64_t)array_bytes(&t, chunks) + keys * per_key;
    return chunks != 0 && need <= c.max_bytes / nshards;
}

int sl_table_create(const sl_rule_t *rule, const sl_table_config_t *cfg, sl_table_t **out)
{
    if (rule == NULL || out == NULL || rule->state_size == 0)
        return SL_EINVAL;
    sl_table_config_t c = cfg ? *cfg : (sl_table_config_t){0};
    unsigned nshards = c.shards ? c.shards : SHARDS_DEFAULT;
    if ((nshards & (nshards - 1)) != 0 || nshards > (1u << 16))
        return SL_EINVAL;

    sl_table_t *t = aligned_alloc(64, (sizeof(*t) + nshards * sizeof(shard_t) + 63) / 64 * 64);
    if (t == NULL)
        return SL_ENOMEM;
    memset(t, 0, sizeof(*t) + nshards * sizeof(shard_t));
    t->rule = *rule;
    t->state_size = rule->state_size;
    t->state_external = rule->state_size > STATE_INLINE_MAX;
    t->state_area = t->state_external ? (uint32_t)sizeof(void *) : rule->state_size;
    t->entry_size = (t->state_area + 1 + KEY_AREA_MIN + 3) / 4 * 4;
    t->key_area = t->entry_size - t->state_area - 1;
    assert(t->key_area < KLEN_LONG); /* klen's 7 bits hold any inline length */
    t->chunk_size = CHUNK_HEADER + CHUNK_ENTRIES * t->entry_size;
    t->key_max = c.key_max ? c.key_max : SL_KEY_MAX_DEFAULT;
    if (t->key_max > UINT32_MAX)
        t->key_max = UINT32_MAX;
    t->seed = c.seed ? c.seed : random_seed();
    if (getrandom(&t->hold_key, sizeof t->hold_key, 0) != (ssize_t)sizeof t->hold_key)
        t->hold_key = random_seed() ^ sl_hash_mix(t->seed, SL_HASH_P1);
    t->nshards = nshards;
    t->shard_mask = nshards - 1;
    t->shard_budget = c.max_bytes ? c.max_bytes / nshards : SIZE_MAX;
    t->budget = c.budget;
    t->evict_idle = c.evict_idle;
    t->skew_ns = c.skew_ns > 0 ? c.skew_ns : 0;
    t->rescan_ns = max_i64(rule->window_ns / 16, SL_NS_PER_MS);

    uint64_t keys = c.initial_keys < ((uint64_t)1 << 40) ? c.initial_keys : (uint64_t)1 << 40;
    uint64_t per_shard = keys / nshards * MAX_LOAD_DEN / MAX_LOAD_NUM / CHUNK_ENTRIES + MIN_CHUNKS;
    if (per_shard > t->shard_budget / t->chunk_size) /* the cap bounds the initial size too */
        per_shard = t->shard_budget / t->chunk_size;
    if (per_shard < MIN_CHUNKS)
        per_shard = MIN_CHUNKS; /* a cap below an empty table's size refuses every key, later */
    uint32_t nchunks = per_shard > UINT32_MAX / CHUNK_ENTRIES / 2 ? UINT32_MAX / CHUNK_ENTRIES / 2
                                                                  : (uint32_t)per_shard;
    for (unsigned i = 0; i < nshards; i++) {
        shard_t *s = &t->shards[i];
        atomic_init(&s->lock, 0);
        atomic_init(&s->handoff, false);
        unsigned char *chunks = array_alloc(t, nchunks);
        if (chunks == NULL) {
            sl_table_free(t);
            return SL_ENOMEM;
        }
        shard_set_array(s, chunks, nchunks);
        s->bytes = array_bytes(t, nchunks);
        budget_add(t, 0, s->bytes);
    }
    *out = t;
    return SL_OK;
}

void sl_table_free(sl_table_t *t)
{
    if (t == NULL)
        return;
    for (unsigned i = 0; i < t->nshards; i++) {
        shard_t *s = &t->shards[i];
        if (s->chunks == NULL)
            continue;
        SHARD_FOREACH_ENTRY(t, s->chunks, s->nchunks, entry, { entry_free_external(t, entry); })
        array_free(t, s->chunks, s->nchunks);
        budget_add(t, s->bytes, 0);
    }
    free(t);
}

const sl_rule_t *sl_table_rule(const sl_table_t *t)
{
    return t ? &t->rule : NULL;
}

/* ---- decisions --------------------------------------------------------------------------- */

/* A fresh key's decision of a peek, or of a cost no key can ever take: every algorithm reports
 * full capacity and nothing to wait for (tests/unit/test_table.c checks this against
 * sl_decide()), so no state is needed. */
static void fresh_decision(const sl_table_t *t, int64_t cost, sl_decision_t *out)
{
    *out = (sl_decision_t){.allowed = cost == 0,
                           .limit = t->rule.capacity,
                           .remaining = t->rule.capacity,
                           .retry_after_ns = cost == 0 ? 0 : -1};
}

/* A fresh state for a key about to be stored: in `buf` (STATE_INLINE_MAX bytes), or allocated
 * for an out-of-line state, its smallest buffer, which has room for one operation (NULL when
 * that fails). */
static void *fresh_state(const sl_table_t *t, uint64_t *buf)
{
    if (!t->state_external)
        return memset(buf, 0, t->state_size);
    size_t bytes = core_state_min(&t->rule);
    void *p = malloc(bytes);
    if (p != NULL)
        core_state_init(&t->rule, p, bytes);
    return p;
}

/*
 * The slow path of shard_decide(): the key is absent, i.e. its state is fresh. A peek, or a cost
 * no key can ever take, decides without a state, so nothing is allocated for it. Otherwise it
 * decides on a zeroed state and stores it if admitted. Out of line to keep the hot path's frame
 * small.
 */
static __attribute__((noinline)) int shard_decide_absent(sl_table_t *t, shard_t *s,
                                                         const unsigned char *key, size_t len,
                                                         uint64_t h, int64_t cost, int64_t reserve,
                                                         int64_t now_ns, sl_decision_t *out)
{
    /* long walks after removals: overflow chains outlived the keys that made them; one rebuild
     * tidies them (long walks without removals are the load's, and a rebuild would not help) */
    if (s->long_probe && s->removed > 0)
        shard_rebuild(t, s, s->nchunks, -1); /* on ENOMEM, next time */
    if (cost == 0 || cost > t->rule.capacity) {
        fresh_decision(t, cost, out);
        core_reserve_view(out, reserve); /* a peek, or never: a reserve only lowers remaining */
        return SL_OK;
    }
    /* a key dropped as fresh at reclaimed_ns may be asked about at an earlier time by a thread
     * whose clock lags: decide no earlier than that, as the dropped state would have */
    now_ns = max_i64(now_ns, s->reclaimed_ns);
    uint64_t buf[STATE_INLINE_MAX / 8];
    void *state = fresh_state(t, buf);
    if (state == NULL)
        return SL_ENOMEM;
    if (reserve > 0)
        core_decide_reserved(&t->rule, state, cost, reserve, now_ns, out);
    else
        core_decide(&t->rule, state, cost, now_ns, out);
    int rc = SL_OK;
    if (out->allowed) {
        rc = shard_insert(t, s, key, len, h, state, now_ns);
        if (rc == SL_OK && t->state_external)
            return SL_OK; /* the table kept the allocation */
    }
    if (t->state_external)
        free(state);
    return rc;
}

/* A charge on an out-of-line state: room first (a decision may append), a smaller buffer after
 * if it left little (expired entries dropped). Out of line: the inline states' path stays short. */
static __attribute__((noinline)) int shard_decide_ext(sl_table_t *t, shard_t *s,
                                                      unsigned char *entry, int64_t cost,
                                                      int64_t reserve, int64_t now_ns,
                                                      sl_decision_t *out)
{
    void *state = entry_state(t, entry);
    if (core_state_need(&t->rule, state) > core_state_bytes(&t->rule, state)) {
        /* a cost the key cannot take now is refused, which writes nothing and needs no room:
         * a key at its limit is refused as such even when the cap leaves none (the states that
         * grow, sliding_log's, refuse exactly the costs over a peek's remaining) */
        core_decide(&t->rule, state, 0, now_ns, out);
        if (sat_add(cost, reserve) > out->remaining) {
            core_decide_reserved(&t->rule, state, cost, reserve, now_ns, out);
            return SL_OK;
        }
        int rc = ext_room(t, s, entry, now_ns, false);
        if (rc != SL_OK)
            return rc;
    }
    if (reserve > 0)
        core_decide_reserved(&t->rule, entry_state(t, entry), cost, reserve, now_ns, out);
    else
        core_decide(&t->rule, entry_state(t, entry), cost, now_ns, out);
    ext_shrink(t, s, entry);
    return SL_OK;
}

/*
 * The time a call on shard s (locked by the caller) is made at: now_ns, or the latest now the
 * shard has seen when now_ns is behind it by at most the table's skew_ns (another thread read
 * the clock later and went first; the clock has reached that time, so deciding at it admits
 * nothing the limit would not, and answers are measured from a time no state has passed).
 */
static inline int64_t shard_now(const sl_table_t *t, shard_t *s, int64_t now_ns)
{
    now_ns = core_clamp_now(now_ns); /* as the algorithms take it; no overflow below */
    if (now_ns >= s->latest_ns) {
        s->latest_ns = now_ns;
        return now_ns;
    }
    return s->latest_ns - now_ns <= t->skew_ns ? s->latest_ns : now_ns;
}

/* Decides under the shard lock (held by the caller), on the state where it lies. */
static inline __attribute__((always_inline)) int
shard_decide(sl_table_t *t, shard_t *s, const unsigned char *key, size_t len, uint64_t h,
             int64_t cost, int64_t reserve, int64_t now_ns, sl_decision_t *out)
{
    now_ns = shard_now(t, s, now_ns);
    unsigned char *entry = shard_find(t, s, key, len, h);
    if (__builtin_expect(entry == NULL, 0))
        return shard_decide_absent(t, s, key, len, h, cost, reserve, now_ns, out);
    entry_touch(t, entry);
    if (t->state_external && cost > 0)
        return shard_decide_ext(t, s, entry, cost, reserve, now_ns, out);
    if (__builtin_expect(reserve > 0, 0))
        core_decide_reserved(&t->rule, entry_state(t, entry), cost, reserve, now_ns, out);
    else
        core_decide(&t->rule, entry_state(t, entry), cost, now_ns, out);
    return SL_OK;
}

/* sl_table_decide_reserved(), inlined into both public entries (reserve 0 folds away). */
static inline __attribute__((always_inline)) int table_decide(sl_table_t *t, const void *key,
                                                              size_t key_len, int64_t cost,
                                                              int64_t reserve, int64_t now_ns,
                                                              sl_decision_t *out)
{
    if (t == NULL || out == NULL || (key == NULL && key_len > 0))
        return SL_EINVAL;
    if (key == NULL)
        key = ""; /* the empty key; no NULL reaches memcpy/memcmp */
    if (key_len > t->key_max)
        return SL_EKEY;
    if (cost < 0 || reserve < 0)
        return SL_ECOST;
    uint64_t h = sl_hash64(key, key_len, t->seed);
    shard_t *s = shard_of(t, h);
    shard_lock(s);
    int rc = shard_decide(t, s, key, key_len, h, cost, reserve, now_ns, out);
    shard_unlock(s);
    return rc;
}

int sl_table_decide(sl_table_t *t, const void *key, size_t key_len, int64_t cost, int64_t now_ns,
                    sl_decision_t *out)
{
    return table_decide(t, key, key_len, cost, 0, now_ns, out);
}

int sl_table_decide_reserved(sl_table_t *t, const void *key, size_t key_len, int64_t cost,
                             int64_t reserve, int64_t now_ns, sl_decision_t *out)
{
    return table_decide(t, key, key_len, cost, reserve, now_ns, out);
}

/* Validates one batch request, returning SL_OK or the status it gets without a decision. */
static int batch_check(const sl_table_t *t, const sl_request_t *r)
{
    if (r->key == NULL && r->key_len > 0)
        return SL_EINVAL;
    if (r->key_len > t->key_max)
        return SL_EKEY;
    return r->cost < 0 ? SL_ECOST : SL_OK;
}

/* Hashes a valid request and prefetches its home chunk. The shard's array is peeked without
 * the lock: a stale address only wastes the prefetch (prefetches never fault). */
static inline uint64_t batch_prefetch(sl_table_t *t, const sl_request_t *r)
{
    if (batch_check(t, r) != SL_OK)
        return 0;
    uint64_t h = sl_hash64(r->key ? r->key : "", r->key_len, t->seed);
    shard_t *s = shard_of(t, h);
    unsigned char *chunks = __atomic_load_n(&s->chunks, __ATOMIC_RELAXED);
    uint32_t nchunks = __atomic_load_n(&s->nchunks, __ATOMIC_RELAXED);
    unsigned char *home = chunk_at(t, chunks, home_of(h, nchunks));
    __builtin_prefetch(home, 1, 3); /* a chunk spans two or three lines: fetch them all */
    __builtin_prefetch(home + 64, 1, 3);
    __builtin_prefetch(home + t->chunk_size - 1, 1, 3);
    return h;
}

size_t sl_table_decide_batch(sl_table_t *t, sl_request_t *reqs, size_t n, int64_t now_ns)
{
    size_t failed = 0;
    if (t == NULL) {
        for (size_t i = 0; i < n; i++)
            reqs[i].status = SL_EINVAL;
        return n;
    }
    /* a pipeline: request i + BATCH_AHEAD is hashed and prefetched as request i is decided */
    uint64_t ring[BATCH_AHEAD];
    for (size_t i = 0; i < n && i < BATCH_AHEAD; i++)
        ring[i] = batch_prefetch(t, &reqs[i]);
    for (size_t i = 0; i < n; i++) {
        sl_request_t *r = &reqs[i];
        uint64_t h = ring[i % BATCH_AHEAD];
        if (i + BATCH_AHEAD < n)
            ring[i % BATCH_AHEAD] = batch_prefetch(t, &reqs[i + BATCH_AHEAD]);
        r->status = batch_check(t, r);
        if (r->status == SL_OK) {
            shard_t *s = shard_of(t, h);
            shard_lock(s);
            r->status = shard_decide(t, s, r->key ? r->key : (const void *)"", r->key_len, h,
                                     r->cost, 0, now_ns, &r->decision);
            shard_unlock(s);
        }
        failed += r->status != SL_OK;
    }
    return failed;
}

/* ---- refunds and settles ----------------------------------------------------------------- */

/*
 * sl_table_settle() under the shard lock (sl_table_refund() is a settle with actual 0). A state
 * a refund leaves fresh is dropped, as reclamation would; an absent key has nothing to give back,
 * and is stored only when a charge past the limit gives it something to hold. A charge past the
 * rule's max_debt changes nothing (SL_EDEBT, *out a peek): an absent key stays absent.
 */
static int shard_settle(sl_table_t *t, shard_t *s, const unsigned char *key, size_t len, uint64_t h,
                        int64_t reserved, int64_t actual, int64_t charged_ns, int64_t now_ns,
                        sl_decision_t *out)
{
    now_ns = shard_now(t, s, now_ns);
    unsigned char *entry = shard_find(t, s, key, len, h);
    if (entry != NULL) {
        entry_touch(t, entry);
        int rc = t->state_external ? ext_room(t, s, entry, now_ns, actual < reserved) : SL_OK;
        if (rc != SL_OK)
            return rc;
        int64_t at =
            core_settle(&t->rule, entry_state(t, entry), reserved, actual, charged_ns, now_ns, out);
        if (at < 0)
            return (int)at; /* SL_EDEBT: unchanged */
        if (actual < reserved && is_fresh(t, entry, at)) {
            shard_drop(t, s, entry);
            shard_reclaimed_at(s, at);
        } else if (t->state_external) {
            ext_shrink(t, s, entry);
        }
        return SL_OK;
    }
    if (actual <= reserved) {
        fresh_decision(t, 0, out);
        return SL_OK;
    }
    now_ns = max_i64(now_ns, s->reclaimed_ns); /* as shard_decide_absent() */
    uint64_t buf[STATE_INLINE_MAX / 8];
    void *state = fresh_state(t, buf);
    if (state == NULL)
        return SL_ENOMEM;
    int64_t at = core_settle(&t->rule, state, reserved, actual, charged_ns, now_ns, out);
    int rc = at < 0 ? (int)at : shard_insert(t, s, key, len, h, state, now_ns);
    if (t->state_external && rc != SL_OK)
        free(state); /* else the table kept it */
    return rc;
}

static int table_settle(sl_table_t *t, const void *key, size_t key_len, int64_t reserved,
                        int64_t actual, int64_t charged_ns, int64_t now_ns, sl_decision_t *out)
{
    if (t == NULL || out == NULL || (key == NULL && key_len > 0))
        return SL_EINVAL;
    if (key == NULL)
        key = "";
    if (key_len > t->key_max)
        return SL_EKEY;
    if (reserved < 0 || actual < 0)
        return SL_ECOST;
    uint64_t h = sl_hash64(key, key_len, t->seed);
    shard_t *s = shard_of(t, h);
    shard_lock(s);
    int rc = shard_settle(t, s, key, key_len, h, reserved, actual, charged_ns, now_ns, out);
    shard_unlock(s);
    return rc;
}

int sl_table_refund(sl_table_t *t, const void *key, size_t key_len, int64_t cost,
                    int64_t charged_ns, int64_t now_ns, sl_decision_t *out)
{
    return table_settle(t, key, key_len, cost, 0, charged_ns, now_ns, out); /* cost < 0: ECOST */
}

int sl_table_settle(sl_table_t *t, const void *key, size_t key_len, int64_t reserved,
                    int64_t actual, int64_t charged_ns, int64_t now_ns, sl_decision_t *out)
{
    return table_settle(t, key, key_len, reserved, actual, charged_ns, now_ns, out);
}

/* ---- all or nothing ---------------------------------------------------------------------- */

/* One distinct (table, key) of an sl_table_decide_all() call. */
typedef struct multi_key {
    sl_table_t *t;
    shard_t *s;
    const unsigned char *key;
    size_t len;              /* bytes */
    uint64_t h;              /* the key's hash in its table */
    size_t first;            /* its first request */
    void *state;             /* scratch: the state as the requests so far leave it */
    unsigned char *key_copy; /* a long key's copy, allocated ahead in case it is stored */
    unsigned char *entry;    /* its entry while locked, NULL when absent */
    int64_t now_ns;          /* when it is decided: no earlier than its shard's reclamation */
    bool charged;            /* an admitted cost > 0 changed the scratch state */
} multi_key_t;

/* One call's scratch, its arrays with room for its requests (a MULTI_ROOM's). */
typedef struct multi {
    multi_key_t *keys;
    uint8_t *key_of; /* request i's key */
    size_t nkeys;
    shard_t **shards; /* distinct, in the order they are locked */
    size_t nshards;
    uint64_t *inline_states; /* scratch of inline states, STATE_INLINE_MAX bytes a key */
} multi_t;

/* Room for the scratch of up to `cap` requests. A call of at most MULTI_SMALL requests (Envoy's
 * few descriptors, most SL.ALLOWALLs) keeps it on its stack (1.8 KiB); a larger one allocates
 * the room for SL_MULTI_MAX (13 KiB: not on a caller's stack). The allocation was an eighth of
 * the work of deciding a 3-key call (docs/dev/benchmarks.md). */
#define MULTI_SMALL 8
#define MULTI_ROOM(cap)                                                                            \
    struct {                                                                                       \
        multi_key_t keys[cap];                                                                     \
        shard_t *shards[cap];                                                                      \
        uint64_t inline_states[(cap)*STATE_INLINE_MAX / 8];                                        \
        uint8_t key_of[cap];                                                                       \
    }
typedef MULTI_ROOM(MULTI_SMALL) multi_small_t;
typedef MULTI_ROOM(SL_MULTI_MAX) multi_large_t;

/* An empty scratch in large's room, or in small's when large is NULL. */
static multi_t multi_in(multi_small_t *small, multi_large_t *large)
{
    if (large != NULL)
        return (multi_t){.keys = large->keys,
                         .key_of = large->key_of,
                         .shards = large->shards,
                         .inline_states = large->inline_states};
    return (multi_t){.keys = small->keys,
                     .key_of = small->key_of,
                     .shards = small->shards,
                     .inline_states = small->inline_states};
}

/* Checks request i and finds (or adds) its key. Returns SL_OK or the request's error. */
static int multi_add(multi_t *m, const sl_multi_request_t *r, size_t i)
{
    sl_table_t *t = r->table;
    if (t == NULL || (r->key == NULL && r->key_len > 0))
        return SL_EINVAL;
    if (r->key_len > t->key_max)
        return SL_EKEY;
    if (r->cost < 0 || r->reserve < 0)
        return SL_ECOST;
    int64_t hold_ns;
    if (r->acquire && core_ops(&t->rule)->holds == NULL)
        return SL_ENOHOLDS;
    if (r->acquire && core_hold_time(&t->rule, r->hold_ns, &hold_ns) != SL_OK)
        return SL_EHOLDTIME;
    const unsigned char *key = r->key ? r->key : (const unsigned char *)"";
    uint64_t h = sl_hash64(key, r->key_len, t->seed);
    for (size_t k = 0; k < m->nkeys; k++) {
        multi_key_t *mk = &m->keys[k];
        if (mk->t == t && mk->h == h && mk->len == r->key_len &&
            memcmp(mk->key, key, r->key_len) == 0) {
            m->key_of[i] = (uint8_t)k;
            return SL_OK;
        }
    }
    m->key_of[i] = (uint8_t)m->nkeys;
    m->keys[m->nkeys++] = (multi_key_t){
        .t = t, .s = shard_of(t, h), .key = key, .len = r->key_len, .h = h, .first = i};
    return SL_OK;
}

/* Scratch states and long-key copies, before any lock. Returns SL_OK, or SL_ENOMEM with *at
 * the key whose allocation failed. */
static int multi_alloc(multi_t *m, size_t *at)
{
    for (size_t k = 0; k < m->nkeys; k++) {
        multi_key_t *mk = &m->keys[k];
        const sl_table_t *t = mk->t;
        /* an out-of-line scratch state is made under the lock, of the size the key needs */
        mk->state = t->state_external ? NULL : (void *)&m->inline_states[k * STATE_INLINE_MAX / 8];
        if (mk->len > t->key_area)
            mk->key_copy = malloc(mk->len);
        if (mk->len > t->key_area && mk->key_copy == NULL) {
            *at = k;
            return SL_ENOMEM;
        }
    }
    return SL_OK;
}

static void multi_free(multi_t *m)
{
    for (size_t k = 0; k < m->nkeys; k++) {
        if (m->keys[k].t->state_external) /* NULL when the table took it or none was made */
            free(m->keys[k].state);
        free(m->keys[k].key_copy);
    }
}

/* Adds s to a set of distinct shards kept in address order (the order every path holding
 * several shard locks takes them in, so two such paths never wait on each other in a cycle; every
 * other path holds one shard lock at a time). */
static void lockset_add(shard_t **set, size_t *n, shard_t *s)
{
    size_t j = *n;
    while (j > 0 && set[j - 1] > s) /* insertion sort; equal stays once */
        j--;
    if (j > 0 && set[j - 1] == s)
        return;
    memmove(&set[j + 1], &set[j], (*n - j) * sizeof(shard_t *));
    set[j] = s;
    (*n)++;
}

static void lockset_lock(shard_t *const *set, size_t n)
{
    for (size_t j = 0; j < n; j++)
        shard_lock(set[j]);
}

static void lockset_unlock(shard_t *const *set, size_t n)
{
    for (size_t j = n; j-- > 0;)
        shard_unlock(set[j]);
}

/* Locks every shard involved once (lockset order). */
static void multi_lock(multi_t *m)
{
    for (size_t k = 0; k < m->nkeys; k++)
        lockset_add(m->shards, &m->nshards, m->keys[k].s);
    lockset_lock(m->shards, m->nshards);
}

static void multi_unlock(multi_t *m)
{
    lockset_unlock(m->shards, m->nshards);
}

/* Makes room for the new keys the charges store, shard by shard: the absent ones, and the
 * present ones that are fresh (making room may reclaim them). Returns SL_OK or the error, with
 * *at a key of the shard that has no room. Afterwards entries may have moved. */
static int multi_make_room(multi_t *m, int64_t now_ns, size_t *at)
{
    for (size_t j = 0; j < m->nshards; j++) {
        shard_t *s = m->shards[j];
        const int64_t when = max_i64(now_ns, s->reclaimed_ns);
        uint32_t keys = 0;
        size_t extra = 0, first = 0;
        for (size_t k = 0; k < m->nkeys; k++) {
            multi_key_t *mk = &m->keys[k];
            if (mk->s != s || !mk->charged)
                continue;
            if (mk->entry == NULL || is_fresh(mk->t, mk->entry, when)) {
                first = keys++ == 0 ? k : first;
                extra += key_extra(mk->t, mk->len, mk->state);
            } else if (mk->t->state_external) { /* a scratch that grew past the stored buffer */
                size_t was = core_state_bytes(&mk->t->rule, entry_state(mk->t, mk->entry));
                size_t now = core_state_bytes(&mk->t->rule, mk->state);
                extra += now > was ? now - was : 0;
                first = keys == 0 && extra > 0 ? k : first;
            }
        }
        if (keys == 0 && extra == 0)
            continue;
        sl_table_t *t = m->keys[first].t;
        int rc = shard_make_room(t, s, keys, extra, when);
        if (rc != SL_OK) {
            *at = first;
            return rc;
        }
    }
    return SL_OK;
}

/* Writes every charged scratch state back, storing new keys; cannot fail (room was made and
 * memory allocated). */
static void multi_write(multi_t *m)
{
    for (size_t k = 0; k < m->nkeys; k++) {
        multi_key_t *mk = &m->keys[k];
        if (!mk->charged)
            continue;
        sl_table_t *t = mk->t;
        unsigned char *entry = shard_find(t, mk->s, mk->key, mk->len, mk->h); /* may have moved */
        if (entry != NULL && t->state_external) {
            ext_replace(t, mk->s, entry, mk->state);
            mk->state = NULL; /* the table keeps it */
            continue;
        }
        if (entry != NULL) {
            memcpy(entry_state(t, entry), mk->state, t->state_size);
            continue;
        }
        assert(mk->s->count < mk->s->grow_at); /* the bytes are checked, not held, by make_room */
        shard_place(t, mk->s, mk->key, mk->len, mk->h, mk->state, mk->key_copy);
        if (t->state_external)
            mk->state = NULL; /* the table keeps them */
        mk->key_copy = NULL;
    }
}

/* Gives an out-of-line scratch state room for one more charge: SL_OK or SL_ENOMEM. */
static int multi_room(multi_key_t *mk)
{
    const sl_table_t *t = mk->t;
    if (!t->state_external ||
        core_state_need(&t->rule, mk->state) <= core_state_bytes(&t->rule, mk->state))
        return SL_OK;
    void *grown = ext_moved(t, mk->state, ext_room_bytes(t, mk->state));
    if (grown == NULL)
        return SL_ENOMEM;
    free(mk->state);
    mk->state = grown;
    return SL_OK;
}

/* Decides the requests in order on the scratch states; returns the first refused, or n; or
 * n + 1 when memory for a scratch state ran out (*at: the request). */
static size_t multi_decide(multi_t *m, sl_multi_request_t *reqs, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++) {
        multi_key_t *mk = &m->keys[m->key_of[i]];
        sl_multi_request_t *r = &reqs[i];
        r->status = SL_OK;
        if (r->cost > 0 && multi_room(mk) != SL_OK) {
            *at = i;
            return n + 1;
        }
        if (r->acquire) { /* its entropy as shard_acquire() draws it: the shard is locked */
            uint64_t entropy = sl_hash_mix(mk->t->hold_key ^ mk->h, ++mk->s->holds ^ SL_HASH_P1);
            sl_acquire_reserved(&mk->t->rule, mk->state, r->cost, r->reserve, r->hold_ns,
                                mk->now_ns, entropy, &r->decision, &r->hold);
        } else {
            core_decide_reserved(&mk->t->rule, mk->state, r->cost, r->reserve, mk->now_ns,
                                 &r->decision);
        }
        if (!r->decision.allowed)
            return i;
        mk->charged |= r->cost > 0;
    }
    return n;
}

/*
 * A request of a refused call, other than the refused one: its cost alone on its key as stored
 * (the scratch state is not looked at), charging nothing. Admitted alone, *out is a peek of the
 * key (remaining and reset_after as they are; nothing is owed, so no delay); refused alone, the
 * refusal (which changes no state), with its own retry_after. Holding the key's shard lock.
 */
static void multi_alone_plain(const multi_key_t *mk, int64_t cost, sl_decision_t *out);

/* multi_alone() of a request with a reserve: its priority's answer (the check is the core's). */
static void multi_alone(const multi_key_t *mk, int64_t cost, int64_t reserve, sl_decision_t *out)
{
    const sl_table_t *t = mk->t;
    void *stored = mk->entry != NULL ? entry_state(t, mk->entry) : NULL;
    if (reserve == 0) {
        multi_alone_plain(mk, cost, out);
        return;
    }
    if (stored == NULL) {
        fresh_decision(t, 0, out); /* a fresh key sheds only what never fits */
        if (sat_add(cost, reserve) > t->rule.capacity)
            decision_reject(out, -1);
    } else if (core_reserve_admits(&t->rule, stored, cost, reserve, mk->now_ns, out)) {
        core_decide(&t->rule, stored, 0, mk->now_ns, out); /* admitted alone: a peek */
    } else {
        return; /* its refusal, the priority's remaining */
    }
    core_reserve_view(out, reserve);
}

static void multi_alone_plain(const multi_key_t *mk, int64_t cost, sl_decision_t *out)
{
    const sl_table_t *t = mk->t;
    void *stored = mk->entry != NULL ? entry_state(t, mk->entry) : NULL;
    if (stored != NULL)
        core_decide(&t->rule, stored, 0, mk->now_ns, out); /* a peek changes nothing */
    else
        fresh_decision(t, 0, out);
    if (cost == 0 || (out->allowed && cost <= out->remaining))
        return; /* "remaining": what a request right now could take */
    sl_decision_t alone;
    if (!t->state_external) { /* on a copy: a max_delay rule may admit past remaining */
        uint64_t copy[STATE_INLINE_MAX / 8];
        if (stored != NULL)
            memcpy(copy, stored, t->state_size);
        else
            memset(copy, 0, t->state_size);
        core_decide(&t->rule, copy, cost, mk->now_ns, &alone);
    } else if (stored !=
               NULL) { /* past what it could take: refused, and a refusal writes nothing */
        assert(t->rule.max_delay_ns == 0);
        core_decide(&t->rule, stored, cost, mk->now_ns, &alone);
        assert(!alone.allowed);
    } else { /* a fresh key refuses only a cost over its capacity */
        fresh_decision(t, cost, &alone);
    }
    if (!alone.allowed)
        *out = alone;
}

/*
 * Every key's entry found and its state copied to its scratch (a fresh one for an absent key),
 * under the shards' locks. Returns SL_OK, or SL_ENOMEM with *at the first request of the key whose
 * out-of-line state could not be copied.
 */
static int multi_read(multi_t *m, int64_t now_ns, size_t *at)
{
    for (size_t k = 0; k < m->nkeys; k++) {
        multi_key_t *mk = &m->keys[k];
        const sl_table_t *t = mk->t;
        mk->entry = shard_find(mk->t, mk->s, mk->key, mk->len, mk->h);
        mk->now_ns = shard_now(t, mk->s, now_ns);
        if (mk->entry == NULL)
            mk->now_ns = max_i64(mk->now_ns, mk->s->reclaimed_ns);
        if (mk->entry != NULL)
            entry_touch(t, mk->entry); /* not evicted to make room for the others */
        if (!t->state_external) {
            if (mk->entry != NULL)
                memcpy(mk->state, entry_state(t, mk->entry), t->state_size);
            else
                memset(mk->state, 0, t->state_size);
            continue;
        }
        const void *stored = mk->entry != NULL ? entry_state(t, mk->entry) : NULL;
        mk->state = stored != NULL ? ext_moved(t, stored, core_state_bytes(&t->rule, stored))
                                   : fresh_state(t, NULL);
        if (mk->state == NULL) {
            *at = mk->first;
            return SL_ENOMEM;
        }
    }
    return SL_OK;
}

/* Every acquire's answer: no hold. */
static void multi_no_holds(sl_multi_request_t *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        reqs[i].hold = (sl_hold_t){0, 0, 0};
}

int sl_table_decide_all(sl_multi_request_t *reqs, size_t n, int64_t now_ns, size_t *refused)
{
    if (refused == NULL || (reqs == NULL && n > 0) || n > SL_MULTI_MAX) {
        if (refused != NULL)
            *refused = n;
        return SL_EINVAL;
    }
    multi_small_t small;
    multi_large_t *large = n > MULTI_SMALL ? malloc(sizeof *large) : NULL;
    if (n > MULTI_SMALL && large == NULL) {
        *refused = n;
        return SL_ENOMEM;
    }
    multi_t mt = multi_in(&small, large);
    multi_t *m = &mt;
    multi_no_holds(reqs, n);
    int rc = SL_OK;
    size_t at = 0;
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        if ((rc = multi_add(m, &reqs[i], i)) != SL_OK)
            at = i;
    }
    if (rc == SL_OK && (rc = multi_alloc(m, &at)) != SL_OK)
        at = m->keys[at].first;
    if (rc != SL_OK) {
        reqs[at].status = rc;
        *refused = at;
        multi_free(m);
        free(large);
        return rc;
    }

    multi_lock(m);
    rc = multi_read(m, now_ns, &at);
    *refused = rc == SL_OK ? multi_decide(m, reqs, n, &at) : n + 1;
    if (*refused > n) { /* out of memory for a scratch state: nothing charged */
        rc = SL_ENOMEM;
        reqs[at].status = rc;
        *refused = at;
    } else if (*refused < n) {
        for (size_t i = 0; i < n; i++) { /* nothing charged: each as it stands alone */
            if (i != *refused)
                multi_alone(&m->keys[m->key_of[i]], reqs[i].cost, reqs[i].reserve,
                            &reqs[i].decision);
            reqs[i].status = SL_OK;
        }
    } else if ((rc = multi_make_room(m, now_ns, &at)) != SL_OK) {
        at = m->keys[at].first;
        reqs[at].status = rc;
        *refused = at;
    } else {
        multi_write(m);
    }
    if (rc != SL_OK || *refused < n)
        multi_no_holds(reqs, n); /* nothing written: the scratch's holds were never made */
    multi_unlock(m);
    multi_free(m);
    free(large);
    return rc;
}

/* ---- holds: sl_table_acquire(), sl_table_release() ----------------------------------------- */

static shard_t *lock_and_find(sl_table_t *t, const void *key, size_t len, uint64_t *h,
                              unsigned char **entry);

/* Checks what every table call checks: SL_OK, or its error. */
static int holds_check(const sl_table_t *t, const void *key, size_t len, const void *out)
{
    if (t == NULL || out == NULL || (key == NULL && len > 0))
        return SL_EINVAL;
    if (core_algorithm(t->rule.algorithm)->ops->holds == NULL)
        return SL_ENOHOLDS;
    return len > t->key_max ? SL_EKEY : SL_OK;
}

/* An acquire under the shard lock: on the stored state, or on a fresh one stored if a hold was
 * made (a peek or a cost no key can take needs none). */
static int shard_acquire(sl_table_t *t, shard_t *s, const unsigned char *key, size_t len,
                         uint64_t h, int64_t cost, int64_t reserve, int64_t hold_ns, int64_t now_ns,
                         sl_decision_t *out, sl_hold_t *hold)
{
    const algorithm_holds_t *ops = core_ops(&t->rule)->holds;
    uint64_t entropy = sl_hash_mix(t->hold_key ^ h, ++s->holds ^ SL_HASH_P1);
    now_ns = shard_now(t, s, now_ns);
    unsigned char *entry = shard_find(t, s, key, len, h);
    if (entry != NULL) {
        entry_touch(t, entry);
        void *state = entry_state(t, entry);
        if (core_reserve_admits(&t->rule, state, cost, reserve, now_ns, out)) {
            ops->acquire(&t->rule, state, cost, hold_ns, now_ns, entropy, out, hold);
            core_reserve_view(out, reserve);
        }
        return SL_OK;
    }
    if (cost == 0 || sat_add(cost, reserve) > t->rule.capacity) {
        fresh_decision(t, cost, out); /* a peek, or never: more than the priority may hold */
        core_reserve_view(out, reserve);
        return SL_OK;
    }
    now_ns = max_i64(now_ns, s->reclaimed_ns); /* as shard_decide_absent() */
    uint64_t buf[STATE_INLINE_MAX / 8];
    void *state = fresh_state(t, buf);
    if (state == NULL)
        return SL_ENOMEM;
    ops->acquire(&t->rule, state, cost, hold_ns, now_ns, entropy, out, hold);
    core_reserve_view(out, reserve);
    int rc = shard_insert(t, s, key, len, h, state, now_ns);
    if (rc != SL_OK) {
        *hold = (sl_hold_t){0, 0, 0}; /* not stored: no hold */
        if (t->state_external)
            free(state);
    }
    return rc;
}

int sl_table_acquire(sl_table_t *t, const void *key, size_t key_len, int64_t cost, int64_t hold_ns,
                     int64_t now_ns, sl_decision_t *out, sl_hold_t *hold)
{
    return sl_table_acquire_reserved(t, key, key_len, cost, 0, hold_ns, now_ns, out, hold);
}

int sl_table_acquire_reserved(sl_table_t *t, const void *key, size_t key_len, int64_t cost,
                              int64_t reserve, int64_t hold_ns, int64_t now_ns, sl_decision_t *out,
                              sl_hold_t *hold)
{
    int rc = holds_check(t, key, key_len, out);
    if (rc == SL_OK && hold == NULL)
        rc = SL_EINVAL;
    if (rc == SL_OK && (cost < 0 || reserve < 0))
        rc = SL_ECOST;
    if (rc == SL_OK)
        rc = core_hold_time(&t->rule, hold_ns, &hold_ns);
    if (rc != SL_OK)
        return rc;
    *hold = (sl_hold_t){0, 0, 0};
    now_ns = core_clamp_now(now_ns);
    uint64_t h = sl_hash64(key_len > 0 ? key : "", key_len, t->seed);
    shard_t *s = shard_of(t, h);
    shard_lock(s);
    rc = shard_acquire(t, s, key_len > 0 ? key : "", key_len, h, cost, reserve, hold_ns, now_ns,
                       out, hold);
    shard_unlock(s);
    return rc;
}

int sl_table_release(sl_table_t *t, const void *key, size_t key_len, uint64_t id, int64_t now_ns,
                     sl_decision_t *out, sl_hold_t *released)
{
    return sl_table_release_sample(t, key, key_len, id, now_ns, NULL, out, released);
}

int sl_table_release_sample(sl_table_t *t, const void *key, size_t key_len, uint64_t id,
                            int64_t now_ns, const sl_sample_t *sample, sl_decision_t *out,
                            sl_hold_t *released)
{
    int rc = holds_check(t, key, key_len, out);
    if (rc != SL_OK)
        return rc;
    if (sample != NULL && sample->latency_ns > SL_ADAPTIVE_LATENCY_MAX_NS)
        return SL_EINVAL;
    now_ns = core_clamp_now(now_ns);
    uint64_t h;
    unsigned char *entry;
    shard_t *s = lock_and_find(t, key, key_len, &h, &entry);
    now_ns = shard_now(t, s, now_ns);
    int64_t expired = 0;
    rc = SL_EHOLD;
    if (entry == NULL) {
        fresh_decision(t, 0, out);
    } else {
        entry_touch(t, entry);
        /* A key that holds nothing after the release stays until a reclaim drops it, as any
         * fresh key: dropping it here made the next acquire allocate and zero a whole state
         * (16 bytes per unit of the limit), 17x a gcra decision for a hot key's pair. */
        rc = core_ops(&t->rule)->holds->release(&t->rule, entry_state(t, entry), id, now_ns, sample,
                                                out, &expired);
    }
    shard_unlock(s);
    if (released != NULL)
        *released = (sl_hold_t){id, 0, expired};
    return rc;
}

/* ---- maintenance ------------------------------------------------------------------------- */

/* Locks the shard of key and finds its entry (NULL if absent); the caller unlocks. */
static shard_t *lock_and_find(sl_table_t *t, const void *key, size_t len, uint64_t *h,
                              unsigned char **entry)
{
    if (key == NULL)
        key = "";
    *h = sl_hash64(key, len, t->seed);
    shard_t *s = shard_of(t, *h);
    shard_lock(s);
    *entry = shard_find(t, s, key, len, *h);
    return s;
}

static int check_key(const sl_table_t *t, const void *key, size_t len)
{
    if (t == NULL || (key == NULL && len > 0))
        return SL_EINVAL;
    return len > t->key_max ? SL_EKEY : SL_OK;
}

int sl_table_reset(sl_table_t *t, const void *key, size_t key_len)
{
    int rc = check_key(t, key, key_len);
    if (rc != SL_OK)
        return rc;
    uint64_t h;
    unsigned char *entry;
    shard_t *s = lock_and_find(t, key, key_len, &h, &entry);
    if (entry != NULL)
        shard_forget(t, s, entry, h);
    shard_unlock(s);
    return SL_OK;
}

int sl_table_get(sl_table_t *t, const void *key, size_t key_len, void *state)
{
    int rc = check_key(t, key, key_len);
    if (rc != SL_OK || state == NULL)
        return rc != SL_OK ? rc : SL_EINVAL;
    uint64_t h;
    unsigned char *entry;
    shard_t *s = lock_and_find(t, key, key_len, &h, &entry);
    if (entry != NULL && t->state_external)
        core_state_move(&t->rule, entry_state(t, entry), state, t->state_size);
    else if (entry != NULL)
        memcpy(state, entry_state(t, entry), t->state_size);
    else
        memset(state, 0, t->state_size);
    shard_unlock(s);
    return SL_OK;
}

int sl_table_put_len(sl_table_t *t, const void *key, size_t key_len, const void *state, size_t len,
                     int64_t now_ns)
{
    int rc = check_key(t, key, key_len);
    if (rc != SL_OK || state == NULL)
        return rc != SL_OK ? rc : SL_EINVAL;
    if ((rc = core_state_check(&t->rule, state, len)) != SL_OK)
        return rc;
    if (sl_state_is_fresh(&t->rule, state, now_ns))
        return sl_table_reset(t, key, key_len);
    /* an out-of-line state goes into a buffer of the size it needs, made before the lock; an
     * inline one into the entry's size (a sliding_log of a small limit is inline, and the state
     * given may be in a smaller buffer than that) */
    uint64_t whole[STATE_INLINE_MAX / 8];
    void *copy = whole;
    if (t->state_external)
        copy = ext_moved(t, state, ext_room_bytes(t, state));
    else
        core_state_move(&t->rule, state, whole, t->state_size);
    if (copy == NULL)
        return SL_ENOMEM;
    uint64_t h;
    unsigned char *entry;
    shard_t *s = lock_and_find(t, key, key_len, &h, &entry);
    if (entry != NULL && t->state_external)
        ext_replace(t, s, entry, copy);
    else if (entry != NULL)
        memcpy(entry_state(t, entry), copy, t->state_size);
    else
        rc = shard_insert(t, s, key, key_len, h, copy, now_ns);
    shard_unlock(s);
    if (rc != SL_OK && t->state_external)
        free(copy);
    return rc;
}

int sl_table_put(sl_table_t *t, const void *key, size_t key_len, const void *state, int64_t now_ns)
{
    return sl_table_put_len(t, key, key_len, state, t != NULL ? t->state_size : 0, now_ns);
}

/* One table of an sl_table_adopt() call, with the key's place in it. */
typedef struct adopt_place {
    sl_table_t *t;
    shard_t *s;
    uint64_t h;
    unsigned char *entry; /* while locked; NULL when absent */
} adopt_place_t;

/* True when state a (of rule) records more usage at now_ns than b: a peek leaves fewer units, or
 * as few and a longer wait. (A peek writes nothing: it runs on the states themselves.) */
static bool more_usage(const sl_rule_t *rule, void *a, void *b, int64_t now_ns)
{
    sl_decision_t da, db;
    core_decide(rule, a, 0, now_ns, &da);
    core_decide(rule, b, 0, now_ns, &db);
    return da.remaining < db.remaining ||
           (da.remaining == db.remaining && da.retry_after_ns > db.retry_after_ns);
}

/*
 * `from`'s state at g, converted to `to`'s numbers: into spare (an inline state's buffer), or for
 * out-of-line states into a new buffer of the size it needs. Returns the state, or NULL with *rc
 * set (SL_ENOMEM, or sl_state_convert()'s error).
 */
static void *adopt_convert(const sl_table_t *to, const sl_table_t *g, const void *from_state,
                           void *spare, int64_t now_ns, int *rc)
{
    size_t bytes = to->state_size;
    void *cand = spare;
    if (to->state_external) {
        bytes = core_state_convert_need(&g->rule, from_state, &to->rule);
        if ((cand = malloc(bytes)) == NULL) {
            *rc = SL_ENOMEM;
            return NULL;
        }
    }
    *rc = core_state_convert(&g->rule, from_state, &to->rule, cand, bytes, now_ns);
    if (*rc != SL_OK && to->state_external)
        free(cand);
    return *rc == SL_OK ? cand : NULL;
}

int sl_table_adopt(sl_table_t *to, const void *key, size_t key_len, sl_table_t *const *from,
                   size_t nfrom, int64_t now_ns)
{
    int rc = check_key(to, key, key_len);
    if (rc != SL_OK)
        return rc;
    if ((from == NULL && nfrom > 0) || nfrom >= SL_MULTI_MAX)
        return SL_EINVAL;
    adopt_place_t at[SL_MULTI_MAX];
    shard_t *locks[SL_MULTI_MAX];
    size_t nlocks = 0;
    const unsigned char *k = key != NULL ? key : (const unsigned char *)"";
    for (size_t i = 0; i <= nfrom; i++) {
        sl_table_t *t = i == 0 ? to : from[i - 1];
        for (size_t j = 0; j < i && t != NULL; j++) {
            if (at[j].t == t)
                return SL_EINVAL; /* named twice (or `to` among `from`) */
        }
        if (t == NULL)
            return SL_EINVAL;
        if (i > 0 && t->rule.algorithm != to->rule.algorithm)
            return SL_EALGORITHM;
        at[i].t = t;
        at[i].h = sl_hash64(k, key_len, t->seed);
        at[i].s = shard_of(t, at[i].h);
        lockset_add(locks, &nlocks, at[i].s);
    }
    /* Scratch for inline states: the best converted copy so far and a candidate, swapped as a
     * candidate wins. Out-of-line ones are allocated under the lock, of the size they need. */
    uint64_t inline_bufs[2][STATE_INLINE_MAX / 8];
    void *spare[2] = {inline_bufs[0], inline_bufs[1]};

    lockset_lock(locks, nlocks);
    for (size_t i = 0; i <= nfrom; i++)
        at[i].entry = shard_find(at[i].t, at[i].s, k, key_len, at[i].h);
    /* The key has one home. Normally one table holds it; when two do (a decision that raced a
     * change of the key's numbers), the copy recording the most usage is kept, so what is lost
     * is never more than the racing decisions took. */
    void *best = NULL; /* `to`'s own state, or a converted copy (`converted`) */
    if (at[0].entry != NULL && !is_fresh(to, at[0].entry, now_ns))
        best = entry_state(to, at[0].entry);
    bool converted = false;
    for (size_t i = 1; i <= nfrom && rc == SL_OK; i++) {
        const sl_table_t *g = at[i].t;
        if (at[i].entry == NULL || is_fresh(g, at[i].entry, now_ns))
            continue;
        void *cand = adopt_convert(to, g, entry_state(g, at[i].entry),
                                   best == spare[0] ? spare[1] : spare[0], now_ns, &rc);
        if (cand == NULL)
            break;
        bool wins = !sl_state_is_fresh(&to->rule, cand, now_ns) &&
                    (best == NULL || more_usage(&to->rule, cand, best, now_ns));
        if (to->state_external && (wins ? converted : true))
            free(wins ? best : cand); /* the copy that lost */
        if (wins) {
            best = cand;
            converted = true;
        }
    }
    if (rc == SL_OK && converted && at[0].entry != NULL) {
        if (to->state_external)
            ext_replace(to, at[0].s, at[0].entry, best);
        else
            memcpy(entry_state(to, at[0].entry), best, to->state_size);
        best = NULL; /* in place */
    } else if (rc == SL_OK && converted) {
        rc = shard_insert(to, at[0].s, k, key_len, at[0].h, best, now_ns);
        best = rc == SL_OK ? NULL : best; /* the table keeps an inserted out-of-line state */
    }
    if (rc == SL_OK) {
        for (size_t i = 1; i <= nfrom; i++) {
            if (at[i].entry != NULL)
                shard_forget(at[i].t, at[i].s, at[i].entry, at[i].h);
        }
    }
    lockset_unlock(locks, nlocks);
    if (to->state_external && converted && best != NULL)
        free(best);
    return rc != SL_OK ? rc : converted ? 1 : 0;
}

/*
 * sl_table_foreach() walks each shard in pieces: a piece is the keys whose hash's low 32 bits
 * (those that place a key: its home chunk grows with them) fall in a range [lo, hi). A piece is
 * copied into a buffer under the shard's lock, then visited with no lock held. A record of the
 * copy is [u32 key length | u32 state length | state, rounded up to 8 bytes | key, rounded up to
 * 8 bytes], so every state is 8-byte aligned for the visitor.
 *
 * A key lies in its home chunk or after it (wrapping), and a chunk's overflow count says whether
 * keys that passed it lie further on, so a piece scans from the home of lo to the home of hi - 1
 * and on while the overflow says so, keeping the keys of its range. Entries may move between two
 * pieces (a rebuild, when a key is added), but hashes do not: a key stored throughout the walk
 * falls in exactly one piece, whatever happened between them, so it is visited once, and no
 * piece needs to know where another stopped.
 *
 * A range covers about COPY_PIECE_CHUNKS chunks, so a decision on the shard waits for one piece
 * (tens of microseconds), not for the whole shard (milliseconds at 150 k keys a shard). A piece
 * whose records pass COPY_PIECE_BYTES is copied again with half its range, so the buffer stays
 * near that size whatever the table holds (the keys of one hash value always go together: a
 * single key larger than that is copied alone). The table is never copied whole: a snapshot of
 * any size needs one piece's buffer beside the table.
 */
#define COPY_PIECE_CHUNKS 256u                /* chunks a piece's range covers: ~1000 entries */
#define COPY_PIECE_BYTES  ((size_t)1 << 20)   /* a piece's records, bytes, at most (but one key) */
#define HASH_SPACE        ((uint64_t)1 << 32) /* the low 32 bits of a hash: ranges cover them */

typedef struct piece {
    unsigned char *buf; /* records of one piece */
    size_t cap;         /* bytes allocated */
    size_t used;        /* bytes of records */
} piece_t;

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Grows p's buffer to at least `need` bytes; the new part is touched here, outside any lock, so
 * that copying into it takes no page faults. Returns SL_OK or SL_ENOMEM. */
static int piece_grow(piece_t *p, size_t need)
{
    size_t cap = p->cap * 2 > need ? p->cap * 2 : need;
    cap = cap < ((size_t)64 << 10) ? (size_t)64 << 10 : cap;
    unsigned char *b = realloc(p->buf, cap);
    if (b == NULL)
        return SL_ENOMEM;
    memset(b + p->cap, 0, cap - p->cap);
    p->buf = b;
    p->cap = cap;
    return SL_OK;
}

/* Appends the record of `entry` if it fits; returns 0, or the record's size when it does not. */
static size_t piece_add(const sl_table_t *t, unsigned char *entry, piece_t *p)
{
    size_t len;
    const unsigned char *key = entry_key(t, entry, &len);
    const void *state = entry_state(t, entry);
    const size_t state_len = t->state_external ? core_state_bytes(&t->rule, state) : t->state_size;
    size_t size = 8 + round8(state_len) + round8(len);
    if (p->used + size > p->cap)
        return size;
    unsigned char *r = p->buf + p->used;
    uint32_t lens[2] = {(uint32_t)len, (uint32_t)state_len};
    memcpy(r, lens, sizeof(lens));
    memcpy(r + 8, state, state_len);
    if (len > 0)
        memcpy(r + 8 + round8(state_len), key, len);
    p->used += size;
    return 0;
}

/*
 * Copies the keys of shard s whose hash's low 32 bits are in [lo, hi) into p (emptied first),
 * under the shard's lock, held by the caller. Returns 0, or the size of a record that did not
 * fit (p then holds part of the piece).
 */
static size_t piece_copy(const sl_table_t *t, shard_t *s, piece_t *p, uint64_t lo, uint64_t hi)
{
    p->used = 0;
    const uint32_t nchunks = s->nchunks;
    const uint32_t last = home_of(hi - 1, nchunks); /* the range's last home chunk */
    bool past = false;
    uint32_t c = home_of(lo, nchunks);
    for (uint32_t walked = 0; walked < nchunks; walked++, c = next_chunk(c, nchunks)) {
        unsigned char *chunk = chunk_at(t, s->chunks, c);
        uint32_t tags = chunk_tags(chunk);
        for (unsigned e = 0; e < CHUNK_ENTRIES; e++) {
            if (((tags >> (8 * e)) & 0xff) == 0)
                continue;
            unsigned char *entry = entry_at(t, chunk, e);
            uint64_t h32 = entry_hash(t, entry) & 0xffffffffu;
            if (h32 < lo || h32 >= hi)
                continue;
            size_t need = piece_add(t, entry, p);
            if (need != 0)
                return need;
        }
        /* from the range's last home chunk on, go on only while keys passed the chunk */
        past = past || c == last;
        if (past && chunk_overflow(chunk) == 0)
            return 0;
    }
    return 0;
}

/* The end of a piece starting at lo, over a shard of nchunks chunks. */
static uint64_t piece_end(uint64_t lo, uint32_t nchunks)
{
    uint64_t width = HASH_SPACE * COPY_PIECE_CHUNKS / nchunks + 1;
    return lo + width < HASH_SPACE ? lo + width : HASH_SPACE;
}

/*
 * Copies the piece of shard s starting at lo into p and sets *hi to where it ends: about
 * COPY_PIECE_CHUNKS chunks' worth, halved while its records pass COPY_PIECE_BYTES. The buffer
 * grows between lock holds, never while holding the lock. Returns SL_OK or SL_ENOMEM.
 */
static int piece_take(const sl_table_t *t, shard_t *s, piece_t *p, uint64_t lo, uint64_t *hi)
{
    *hi = 0;
    for (;;) {
        shard_lock(s);
        atomic_store_explicit(&s->walking, true, memory_order_relaxed);
        if (*hi == 0)
            *hi = piece_end(lo, s->nchunks);
        size_t need = piece_copy(t, s, p, lo, *hi);
        shard_unlock_walk(s, need != 0);
        if (need == 0)
            return SL_OK;
        if (p->used + need > COPY_PIECE_BYTES && *hi - lo > 1) {
            *hi = lo + (*hi - lo) / 2; /* too much for one piece: half the range */
            continue;
        }
        if (piece_grow(p, p->used + need) != SL_OK)
            return SL_ENOMEM;
    }
}

int sl_table_foreach(sl_table_t *t, sl_table_visit_fn fn, void *arg)
{
    if (t == NULL || fn == NULL)
        return SL_EINVAL;
    piece_t p = {0};
    int stop = 0;
    for (unsigned k = 0; k < t->nshards && stop == 0; k++) {
        for (uint64_t lo = 0, hi; lo < HASH_SPACE && stop == 0; lo = hi) {
            if ((stop = piece_take(t, &t->shards[k], &p, lo, &hi)) != SL_OK)
                break;
            for (size_t at = 0; at < p.used && stop == 0;) {
                uint32_t lens[2];
                memcpy(lens, p.buf + at, sizeof(lens));
                const unsigned char *state = p.buf + at + 8;
                const unsigned char *key = state + round8(lens[1]);
                at += 8 + round8(lens[1]) + round8(lens[0]);
                stop = fn(arg, key, lens[0], state, lens[1]);
            }
        }
    }
    free(p.buf);
    return stop;
}

size_t sl_table_reclaim(sl_table_t *t, int64_t now_ns)
{
    size_t dropped = 0;
    for (unsigned k = 0; t != NULL && k < t->nshards; k++) {
        shard_t *s = &t->shards[k];
        shard_lock(s);
        uint32_t before = s->count;
        if (before > 0) {
            shard_drop_fresh(t, s, now_ns);
        } else {
            shard_reclaimed_at(s, now_ns); /* an empty shard: nothing to walk */
        }
        dropped += before - s->count;
        shard_unlock(s);
    }
    return dropped;
}

/* The chunks a shard of `count` keys needs, with a quarter to spare (MIN_CHUNKS at least). */
static uint32_t chunks_for(uint32_t count)
{
    uint64_t need = ((uint64_t)count + count / 4) * MAX_LOAD_DEN / MAX_LOAD_NUM / CHUNK_ENTRIES + 1;
    return need < MIN_CHUNKS ? MIN_CHUNKS : need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
}

/* Whether shard s's array is larger than chunks_for(its keys), and may be shrunk to it. */
static bool shard_shrinks(const shard_t *s)
{
    return chunks_for(s->count) < s->nchunks;
}

/*
 * Keys shard s would have to lose to free `want` bytes: out-of-line states free theirs with the
 * key (want over what a key holds, about); inline ones only as the array shrinks, so as many as
 * leave the keys that fit an array smaller by `want` (chunks_for's inverse).
 */
static uint64_t keys_to_free(const sl_table_t *t, const shard_t *s, size_t want)
{
    if (s->count == 0)
        return 0;
    if (t->state_external)
        return want / (s->bytes / s->count) + 1;
    size_t array = array_bytes(t, s->nchunks);
    uint64_t keep_chunks = want >= array ? MIN_CHUNKS : (array - want) / t->chunk_size;
    uint64_t keep = keep_chunks * CHUNK_ENTRIES * MAX_LOAD_NUM / MAX_LOAD_DEN * 4 / 5;
    return s->count > keep ? s->count - keep : 0;
}

#define EVICT_LEVELS 16 /* sl_table_evict(): idle keys are ranked by sixteenths of units left */

/* Which sixteenth of the rule's capacity a peek at the entry leaves (0 = none left, 15 = all). */
static unsigned units_left_level(const sl_table_t *t, unsigned char *entry, int64_t now_ns)
{
    sl_decision_t peek; /* a peek writes nothing */
    core_decide(&t->rule, entry_state(t, entry), 0, max_i64(now_ns, 0), &peek);
    int64_t left = peek.remaining < 0 ? 0 : peek.remaining;
    return (unsigned)((__int128)left * (EVICT_LEVELS - 1) / max_i64(t->rule.capacity, 1));
}

/*
 * sl_table_evict() on one shard, locked: frees about `want` bytes; returns the bytes freed.
 * Idle keys are those not marked as in use when the call begins. A first walk only counts the
 * idle keys by the units they have left; the lowest level such that the idle keys at or above it
 * hold `want` bytes is the threshold. A second walk evicts the idle keys above it, and of those
 * at it the share still wanted, chosen by a mix of their hash (the most units left first, as far
 * as sixteenths tell), and unmarks the keys in use, so that they are idle at the next call unless
 * decided on meanwhile. What goes is spread over the hash range, not the array's first keys: the
 * keys left then fill a smaller array evenly (a prefix evicted left them all in its upper part,
 * and rebuilding that was quadratic, under the lock).
 */
static size_t shard_evict(sl_table_t *t, shard_t *s, int64_t now_ns, size_t want)
{
    const size_t before = s->bytes;
    shard_drop_fresh(t, s, now_ns);
    uint64_t idle[EVICT_LEVELS] = {0};
    SHARD_FOREACH_ENTRY(t, s->chunks, s->nchunks, entry, {
        if (!(entry_klen(t, entry)[0] & KLEN_USED))
            idle[units_left_level(t, entry, now_ns)]++;
    })
    uint64_t wanted = keys_to_free(t, s, want), above = 0; /* and those above the threshold */
    unsigned threshold = EVICT_LEVELS;
    while (threshold > 0 && above + idle[threshold - 1] < wanted)
        above += idle[--threshold];
    if (threshold > 0)
        threshold--; /* the level evicted in part */
    uint64_t at = threshold < EVICT_LEVELS ? idle[threshold] : 0;
    uint64_t cut = at > 0 ? ((wanted > above ? wanted - above : 0) << 16) / at : 0; /* of 2^16 */
    SHARD_FOREACH_ENTRY(t, s->chunks, s->nchunks, entry, {
        unsigned char *kl = entry_klen(t, entry);
        if (kl[0] & KLEN_USED) {
            kl[0] &= (unsigned char)~KLEN_USED;
            continue;
        }
        unsigned level = units_left_level(t, entry, now_ns);
        uint64_t h = entry_hash(t, entry);
        if (level > threshold ||
            (level == threshold && (sl_hash_mix(h, SL_HASH_P1) & 0xffff) < cut)) {
            s->evicted++;
            shard_forget(t, s, entry, h);
        }
    })
    if (shard_shrinks(s))
        shard_rebuild(t, s, chunks_for(s->count), -1); /* on ENOMEM it stays as large */
    return before > s->bytes ? before - s->bytes : 0;
}

size_t sl_table_evict(sl_table_t *t, int64_t now_ns, size_t bytes)
{
    size_t freed = 0;
    for (unsigned k = 0; t != NULL && k < t->nshards && freed < bytes; k++) {
        shard_t *s = &t->shards[k];
        shard_lock(s);
        freed += shard_evict(t, s, now_ns, (bytes - freed) / (t->nshards - k) + 1);
        shard_unlock(s);
    }
    return freed;
}

int sl_table_stats(sl_table_t *t, sl_table_stats_t *out)
{
    if (t == NULL || out == NULL)
        return SL_EINVAL;
    *out = (sl_table_stats_t){.bytes = sizeof(*t) + t->nshards * sizeof(shard_t)};
    for (unsigned k = 0; k < t->nshards; k++) {
        shard_t *s = &t->shards[k];
        shard_lock(s);
        out->keys += s->count;
        out->bytes += s->bytes;
        out->rebuilds += s->rebuilds;
        out->reclaimed += s->reclaimed;
        out->refused += s->refused;
        out->evicted += s->evicted;
        shard_unlock(s);
    }
    return SL_OK;
}

void sl_table_lock_counts(sl_table_t *t, uint64_t *handoffs, unsigned *passed_max)
{
    *handoffs = 0;
    *passed_max = 0;
    for (unsigned k = 0; t != NULL && k < t->nshards; k++) {
        shard_t *s = &t->shards[k];
        shard_lock(s);
        *handoffs += s->handoffs;
        *passed_max = s->passed_max > *passed_max ? s->passed_max : *passed_max;
        shard_unlock(s);
    }
}

size_t sl_table_count(sl_table_t *t)
{
    size_t n = 0;
    for (unsigned k = 0; t != NULL && k < t->nshards; k++) {
        shard_lock(&t->shards[k]);
        n += t->shards[k].count;
        shard_unlock(&t->shards[k]);
    }
    return n;
}

size_t sl_table_memory(sl_table_t *t)
{
    size_t n = t ? sizeof(*t) + t->nshards * sizeof(shard_t) : 0;
    for (unsigned k = 0; t != NULL && k < t->nshards; k++) {
        shard_lock(&t->shards[k]);
        n += t->shards[k].bytes;
        shard_unlock(&t->shards[k]);
    }
    return n;
}
