/*
 * watch.c - a named rule's per-second counters and heavy-hitter sketches, per loop (watch.h).
 *
 * State. watch_t holds one pointer per loop to that loop's part (watch_loop_t), NULL until the
 * loop's first decision of the rule, then published with a release store and never changed
 * until the watch is freed. A part is:
 *
 *   sec[WATCH_SECONDS]        second s counts in sec[s % WATCH_SECONDS] while its `second` is s;
 *                             the first record in a later second zeroes it and claims it
 *   decided[WATCH_INTERVALS]  interval k (WATCH_INTERVAL_NS of time) counts in sketch
 *                             k % WATCH_INTERVALS; the first record in a later interval resets it
 *   denied                    the same for denials, allocated at the loop's first denial
 *
 * plus, for the writer alone, the second and interval it last recorded in (so a record does
 * one compare, not a division, while the second lasts).
 */
#include "engine/watch.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define RELAXED memory_order_relaxed

typedef struct watch_second {
    _Atomic int64_t second; /* which second it counts, s since the epoch (-1: none yet) */
    _Atomic uint32_t allowed, denied, shadow_denied; /* decisions in that second */
} watch_second_t;

typedef struct watch_loop {
    watch_second_t sec[WATCH_SECONDS];
    topk_t decided[WATCH_INTERVALS];
    _Atomic(topk_t *) denied; /* [WATCH_INTERVALS], NULL until the loop's first denial */
    /* the writer's */
    int64_t second;       /* the second last recorded in, s */
    int64_t second_start; /* its start, ns */
    int64_t interval;     /* the interval last recorded in */
} watch_loop_t;

struct watch {
    _Atomic int refs;
    unsigned nloops;
    uint64_t seed;
    _Atomic(watch_loop_t *) loops[]; /* [nloops] */
};

watch_t *watch_create(unsigned loops, uint64_t seed)
{
    watch_t *w = calloc(1, sizeof *w + loops * sizeof w->loops[0]);
    if (w == NULL) {
        return NULL;
    }
    atomic_init(&w->refs, 1);
    w->nloops = loops;
    w->seed = seed;
    return w;
}

void watch_hold(watch_t *w)
{
    atomic_fetch_add(&w->refs, 1);
}

void watch_release(watch_t *w)
{
    if (w == NULL || atomic_fetch_sub(&w->refs, 1) > 1) {
        return;
    }
    for (unsigned i = 0; i < w->nloops; i++) {
        watch_loop_t *l = atomic_load(&w->loops[i]);
        if (l != NULL) {
            free(atomic_load(&l->denied));
            free(l);
        }
    }
    free(w);
}

/* ---- the writer ----------------------------------------------------------------------------- */

static watch_loop_t *loop_part(watch_t *w, unsigned loop)
{
    watch_loop_t *l = atomic_load_explicit(&w->loops[loop], RELAXED); /* only this loop sets it */
    if (l != NULL) {
        return l;
    }
    if ((l = malloc(sizeof *l)) == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < WATCH_SECONDS; i++) {
        atomic_init(&l->sec[i].second, -1);
        atomic_init(&l->sec[i].allowed, 0);
        atomic_init(&l->sec[i].denied, 0);
        atomic_init(&l->sec[i].shadow_denied, 0);
    }
    for (size_t i = 0; i < WATCH_INTERVALS; i++) {
        topk_init(&l->decided[i], w->seed, -1);
    }
    atomic_init(&l->denied, NULL);
    l->second = -1;
    l->second_start = 0;
    l->interval = -1;
    atomic_store_explicit(&w->loops[loop], l, memory_order_release);
    return l;
}

static topk_t *denied_sketches(watch_t *w, watch_loop_t *l)
{
    topk_t *d = atomic_load_explicit(&l->denied, RELAXED);
    if (d != NULL) {
        return d;
    }
    if ((d = malloc(WATCH_INTERVALS * sizeof *d)) == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < WATCH_INTERVALS; i++) {
        topk_init(&d[i], w->seed, (int64_t)i == l->interval % WATCH_INTERVALS ? l->interval : -1);
    }
    atomic_store_explicit(&l->denied, d, memory_order_release);
    return d;
}

/* Moves l on to the second (and interval) of now_ns. */
static void next_second(watch_loop_t *l, int64_t now_ns)
{
    l->second = now_ns / SL_NS_PER_SEC;
    l->second_start = l->second * SL_NS_PER_SEC;
    watch_second_t *s = &l->sec[l->second % WATCH_SECONDS];
    if (atomic_load_explicit(&s->second, RELAXED) != l->second) {
        atomic_store_explicit(&s->second, -1, RELAXED); /* readers: being claimed */
        atomic_store_explicit(&s->allowed, 0, memory_order_release);
        atomic_store_explicit(&s->denied, 0, memory_order_release);
        atomic_store_explicit(&s->shadow_denied, 0, memory_order_release);
        atomic_store_explicit(&s->second, l->second, memory_order_release);
    }
    int64_t k = now_ns / WATCH_INTERVAL_NS;
    if (k == l->interval) {
        return;
    }
    l->interval = k;
    topk_t *d = atomic_load_explicit(&l->denied, RELAXED);
    if (atomic_load_explicit(&l->decided[k % WATCH_INTERVALS].epoch, RELAXED) != k) {
        topk_reset(&l->decided[k % WATCH_INTERVALS], k);
    }
    if (d != NULL && atomic_load_explicit(&d[k % WATCH_INTERVALS].epoch, RELAXED) != k) {
        topk_reset(&d[k % WATCH_INTERVALS], k);
    }
}

static inline void bump(_Atomic uint32_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, RELAXED) + 1, RELAXED);
}

void watch_record(watch_t *w, unsigned loop, const void *key, size_t key_len,
                  watch_outcome_t outcome, int64_t now_ns)
{
    watch_loop_t *l = loop_part(w, loop);
    if (l == NULL) {
        return;
    }
    /* a clock that stepped back stays in the second it left: counters never move backwards */
    if (now_ns - l->second_start >= SL_NS_PER_SEC) {
        next_second(l, now_ns);
    }
    watch_second_t *s = &l->sec[l->second % WATCH_SECONDS];
    bump(outcome == WATCH_ALLOWED  ? &s->allowed
         : outcome == WATCH_DENIED ? &s->denied
                                   : &s->shadow_denied);
    if (key == NULL) {
        return;
    }
    topk_t *dec = &l->decided[l->interval % WATCH_INTERVALS];
    uint64_t h = topk_hash(dec, key, key_len);
    topk_add(dec, h, key, key_len);
    if (outcome != WATCH_ALLOWED) {
        topk_t *d = denied_sketches(w, l);
        if (d != NULL) {
            topk_add(&d[l->interval % WATCH_INTERVALS], h, key, key_len);
        }
    }
}

/* ---- readers -------------------------------------------------------------------------------- */

void watch_rates(const watch_t *w, int64_t end_s, size_t n, uint64_t *allowed, uint64_t *denied,
                 uint64_t *shadow_denied)
{
    memset(allowed, 0, n * sizeof *allowed);
    memset(denied, 0, n * sizeof *denied);
    memset(shadow_denied, 0, n * sizeof *shadow_denied);
    for (unsigned li = 0; li < w->nloops; li++) {
        const watch_loop_t *l = atomic_load_explicit(&w->loops[li], memory_order_acquire);
        for (size_t i = 0; l != NULL && i < n; i++) {
            int64_t want = end_s - (int64_t)n + (int64_t)i;
            const watch_second_t *s =
                &l->sec[((want % WATCH_SECONDS) + WATCH_SECONDS) % WATCH_SECONDS];
            if (atomic_load_explicit(&s->second, memory_order_acquire) != want) {
                continue;
            }
            uint32_t a = atomic_load_explicit(&s->allowed, memory_order_acquire);
            uint32_t d = atomic_load_explicit(&s->denied, memory_order_acquire);
            uint32_t sh = atomic_load_explicit(&s->shadow_denied, memory_order_acquire);
            if (atomic_load_explicit(&s->second, RELAXED) != want) {
                continue; /* claimed by a later second while read: long gone */
            }
            allowed[i] += a;
            denied[i] += d;
            shadow_denied[i] += sh;
        }
    }
}

/* Reads the sketches of the window into items (room for all); sums their floors and totals. */
static size_t read_window(const watch_t *w, bool denied, int64_t k, topk_item_t *items,
                          uint64_t *floor_sum, uint64_t *total)
{
    size_t n = 0;
    *floor_sum = *total = 0;
    for (unsigned li = 0; li < w->nloops; li++) {
        const watch_loop_t *l = atomic_load_explicit(&w->loops[li], memory_order_acquire);
        const topk_t *sk = l == NULL ? NULL
                           : denied  ? atomic_load_explicit(&l->denied, memory_order_acquire)
                                     : l->decided;
        for (size_t i = 0; sk != NULL && i < WATCH_INTERVALS; i++) {
            int64_t epoch = -1;
            uint64_t added = 0;
            size_t got = topk_read(&sk[i], items + n, &epoch, &added);
            if (epoch <= k - WATCH_INTERVALS || epoch > k || added == 0) {
                continue; /* outside the window, or reset while read */
            }
            *floor_sum += got > 0 ? items[n].floor : 0;
            *total += added;
            n += got;
        }
    }
    return n;
}

long watch_top(const watch_t *w, bool denied, int64_t now_ns, size_t n, topk_item_t *out,
               uint64_t *total)
{
    size_t room = (size_t)w->nloops * WATCH_INTERVALS * TOPK_CAPACITY;
    topk_item_t *items = malloc(room * sizeof *items);
    if (items == NULL) {
        return -1;
    }
    uint64_t floor_sum;
    size_t got = read_window(w, denied, now_ns / WATCH_INTERVAL_NS, items, &floor_sum, total);
    got = topk_merge(items, got, floor_sum);
    size_t k = got < n ? got : n;
    memcpy(out, items, k * sizeof *out);
    free(items);
    return (long)k;
}
