/*
 * redis_store.h - sluiced's Redis request store: per-key state in Redis or Redis Cluster, one
 * round trip per decision, atomic on the server, time from the Redis server (SPEC §4).
 *
 * Two ways to decide, chosen once at start (redis_store_probe):
 *   module  the sluice.so commands (SL.THROTTLE key algorithm limit window_ms ...): the same
 *           core code as sluiced's memory store, compiled into Redis
 *   lua     EVALSHA of the scripts in src/store/lua/ for a Redis that forbids modules; a
 *           NOSCRIPT reply is answered by sending the script itself (EVAL), which also caches
 *           it on that node
 *
 * Keys: "sl:{<key>}:<rule>:<8 hex digits of the rule's parameters>". The client key is the hash
 * tag, so one client's keys under several rules share a cluster slot; the parameter hash means a
 * rule whose numbers change starts fresh instead of reading a state written under others.
 *
 * The over-limit cache is per loop. A reset through this server makes every loop forget its
 * cached denials at once; a reset through another sluiced sharing the Redis is seen here when
 * the cached retry time passes (at most the rule's retry after).
 *
 * Each decision has a deadline (the decision timeout, a few ms by default): a reply that has
 * not come by then is answered as a store error (the rule's on_store_error applies) and the late
 * reply is dropped. Denials are remembered per loop until their retry time, so a key known to be
 * over its limit is answered without a round trip (counted as cache hits).
 *
 * One store per loop thread; nothing here is thread-safe.
 */
#ifndef SLUICE_STORE_REDIS_STORE_H
#define SLUICE_STORE_REDIS_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "sluice/sluice.h"
#include "store/redis_client.h"

#define REDIS_STORE_ERR_MAX 256

typedef enum redis_mode {
    REDIS_MODE_MODULE = 1,
    REDIS_MODE_LUA = 2,
} redis_mode_t;

typedef struct redis_store redis_store_t;

/* Connects once (blocking, at start-up) to the first reachable node of cfg and finds out whether
 * sluice.so is loaded there. Returns 0 with *mode set, or -1 with err (nothing reachable). */
int redis_store_probe(const rc_config_t *cfg, int64_t timeout_ns, redis_mode_t *mode, char *err);

/* One store per loop. reset_epoch is shared by the stores of every loop (a reset through any of
 * them makes every loop forget its cached denials). */
int redis_store_create(uv_loop_t *loop, const rc_config_t *cfg, redis_mode_t mode,
                       int64_t timeout_ns, _Atomic uint64_t *reset_epoch, redis_store_t **out,
                       char *err);

/* Frees the store; decisions still waiting are answered as store errors first. */
void redis_store_free(redis_store_t *s);

/* The answer to a decision: status 0 with *d, or -1 (store error: err says why). */
typedef void (*redis_decision_fn)(void *arg, int status, const sl_decision_t *d, const char *err);

/*
 * Decides cost units for key under the prepared rule (named name, for the Redis key) at the
 * Redis server's time; now_ns (the caller's batch clock) only dates the over-limit cache. Calls fn
 * exactly once: at once for a cache hit or when nothing could be sent, else when the reply or the
 * deadline comes.
 */
void redis_store_decide(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, int64_t cost, int64_t now_ns, redis_decision_fn fn,
                        void *arg);

/* Forgets key under rule (DEL). fn gets status 0 or -1; d is NULL. */
void redis_store_reset(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                       size_t key_len, redis_decision_fn fn, void *arg);

/* Counters: written by the store's loop, readable from any thread (relaxed atomics). */
#define REDIS_ALL_MAX 64 /* most pairs in one SL.ALLOWALL */

/* One pair of an all-or-nothing decision. */
typedef struct redis_pair {
    const char *name;      /* the rule's name */
    const sl_rule_t *rule; /* its prepared parameters (an override's, if any) */
    const void *key;
    size_t key_len;
    bool shadow; /* a refusal of this pair does not block the others */
} redis_pair_t;

/* The answer: status 0 and either the refusing pair (refused >= 0, d[0] its decision, n 1) or
 * every pair charged (refused -1, d[0..n)); status -1 with err when Redis failed. */
typedef void (*redis_all_fn)(void *arg, int status, const sl_decision_t *d, size_t n, long refused,
                             const char *err);

/*
 * SL.ALLOWALL atomically: when the module is loaded and every pair's key is in one cluster slot
 * (always so on one server), one script peeks and charges them all inside Redis. Returns 0 and
 * calls fn once later, or -1 (nothing sent, fn never called) when it cannot: the caller then
 * takes the step-by-step path.
 */
int redis_store_decide_all(redis_store_t *s, const redis_pair_t *pairs, size_t n, int64_t cost,
                           redis_all_fn fn, void *arg);

typedef struct redis_store_stats {
    _Atomic uint64_t decisions;  /* sent to Redis */
    _Atomic uint64_t cache_hits; /* answered from the over-limit cache */
    _Atomic uint64_t timeouts;   /* answered as errors at their deadline */
    _Atomic uint64_t errors;     /* no reply, or an error reply */
    _Atomic uint64_t noscript;   /* EVALSHA answered NOSCRIPT, re-sent as EVAL */
} redis_store_stats_t;

const redis_store_stats_t *redis_store_stats(const redis_store_t *s);
const rc_stats_t *redis_store_client_stats(const redis_store_t *s);

#endif /* SLUICE_STORE_REDIS_STORE_H */
