/*
 * table.c - the per-key table: string key -> algorithm state, for one rule, thread-safe.
 *
 * Layout. The table is 2^b shards; a key's 64-bit hash picks the shard by its top bits and the
 * home slot inside it by its low 32 bits (fastrange: (h32 * cap) >> 32, so a capacity need not
 * be a power of two). Each shard is an open-addressing array of fixed-size slots with Robin Hood
 * linear probing, guarded by one spinlock:
 *
 *   slot = [ state area | dist+1 (1 byte, 0 = empty) | klen (1 byte) | key area ]
 *
 * Small states (<= STATE_INLINE_MAX bytes) live in the slot; larger ones (a sliding_log ring)
 * are a separate allocation and the state area holds the pointer. Keys up to the key area's size
 * live in the slot; longer ones are a separate allocation described by the key area (KLEN_LONG).
 * So the common case -- a short key and an 8-byte GCRA state -- is one 28-byte slot, and a
 * decision touches one slot's cache line(s): hash, lock, probe, decide, unlock.
 *
 * Invariants (per shard, under its lock):
 *   - Robin Hood: along a probe run, dist never increases by more than one from slot to slot,
 *     and a lookup may stop at the first slot whose dist is smaller than its own.
 *   - count <= grow_at < cap; grow_at = cap * MAX_LOAD.
 *   - bytes = cap * slot_size + the sizes of the out-of-line keys and states.
 *
 * Growth and reclamation happen together, when an insert finds the shard at grow_at: the shard
 * is rebuilt without the keys whose state is fresh (they decide as an absent key would), at the
 * same capacity if that freed enough room, else 1.25x larger (small steps keep memory per key
 * close to slot_size / MAX_LOAD). If the larger array would pass the memory cap the insert fails
 * with SL_EFULL instead: a key that still holds usage is never evicted (docs/design.md).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/core.h"
#include "core/hash.h"

#define STATE_INLINE_MAX 128u  /* larger states are allocated out of line, bytes */
#define KEY_AREA_MIN     18u   /* inline key capacity at least, bytes */
#define KLEN_LONG        0xFFu /* klen of a key stored out of line */
#define DIST_MAX         250u  /* a longer probe run forces growth */
#define MAX_LOAD_NUM     7u    /* grow when count reaches 7/8 of capacity */
#define MAX_LOAD_DEN     8u
#define MIN_CAPACITY     16u               /* slots in a new shard */
#define HUGE_ALLOC_MIN   ((size_t)2 << 20) /* huge page size; larger arrays are mmap'ed */
#define SHARDS_DEFAULT   64u
#define BATCH_AHEAD      16u /* batch: requests hashed and prefetched ahead */

/* An out-of-line key, described in the slot's key area. */
typedef struct long_key {
    unsigned char *bytes; /* malloc'ed copy of the key */
    uint32_t len;         /* key length, bytes */
    uint32_t hash_lo;     /* low 32 bits of the key's hash, checked before memcmp */
} long_key_t;

typedef struct shard {
    atomic_uint lock;                   /* 0 free, 1 held */
    uint32_t cap;                       /* slots */
    uint32_t count;                     /* occupied slots */
    uint32_t grow_at;                   /* count that triggers rebuild */
    unsigned char *slots;               /* cap * slot_size bytes */
    size_t bytes;                       /* slots array + out-of-line keys and states, bytes */
} __attribute__((aligned(64))) shard_t; /* one cache line each: no false sharing of locks */

struct sl_table {
    sl_rule_t rule;      /* prepared, owned copy */
    uint32_t state_size; /* bytes of state per key (rule.state_size) */
    uint32_t state_area; /* bytes the state takes in a slot: state_size or a pointer */
    bool state_external; /* states are out-of-line allocations */
    uint32_t slot_size;  /* bytes per slot, a multiple of 4 */
    uint32_t key_area;   /* inline key capacity, bytes */
    size_t key_max;      /* longest key accepted, bytes */
    size_t shard_budget; /* max bytes per shard; SIZE_MAX = no cap */
    uint64_t seed;       /* hash seed */
    uint64_t shard_mask; /* nshards - 1 */
    unsigned nshards;    /* power of two, <= 2^16 */
    shard_t shards[];
};

/* ---- locking ----------------------------------------------------------------------------- */

static __attribute__((noinline)) void shard_lock_contended(shard_t *s)
{
    unsigned spins = 0;
    do {
        while (atomic_load_explicit(&s->lock, memory_order_relaxed) != 0) {
            if (++spins < 128)
                __builtin_ia32_pause();
            else
                sched_yield(); /* the holder may be descheduled (more threads than cores) */
        }
    } while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire) != 0);
}

static inline void shard_lock(shard_t *s)
{
    if (__builtin_expect(atomic_exchange_explicit(&s->lock, 1, memory_order_acquire) != 0, 0))
        shard_lock_contended(s);
}

static inline void shard_unlock(shard_t *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

/* ---- slots ------------------------------------------------------------------------------- */

static inline unsigned char *slot_at(const sl_table_t *t, unsigned char *slots, uint32_t i)
{
    return slots + (size_t)i * t->slot_size;
}

static inline unsigned char *slot_meta(const sl_table_t *t, unsigned char *slot)
{
    return slot + t->state_area; /* [0] dist + 1, [1] klen, [2..] key area */
}

static inline uint32_t home_of(uint64_t h, uint32_t cap)
{
    return (uint32_t)(((h & 0xffffffffu) * (uint64_t)cap) >> 32);
}

/* Bits 40..55 pick the shard, bits 0..31 the home slot: independent parts of the hash. */
static inline shard_t *shard_of(sl_table_t *t, uint64_t h)
{
    return &t->shards[(h >> 40) & t->shard_mask];
}

/* Equal bytes, for short keys with overlapping word loads (len bytes readable in both). */
static inline bool bytes_equal(const unsigned char *a, const unsigned char *b, size_t len)
{
    if (len >= 8 && len <= 16)
        return hash_r64(a) == hash_r64(b) && hash_r64(a + len - 8) == hash_r64(b + len - 8);
    if (len >= 4 && len < 8)
        return hash_r32(a) == hash_r32(b) && hash_r32(a + len - 4) == hash_r32(b + len - 4);
    return memcmp(a, b, len) == 0;
}

static inline bool slot_key_equal(const sl_table_t *t, unsigned char *meta,
                                  const unsigned char *key, size_t len, uint64_t h)
{
    if (len <= t->key_area)
        return meta[1] == len && bytes_equal(meta + 2, key, len);
    if (meta[1] != KLEN_LONG)
        return false;
    long_key_t lk;
    memcpy(&lk, meta + 2, sizeof(lk));
    return lk.len == len && lk.hash_lo == (uint32_t)h && memcmp(lk.bytes, key, len) == 0;
}

/* The key stored in a slot. */
static const unsigned char *slot_key(const sl_table_t *t, unsigned char *meta, size_t *len)
{
    if (meta[1] != KLEN_LONG) {
        *len = meta[1];
        return meta + 2;
    }
    long_key_t lk;
    memcpy(&lk, meta + 2, sizeof(lk));
    *len = lk.len;
    return lk.bytes;
}

static uint64_t slot_hash(const sl_table_t *t, unsigned char *slot)
{
    size_t len;
    const unsigned char *key = slot_key(t, slot_meta(t, slot), &len);
    return hash_bytes(key, len, t->seed);
}

/* Pointer to the slot's state: in the slot, or the out-of-line allocation. */
static inline void *slot_state_ptr(const sl_table_t *t, unsigned char *slot)
{
    if (!t->state_external)
        return slot;
    void *p;
    memcpy(&p, slot, sizeof(p));
    return p;
}

static size_t slot_external_bytes(const sl_table_t *t, unsigned char *slot)
{
    size_t n = t->state_external ? t->state_size : 0;
    unsigned char *meta = slot_meta(t, slot);
    if (meta[1] == KLEN_LONG) {
        long_key_t lk;
        memcpy(&lk, meta + 2, sizeof(lk));
        n += lk.len;
    }
    return n;
}

static void slot_free_external(const sl_table_t *t, unsigned char *slot)
{
    if (t->state_external)
        free(slot_state_ptr(t, slot));
    unsigned char *meta = slot_meta(t, slot);
    if (meta[1] == KLEN_LONG) {
        long_key_t lk;
        memcpy(&lk, meta + 2, sizeof(lk));
        free(lk.bytes);
    }
}

/* ---- slot arrays ------------------------------------------------------------------------- */

static size_t array_bytes(const sl_table_t *t, uint32_t cap)
{
    return (size_t)cap * t->slot_size;
}

static size_t page_round(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

/*
 * Large arrays are mapped at a 2 MiB boundary and offered transparent huge pages: at millions
 * of keys every random lookup would otherwise also miss the TLB and walk the page tables. The
 * length is not rounded up to 2 MiB (that would make the tail resident for nothing); the tail
 * simply stays on small pages.
 */
static unsigned char *array_alloc(const sl_table_t *t, uint32_t cap)
{
    size_t n = array_bytes(t, cap);
    if (n < HUGE_ALLOC_MIN)
        return calloc(1, n);
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

static void array_free(const sl_table_t *t, unsigned char *slots, uint32_t cap)
{
    if (slots == NULL)
        return;
    if (array_bytes(t, cap) < HUGE_ALLOC_MIN)
        free(slots);
    else
        munmap(slots, page_round(array_bytes(t, cap)));
}

static uint32_t grow_threshold(uint32_t cap)
{
    return (uint32_t)((uint64_t)cap * MAX_LOAD_NUM / MAX_LOAD_DEN);
}

/* Publishes a new array; relaxed atomics because batch prefetching peeks without the lock. */
static void shard_set_array(shard_t *s, unsigned char *slots, uint32_t cap)
{
    __atomic_store_n(&s->slots, slots, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cap, cap, __ATOMIC_RELAXED);
    s->grow_at = grow_threshold(cap);
}

/* ---- probing ----------------------------------------------------------------------------- */

/*
 * Finds key in shard s. Returns the slot index, or -1 with *insert_at set to where the key would
 * go (an empty slot, or the first slot with a shorter probe distance) and *insert_dist to its
 * probe distance there.
 */
static inline __attribute__((always_inline)) int64_t
shard_find(const sl_table_t *t, shard_t *s, const unsigned char *key, size_t len, uint64_t h,
           uint32_t *insert_at, uint32_t *insert_dist)
{
    uint32_t cap = s->cap, i = home_of(h, cap), dist = 0;
    for (;;) {
        unsigned char *meta = slot_meta(t, slot_at(t, s->slots, i));
        if (meta[0] == 0 || (uint32_t)(meta[0] - 1) < dist)
            break;
        if (slot_key_equal(t, meta, key, len, h))
            return i;
        i = i + 1 == cap ? 0 : i + 1;
        dist++;
    }
    *insert_at = i;
    *insert_dist = dist;
    return -1;
}

/*
 * Robin Hood placement of a prepared slot image (`entry`, dist field ignored) starting at slot i
 * with probe distance dist. Returns false if a probe run would exceed DIST_MAX (the caller grows
 * and retries; nothing was written in that case).
 */
static bool shard_place(const sl_table_t *t, unsigned char *slots, uint32_t cap,
                        unsigned char *entry, uint32_t i, uint32_t dist)
{
    /* dry run: the displaced chain must end at an empty slot within DIST_MAX */
    uint32_t j = i, d = dist;
    for (;;) {
        unsigned char *meta = slot_meta(t, slot_at(t, slots, j));
        if (d > DIST_MAX)
            return false;
        if (meta[0] == 0)
            break;
        if ((uint32_t)(meta[0] - 1) < d)
            d = meta[0] - 1u; /* the displaced entry continues from here */
        j = j + 1 == cap ? 0 : j + 1;
        d++;
    }
    unsigned char tmp[STATE_INLINE_MAX + 64];
    for (;;) {
        unsigned char *slot = slot_at(t, slots, i);
        unsigned char *meta = slot_meta(t, slot);
        if (meta[0] == 0) {
            memcpy(slot, entry, t->slot_size);
            slot_meta(t, slot)[0] = (unsigned char)(dist + 1);
            return true;
        }
        if ((uint32_t)(meta[0] - 1) < dist) {
            uint32_t theirs = meta[0] - 1u;
            memcpy(tmp, slot, t->slot_size);
            memcpy(slot, entry, t->slot_size);
            slot_meta(t, slot)[0] = (unsigned char)(dist + 1);
            memcpy(entry, tmp, t->slot_size);
            dist = theirs;
        }
        i = i + 1 == cap ? 0 : i + 1;
        dist++;
    }
}

/* Removes slot i by shifting the rest of its probe run back one place. */
static void shard_remove_at(const sl_table_t *t, shard_t *s, uint32_t i)
{
    uint32_t cap = s->cap;
    for (;;) {
        uint32_t next = i + 1 == cap ? 0 : i + 1;
        unsigned char *nslot = slot_at(t, s->slots, next);
        unsigned char nd = slot_meta(t, nslot)[0];
        unsigned char *slot = slot_at(t, s->slots, i);
        if (nd <= 1) { /* empty or at home: the run ends here */
            memset(slot, 0, t->slot_size);
            break;
        }
        memcpy(slot, nslot, t->slot_size);
        slot_meta(t, slot)[0] = (unsigned char)(nd - 1);
        i = next;
    }
    s->count--;
}

/* ---- growth and reclamation -------------------------------------------------------------- */

/*
 * Rebuilds shard s into an array of new_cap slots, dropping the keys whose state is fresh at
 * now_ns (or none when now_ns < 0). Returns SL_OK, or SL_ENOMEM / SL_EFULL with s unchanged.
 */
static int shard_rebuild(sl_table_t *t, shard_t *s, uint32_t new_cap, int64_t now_ns)
{
    unsigned char *fresh = array_alloc(t, new_cap);
    if (fresh == NULL)
        return SL_ENOMEM;
    unsigned char entry[STATE_INLINE_MAX + 64];
    uint32_t kept = 0;
    size_t external = 0;
    for (uint32_t i = 0; i < s->cap; i++) {
        unsigned char *slot = slot_at(t, s->slots, i);
        if (slot_meta(t, slot)[0] == 0)
            continue;
        if (now_ns >= 0 && sl_state_is_fresh(&t->rule, slot_state_ptr(t, slot), now_ns))
            continue;
        memcpy(entry, slot, t->slot_size);
        uint64_t h = slot_hash(t, slot);
        if (!shard_place(t, fresh, new_cap, entry, home_of(h, new_cap), 0)) {
            array_free(t, fresh, new_cap);
            return SL_EFULL;
        }
        kept++;
        external += slot_external_bytes(t, slot);
    }
    /* commit: free what was dropped, swap the arrays */
    for (uint32_t i = 0; i < s->cap; i++) {
        unsigned char *slot = slot_at(t, s->slots, i);
        if (slot_meta(t, slot)[0] == 0)
            continue;
        if (now_ns >= 0 && sl_state_is_fresh(&t->rule, slot_state_ptr(t, slot), now_ns))
            slot_free_external(t, slot);
    }
    array_free(t, s->slots, s->cap);
    shard_set_array(s, fresh, new_cap);
    s->count = kept;
    s->bytes = array_bytes(t, new_cap) + external;
    return SL_OK;
}

/* The next capacity when growing, or 0 past the largest a shard may have. */
static uint32_t next_capacity(uint32_t cap)
{
    uint64_t bigger = (uint64_t)cap + cap / 4 + MIN_CAPACITY;
    return bigger > UINT32_MAX / 2 ? 0 : (uint32_t)bigger;
}

static uint32_t shard_count_fresh(const sl_table_t *t, shard_t *s, int64_t now_ns)
{
    uint32_t fresh = 0;
    for (uint32_t i = 0; i < s->cap; i++) {
        unsigned char *slot = slot_at(t, s->slots, i);
        if (slot_meta(t, slot)[0] == 0)
            continue;
        fresh += sl_state_is_fresh(&t->rule, slot_state_ptr(t, slot), now_ns);
    }
    return fresh;
}

static bool shard_has_room(const sl_table_t *t, const shard_t *s, size_t extra)
{
    return s->count < s->grow_at && s->bytes + extra <= t->shard_budget;
}

/*
 * Makes room for one more key with `extra` out-of-line bytes in shard s: one rebuild that drops
 * the fresh keys, at a larger capacity unless reclaiming alone left an eighth of the room free
 * or the cap forbids growing. Returns SL_OK, SL_EFULL or SL_ENOMEM.
 */
static int shard_make_room(sl_table_t *t, shard_t *s, size_t extra, int64_t now_ns)
{
    if (shard_has_room(t, s, extra))
        return SL_OK;
    uint32_t fresh = shard_count_fresh(t, s, now_ns);
    uint32_t live = s->count - fresh;
    uint32_t cap = s->cap;
    if (live + live / 8 >= s->grow_at) {
        uint32_t bigger = next_capacity(cap);
        size_t external =
            s->bytes - array_bytes(t, cap); /* counts fresh keys too: an upper bound */
        if (bigger != 0 && array_bytes(t, bigger) + external + extra <= t->shard_budget)
            cap = bigger;
    }
    if (fresh > 0 || cap != s->cap) {
        int rc = shard_rebuild(t, s, cap, now_ns);
        if (rc != SL_OK)
            return rc;
    }
    return shard_has_room(t, s, extra) ? SL_OK : SL_EFULL;
}

/*
 * Inserts key with `state` (state_size bytes) into shard s, which does not hold it. Returns
 * SL_OK, SL_EFULL or SL_ENOMEM; on error nothing changed.
 */
static int shard_insert(sl_table_t *t, shard_t *s, const unsigned char *key, size_t len, uint64_t h,
                        const void *state, int64_t now_ns)
{
    size_t extra = (t->state_external ? t->state_size : 0) + (len > t->key_area ? len : 0);
    int rc = shard_make_room(t, s, extra, now_ns);
    if (rc != SL_OK)
        return rc;

    unsigned char entry[STATE_INLINE_MAX + 64];
    memset(entry, 0, t->slot_size);
    unsigned char *meta = slot_meta(t, entry);
    long_key_t lk = {0};
    if (len > t->key_area) {
        lk = (long_key_t){.bytes = malloc(len), .len = (uint32_t)len, .hash_lo = (uint32_t)h};
        if (lk.bytes == NULL)
            return SL_ENOMEM;
        memcpy(lk.bytes, key, len);
        meta[1] = KLEN_LONG;
        memcpy(meta + 2, &lk, sizeof(lk));
    } else {
        meta[1] = (unsigned char)len;
        memcpy(meta + 2, key, len);
    }
    if (t->state_external) {
        void *p = malloc(t->state_size);
        if (p == NULL) {
            free(lk.bytes);
            return SL_ENOMEM;
        }
        memcpy(p, state, t->state_size);
        memcpy(entry, &p, sizeof(p));
    } else {
        memcpy(entry, state, t->state_size);
    }

    for (int attempt = 0; attempt < 4; attempt++) {
        uint32_t at, dist;
        if (shard_find(t, s, key, len, h, &at, &dist) < 0 &&
            shard_place(t, s->slots, s->cap, entry, at, dist)) {
            s->count++;
            s->bytes += extra;
            return SL_OK;
        }
        /* a probe run too long: grow and retry */
        uint32_t bigger = next_capacity(s->cap);
        if (bigger == 0 || array_bytes(t, bigger) > t->shard_budget ||
            shard_rebuild(t, s, bigger, now_ns) != SL_OK)
            break;
    }
    slot_free_external(t, entry);
    return SL_EFULL;
}

/* ---- creation ---------------------------------------------------------------------------- */

static uint64_t random_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)&ts;
    return hash_mix(x ^ HASH_P0, HASH_P2) | 1;
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
    t->slot_size = (t->state_area + 2 + KEY_AREA_MIN + 3) / 4 * 4;
    t->key_area = t->slot_size - t->state_area - 2;
    t->key_max = c.key_max ? c.key_max : SL_KEY_MAX_DEFAULT;
    if (t->key_max > UINT32_MAX)
        t->key_max = UINT32_MAX;
    t->seed = c.seed ? c.seed : random_seed();
    t->nshards = nshards;
    t->shard_mask = nshards - 1;
    t->shard_budget = c.max_bytes ? c.max_bytes / nshards : SIZE_MAX;

    uint64_t per_shard = c.initial_keys / nshards * MAX_LOAD_DEN / MAX_LOAD_NUM + 1;
    uint32_t cap = (uint32_t)(per_shard < MIN_CAPACITY     ? MIN_CAPACITY
                              : per_shard > UINT32_MAX / 2 ? UINT32_MAX / 2
                                                           : per_shard);
    for (unsigned i = 0; i < nshards; i++) {
        shard_t *s = &t->shards[i];
        atomic_init(&s->lock, 0);
        unsigned char *slots = array_alloc(t, cap);
        if (slots == NULL) {
            sl_table_free(t);
            return SL_ENOMEM;
        }
        shard_set_array(s, slots, cap);
        s->bytes = array_bytes(t, cap);
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
        if (s->slots == NULL)
            continue;
        for (uint32_t j = 0; j < s->cap; j++) {
            unsigned char *slot = slot_at(t, s->slots, j);
            if (slot_meta(t, slot)[0] != 0)
                slot_free_external(t, slot);
        }
        array_free(t, s->slots, s->cap);
    }
    free(t);
}

const sl_rule_t *sl_table_rule(const sl_table_t *t)
{
    return t ? &t->rule : NULL;
}

/* ---- decisions --------------------------------------------------------------------------- */

/* The slow path of shard_decide(): the key is absent. Decides on a fresh state and stores it
 * only if something was admitted. Out of line to keep the hot path's frame small. */
static __attribute__((noinline)) int shard_decide_absent(sl_table_t *t, shard_t *s,
                                                         const unsigned char *key, size_t len,
                                                         uint64_t h, int64_t cost, int64_t now_ns,
                                                         sl_decision_t *out)
{
    uint64_t buf[STATE_INLINE_MAX / 8];
    void *state = buf;
    if (t->state_external && (state = calloc(1, t->state_size)) == NULL)
        return SL_ENOMEM;
    if (!t->state_external)
        memset(buf, 0, t->state_size);
    core_decide(&t->rule, state, cost, now_ns, out);
    int rc = SL_OK;
    if (out->allowed && cost > 0)
        rc = shard_insert(t, s, key, len, h, state, now_ns);
    if (t->state_external)
        free(state);
    return rc;
}

/* Decides under the shard lock (held by the caller), on the state where it lies. */
static inline __attribute__((always_inline)) int shard_decide(sl_table_t *t, shard_t *s,
                                                              const unsigned char *key, size_t len,
                                                              uint64_t h, int64_t cost,
                                                              int64_t now_ns, sl_decision_t *out)
{
    uint32_t at, dist;
    int64_t i = shard_find(t, s, key, len, h, &at, &dist);
    if (__builtin_expect(i < 0, 0))
        return shard_decide_absent(t, s, key, len, h, cost, now_ns, out);
    core_decide(&t->rule, slot_state_ptr(t, slot_at(t, s->slots, (uint32_t)i)), cost, now_ns, out);
    return SL_OK;
}

int sl_table_decide(sl_table_t *t, const void *key, size_t key_len, int64_t cost, int64_t now_ns,
                    sl_decision_t *out)
{
    if (t == NULL || out == NULL || (key == NULL && key_len > 0))
        return SL_EINVAL;
    if (key_len > t->key_max)
        return SL_EKEY;
    if (cost < 0)
        return SL_ECOST;
    uint64_t h = hash_bytes(key, key_len, t->seed);
    shard_t *s = shard_of(t, h);
    shard_lock(s);
    int rc = shard_decide(t, s, key, key_len, h, cost, now_ns, out);
    shard_unlock(s);
    return rc;
}

size_t sl_table_decide_batch(sl_table_t *t, sl_request_t *reqs, size_t n, int64_t now_ns)
{
    uint64_t hashes[BATCH_AHEAD];
    size_t failed = 0;
    if (t == NULL) {
        for (size_t j = 0; j < n; j++)
            reqs[j].status = SL_EINVAL;
        return n;
    }
    for (size_t base = 0; base < n; base += BATCH_AHEAD) {
        size_t m = n - base < BATCH_AHEAD ? n - base : BATCH_AHEAD;
        /* pass 1: hash and prefetch each home slot (a racy peek is fine for a prefetch) */
        for (size_t j = 0; j < m; j++) {
            sl_request_t *r = &reqs[base + j];
            if (r->key_len > t->key_max || (r->key == NULL && r->key_len > 0))
                continue;
            hashes[j] = hash_bytes(r->key, r->key_len, t->seed);
            shard_t *s = shard_of(t, hashes[j]);
            unsigned char *slots = __atomic_load_n(&s->slots, __ATOMIC_RELAXED);
            uint32_t cap = __atomic_load_n(&s->cap, __ATOMIC_RELAXED);
            unsigned char *home = slot_at(t, slots, home_of(hashes[j], cap));
            __builtin_prefetch(home, 1, 3);
            __builtin_prefetch(home + 64, 1, 3); /* a straddling slot and the probe window */
        }
        /* pass 2: decide in order */
        for (size_t j = 0; j < m; j++) {
            sl_request_t *r = &reqs[base + j];
            if (r->key == NULL && r->key_len > 0)
                r->status = SL_EINVAL;
            else if (r->key_len > t->key_max)
                r->status = SL_EKEY;
            else if (r->cost < 0)
                r->status = SL_ECOST;
            else {
                shard_t *s = shard_of(t, hashes[j]);
                shard_lock(s);
                r->status = shard_decide(t, s, r->key, r->key_len, hashes[j], r->cost, now_ns,
                                         &r->decision);
                shard_unlock(s);
            }
            failed += r->status != SL_OK;
        }
    }
    return failed;
}

/* ---- maintenance ------------------------------------------------------------------------- */

int sl_table_reset(sl_table_t *t, const void *key, size_t key_len)
{
    if (t == NULL || (key == NULL && key_len > 0))
        return SL_EINVAL;
    if (key_len > t->key_max)
        return SL_EKEY;
    uint64_t h = hash_bytes(key, key_len, t->seed);
    shard_t *s = shard_of(t, h);
    shard_lock(s);
    uint32_t at, dist;
    int64_t i = shard_find(t, s, key, key_len, h, &at, &dist);
    if (i >= 0) {
        unsigned char *slot = slot_at(t, s->slots, (uint32_t)i);
        s->bytes -= slot_external_bytes(t, slot);
        slot_free_external(t, slot);
        shard_remove_at(t, s, (uint32_t)i);
    }
    shard_unlock(s);
    return SL_OK;
}

int sl_table_get(sl_table_t *t, const void *key, size_t key_len, void *state)
{
    if (t == NULL || state == NULL || (key == NULL && key_len > 0))
        return SL_EINVAL;
    if (key_len > t->key_max)
        return SL_EKEY;
    uint64_t h = hash_bytes(key, key_len, t->seed);
    shard_t *s = shard_of(t, h);
    shard_lock(s);
    uint32_t at, dist;
    int64_t i = shard_find(t, s, key, key_len, h, &at, &dist);
    if (i >= 0)
        memcpy(state, slot_state_ptr(t, slot_at(t, s->slots, (uint32_t)i)), t->state_size);
    else
        memset(state, 0, t->state_size);
    shard_unlock(s);
    return SL_OK;
}

int sl_table_put(sl_table_t *t, const void *key, size_t key_len, const void *state, int64_t now_ns)
{
    if (t == NULL || state == NULL || (key == NULL && key_len > 0))
        return SL_EINVAL;
    if (key_len > t->key_max)
        return SL_EKEY;
    if (sl_state_is_fresh(&t->rule, state, now_ns))
        return sl_table_reset(t, key, key_len);
    uint64_t h = hash_bytes(key, key_len, t->seed);
    shard_t *s = shard_of(t, h);
    shard_lock(s);
    uint32_t at, dist;
    int64_t i = shard_find(t, s, key, key_len, h, &at, &dist);
    int rc = SL_OK;
    if (i >= 0)
        memcpy(slot_state_ptr(t, slot_at(t, s->slots, (uint32_t)i)), state, t->state_size);
    else
        rc = shard_insert(t, s, key, key_len, h, state, now_ns);
    shard_unlock(s);
    return rc;
}

int sl_table_foreach(sl_table_t *t, sl_table_visit_fn fn, void *arg)
{
    if (t == NULL || fn == NULL)
        return SL_EINVAL;
    uint64_t buf[STATE_INLINE_MAX / 8];
    for (unsigned k = 0; k < t->nshards; k++) {
        shard_t *s = &t->shards[k];
        int stop = 0;
        shard_lock(s);
        for (uint32_t i = 0; i < s->cap && stop == 0; i++) {
            unsigned char *slot = slot_at(t, s->slots, i);
            unsigned char *meta = slot_meta(t, slot);
            if (meta[0] == 0)
                continue;
            size_t len;
            const unsigned char *key = slot_key(t, meta, &len);
            const void *state = slot_state_ptr(t, slot);
            if (!t->state_external) {
                memcpy(buf, slot, t->state_size);
                state = buf;
            }
            stop = fn(arg, key, len, state, t->state_size);
        }
        shard_unlock(s);
        if (stop != 0)
            return stop;
    }
    return 0;
}

size_t sl_table_reclaim(sl_table_t *t, int64_t now_ns)
{
    size_t dropped = 0;
    for (unsigned k = 0; t != NULL && k < t->nshards; k++) {
        shard_t *s = &t->shards[k];
        shard_lock(s);
        uint32_t before = s->count;
        if (shard_rebuild(t, s, s->cap, now_ns) == SL_OK)
            dropped += before - s->count;
        shard_unlock(s);
    }
    return dropped;
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
