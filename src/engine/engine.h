/*
 * engine.h - sluiced's decision engine: the rules in force, their per-key tables, overrides,
 * and the decisions every front end (RESP, HTTP) asks for.
 *
 * Rules live in the config store (rules/config_store.h). The engine holds the current rule set,
 * an immutable snapshot of the store's rules at one version. A reload (the retriever's poll, or
 * a rule change made through this server) builds a new set and publishes it with one atomic
 * store; readers never see half of a set. A rule whose parameters did not change keeps its
 * tables (and so its keys' usage) across reloads.
 *
 * Threads. Each event loop is a worker (engine_worker_t, owned by that loop's thread). A worker
 * picks up the newest set at the start of each batch (engine_worker_begin) and holds it until
 * the next: a hazard pointer, so a retired set is freed only when no worker still uses it.
 * Everything else in a worker (its override cache, its config store handle, its counters) is
 * private to its thread.
 *
 * Overrides are resolved lazily: per worker, a direct-mapped cache of (rule, key) -> override or
 * "none", each entry valid for override_ttl and only while the rule set it was read under is
 * current. Rules the store holds no overrides for are never looked up. A lookup the store fails,
 * or does not answer within override_timeout, is answered by the last known override of the key
 * (overrides.c), so a block once known holds through an outage.
 */
#ifndef SLUICE_ENGINE_ENGINE_H
#define SLUICE_ENGINE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "sluice/sluice.h"
#include "proto/netaddr.h"
#include "proto/rls.h"
#include "rules/config_store.h"
#include "rules/ruledef.h"
#include "engine/config_thread.h"
#include "engine/watch.h"
#include "store/request_store.h"

#define ENGINE_WORKERS_MAX 256
#define ENGINE_INLINE_MAX  1024 /* default most distinct inline (SL.THROTTLE) rules */
#define ENGINE_ERR_MAX     512
#define ENGINE_TABLE_MIN_BYTES                                                                     \
    (64 * 1024) /* the least max_memory (rules' empty tables take some) */

/* Per worker, per rule counters (one cache line each, written by one thread). */
typedef struct rule_counters {
    _Atomic uint64_t allowed;
    _Atomic uint64_t denied;
    _Atomic uint64_t shadow_denied; /* denied by the rule, allowed because it is in shadow mode */
    _Atomic uint64_t store_errors;  /* table full, out of memory, override lookup failed */
    _Atomic uint64_t holds_expired; /* holds found expired (never released) and dropped */
    _Atomic uint64_t releases_refused; /* releases of no live hold (SL_EHOLD) */
    char pad[16];
} rule_counters_t;

/* A rule's request-store data (its tables, for the memory store) and counters: shared by the
 * rule states of successive rule sets while the rule's parameters stay the same (ruleset.c). */
typedef struct rule_tables rule_tables_t;

/* One rule as one rule set knows it. Immutable once published. */
typedef struct rule_state {
    ruledef_t def;      /* no inline overrides: they are in the store */
    bool inline_rule;   /* made by SL.THROTTLE / CL.THROTTLE, not named */
    bool has_overrides; /* the store held overrides for it when the set was built */
    uint64_t name_hash; /* of def.name: its keys' overrides are cached by name and key */
    int64_t lease_ns;   /* mode: leased: its leases' time (ruledef_lease_ns), ns; 0 strict */
    int64_t sync_ns;    /* mode: approximate: its sync interval (ruledef_sync_ns), ns; 0 else */
    int64_t replica_wait_ms; /* replicas: how long a write waits for them (ruledef_replica_wait_ns),
                                ms; computed once here, not on every decision */
    rule_tables_t *t;
    _Atomic int refs;              /* sets holding it, and decisions waiting on a remote store */
    _Atomic int64_t last_used_ns;  /* inline rules: the last decision, to within a second */
    struct rule_state *limbo_next; /* inline rules taken out of force (inline_rules.c) */
    bool own_series;               /* inline rules: /metrics shows it under its own name (else
                                      in the "inline:other" series), for its whole life */
    struct engine *engine;         /* inline rules: whose series count it takes or adds to */
    netaddr_t maker;               /* inline rules: the client address (an IPv6 one's /64) whose
                                      connection made it; family 0: none (a snapshot's) */
} rule_state_t;

typedef struct ruleset {
    int64_t version;     /* the config store's version it was built from */
    uint64_t generation; /* unique per published set (a forced reload keeps the version) */
    size_t n;
    rule_state_t **rules;            /* sorted by name */
    struct descriptors *descriptors; /* what Envoy's descriptors are decided by (descriptors.h) */
    struct ruleset *retired_next;
} ruleset_t;

typedef struct engine_settings {
    const char *store_url;
    unsigned workers;
    size_t key_max;
    size_t max_memory; /* cap of all keys of all rules, bytes; 0 none, else >=
                          ENGINE_TABLE_MIN_BYTES */
    int64_t override_ttl_ns;
    int64_t override_timeout_ns; /* longest an override lookup the store does not answer holds
                                    a decision, ns; 0: as long as the store takes */
    const char *request_store;   /* "memory" (NULL too), "redis://h:p", "redis-cluster://h:p,..." */
    int64_t store_timeout_ns;    /* a decision's deadline with a remote request store */
    size_t max_inline;           /* most inline rules at once; 0 = ENGINE_INLINE_MAX */
    size_t max_inline_address;   /* most inline rules the connections of one client address may
                                    have made, of those in force; 0 = max_inline / 4 */
    size_t metrics_inline;       /* inline rules with series of their own at once */
} engine_settings_t;

typedef struct engine engine_t;

/* The result of one check, with everything a front end reports. */
typedef struct engine_decision {
    sl_decision_t d;
    bool shadowed;                   /* denied by the rule but allowed: shadow mode */
    int64_t shadowed_retry_after_ns; /* shadowed: the refusal's retry_after as the store gave it */
    bool store_error;                /* decided by on_store_error */
    bool never;        /* the cost exceeds what the rule can ever admit for this key */
    bool blocked;      /* the key's override blocks it (limit 0) */
    bool peek;         /* a cost of 0 (a peek, or a settle): the console's rates and top keys
                          leave it out, as it decides nothing */
    bool debt_refused; /* a settle refused: it would have left the key owing more than the
                          rule's max_debt; nothing was charged (the reply is an error) */
    const rule_state_t *rule;
    int64_t window_ns; /* the window in force for this key (an override's, if any) */
    int64_t max_debt;  /* the max_debt in force for this key (an override's, if any), units */
    int64_t cost;      /* engine_allowall, a check never admissible: its cost, summed over the
                          checks naming its (rule, key) */
    sl_hold_t hold;    /* an acquire: the hold made (id 0: none, refused or shadowed); a
                          release: the hold freed */
    int64_t reserve;   /* the units the request had to leave for higher priorities (0: none) */
    int hold_status;   /* an acquire or a release the key's numbers refused as a request error:
                          SL_EHOLD (no such live hold: nothing changed), SL_EHOLDTIME, SL_ENOHOLDS;
                          SL_OK otherwise */
} engine_decision_t;

enum engine_status {
    ENGINE_OK = 0,
    ENGINE_ENORULE = -1,   /* unknown rule */
    ENGINE_ECOST = -2,     /* cost is negative */
    ENGINE_EKEY = -3,      /* key longer than the limit */
    ENGINE_EINLINE = -4,   /* too many distinct inline rules */
    ENGINE_ERULE = -5,     /* invalid inline rule parameters (err says which) */
    ENGINE_ESTORE = -6,    /* the request store failed (a reset that could not be done) */
    ENGINE_ENOTSUP = -7,   /* not possible this way (the caller has another) */
    ENGINE_ENOHOLDS = -8,  /* an acquire or release on a rule whose algorithm holds nothing */
    ENGINE_EHOLDTIME = -9, /* engine_allowall's acquire: a timeout past its rule's hold_timeout */
    ENGINE_PENDING = 1,    /* engine_decide_start: the answer comes later */
};

typedef struct engine_worker engine_worker_t;

/* Creates the engine and its config store; loads the rules. Returns 0 or -1 with err. */
int engine_create(const engine_settings_t *cfg, engine_t **out, char *err);
void engine_free(engine_t *e);

/* The engine's own store handle: for the main thread (imports, reloads) before engine_start;
 * afterwards it belongs to the config thread. */
config_store_t *engine_store(engine_t *e);

/*
 * Starts the config thread (config_thread.h): from now on every use of the config store runs
 * there, including a poll of its version every poll_interval_ns (a new version is put in force),
 * and, for a store that pushes its changes (PostgreSQL), a poll as soon as it tells of one.
 * Call after the first rules are loaded and before the loops start. Returns 0 or -1 with err.
 */
int engine_start(engine_t *e, int64_t poll_interval_ns, char *err);

/* Stops the store's push, then the config thread, after every loop has stopped (engine_free
 * does it too). */
void engine_stop(engine_t *e);

/* Whether the config store can be reached (a PostgreSQL the push finds answering; a SQLite file
 * still the one opened). Any thread. Each change is logged once. */
bool engine_store_up(engine_t *e);

/* Whether changes can be written to the config store (it can be reached and, SQLite, its file
 * is writable: config_store_writable), as of the last poll. Any thread. Each change is logged
 * once. */
bool engine_store_writable(engine_t *e);

/* Config store failures seen by the engine: polls and reloads that failed, a store file that was
 * deleted or replaced, a store found not writable. */
uint64_t engine_store_errors(engine_t *e);

/*
 * Runs job on the config thread, then job->done on this worker's loop (admin commands: their
 * reply is written in done). Without a config thread both run at once, here, with the worker's
 * own store handle (NULL if it cannot be opened: run must then report the error).
 */
void engine_submit(engine_worker_t *w, config_job_t *job);

/* The same for the main thread: done runs on the config thread (or at once without one). */
void engine_submit_main(engine_t *e, config_job_t *job);

/* Rebuilds the rule set from the store if its version changed (force: always). Thread-safe;
 * serialized; store must be the caller's to use (the config thread's, once it runs). Returns 1
 * if a new set was published, 0 if not, -1 with err (the set in force stays; counted in
 * engine_store_errors). */
int engine_reload(engine_t *e, config_store_t *store, bool force, char *err);

/* The current version and rule count (any thread). */
int64_t engine_version(engine_t *e);
uint64_t engine_reloads(engine_t *e);

/* Frees rule sets no worker holds any more. Call now and then (the main loop's timer). */
void engine_collect(engine_t *e);

/* A worker for thread index `index` (< cfg.workers). Owned by that thread. */
engine_worker_t *engine_worker(engine_t *e, unsigned index);

/* Picks up the newest rule set; call at the start of a batch. Returns it. */
const ruleset_t *engine_worker_begin(engine_worker_t *w);

/* Whether decisions on this worker wait for an override lookup to be free (OV_WAITS_MAX in
 * flight): the loop should read no more from the connections that add to them (back-pressure)
 * until engine_worker_when_ready's callback. */
bool engine_worker_saturated(const engine_worker_t *w);

/* fn(arg) once, later on this worker's loop, when no decision waits for a free override lookup
 * any more (one callback per worker: a second call replaces the first). */
void engine_worker_when_ready(engine_worker_t *w, void (*fn)(void *arg), void *arg);

/* Drops the worker's hold on any rule set (a loop that is shutting down). */
void engine_worker_end(engine_worker_t *w);

/* The worker's current set (NULL before its first engine_worker_begin). */
const ruleset_t *engine_worker_set(const engine_worker_t *w);

/* Finds a named rule in the worker's current set. */
rule_state_t *engine_find(engine_worker_t *w, const char *name, size_t len);

/* The rule in force for a descriptor of Envoy's rate limit service (descriptors.h), or NULL;
 * *domain_known tells whether any rule stands for a descriptor of the domain. counted (room for
 * n, or NULL) as descriptors_match's: valid until the worker's next engine_worker_begin. */
rule_state_t *engine_descriptor(engine_worker_t *w, const char *domain, size_t domain_len,
                                const rls_entry_t *entries, size_t n, bool *domain_known,
                                const char **counted);

/*
 * Decides cost units for key under rule at now_ns (cost 0: peek) at once, reading a key's
 * override from the store on this thread if it must: for callers without an event loop (tests,
 * tools). Applies the key's override, shadow mode, cold start, and on_store_error (also the
 * answer of a request store that cannot decide at once). Returns ENGINE_OK with *out filled, or
 * ENGINE_ECOST / ENGINE_EKEY.
 */
int engine_decide(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len,
                  int64_t cost, int64_t now_ns, engine_decision_t *out);

/* Forgets key's usage under rule (and under its override table, if any) with a request store
 * that completes at once; ENGINE_ESTORE with one that does not (engine_reset_async's). */
int engine_reset(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len);

/* What one connection may still make of inline rules: a count of its own, and its client
 * address, whose connections together may have made at most cfg.max_inline_address of the
 * rules in force. */
typedef struct engine_inline_budget {
    unsigned left;  /* inline rules this connection may still create */
    netaddr_t addr; /* its client's address (family 0: unknown, not capped by address) */
} engine_inline_budget_t;

/*
 * The inline rule for these parameters, created on first use (inline_rules.c). budget (may be
 * NULL: no limit) is what the caller's connection may still create; a creation takes one.
 * now_ns marks the rule used. Returns ENGINE_OK and *out (valid until the worker's next
 * engine_worker_begin; hold it to keep it longer), ENGINE_ERULE (err says which parameter) or
 * ENGINE_EINLINE (too many inline rules, or this connection's or this address's share is spent;
 * err says which, naming the setting; counted and logged at a limited rate).
 */
int engine_inline_rule(engine_worker_t *w, const sl_rule_t *params, engine_inline_budget_t *budget,
                       int64_t now_ns, rule_state_t **out, char *err);

#define ENGINE_LABEL_MAX 160 /* a rule's label, bytes, NUL included (THROTTLE_LABEL_MAX) */

/* How errors name a rule: "rule 'api'" for a named one, "the inline rule gcra 5 1000 BURST 3" for
 * an inline one, as its command writes it (throttle_rule_label), never its internal name. */
void engine_rule_label(const rule_state_t *rs, char label[ENGINE_LABEL_MAX]);

/* A new connection's budget: 1/8 of the most inline rules (at least 16), its address unknown. */
engine_inline_budget_t engine_inline_budget(const engine_t *e);

/* Sets the client address of budget (an IPv6 address counts by its /64, as one client holds a
 * whole /64). */
void engine_inline_budget_address(engine_inline_budget_t *budget, const netaddr_t *peer);

/* Takes out of force the inline rules unused for a while whose keys are all fresh (nothing is
 * lost). The config thread calls it at every poll. Returns how many it took out. */
size_t engine_inline_sweep(engine_t *e, int64_t now_ns);

/* Inline rules in force. */
size_t engine_inline_count(engine_t *e);

/* Counts a worker's decisions for metrics (done by engine_decide). */
const rule_counters_t *engine_counters(const rule_state_t *rule, unsigned worker);

/* The counters of rule summed over the workers. */
/* A rule's holds (a rule whose algorithm holds units): units in flight at now_ns (-1: the store
 * cannot tell), holds dropped at their expiry, releases refused. */
typedef struct engine_holds {
    int64_t in_flight;
    uint64_t expired, releases_refused;
    int64_t limit_now; /* an adaptive rule: the limit of its latest hold decision; 0 none yet */
} engine_holds_t;
void engine_rule_holds(const rule_state_t *rule, int64_t now_ns, engine_holds_t *out);

/* The units rule's live holds hold at now_ns (-1: the store cannot tell) and the n keys holding
 * most, in top[0..*got) (most first; count is the key's units). A walk of the rule's keys. */
int64_t engine_rule_holders(const rule_state_t *rule, int64_t now_ns, topk_item_t *top, size_t n,
                            size_t *got);

void engine_counters_sum(const rule_state_t *rule, uint64_t *allowed, uint64_t *denied,
                         uint64_t *shadow_denied, uint64_t *store_errors);

/* What the inline rules shown in "inline:other" counted and hold: the rules in force, those
 * waiting to be freed, and those freed (so the sums never go down). Any thread. */
typedef struct engine_inline_other {
    uint64_t allowed, denied, shadow_denied, store_errors;
    size_t keys, bytes;
} engine_inline_other_t;
void engine_inline_other(engine_t *e, engine_inline_other_t *out);

/* Calls fn for every rule state in the current set and every inline rule, under the reload lock
 * (snapshots, metrics). */
typedef void (*engine_rule_fn)(void *arg, rule_state_t *rule);
void engine_foreach_rule(engine_t *e, engine_rule_fn fn, void *arg);

unsigned engine_workers(engine_t *e);

/* The longest key accepted, bytes. */
size_t engine_key_max(const engine_t *e);

/* Whether one key of a rule with these parameters can fit under --max-memory (always with no cap
 * or the Redis store). false with the reason in err (cap bytes): such a rule is refused when it is
 * set or imported, since it could never limit anyone. */
bool engine_rule_fits(const engine_t *e, const sl_rule_t *rule, char *err, size_t cap);

/* engine_rule_fits as a rules_check_fn (rules_import.h): arg is the engine. */
bool engine_rule_check(void *arg, const sl_rule_t *rule, char *err, size_t cap);

/* What the console shows of a named rule (watch.h), read from any thread while rule is held:
 * its heaviest keys of the last minute, by decisions or by denials (watch_top's result; -1 for
 * an inline rule, which is not watched, or when out of memory), and its decisions per second
 * (watch_rates; false, and nothing written, for an inline rule). */
long engine_top(const rule_state_t *rule, bool denied, int64_t now_ns, size_t n, topk_item_t *out,
                uint64_t *total);
bool engine_rates(const rule_state_t *rule, int64_t end_s, size_t n, uint64_t *allowed,
                  uint64_t *denied, uint64_t *shadow_denied);

/* Table statistics of a rule, summed over its base and override tables. */
void engine_rule_stats(rule_state_t *rule, sl_table_stats_t *out);

/* Snapshots: writes every table / loads a snapshot into the tables. Return 0 or -1 with err.
 * engine_load_snapshot sets cold-start windows when no usable snapshot exists.
 * engine_save_snapshot may run on any thread while the loops decide: it holds no lock a
 * decision or a reload waits on while it writes (each table is copied shard by shard, the list
 * of override tables under ov_lock). One at a time per path: two would share path.tmp. */
int engine_save_snapshot(engine_t *e, const char *path, int64_t now_ns, size_t *keys, char *err);
int engine_load_snapshot(engine_t *e, const char *path, int64_t now_ns, size_t *keys, char *err);

/* ---- request stores ------------------------------------------------------------------------
 *
 * Per-key state lives in the request store `request_store` names (store/request_store.h): the
 * memory store decides at once; with a Redis URL, decisions complete asynchronously, on the
 * worker's loop. The *_async calls work with either store: with one that decides at once they
 * call fn before returning. */

/* Whether decisions wait for a remote store (they do not complete at once). */
bool engine_is_remote(const engine_t *e);
const char *engine_store_name(const engine_t *e); /* "memory", "redis (sluice.so module)", ... */

/* Near --max-memory, frees idle keys across every rule (the memory store; sluiced's main thread
 * calls it once a poll interval, never the config thread, whose override lookups must not wait
 * for it): returns the bytes freed, counted and logged. A key decided on since the last call is
 * not idle. Any thread, one at a time. */
size_t engine_relieve(engine_t *e, int64_t now_ns);

/* The budget of --max-memory that the request store's keys count against, and whatever else the
 * server holds for clients should (a replay's table): NULL when there is none. */
sl_budget_t *engine_budget(const engine_t *e);

/* The config store now holds json as (rule, key)'s override (NULL: none any more), written by
 * this server (SL.OVERRIDE, /v1/rules/.../overrides): remembered as a lookup's answer would be,
 * so that a block set here holds through an outage that begins before any lookup of the key.
 * Any thread. */
void engine_override_written(engine_t *e, const char *rule, const void *key, size_t key_len,
                             const char *json);

/* Bytes the request store holds under --max-memory (every rule's tables, the memory store) and
 * the cap; 0 and 0 for a store that holds none. Any thread. */
void engine_memory(const engine_t *e, size_t *used, size_t *max);

/* With the Redis store: how many nodes decide with the sluice.so module and how many with the
 * Lua scripts, as last found out (each connection to a node asks); 0 and 0 with a store without
 * nodes. Any thread. */
void engine_store_modes(const engine_t *e, size_t *module_nodes, size_t *lua_nodes);

/* Gives the worker its loop (a remote request store's connections live on it). Call on the worker's
 * thread before its first decision; engine_worker_detach when the loop stops. */
int engine_worker_attach(engine_worker_t *w, uv_loop_t *loop, char *err);
void engine_worker_detach(engine_worker_t *w);
/* The worker's loop is stopping: what its request store holds for others (leased rules' leases)
 * is given back, at the first call. Returns how many of those are still on their way: wait
 * (bounded) for 0 before engine_worker_detach. */
unsigned engine_worker_stop(engine_worker_t *w);

typedef void (*engine_decision_fn)(void *arg, int status, const engine_decision_t *d);
typedef void (*engine_done_fn)(void *arg, int status);

/* What an operation on a key does: decide `cost` units (0: a peek), or settle a reservation. */
typedef store_request_t engine_request_t;

/*
 * Starts a decision with either store. Returns ENGINE_OK with *out filled when it could be
 * decided at once (the memory store, an override already cached, a Redis over-limit cache hit,
 * a failure), ENGINE_PENDING when the answer comes later (it waits for Redis, or for the config
 * thread to look the key's override up): the caller must then call engine_pending_then() before
 * it returns to its loop. ENGINE_ECOST / ENGINE_EKEY for a bad request.
 */
/* A request's priority by name (len bytes) under rule rs: 0 and *index (0 the lowest), or -1
 * with a message in err (cap bytes): the rule has no priorities, or none of that name. A
 * request naming none is of the lowest: leave engine_request_t.priority 0. */
int engine_priority(const rule_state_t *rs, const char *name, size_t len, unsigned *index,
                    char *err, size_t cap);

typedef struct engine_pending engine_pending_t;
int engine_decide_start(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len,
                        int64_t cost, int64_t now_ns, engine_decision_t *out,
                        engine_pending_t **pending);

/*
 * engine_decide_start() for any request: a decision of req->cost, or a settle (req->settle) of
 * a reservation of `reserved` units that a decision on key under rule admitted, now that it cost
 * `actual`: actual < reserved gives the difference back, actual > reserved charges the
 * difference even past the limit (the key is then in debt and refuses everything until time has
 * paid it back). A settle applies the key's override as a decision does (a blocked key is
 * answered blocked, nothing settled); charged_ns is when the reservation was admitted (-1: now;
 * the Redis store then uses the Redis server's time); its decision is what a peek reports
 * afterwards (counted as a peek is); a store that fails gives the rule's on_store_error.
 * Returns as engine_decide_start() does; ENGINE_ECOST for a negative cost, reserved or actual.
 */
/* req may be an acquire or a release (req->hold_op) on a rule whose algorithm holds units
 * (ENGINE_ENOHOLDS otherwise) with a store that holds (ENGINE_ENOTSUP otherwise): the decision then
 * carries the hold made or freed (out->hold; the engine points req->hold there itself) or the
 * request's error (out->hold_status: SL_EHOLD for a release of no live hold, SL_EHOLDTIME for a
 * hold time outside [1 ms, the rule's window]). A blocked key's acquire is refused with no hold; a
 * refused acquire under shadow mode is allowed with no hold (id 0: nothing to release). */
int engine_request_start(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len,
                         const engine_request_t *req, int64_t now_ns, engine_decision_t *out,
                         engine_pending_t **pending);

/* fn(arg, ENGINE_OK, decision) runs once on this loop when the pending decision is made. The
 * decision's rule stays valid during fn. */
void engine_pending_then(engine_pending_t *pending, engine_decision_fn fn, void *arg);

/*
 * engine_decide_start() with a callback either way. Returns ENGINE_ECOST / ENGINE_EKEY (fn is
 * then never called), or ENGINE_OK and calls fn exactly once with ENGINE_OK and the decision:
 * before returning or later on this loop. The decision's rule stays valid during fn.
 */
int engine_decide_async(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len,
                        int64_t cost, int64_t now_ns, engine_decision_fn fn, void *arg);

/* engine_decide_async() for any request (engine_request_start()'s). */
int engine_request_async(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len,
                         const engine_request_t *req, int64_t now_ns, engine_decision_fn fn,
                         void *arg);

/*
 * Makes sure the overrides of every (rule, key) pair are in this worker's cache, for steps that
 * must see them all at once (SL.ALLOWALL). Returns ENGINE_OK when nothing needs looking up (fn is
 * not called), or ENGINE_PENDING and calls fn(arg, ENGINE_OK) once every lookup is done: later
 * on this loop, or before returning when every lookup was answered at once (failed lookups
 * leave their pair uncached: its decision then applies on_store_error).
 */
int engine_resolve_overrides(engine_worker_t *w, rule_state_t *const *rules,
                             const char *const *keys, const size_t *key_lens, size_t n,
                             int64_t now_ns, engine_done_fn fn, void *arg);

/*
 * With the Redis store: every loop forgets its cached refusals of key under rule (under its
 * override's parameters too, as decisions at now_ns use them), and a refusal already on its way
 * is not remembered; nothing is sent. Call it when Redis gives the key room back other than by a
 * reset (a refund), once Redis has acknowledged it. A no-op with the memory store.
 */
void engine_forget_refusals(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len,
                            int64_t now_ns);

#define ENGINE_CHECKS_MAX 64 /* checks in one all-or-nothing decision (SL_MULTI_MAX) */

/* One check of an all-or-nothing decision (SL.ALLOWALL, /v1/allow's checks). */
typedef struct engine_check {
    rule_state_t *rule; /* a rule of the worker's current set (held while deciding) */
    const char *key;    /* key_len bytes (copied) */
    size_t key_len;
    int64_t cost;
    unsigned priority; /* its priority in its rule's list, 0 the lowest (engine_priority()) */
    int64_t hold_ns;   /* ENGINE_ALL_ACQUIRE: the hold's lifetime, ns, at most the rule's
                          hold_timeout (a key's override with a shorter one: that); 0: the
                          hold_timeout in force */
} engine_check_t;

/* The answer: each check's decision, and `refused`, the first check that refused the whole (its
 * decision says why; nothing was charged, save the step-by-step race in allowall.c), or n when
 * every check was admitted and charged. The decisions' rules stay valid during the call. */
typedef void (*engine_allowall_fn)(void *arg, const engine_decision_t *d, size_t n, size_t refused);

/*
 * Decides n checks all or nothing (allowall.c): a (rule, key) named twice counts once with the
 * costs summed; every check's override applies; a cost some check's rule can never admit answers
 * the whole before anything is decided; the memory store charges all or none under its shards'
 * locks. flags ENGINE_ALL_INDEPENDENT: validated the same way, then each check decided on its own
 * (refused is then n unless a check was never admissible). Calls fn exactly once, before returning
 * or later on this loop. Returns ENGINE_OK, or ENGINE_ECOST / ENGINE_EKEY for check *bad (fn is
 * then never called), or ENGINE_ENOTSUP for n outside 1..ENGINE_CHECKS_MAX or out of memory.
 */
#define ENGINE_ALL_INDEPENDENT 1u /* validate together, then decide each check on its own */
/* Every check is an acquire (its rule must hold units: ENGINE_ENOHOLDS, else ENGINE_ENOTSUP with
 * a store that cannot hold, ENGINE_EHOLDTIME for a hold_ns past its rule's hold_timeout; *bad
 * the check): admitted, each decision carries its hold (a (rule, key) named twice is one hold of
 * the summed cost, for the shortest timeout, reported by both); refused, no hold is kept. The
 * memory store makes every hold or none under its shards' locks; Redis acquires each and, when
 * one is refused, releases those made (a refused whole never keeps a hold, but may delay others
 * for a round trip, as the step-by-step path says). */
#define ENGINE_ALL_ACQUIRE 2u
int engine_allowall(engine_worker_t *w, const engine_check_t *checks, size_t n, int64_t now_ns,
                    unsigned flags, engine_allowall_fn fn, void *arg, size_t *bad);

/* engine_reset() for either store; fn gets ENGINE_OK or ENGINE_ESTORE. */
int engine_reset_async(engine_worker_t *w, rule_state_t *rule, const void *key, size_t key_len,
                       engine_done_fn fn, void *arg);

/* Keeps a rule state (and its tables) alive across asynchronous steps; release when done. */
void engine_rule_hold(rule_state_t *rule);
void engine_rule_release(rule_state_t *rule);

/* The worker's request store counters (all zero for a store without them: the memory store). */
typedef store_stats_t engine_store_stats_t;
void engine_worker_stats(const engine_worker_t *w, engine_store_stats_t *out);

#endif /* SLUICE_ENGINE_ENGINE_H */
