/*
 * watch.h - what the console shows of a named rule: its decisions per second over the last 15
 * minutes, and its heaviest keys over the last minute (by decisions and by denials).
 *
 * Every decision of the rule is recorded by the loop that made it, into that loop's own part
 * (watch_record): a ring of WATCH_SECONDS per-second counters, and a ring of WATCH_INTERVALS
 * Space-Saving sketches (core/topk.h), one per WATCH_INTERVAL_NS of time, for decisions and for
 * denials. A loop's part is allocated at the loop's first decision of the rule (once); after
 * that a record is a few stores into memory no other thread writes, no lock, no shared
 * read-modify-write. Readers (any thread) sum the loops' counters and merge the loops' sketches
 * (watch_rates, watch_top); they may read while the loops write (the counters are atomics
 * loaded and stored relaxed, the sketches seqlocked), so a read is each counter as it was at
 * some moment during the read.
 *
 * Memory: per loop that decided the rule, WATCH_SECONDS slots of 24 bytes (21.6 KB), plus
 * WATCH_INTERVALS sketches of sizeof(topk_t) (16.2 KB each: 97 KB) for decisions and, once the
 * loop has denied a key of the rule, as many for denials: at most 216 KB per loop.
 */
#ifndef SLUICE_ENGINE_WATCH_H
#define SLUICE_ENGINE_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/topk.h"

#define WATCH_SECONDS     900                    /* per-second counters kept (15 minutes) */
#define WATCH_INTERVAL_NS INT64_C(10000000000)   /* one sketch's time, ns */
#define WATCH_INTERVALS   6                      /* sketches kept: the top's window */
#define WATCH_TOP_MAX     100                    /* most keys a top reports */
#define WATCH_WINDOW_S    (WATCH_INTERVALS * 10) /* the top's window, as reported, s */

typedef struct watch watch_t;

/* What a decision was, for watch_record. */
typedef enum watch_outcome {
    WATCH_ALLOWED = 0,
    WATCH_DENIED = 1,
    WATCH_SHADOW_DENIED = 2, /* denied by a rule in shadow mode: let through */
} watch_outcome_t;

/* A watch for `loops` loops (> 0), its sketches hashing with seed. NULL when out of memory. */
watch_t *watch_create(unsigned loops, uint64_t seed);

/* Takes one more reference / drops one; the last frees it (no loop may be recording). */
void watch_hold(watch_t *w);
void watch_release(watch_t *w);

/* Records a decision made by loop `loop` at now_ns (>= 0) on key (key_len bytes; NULL: counted
 * per second only). Only loop `loop`'s thread calls this for that loop. */
void watch_record(watch_t *w, unsigned loop, const void *key, size_t key_len,
                  watch_outcome_t outcome, int64_t now_ns);

/* The decisions per second of the n seconds (n <= WATCH_SECONDS) ending at end_s (exclusive,
 * seconds since the epoch), oldest first, summed over the loops: allowed[i], denied[i] and
 * shadow_denied[i] are second end_s - n + i. Any thread. */
void watch_rates(const watch_t *w, int64_t end_s, size_t n, uint64_t *allowed, uint64_t *denied,
                 uint64_t *shadow_denied);

/* The heaviest keys of the window ending at now_ns (the current interval and the
 * WATCH_INTERVALS - 1 before it), by decisions or by denials (shadow denials included), merged
 * over the loops: at most n items into out (room for n), most first. *total gets the decisions
 * (or denials) the sketches counted, so each item's count exceeds its true count by at most its
 * error, and every error is at most total / TOPK_CAPACITY. Any thread; allocates while it
 * merges. Returns the count written, or -1 when out of memory. */
long watch_top(const watch_t *w, bool denied, int64_t now_ns, size_t n, topk_item_t *out,
               uint64_t *total);

#endif /* SLUICE_ENGINE_WATCH_H */
