/*
 * redis_lease.h - leased rules over the Redis request store: each loop holds, per (rule, key)
 * it decides often, a lease of part of the key's quota (SL.LEASE, or the script's lease), and
 * decides with it locally, with no Redis command, until its units run out or it ends; the unused
 * part goes back (SL.RETURN) when it ends, when the rule changes or goes, and when sluiced stops.
 *
 * A table per loop, like the over-limit cache, beside the loop's redis_store_t (whose
 * connections send the leases and returns): no lock, nothing shared. A key hot on several loops
 * of one node holds a lease on each (each at most a quarter of what the key had left).
 *
 *   decide     a running lease with units enough: taken there, answered at once. Else one lease
 *              request per key at a time: decisions on the key that arrive while it is in flight
 *              wait for it (at most LEASE_WAITERS_MAX; past that they are decided strictly), and
 *              are answered from the grant in order, strictly when it runs short. A grant of
 *              nothing (the key is at its limit) makes the key's decisions strict, with the
 *              over-limit cache, for one lease time. Peeks, settles and costs over the rule's
 *              capacity are strict.
 *   size       lease_size.h: from the loop's arrival rate for the key, capped at a quarter of
 *              what the key had remaining.
 *   ends       a sweep every LEASE_SWEEP_MS gives back the unused units of leases that ended,
 *              and of rules removed or changed (a store_rule retired); a decision finding its
 *              key's lease ended or under other numbers gives it back first. A return is sent
 *              only to the node that granted it, in the generation it granted it (redis_store.h).
 *   stop       redis_leases_stop() gives back every lease and says how many returns are still
 *              on their way; from then on every decision is strict.
 *   Redis down leases in hand are spent until they end; a lease request that fails answers its
 *              waiters as store errors (on_store_error).
 */
#ifndef SLUICE_STORE_REDIS_LEASE_H
#define SLUICE_STORE_REDIS_LEASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "store/redis_store.h"

#define LEASE_SLOTS       4096 /* keys with a lease per loop (direct-mapped) */
#define LEASE_WAITERS_MAX 256  /* decisions waiting for one key's lease request */
#define LEASE_SWEEP_MS    20   /* how often ended leases are looked for */
#define LEASE_IDLE_TIMES  16   /* a key unused for this many lease times is forgotten */

/* What a lease is granted for: the rule's data, counted, so that a lease outlives a reload
 * until it is given back. A store_rule_t of the Redis store begins with one. */
typedef struct redis_rule_ref {
    _Atomic int refs;     /* the engine's, and each lease entry's */
    _Atomic bool retired; /* the engine let go of it: the rule changed or went */
} redis_rule_ref_t;

/* The engine lets go of r (it is freed when no lease holds it any more). Any thread. */
void redis_rule_ref_retire(redis_rule_ref_t *r);

/* Counters: written by the loop, read by any thread (relaxed). */
typedef struct redis_lease_stats {
    _Atomic uint64_t taken;      /* leases granted (at least one unit) */
    _Atomic uint64_t returned;   /* returns Redis acknowledged */
    _Atomic uint64_t unreturned; /* leases whose unused units never went back */
    _Atomic uint64_t units;      /* units granted */
    _Atomic uint64_t hits;       /* decisions answered from a lease */
    _Atomic uint64_t spent;      /* units those took */
    _Atomic uint64_t asked;      /* decisions and settles asked of the store, leased or not */
} redis_lease_stats_t;

typedef struct redis_leases redis_leases_t;

/* A loop's table over its store rs (which must outlive it). NULL when out of memory. */
redis_leases_t *redis_leases_create(uv_loop_t *loop, redis_store_t *rs);

/* Frees the table, after redis_store_free() of its store has answered everything in flight:
 * units still in hand are counted unreturned. */
void redis_leases_free(redis_leases_t *t);

/* What a leased decision names. */
typedef struct redis_lease_target {
    redis_rule_ref_t *ref; /* the rule's data (held by a lease) */
    const char *name;      /* the rule's name */
    const sl_rule_t *rule; /* the numbers in force */
    const void *key;
    size_t key_len;
    int64_t lease_ns;  /* whole milliseconds */
    int64_t closed_ns; /* as redis_store_decide's */
} redis_lease_target_t;

/* Decides cost units for tg at now_ns (the caller's clock, as redis_store_decide's): from a
 * lease, or through one, or strictly. Calls fn exactly once, at once or later. */
void redis_leases_decide(redis_leases_t *t, const redis_lease_target_t *tg, int64_t cost,
                         int64_t now_ns, redis_decision_fn fn, void *arg);

/* The key's running lease has `cost` units for each of the n targets: takes them all, fills
 * d[0..n) and returns true; else takes nothing and returns false. */
bool redis_leases_take_all(redis_leases_t *t, const redis_lease_target_t *tg, size_t n,
                           int64_t cost, sl_decision_t *d);

/* The key's lease under tg, if any, is dropped without being given back (its key was reset). */
void redis_leases_drop(redis_leases_t *t, const redis_lease_target_t *tg);

/* Gives back every lease (the first call) and returns how many returns and lease requests are
 * still on their way (0: done). From the first call on, decisions are strict. */
unsigned redis_leases_stop(redis_leases_t *t);

const redis_lease_stats_t *redis_leases_stats(const redis_leases_t *t);

/* Counts a decision or settle asked of the loop's store (for Redis commands per decision). */
void redis_leases_asked(redis_leases_t *t);

#endif /* SLUICE_STORE_REDIS_LEASE_H */
