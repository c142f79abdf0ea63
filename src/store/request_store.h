/*
 * request_store.h - where per-key state lives while sluiced decides: a request store, reached
 * through a small table of functions so that the engine never asks which store it has.
 *
 * Stores (one file each, and one entry each in request_stores.c's list):
 *   memory          sl_table_t per rule in this process (memory_store.c), snapshots to disk
 *   redis://        Redis or Redis Cluster (redis_request.c over redis_store.h): one round trip
 *   redis-cluster://  per decision (per lease for leased rules: redis_lease.h; per sync interval
 *                   for approximate ones: redis_approx.h), the state shared
 *                   by every sluiced using the same Redis
 *
 * Objects:
 *   request_store_t  one per engine, from the --store URL (request_store_open, request_stores.h)
 *   store_loop_t     one per event loop, for stores that do I/O on it (NULL for the others)
 *   store_rule_t     one per rule's numbers: what the store keeps for a rule (the memory store's
 *                    table, its override tables, its cold-start window; Redis's cold-start
 *                    window); NULL for a store that keeps nothing per rule. The engine shares one
 *                    across reloads while the rule's numbers stay the same, and asks for a new
 *                    one (then migrate) when they change.
 *   handle           a (void *) naming an override's numbers for one rule, from ops->override:
 *                    the memory store's override table; NULL when the numbers are enough (Redis)
 *
 * Completion: an answer is returned, or called back after the call has returned, never inside
 * it. decide, decide_all and reset return the answer when they have it within the call (an
 * sl_status with *d / d[] and *at filled: a memory store's every decision, a Redis refusal
 * remembered, a lease's units, a key's approximate count, a request that could not be sent), and
 * fn is then never called; or they return STORE_PENDING, and fn is called exactly once, later,
 * from the loop, after the call has returned (a callback never runs inside the call that took
 * it, as libuv's never do). So a caller need not guard against its callback running while it is
 * still starting the operation. Another operation's callback may run inside a call (a reply
 * that was waiting is read). A store whose `completes_at_once` is true never returns
 * STORE_PENDING: its caller may pass fn NULL and need not prepare anything for a later answer
 * (the memory store decides without allocating). tests/unit/test_store_contract.c holds every
 * store to this.
 *
 * Capabilities are fields of the table, not the store's name: a caller that must know asks the
 * field (completes_at_once, has_snapshots: a store whose keys' usage a restart without a
 * snapshot loses, so that cold_start applies at start-up); an operation a store does not have is
 * NULL (cold_start: a store that cannot tell a new key, so that a closed start hands it a fresh
 * quota).
 *
 * Adding a store: one file defining its request_store_ops_t, and its entry in request_stores.c.
 */
#ifndef SLUICE_STORE_REQUEST_STORE_H
#define SLUICE_STORE_REQUEST_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/topk.h"
#include "sluice/sluice.h"
#include "store/snapshot.h"

#define REQUEST_STORE_ERR_MAX 512
#define STORE_PENDING         1    /* decide, reset, decide_all: fn is called once, later */
#define STORE_ENOTSUP         2    /* decide_all: nothing done; decide pair by pair */
#define STORE_ALL_RETRY       (-2) /* a store_all_fn status: nothing was decided */
#define STORE_ALL_MAX         64   /* most pairs in one decide_all */

typedef struct request_store request_store_t;
typedef struct store_loop store_loop_t;
typedef struct store_rule store_rule_t;
typedef struct store_loader store_loader_t;
typedef struct request_store_ops request_store_ops_t;

/* What every store begins with: its table. */
struct request_store {
    const request_store_ops_t *ops;
};

/* Told something worth a log line (level: 0 info, 1 warning); any loop's thread. */
typedef void (*store_note_fn)(int level, const char *text);

/* What goes wrong, or right again, with a remote store: a request past its deadline, one
 * answered by an error or not at all, a connection lost or not made, made again; a decision
 * answered without the store (past its deadline) that the store admitted later, given back
 * (LATE_REFUND), or whose refund failed (LATE_REFUND_FAILED). */
typedef enum store_event {
    STORE_EVENT_TIMEOUT = 0,
    STORE_EVENT_ERROR = 1,
    STORE_EVENT_DOWN = 2,
    STORE_EVENT_UP = 3,
    STORE_EVENT_LATE_REFUND = 4,
    STORE_EVENT_LATE_REFUND_FAILED = 5,
    STORE_EVENT_UNREPLICATED = 6, /* an admission too few replicas acknowledged: given back */
} store_event_t;

/* Told of each event as it happens, with a line saying where and why, on the loop's thread
 * that saw it: as many as there are (a flood of timeouts is a flood of calls), so the receiver
 * limits what it logs. This is how the store layer reports without knowing who listens (the
 * server counts and logs them, rate-limited). */
typedef void (*store_event_fn)(void *arg, store_event_t ev, const char *text);

typedef struct store_config {
    size_t max_memory;    /* cap of all the store's memory together, bytes; 0 none */
    size_t key_max;       /* the longest key, bytes */
    int64_t timeout_ns;   /* a decision's deadline, for a store that waits for answers */
    store_note_fn note;   /* may be NULL */
    store_event_fn event; /* may be NULL; gets event_arg */
    void *event_arg;
} store_config_t;

/* A request on a rule whose algorithm holds units (concurrency): none, an acquire of `cost`
 * units as one hold, or a release of a hold by its id. */
typedef enum store_hold_op {
    STORE_HOLD_NONE = 0,
    STORE_HOLD_ACQUIRE = 1, /* sl_acquire(): the decision of cost units, and a hold if admitted */
    STORE_HOLD_RELEASE = 2, /* sl_release() of hold_id: SL_OK, or SL_EHOLD (nothing changed) */
} store_hold_op_t;

/* What an operation on a key does: decide `cost` units (0: a peek), or settle a reservation
 * (a refund is a settle of actual 0), or acquire or release a hold. */
typedef struct store_request {
    int64_t cost;            /* a decision's units (an acquire's too) */
    bool settle;             /* a settle instead: the fields below */
    int64_t reserved;        /* units the reservation was admitted for */
    int64_t actual;          /* what it cost */
    int64_t charged_ns;      /* when it was admitted, ns since the Unix epoch; -1: now */
    store_hold_op_t hold_op; /* an acquire or a release instead of a decision (settle false) */
    int64_t hold_ns;         /* acquire: the hold's lifetime, ns; 0: the rule's window */
    uint64_t hold_id;        /* release: the hold's id */
    bool sampled;            /* release: sample holds what the caller reported (LATENCY,
                                DROPPED) for an adaptive limit; false: nothing reported */
    sl_sample_t sample;      /* release, when sampled: latency_ns (< 0: none) and dropped */
    sl_hold_t *hold;         /* acquire, release: where the store writes the hold made or freed
                                (its id, expiry and the expired holds it dropped) before it
                                answers; the caller keeps it alive until then */
    unsigned priority;       /* the request's priority in its rule's list, 0 the lowest (the
                                engine's input: it sets reserve from it) */
    int64_t reserve;         /* a decision or acquire: units it must leave for higher
                                priorities (sl_decide_reserved()); 0: none */
} store_request_t;

/* The (rule, key) an operation names, with the numbers in force for the key. */
typedef struct store_target {
    store_rule_t *rule;       /* the rule's data (may be NULL: a store that keeps none) */
    void *handle;             /* the key's override (ops->override), or NULL: the rule's own */
    const char *name;         /* the rule's name */
    const sl_rule_t *numbers; /* the numbers in force: the override's, else the rule's */
    const void *key;
    size_t key_len;
    bool closed;      /* the rule's cold_start is closed: a key of unknown usage starts saturated */
    int64_t lease_ns; /* mode: leased: a lease's time, ns (a store with `leases` may decide from
                         a lease it holds); 0: strict */
    int64_t sync_ns;  /* mode: approximate: the sync interval, ns (a store with `leases` may
                         decide from the key's count as of its last sync); 0: not approximate */
    int replicas;     /* strict: an admission is answered once this many replicas of the
                         key's store acknowledged it (a store without replicas ignores
                         it); 0: none */
    int64_t replica_wait_ms; /* with replicas: how long the store waits for them, ms */
} store_target_t;

/* One pair of decide_all. */
typedef struct store_pair {
    store_target_t tg;
    int64_t cost;
    bool shadow;     /* a refusal of this pair does not block the others */
    int64_t reserve; /* units it must leave for higher priorities (store_request_t's) */
    bool acquire;    /* an acquire (store_request_t's hold_op): a store that completes at once
                        makes the pair's hold with the whole, or none */
    int64_t hold_ns; /* acquire: the hold's lifetime, ns; 0: the numbers' window */
    sl_hold_t *hold; /* acquire: where the hold made is written (id 0: none), or NULL */
} store_pair_t;

/* A later answer: status 0 with *d, or -1 (a store error: err says why; d may be NULL), or
 * SL_EDEBT for a settle refused by the rule's max_debt (nothing charged; d may be NULL). A store
 * that answers at once returns the same codes (SL_OK, SL_EDEBT, ...). */
typedef void (*store_done_fn)(void *arg, int status, const sl_decision_t *d, const char *err);

/* decide_all's later answer: status 0 and d[0..n): pair `refused` (>= 0) refused, nothing
 * charged, the others' what a peek reports; or every pair charged (refused -1). Status -1 with
 * err, or STORE_ALL_RETRY when nothing was decided after all (decide pair by pair). */
typedef void (*store_all_fn)(void *arg, int status, const sl_decision_t *d, size_t n, long refused,
                             const char *err);

/*
 * Statistics: each store declares the numbers it keeps as a list of rows (ops->stat_list), and
 * fills a loop's values (ops->stats); /metrics and INFO render that list (store_stats.h), so no
 * reader names a store's counter. A row is one Prometheus sample: its family `metric` (with
 * `help`, on the family's first row), the sample's suffix and labels, its kind, and where its
 * value is. INFO shows the same value under a name made from the sample's (store_stats.h).
 */
typedef enum store_stat_kind {
    STORE_STAT_COUNTER = 0, /* a count since start */
    STORE_STAT_GAUGE = 1,   /* a level now */
    STORE_STAT_SUMMARY = 2, /* a Prometheus summary's _sum or _count */
} store_stat_kind_t;

/* How a row's value is made from the values. */
typedef enum store_stat_form {
    STORE_STAT_INT = 0,     /* value[at] */
    STORE_STAT_SECONDS = 1, /* value[at], ns, in seconds */
    STORE_STAT_RATIO = 2,   /* value[at] / value[over] (0 while value[over] is 0) */
    STORE_STAT_NONE = 3,    /* 1 while value[at] is 0, else 0 */
} store_stat_form_t;

#define STORE_STAT_VALUES_MAX 32

typedef struct store_stat {
    const char *metric; /* the family: "sluice_redis_leases_total" */
    const char *help;   /* the family's help, on its first row; NULL on the others */
    const char *suffix; /* the sample's: "" or "_sum", "_count" */
    const char *labels; /* the sample's: "event=\"taken\"", or "" */
    store_stat_kind_t kind;
    store_stat_form_t form;
    unsigned at, over; /* indexes in the values (< STORE_STAT_VALUES_MAX) */
    bool shared;       /* value[at] is the store's, the same in every loop: not summed */
} store_stat_t;

/* A loop's statistics: the store's rows and the loop's values. */
typedef struct store_stats {
    const store_stat_t *list; /* NULL: none (n 0) */
    size_t n;
    uint64_t value[STORE_STAT_VALUES_MAX];
} store_stats_t;

struct request_store_ops {
    const char *name;       /* "memory", "redis" */
    bool completes_at_once; /* decide and reset never return STORE_PENDING */
    bool has_snapshots;     /* save_rule .. load_close are set; a start without one is cold */
    bool leases;            /* targets with a lease_ns may be decided from leases the store
                               holds, and targets with a sync_ns from a count synced every
                               sync_ns (else every mode is strict); `stop` returns leases and
                               sends what was admitted since the last sync */
    const char *url_form;   /* the URLs it takes, for an error naming none; NULL: the default */
    bool holds;             /* decide takes acquires and releases (store_request_t.hold_op) */

    /* Whether url names this store. */
    bool (*accepts)(const char *url);
    /* Opens the store (blocking, at start-up). 0 with *out, or -1 with err. */
    int (*open)(const char *url, const store_config_t *cfg, request_store_t **out, char *err);
    void (*close)(request_store_t *s);

    /* A loop's handle: *slot is set (under a lock stats() takes: other threads read it) to the
     * loop's store, NULL for a store with nothing per loop. Detach clears and frees it. */
    int (*attach)(request_store_t *s, uv_loop_t *loop, store_loop_t **slot, char *err);
    void (*detach)(request_store_t *s, store_loop_t **slot);
    /* The loop is stopping: what it holds for others (leases) is given back, at the first call,
     * while its connections are still up; returns how many of those are still on their way
     * (0: done; the caller may wait for them, bounded). NULL: nothing to give back. */
    unsigned (*stop)(store_loop_t *l);

    /* Per-rule data for these numbers: 0 with *out (NULL when the store keeps none), -1 when out
     * of memory. migrate carries every key of `from` into `to` (the same algorithm, other
     * numbers), converted; NULL: nothing to carry. */
    int (*rule_new)(request_store_t *s, const sl_rule_t *numbers, store_rule_t **out);
    void (*rule_migrate)(store_rule_t *to, store_rule_t *from, int64_t now_ns);
    void (*rule_free)(store_rule_t *r);
    /* The rule's keys as a cold start leaves them: as having used their whole quota at from_ns
     * (sl_state_saturate), for keys first seen before until_ns. renew false keeps a window still
     * in force at from_ns. Applied to keys of targets marked closed. */
    void (*cold_start)(store_rule_t *r, int64_t from_ns, int64_t until_ns, bool renew);
    /* True when the rule holds no key with usage left at now_ns (NULL: always). */
    bool (*rule_idle)(store_rule_t *r, int64_t now_ns);
    /* Whether one key of these numbers fits under cfg.max_memory (NULL: always). */
    bool (*rule_fits)(request_store_t *s, const sl_rule_t *numbers);
    /* Keys, bytes, ... of the rule's data (NULL: all zero). */
    void (*rule_stats)(store_rule_t *r, sl_table_stats_t *out);
    /* Units the live holds of the rule's keys hold at now_ns, over every numbers' table (a walk
     * of the keys: for metrics and the console), and when n > 0 the n keys holding most, in
     * top[0..*got), most first (count: units, error 0; a key in two tables counts twice). NULL:
     * not known here (a remote store). */
    int64_t (*rule_in_flight)(store_rule_t *r, int64_t now_ns, topk_item_t *top, size_t n,
                              size_t *got);

    /* The handle of an override's numbers for rule r (created on first use): 0 with *handle
     * (NULL when the numbers are enough), -1 when out of memory. NULL: no handles. */
    int (*override)(store_rule_t *r, const sl_rule_t *numbers, void **handle);
    /* A key's override is now known to be `handle` (NULL: none): its usage moves there from the
     * rule's other numbers. NULL: nothing moves (one state per key whatever its numbers). */
    void (*adopt)(store_rule_t *r, void *handle, const void *key, size_t key_len, int64_t now_ns);
    /* The rule has no overrides any more: every key goes back to the rule's own numbers. */
    void (*overrides_gone)(store_rule_t *r, int64_t now_ns);

    /* Decides or settles on tg at now_ns: an sl_status with *d (answered within the call: fn
     * unused; a store error is SL_EINVAL), or STORE_PENDING and fn(arg, ...) exactly once,
     * after the call has returned. */
    int (*decide)(request_store_t *s, store_loop_t *l, const store_target_t *tg,
                  const store_request_t *req, int64_t now_ns, sl_decision_t *d, store_done_fn fn,
                  void *arg);
    /* All or nothing over n pairs. completes_at_once: every pair is charged or none, under the
     * tables' locks, shadow pairs not given (the caller decides them after): returns an
     * sl_status with d[] and *at (the refusing pair, or n), or with an error *at the pair at
     * fault (n: every one). Otherwise the same when answered within the call (d[], *at: the
     * refusing pair or n), or STORE_PENDING and fn after the call has returned, or
     * STORE_ENOTSUP (nothing done: one cost for every pair is needed, keys on one slot, ...). */
    int (*decide_all)(request_store_t *s, store_loop_t *l, const store_pair_t *pairs, size_t n,
                      int64_t now_ns, sl_decision_t *d, size_t *at, store_all_fn fn, void *arg);
    /* Forgets the key under tg's rule (every numbers' state for the memory store; for Redis,
     * the key under the rule's algorithm). 0 done (SL_EINVAL: failed), or STORE_PENDING and
     * fn(arg, 0 or -1) after the call has returned. */
    int (*reset)(request_store_t *s, store_loop_t *l, const store_target_t *tg, store_done_fn fn,
                 void *arg);
    /* The loop forgets its cached refusals of tg (NULL: it caches none). */
    void (*forget)(store_loop_t *l, const store_target_t *tg);

    /* Snapshots (has_snapshots). save_rule writes rule r's sections: its own as kind (with its
     * closed window while it lasts at now_ns), then its override tables as 'o'. 0, or -1 with
     * err. Loading: load_open, then per section load_section (kind 'r'/'i': the rule's own
     * numbers, converted when they differ from `from`; 'o': the override table of `from`):
     * 1 taken and converted, 0 taken, -1 skipped; load_entry per key; load_close gives the keys
     * loaded. */
    int (*save_rule)(store_rule_t *r, snapshot_writer_t *wr, char kind, const char *name,
                     int64_t now_ns, size_t *keys, char *err);
    store_loader_t *(*load_open)(int64_t now_ns);
    int (*load_section)(store_loader_t *l, store_rule_t *r, char kind, const sl_rule_t *from);
    void (*load_entry)(store_loader_t *l, const void *key, size_t key_len, const void *state,
                       size_t state_len);
    size_t (*load_close)(store_loader_t *l);

    /* Frees memory when the store is near its --max-memory (the main thread, every poll interval):
     * returns the bytes freed. NULL: nothing to free. */
    size_t (*relieve)(request_store_t *s, int64_t now_ns);
    /* The budget of --max-memory the store's keys count against (NULL: none, or no cap), which
     * the server's other memory held for clients counts against too. NULL: it holds none. */
    sl_budget_t *(*budget)(const request_store_t *s);

    /* "memory", "redis (sluice.so module)", ...: what is deciding now. */
    const char *(*describe)(const request_store_t *s);
    /* Nodes deciding with sluice.so and with the Lua scripts (NULL: none). Any thread. */
    void (*modes)(const request_store_t *s, size_t *module_nodes, size_t *lua_nodes);
    /* The statistics the store keeps (nstat rows; NULL: none), and the loop at *slot's values
     * of them into value[STORE_STAT_VALUES_MAX] (NULL: none). Any thread. */
    const store_stat_t *stat_list;
    size_t nstat;
    void (*stats)(request_store_t *s, store_loop_t *const *slot, uint64_t *value);
};

#endif /* SLUICE_STORE_REQUEST_STORE_H */
