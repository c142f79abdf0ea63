/*
 * redis_approx.h - approximate rules over the Redis request store: each loop holds, per (rule,
 * key) it decides, the key's count as of its last reply and the units it admitted since
 * (approx_count.h), decides locally from them, and every sync interval sends what it admitted
 * as one charge past the limit per key (SL.SETTLE with reserved 0, or the script's settle),
 * pipelined with the loop's other commands, getting the key's count back.
 *
 * A table per loop, like the lease table (redis_lease.h) beside it: no lock, nothing shared. A
 * key decided on several loops of a node has a count on each; each loop is one node of the
 * bound (approx_count.h).
 *
 *   decide   a key new to the loop, or whose count is stale (it arrived a sync interval ago or
 *            more: its syncs fail, its timer is late, or it was idle), is decided strictly and
 *            the reply is its count, the units admitted here and not yet synced sent first (a
 *            sync of its own, counted as one); else
 *            it is admitted or refused here. Peeks, settles and costs over the rule's capacity
 *            are strict. A key whose slot holds another key with units not yet synced is
 *            decided strictly.
 *   sync     a timer every sync interval (the smallest of the table's rules) sends each key's
 *            admitted units, and a key asked about with nothing admitted is synced with 0 (a
 *            peek), so that a node refusing locally learns when room comes back.
 *   forget   a key not decided for APPROX_IDLE_TIMES sync intervals, with nothing to send, is
 *            dropped.
 *   Redis down  a failed sync keeps its units for the next; local decisions go on from the last
 *            count for a sync interval after it arrived, then the key is strict
 *            (on_store_error).
 *   stop     redis_approx_stop() sends what every key admitted and says how many syncs are on
 *            their way; from then on every decision is strict.
 */
#ifndef SLUICE_STORE_REDIS_APPROX_H
#define SLUICE_STORE_REDIS_APPROX_H

#include <stdatomic.h>
#include <stdint.h>

#include <uv.h>

#include "store/redis_store.h"

#define APPROX_SLOTS      4096 /* keys with a count per loop (direct-mapped) */
#define APPROX_IDLE_TIMES 16   /* a key not decided for this many sync intervals is dropped */

/* Counters: written by the loop, read by any thread (relaxed). */
typedef struct redis_approx_stats {
    _Atomic uint64_t syncs;    /* syncs sent (one command each) */
    _Atomic uint64_t units;    /* units they charged */
    _Atomic uint64_t local;    /* decisions answered here, admitted or refused */
    _Atomic uint64_t lag_ns;   /* the sum of the counts' ages at those decisions, ns */
    _Atomic uint64_t failures; /* syncs that failed (their units are sent again) */
} redis_approx_stats_t;

typedef struct redis_approx redis_approx_t;

/* A loop's table over its store rs (which must outlive it). NULL when out of memory. */
redis_approx_t *redis_approx_create(uv_loop_t *loop, redis_store_t *rs);

/* Frees the table, after redis_store_free() of its store has answered everything in flight. */
void redis_approx_free(redis_approx_t *t);

/* What an approximate decision names. */
typedef struct redis_approx_target {
    const char *name;      /* the rule's name */
    const sl_rule_t *rule; /* the numbers in force */
    const void *key;
    size_t key_len;
    int64_t sync_ns;   /* the sync interval, whole milliseconds */
    int64_t closed_ns; /* as redis_store_decide's */
} redis_approx_target_t;

/* Decides cost units for tg at now_ns (the caller's clock, as redis_store_decide's): here, or
 * strictly. Calls fn exactly once, at once or later. */
void redis_approx_decide(redis_approx_t *t, const redis_approx_target_t *tg, int64_t cost,
                         int64_t now_ns, redis_decision_fn fn, void *arg);

/* The key under tg, if any, forgets its count and what it admitted (its key was reset). */
void redis_approx_drop(redis_approx_t *t, const redis_approx_target_t *tg);

/* Sends what every key admitted (the first call) and returns how many syncs are still on their
 * way (0: done). From the first call on, decisions are strict. */
unsigned redis_approx_stop(redis_approx_t *t);

const redis_approx_stats_t *redis_approx_stats(const redis_approx_t *t);

#endif /* SLUICE_STORE_REDIS_APPROX_H */
