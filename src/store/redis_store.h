/*
 * redis_store.h - sluiced's Redis request store (request_store.h's entry for it is
 * redis_request.c): per-key state in Redis or Redis Cluster, one round trip per decision,
 * atomic on the server, time from the Redis server.
 *
 * Two ways to decide (and settle), chosen per node and found out again on every connection to it:
 *   module  the sluice.so commands (SL.THROTTLE key algorithm limit window_ms ..., SL.SETTLE):
 *           the same core code as sluiced's memory store, compiled into Redis
 *   lua     EVALSHA of the scripts in src/store/lua/ for a Redis that forbids modules; a
 *           NOSCRIPT reply is answered by sending the script itself (EVAL), which also caches
 *           it on that node
 * At start one node is asked (blocking) whether sluice.so is loaded (COMMAND INFO sl.throttle);
 * then each connection made to a node, the first and every reconnect, asks again before
 * anything else is sent on it, and the node's mode follows the answer (logged when it changes).
 * A decision sent as a module command to a node that has lost the module ("unknown command")
 * makes the store ask that node again and re-send the decision in the node's mode, at most
 * twice, instead of failing. The modes are shared by every loop's store (redis_shared_t).
 *
 * Keys: "sl:{<key>}:<rule>:<8 hex digits>", the digits a hash of the rule's algorithm and of the
 * mode, not of its numbers. The client key is the hash tag, so one client's keys under several
 * rules share a cluster slot. A key keeps its name when its numbers change (an override set or
 * removed, a rule's numbers changed): its value records the numbers it was written under, and
 * the module or the script converts it to the numbers a decision names, keeping its usage. A
 * change of algorithm is another name, so those keys start fresh; and the module's states and
 * the scripts' (different bytes) never meet under one name when a node changes mode: its keys
 * start fresh in the new mode. Keys named by an older sluiced (whose digits hashed the numbers
 * too) are not read; they expire by themselves.
 *
 * A closed start (a rule's cold_start: closed, request_store.h): a decision, peek or settle on
 * a key that does not exist in Redis is sent, within one window of a closed start, with that
 * start's time (CLOSED_FROM for the module, closed_from for the scripts), and Redis takes the key
 * as having used its whole capacity then (sl_state_saturate()), atomically with the decision. The
 * closed starts: the rule's own (its algorithm changed: another name, every key absent), and the
 * node's, when the node is found to have lost its data (its run_id, asked with the mode on every
 * connection, changed: it restarted, or failed over behind its address) or to have changed mode
 * (the keys are under other names there). The latest one whose window the decision is in is
 * sent, in whole milliseconds rounded up. Decisions for an open rule never carry one.
 *
 * Each decision has a deadline (the decision timeout, a few ms by default): a reply that has
 * not come by then is answered as a store error (the rule's on_store_error applies) and the late
 * reply is dropped.
 *
 * The over-limit cache (remote/overlimit_cache.h) is per loop: a refusal of cost c is remembered
 * until its retry time (less the rule's max_delay), and a request of cost >= c for that key is
 * answered from it without a round trip (counted as a cache hit); smaller costs and peeks go to
 * Redis. Whatever gives a key room back drops its entry in every loop at once: a reset, a settle
 * that gives units back, or redis_store_forget() through this server (a per-key epoch shared by
 * the loops), a reconnect
 * to Redis (it may have restarted empty: every entry). An entry holds for the numbers it was
 * learnt under only: a request under other numbers (an override, a changed rule) is never
 * answered from it, and drops it. A reset through another sluiced sharing the Redis is seen
 * here when the cached hold ends (at most the rule's retry time).
 *
 * One store per loop thread; nothing here is thread-safe except redis_shared_t's functions.
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

/* What the stores of every loop share: each node's mode, the cache's epochs and hash seed. */
typedef struct redis_shared redis_shared_t;

/*
 * Connects once (blocking, at start-up) to the first reachable node of cfg and finds out whether
 * sluice.so is loaded there: the mode every node starts in until its own connection is asked.
 * Returns 0 with *out (free with redis_shared_free() after every store using it), or -1 with
 * err (nothing reachable, or out of memory).
 */
int redis_shared_create(const rc_config_t *cfg, int64_t timeout_ns, redis_shared_t **out,
                        char *err);

/* NULL is a no-op. */
void redis_shared_free(redis_shared_t *sh);

/* The mode the nodes are in, as far as asked: how many use the module and how many the Lua
 * scripts. Any thread. */
void redis_shared_modes(const redis_shared_t *sh, size_t *module_nodes, size_t *lua_nodes);

/* Sets *slot, a pointer other threads read through redis_shared_visit(), to store (a loop's
 * store, or what holds it; NULL to
 * clear it before freeing the store it held), under the shared lock. */
void redis_shared_set(redis_shared_t *sh, void **slot, void *store);

/* Calls fn(arg, store) under the shared lock when *slot holds a store, which stays whole during
 * the call (see redis_shared_set). Any thread; fn must be quick and must not call back in. */
void redis_shared_visit(redis_shared_t *sh, void *const *slot,
                        void (*fn)(void *arg, const void *store), void *arg);

/* What a probe of a node found (bits of redis_node_news_t). */
typedef enum redis_node_news {
    REDIS_NODE_MODE = 1,   /* it decides in another mode now */
    REDIS_NODE_LOST = 2,   /* it lost its data: another run_id than before */
    REDIS_NODE_CLOSED = 4, /* so a closed start from now: one of the above, on a node known */
} redis_node_news_t;

/* Told when a probe of a node finds news (redis_node_news_t bits): node "host:port" decides in
 * `mode`. Called once per change, on the loop of the store that found it out, with the arg
 * given to redis_store_create(). */
typedef void (*redis_node_fn)(void *arg, const char *node, unsigned news, redis_mode_t mode);

/* What goes wrong, or right again, with Redis: a request past its deadline (TIMEOUT), one
 * answered by an error or by nothing (ERROR), a node's connection lost or not made (DOWN), made
 * again (UP); a decision answered without Redis (past its deadline) that Redis admitted when it
 * ran later, its units given back (LATE_REFUND), or that refund answered by an error or by
 * nothing (LATE_REFUND_FAILED: the key stays charged for a refused request). */
typedef enum redis_event {
    REDIS_EVENT_TIMEOUT = 0,
    REDIS_EVENT_ERROR = 1,
    REDIS_EVENT_DOWN = 2,
    REDIS_EVENT_UP = 3,
    REDIS_EVENT_LATE_REFUND = 4,
    REDIS_EVENT_LATE_REFUND_FAILED = 5,
    REDIS_EVENT_UNREPLICATED = 6, /* an admission fewer replicas acknowledged than its rule
                                     asks (redis_store_decide_acked): a store error, given back */
} redis_event_t;

/* Told of each event, with a line saying which node and why, on the loop of the store that saw
 * it (any loop's thread): each timeout and error of a request, each change of a connection. The
 * receiver limits what it logs. */
typedef void (*redis_event_fn)(void *arg, redis_event_t ev, const char *text);

/* Sets who is told of events (NULL: nobody); before the first store is created. */
void redis_shared_on_event(redis_shared_t *sh, redis_event_fn fn, void *arg);

/* One store per loop, all of an engine's over one shared (which must outlive them); on_node may
 * be NULL (else it gets on_node_arg). */
int redis_store_create(uv_loop_t *loop, const rc_config_t *cfg, redis_shared_t *shared,
                       int64_t timeout_ns, redis_node_fn on_node, void *on_node_arg,
                       redis_store_t **out, char *err);

/* Frees the store; decisions still waiting are answered as store errors first. */
void redis_store_free(redis_store_t *s);

/* The answer to a decision: status 0 with *d, or -1 (store error: err says why), or for a
 * settle SL_EDEBT: refused by the rule's max_debt, nothing charged (d NULL, err the reply). */
typedef void (*redis_decision_fn)(void *arg, int status, const sl_decision_t *d, const char *err);

/*
 * No answer is called back inside the call that asked for it (request_store.h's contract): the
 * store's seam (redis_request.c) marks the call it is making with redis_store_enter(), and while
 * it is marked, an answer to that call's (fn, arg) found inside it (a cache hit, a lease's
 * units, a key's count, a request that could not be sent) is kept in the mark, which the seam
 * returns as the call's result. Every answer of the Redis store goes through
 * redis_store_answer(). Marks nest (a callback that runs inside a call may start another).
 */
typedef struct redis_inside {
    redis_decision_fn fn; /* the call's answer */
    void *arg;
    sl_decision_t *d; /* where its decision goes (may be NULL: a reset) */
    int status;       /* what fn would have been given */
    bool answered;
} redis_inside_t;

/* Marks in as the call under way on s; returns the mark it replaces, for redis_store_leave(). */
redis_inside_t *redis_store_enter(redis_store_t *s, redis_inside_t *in);
/* Ends the call marked on s: the mark before it is back. */
void redis_store_leave(redis_store_t *s, redis_inside_t *before);
/* Answers (fn, arg): kept in s's mark when it is the call under way, else fn(arg, ...) now. */
void redis_store_answer(redis_store_t *s, redis_decision_fn fn, void *arg, int status,
                        const sl_decision_t *d, const char *err);

/*
 * Decides cost units for key under the prepared rule (named name, for the Redis key) at the
 * Redis server's time; now_ns (the caller's batch clock) dates the over-limit cache and says
 * which closed starts are in their window. closed_ns is the rule's: -1 for an open rule (no
 * closed start at all), else its own closed start's time (ns since the Unix epoch; 0: none), to
 * which the node's is added (see above). Calls fn exactly once (through redis_store_answer):
 * at once for a cache hit or when nothing could be sent, else when the reply or the deadline
 * comes.
 */
void redis_store_decide(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, int64_t cost, int64_t closed_ns, int64_t now_ns,
                        redis_decision_fn fn, void *arg);

/* What an admission waits for before it is answered: replicas (0: none) acknowledging it within
 * wait_ms. */
typedef struct redis_acks {
    int replicas;
    int64_t wait_ms;
} redis_acks_t;

/*
 * redis_store_decide, and an admission is answered only once acks->replicas replicas of the
 * key's node hold it: `WAIT replicas wait_ms` is sent right after the decision on the same
 * connection (WAIT counts the replicas that acknowledged every write the connection made before
 * it), and its reply read after the decision's. Fewer replicas (or no reply to the WAIT) is a
 * store error (-1, "redis: ... replicas ..."), and the admission is given back (a settle of its
 * cost to 0, as for one answered past its deadline). A refusal, or a decision redirected to
 * another node (whose WAIT then came first), waits for a WAIT sent on its reply. acks NULL or
 * replicas 0: redis_store_decide. The wait holds the connection: every later command of this loop
 * to that node waits behind it (up to wait_ms).
 */
void redis_store_decide_acked(redis_store_t *s, const char *name, const sl_rule_t *rule,
                              const void *key, size_t key_len, int64_t cost, int64_t reserve,
                              int64_t closed_ns, int64_t now_ns, const redis_acks_t *acks,
                              redis_decision_fn fn, void *arg);

/*
 * Settles a reservation of `reserved` units that a decision on key under rule admitted, now that
 * it cost `actual` (both >= 0): sl_settle() on the key's state in Redis, atomically, at the Redis
 * server's time. actual < reserved gives the difference back (a refund is actual 0: what an
 * all-or-nothing decision that failed half-way sends for the pairs it charged), actual >
 * reserved charges the difference even past the limit (the key is in debt, refusing everything
 * until time pays it back), equal changes nothing. charged_ns is when the reservation was
 * admitted on the Redis server's clock, ns since the Unix epoch, or -1 for "when Redis runs the
 * settle": right for a refund sent at once, while a later settle without the time may take the
 * units back from where a later admission put them (docs/module.md). The module is told the
 * millisecond (SL.SETTLE ... AT charged_ns / 1 ms, which looks for the charge as of that
 * millisecond's end), the scripts the microsecond. now_ns (the caller's clock) dates the cache;
 * closed_ns is redis_store_decide's (a settle on a key that does not exist, in a closed start's
 * window, settles on the whole capacity taken then).
 *
 * Calls fn exactly once, at once when nothing could be sent (a bad argument, a key too long, a
 * rule the node's mode cannot take: the same errors as redis_store_decide), else with Redis's
 * answer or at the deadline: status 0 and *d, the key's decision after the settle (a peek:
 * allowed false while it is in debt), or -1 and err. Nothing is answered from the over-limit
 * cache, and when it gives room back (actual < reserved) every loop's cached refusal of the key
 * is dropped, when sent and again when Redis has done it, as redis_store_reset() does. A node
 * whose sluice.so has no SL.SETTLE (an older one) answers "unknown command": a store error,
 * after asking the node its mode again (at most twice).
 */
void redis_store_settle(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, int64_t reserved, int64_t actual, int64_t charged_ns,
                        int64_t closed_ns, int64_t now_ns, redis_decision_fn fn, void *arg);

/* Forgets key under rule (DEL of its state in either mode, whatever numbers it was written
 * under: only the algorithm names it; every loop's cached refusal of it is dropped). fn gets
 * status 0 or -1; d is NULL. */
void redis_store_reset(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                       size_t key_len, redis_decision_fn fn, void *arg);

/*
 * Drops every loop's cached refusal of key under rule (under any numbers of its algorithm), and
 * keeps a refusal already on its way from being remembered. Call it whenever Redis gives the key
 * room back other than by a reset (a refund): once Redis has acknowledged it (calling it also
 * before sending is harmless). Nothing is sent.
 */
void redis_store_forget(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len);

/* Where a lease was granted: the node, and how many times it had lost its data or changed mode
 * then. A lease is given back only to that node in that generation: to a node that lost its
 * data since, the units would be room its new state never recorded. */
typedef struct redis_lease_node {
    const void *node;    /* the shared node (identity only) */
    uint64_t generation; /* its generation then */
} redis_lease_node_t;

/*
 * Leases up to `want` units of key under rule for lease_ns (whole milliseconds: the module's
 * unit): SL.LEASE with the module, the script's lease otherwise, with the closed start as
 * redis_store_decide sends it. Calls fn exactly once (as redis_store_decide): status 0 with *d
 * a peek after the grant (allowed when units were granted), *lease the grant on Redis's clock
 * (ns since the Unix epoch) and *node where it was granted; or -1 and err. lease and node must
 * stay valid until fn is called. Never answered from the over-limit cache.
 */
void redis_store_lease(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                       size_t key_len, int64_t want, int64_t lease_ns, int64_t closed_ns,
                       int64_t now_ns, sl_lease_t *lease, redis_lease_node_t *node,
                       redis_decision_fn fn, void *arg);

/*
 * Gives back `unused` units of lease (granted by redis_store_lease on node) under the numbers
 * it was granted under: SL.RETURN, or the script's return. fn gets status 0 with the key's peek
 * afterwards, or -1 and err: the node is another one, or lost its data or changed mode since
 * (nothing is sent), or Redis failed. The key's cached refusals are dropped in every loop.
 */
void redis_store_return(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, const sl_lease_t *lease, int64_t unused,
                        const redis_lease_node_t *node, redis_decision_fn fn, void *arg);

/* An acquire or a release of a hold on a key of a rule whose algorithm holds units. */
typedef struct redis_hold_req {
    bool release;      /* a release of id; else an acquire of cost units for hold_ns */
    int64_t cost;      /* acquire: units (0: what a peek reports, no hold) */
    int64_t hold_ns;   /* acquire: the hold's time, ns; 0: the rule's window */
    uint64_t id;       /* release: the hold's id */
    sl_hold_t *hold;   /* the hold made (its id; 0 when none) or freed goes there; may be NULL;
                          valid until fn is called */
    int64_t closed_ns; /* the rule's closed start, as redis_store_decide's */
    int64_t reserve;   /* an acquire: units it must leave for higher priorities; 0 none */
    bool sampled;      /* release: sample is what the caller reported, for an adaptive limit */
    sl_sample_t sample;
} redis_hold_req_t;

/*
 * SL.ACQUIRE or SL.RELEASE (the module), or the script's acquire or release, on key under rule:
 * the core's sl_acquire() and sl_release() on the key's state in Redis, atomically, at the Redis
 * server's time. Calls fn exactly once (as redis_store_decide): status 0 and *d (an acquire's
 * decision, with the hold's id in *req->hold; a release's d admits, with the rule's limit),
 * SL_EHOLD (a release of a hold the key does not hold: nothing changed, not a store error),
 * SL_EHOLDTIME (a hold time outside [1 ms, the rule's window], at once: nothing sent), or -1 and
 * err. Never answered from the over-limit cache; a release drops the key's cached refusals in
 * every loop. An acquire answered past its deadline keeps its hold until the hold expires.
 */
void redis_store_hold(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                      size_t key_len, const redis_hold_req_t *req, int64_t now_ns,
                      redis_decision_fn fn, void *arg);

#define REDIS_ALL_MAX 64 /* most pairs in one SL.ALLOWALL */

/* One pair of an all-or-nothing decision. */
typedef struct redis_pair {
    const char *name;      /* the rule's name */
    const sl_rule_t *rule; /* its prepared parameters (an override's, if any) */
    const void *key;
    size_t key_len;
    bool shadow;       /* a refusal of this pair does not block the others */
    int64_t closed_ns; /* the rule's closed start, as redis_store_decide's */
} redis_pair_t;

#define REDIS_ALL_RETRY (-2) /* a redis_all_fn status: nothing was decided, decide step by step */

/* The answer: status 0 and a decision per pair, d[0..n): either pair `refused` (>= 0) refused,
 * nothing charged, and d[refused] its refusal, the others' what a peek reports; or every pair
 * charged (refused -1). Status -1 with err when Redis failed. */
typedef void (*redis_all_fn)(void *arg, int status, const sl_decision_t *d, size_t n, long refused,
                             const char *err);

/*
 * SL.ALLOWALL atomically: when the module is loaded and every pair's key is in one cluster slot
 * (always so on one server), one script peeks and charges them all inside Redis (each with its
 * closed start in force at now_ns, as redis_store_decide sends it). Returns 0 and
 * calls fn once later, or -1 (nothing sent, fn never called) when it cannot: the caller then
 * takes the step-by-step path. fn's status is 0 (decisions), -1 with err (a store error), or
 * REDIS_ALL_RETRY when the node turned out to have lost the module before anything was
 * written: the caller then takes the step-by-step path too.
 */
int redis_store_decide_all(redis_store_t *s, const redis_pair_t *pairs, size_t n, int64_t cost,
                           int64_t now_ns, redis_all_fn fn, void *arg);

/* Counters: written by the store's loop, readable from any thread (relaxed atomics). */
typedef struct redis_store_stats {
    _Atomic uint64_t decisions;     /* sent to Redis */
    _Atomic uint64_t cache_hits;    /* answered from the over-limit cache */
    _Atomic uint64_t timeouts;      /* answered as errors at their deadline */
    _Atomic uint64_t errors;        /* no reply, or an error reply */
    _Atomic uint64_t noscript;      /* EVALSHA answered NOSCRIPT, re-sent as EVAL */
    _Atomic uint64_t late_refunds;  /* admissions Redis made after their deadline, given back */
    _Atomic uint64_t replica_waits; /* WAITs sent after a decision (redis_store_decide_acked) */
    _Atomic uint64_t unreplicated;  /* admissions too few replicas acknowledged, given back */
} redis_store_stats_t;

/* The store's counters, and its connections' (redirects, refreshes, reconnects). */
const redis_store_stats_t *redis_store_stats(const redis_store_t *s);
const rc_stats_t *redis_store_client_stats(const redis_store_t *s);

#endif /* SLUICE_STORE_REDIS_STORE_H */
