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
    guard_entry_t shared; /* addresses that found no free slot */
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

/* More than the free failures in a window that has not passed. */
static bool hot(const guard_entry_t *e, int64_t now_ns)
{
    return e->failures > GUARD_FREE_FAILURES && !expired(e, now_ns);
}

/* k's entry: its own; else a free one, taken for it when `take` (NULL when not: k has no
 * failures); else the shared one (*shared set). */
static guard_entry_t *guard_find(guard_t *g, const netaddr_t *k, int64_t now_ns, bool take,
                                 bool *shared)
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
        return &g->shared;
    }
    if (take) {
        *spare = (guard_entry_t){.addr = *k};
        return spare;
    }
    return NULL;
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

/* One more failure of entry e at now_ns: the verdict, e updated (its queue only when the reply
 * is held back). */
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
    int64_t due = start + held_delay_ns(e->failures - GUARD_FREE_FAILURES);
    if (due - now_ns > GUARD_QUEUE_MAX_NS) {
        v.drop = true; /* not queued: the queue stays within GUARD_QUEUE_MAX_NS */
        return v;
    }
    e->due_ns = due;
    v.hold_ns = due - now_ns;
    v.retry_ns = now_ns + GUARD_WINDOW_NS - due;
    return v;
}

guard_verdict_t guard_attempt(guard_t *g, const netaddr_t *addr, int64_t now_ns, bool right)
{
    netaddr_t k = guard_key(addr);
    bool shared = false;
    pthread_mutex_lock(&g->mu);
    guard_entry_t *e = guard_find(g, &k, now_ns, false, &shared);
    bool is_hot = e != NULL && hot(e, now_ns);
    guard_verdict_t v = {.let_in = true};
    if (is_hot || !right) {
        if (e == NULL) {
            e = guard_find(g, &k, now_ns, true, &shared);
        }
        v = entry_fail(e, now_ns);
        v.hot = is_hot;
    }
    pthread_mutex_unlock(&g->mu);
    v.shared = shared;
    return v;
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
