/*
 * auth_guard.c - failed secrets per client address (see auth_guard.h).
 *
 * The table is an array of GUARD_ADDRESSES entries. An address hashes (seeded, so nobody can
 * aim addresses at one slot from outside) to a slot and may live in that slot or the
 * GUARD_PROBE - 1 after it (wrapping); a lookup compares all of them, so an entry freed in
 * between needs no tombstone. An entry is free when it holds no address or its last failure is
 * older than the window: expired entries are reused while inserting, with no sweeper.
 */
#include "server/auth_guard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

typedef struct guard_entry {
    netaddr_t addr;    /* family 0: free (the shared entry keeps 0) */
    uint32_t failures; /* in the window ending at last_ns */
    int64_t last_ns;   /* the latest failure, monotonic ns */
    int64_t due_ns;    /* when the latest reply held back leaves; 0: none */
} guard_entry_t;

struct guard {
    pthread_mutex_t mu;
    uint64_t seed;
    _Atomic size_t used;  /* entries that hold an address (live or expired), and the shared
                             entry while it counts: 0 lets a success skip the lock */
    guard_entry_t shared; /* addresses that found no free slot */
    bool shared_used;
    guard_entry_t slots[GUARD_ADDRESSES];
};

/* The key an address is counted under: IPv6 by its /64. */
static netaddr_t guard_key(const netaddr_t *a)
{
    netaddr_t k = *a;
    if (k.family == 6) {
        memset(k.addr + 8, 0, 8);
    } else if (k.family == 4) {
        memset(k.addr + 4, 0, 12);
    } else {
        memset(&k, 0, sizeof k);
        k.family = 255; /* an unknown peer: one address of its own, never "free" */
    }
    return k;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 33);
}

static size_t guard_slot(const guard_t *g, const netaddr_t *k)
{
    uint64_t lo, hi;
    memcpy(&lo, k->addr, 8);
    memcpy(&hi, k->addr + 8, 8);
    uint64_t h = mix(g->seed ^ k->family);
    h = mix(h ^ lo);
    h = mix(h ^ hi);
    return (size_t)(h % GUARD_ADDRESSES);
}

static bool same_key(const guard_entry_t *e, const netaddr_t *k)
{
    return e->addr.family == k->family && memcmp(e->addr.addr, k->addr, 16) == 0;
}

static bool expired(const guard_entry_t *e, int64_t now_ns)
{
    return now_ns - e->last_ns > GUARD_WINDOW_NS;
}

/* k's entry: its own, a free one taken for it, or the shared one (*shared set). */
static guard_entry_t *guard_find(guard_t *g, const netaddr_t *k, int64_t now_ns, bool *shared)
{
    size_t at = guard_slot(g, k);
    guard_entry_t *spare = NULL;
    for (size_t i = 0; i < GUARD_PROBE; i++) {
        guard_entry_t *e = &g->slots[(at + i) % GUARD_ADDRESSES];
        if (same_key(e, k)) {
            return e;
        }
        if (spare == NULL && (e->addr.family == 0 || expired(e, now_ns))) {
            spare = e;
        }
    }
    *shared = spare == NULL;
    if (spare == NULL) {
        if (!g->shared_used) {
            g->shared_used = true;
            atomic_fetch_add(&g->used, 1);
        }
        return &g->shared;
    }
    if (spare->addr.family == 0) {
        atomic_fetch_add(&g->used, 1);
    }
    *spare = (guard_entry_t){.addr = *k};
    return spare;
}

/* The delay of the n-th held reply (n >= 1): GUARD_DELAY_NS, doubled each time, capped. */
static int64_t held_delay_ns(uint32_t n)
{
    int64_t d = GUARD_DELAY_NS;
    for (uint32_t i = 1; i < n && d < GUARD_DELAY_MAX_NS; i++) {
        d *= 2;
    }
    return d < GUARD_DELAY_MAX_NS ? d : GUARD_DELAY_MAX_NS;
}

/* One more failure of entry e at now_ns: the verdict, e updated. */
static guard_verdict_t entry_fail(guard_entry_t *e, int64_t now_ns)
{
    if (expired(e, now_ns)) {
        e->failures = 0;
        e->due_ns = 0;
    }
    if (e->failures < UINT32_MAX) {
        e->failures++;
    }
    e->last_ns = now_ns;
    guard_verdict_t v = {.failures = e->failures};
    if (e->failures <= GUARD_FREE_FAILURES) {
        return v;
    }
    int64_t start = e->due_ns > now_ns ? e->due_ns : now_ns;
    e->due_ns = start + held_delay_ns(e->failures - GUARD_FREE_FAILURES);
    v.hold_ns = e->due_ns - now_ns;
    v.close = v.hold_ns > GUARD_QUEUE_MAX_NS; /* its connection goes: no pipeline piles up */
    return v;
}

guard_verdict_t guard_fail(guard_t *g, const netaddr_t *addr, int64_t now_ns)
{
    netaddr_t k = guard_key(addr);
    bool shared = false;
    pthread_mutex_lock(&g->mu);
    guard_verdict_t v = entry_fail(guard_find(g, &k, now_ns, &shared), now_ns);
    pthread_mutex_unlock(&g->mu);
    v.shared = shared;
    return v;
}

void guard_success(guard_t *g, const netaddr_t *addr)
{
    if (atomic_load_explicit(&g->used, memory_order_relaxed) == 0) {
        return;
    }
    netaddr_t k = guard_key(addr);
    size_t at = guard_slot(g, &k);
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < GUARD_PROBE; i++) {
        guard_entry_t *e = &g->slots[(at + i) % GUARD_ADDRESSES];
        if (same_key(e, &k)) {
            *e = (guard_entry_t){0};
            atomic_fetch_sub(&g->used, 1);
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
}

size_t guard_live(guard_t *g, int64_t now_ns)
{
    size_t n = 0;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < GUARD_ADDRESSES; i++) {
        const guard_entry_t *e = &g->slots[i];
        n += e->addr.family != 0 && !expired(e, now_ns);
    }
    pthread_mutex_unlock(&g->mu);
    return n;
}

static void guard_init(guard_t *g, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    g->seed = seed;
}

guard_t *guard_create(uint64_t seed)
{
    guard_t *g = malloc(sizeof *g);
    if (g != NULL) {
        guard_init(g, seed);
    }
    return g;
}

void guard_free(guard_t *g)
{
    if (g != NULL) {
        pthread_mutex_destroy(&g->mu);
        free(g);
    }
}

static guard_t global;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)&ts);
    }
    guard_init(&global, seed);
}

guard_t *guard_global(void)
{
    pthread_once(&global_once, global_init);
    return &global;
}
