/*
 * engine_impl.h - the engine's internals, shared by its files (engine.c: rule sets, tables,
 * decisions, snapshots, the Redis store; overrides.c: per-key overrides and their lookups).
 * Nothing outside src/server/engine*.c and overrides.c includes this.
 */
#ifndef SLUICE_SERVER_ENGINE_IMPL_H
#define SLUICE_SERVER_ENGINE_IMPL_H

#include "server/config_thread.h"
#include "server/engine.h"
#include "store/redis_store.h"

#define OV_CACHE_SLOTS  4096 /* per worker; a power of two */
#define OV_WAITS_MAX    4096 /* override lookups in flight per worker */
#define INLINE_CACHE    8    /* per worker, most recently used inline rules */
#define STATE_STACK_MAX 4096 /* cold-start states up to this size live on the stack */
#define OPS_KEEP        4096 /* free engine_op_t kept per worker */
#define OP_KEY_INLINE   128  /* keys up to this long live inside their op */

typedef struct override_table {
    sl_rule_t rule;
    sl_table_t *table;
} override_table_t;

struct rule_tables {
    sl_rule_t rule;
    sl_table_t *table;
    pthread_mutex_t ov_lock;
    override_table_t *ov;
    size_t nov;
    rule_counters_t *counters; /* [workers] */
    int64_t closed_until_ns;
    int64_t closed_from_ns;
    _Atomic int refs; /* rule states using these tables */
};

/* What a worker knows of one (rule, key)'s override. */
typedef struct ov_entry {
    uint64_t hash;
    uint64_t generation; /* valid only while the worker's set is of this generation */
    const rule_state_t *rule;
    int64_t expires_ns;
    bool present; /* the key has an override */
    bool blocked;
    sl_table_t *table; /* the override's table when present and not blocked (memory store) */
    sl_rule_t ov_rule; /* the override's parameters when present */
    int64_t window_ns;
    char *key;
    size_t key_len;
} ov_entry_t;

typedef struct inline_slot {
    sl_rule_t params;
    rule_state_t *rule;
} inline_slot_t;

typedef struct ov_wait ov_wait_t;
typedef struct inline_set inline_set_t;

/*
 * A decision that completes later: waiting for an override lookup, or for Redis. Reused through
 * the worker's free list. While it is being started (engine_decide_start) `starting` is set, and
 * a completion then only fills *sync_out; otherwise completion calls fn(arg).
 */
typedef struct engine_op {
    engine_worker_t *w;
    rule_state_t *rs; /* held */
    engine_decision_fn fn;
    void *arg;
    engine_decision_t out;
    engine_decision_t *sync_out; /* while starting */
    bool starting;
    bool finished;     /* completed while starting */
    bool resolve_only; /* only waits for the override: completes without deciding */
    engine_request_t req;
    int64_t now_ns;
    char *key; /* key_buf or an allocation of its own */
    size_t key_len;
    struct engine_op *next; /* in an override lookup's waiters */
    char key_buf[OP_KEY_INLINE];
} engine_op_t;

struct engine_worker {
    engine_t *engine;
    unsigned index;
    _Atomic(ruleset_t *) hazard; /* the set this worker uses; NULL between uses */
    ruleset_t *set;
    config_store_t *store; /* without a config thread: this worker's own handle */
    config_inbox_t *inbox; /* with one: where its jobs come back (NULL until attached) */
    ov_entry_t *ov_cache;  /* [OV_CACHE_SLOTS] */
    ov_wait_t *ov_waits;   /* override lookups in flight */
    size_t nov_waits;
    _Atomic(inline_set_t *) inl_hazard; /* the inline set this worker uses */
    inline_set_t *inl_set;
    inline_slot_t inl[INLINE_CACHE]; /* most recently used rules of inl_set */
    unsigned inl_next;
    redis_store_t *redis; /* the loop's Redis request store, when the engine has one */
    bool attached;        /* to a loop (engine_worker_attach) */
    rc_freelist_t ops;    /* engine_op_t to reuse while attached */
    char pad[64];
};

struct engine {
    engine_config_t cfg;
    char *store_url;
    config_store_t *store;                    /* owned by ct once it runs */
    config_thread_t *ct;                      /* NULL until engine_start (and in tests) */
    char store_problem[CONFIG_STORE_ERR_MAX]; /* the store file's last reported problem, or ""
                                                 (config thread only) */
    _Atomic(ruleset_t *) current;
    pthread_mutex_t reload_lock;
    ruleset_t *retired; /* published before, maybe still in use */
    _Atomic uint64_t reloads;
    _Atomic uint64_t store_errors; /* failed polls and reloads, a lost store file */
    _Atomic int64_t version;
    uint64_t generation; /* of the last set published; under reload_lock */
    engine_worker_t *workers;
    pthread_mutex_t inline_lock;         /* creating, sweeping, publishing inline sets */
    _Atomic(inline_set_t *) inl_current; /* the inline rules in force */
    inline_set_t *inl_retired;           /* published before, maybe still in use */
    rule_state_t *inl_limbo;             /* taken out of force, maybe still in use */
    _Atomic size_t inl_series;           /* inline rules with series of their own */
    rule_counters_t inl_other_gone;      /* counts of "inline:other" rules freed since */
    bool redis;                          /* the request store is Redis (else the memory tables) */
    rc_config_t rc;                      /* where */
    redis_shared_t *redis_shared;        /* what every loop's Redis store shares (modes, caches) */
};

/* ---- shared between engine.c and overrides.c ---------------------------------------------- */

bool params_equal(const sl_rule_t *a, const sl_rule_t *b);

/* A new table for rule with the engine's table settings; NULL when out of memory. */
sl_table_t *engine_new_table(const engine_t *e, const sl_rule_t *rule);

/* A decision applied by on_store_error; counted. */
void engine_store_error(engine_worker_t *w, rule_state_t *rs, engine_decision_t *out);

/* The end of every decision: shadow mode, counters, on_store_error when st != SL_OK. */
void engine_finish(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out);

/* An op from the worker's free list for rule rs (held), or NULL when out of memory. The key is
 * copied when key != NULL. */
engine_op_t *engine_op_get(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                           int64_t cost, int64_t now_ns);

/* Completes op with op->out: fills the starter's result, or calls fn; then releases it. */
void engine_op_complete(engine_op_t *op);

/* Continues a decision whose override is now known (en NULL: the lookup failed, apply
 * on_store_error): decides on the memory table or sends it to Redis. Completes op (now or
 * later). */
void engine_op_continue(engine_op_t *op, const ov_entry_t *en);

rule_tables_t *engine_tables_create(const engine_t *e, const sl_rule_t *rule);
void engine_tables_release(rule_tables_t *t);
/* A rule state over tables t (takes ownership of def's contents); refs 0. NULL: out of memory. */
rule_state_t *engine_state_create(ruledef_t *def, rule_tables_t *t);
void engine_state_release(rule_state_t *rs);

/* The memory tables' all-or-nothing decision of n distinct (rule, key, cost) pairs whose overrides
 * are cached (engine.c; allowall.c calls it). */
void engine_decide_all_local(engine_worker_t *w, rule_state_t *const *rules,
                             const char *const *keys, const size_t *key_lens, const int64_t *costs,
                             size_t n, int64_t now_ns, engine_decision_t *d, size_t *refused);

/* ---- inline_rules.c ----------------------------------------------------------------------- */

/* The worker picks up the newest inline set (from engine_worker_begin) / lets go of it. */
void inline_worker_begin(engine_worker_t *w);
void inline_worker_end(engine_worker_t *w);

/* What the inline rules freed since start counted, under "inline:other". */
void engine_inline_retired(engine_t *e, uint64_t *allowed, uint64_t *denied,
                           uint64_t *shadow_denied, uint64_t *store_errors);

/* Every inline rule in force, each held (release each, free the array). Returns the count. */
size_t inline_hold_all(engine_t *e, rule_state_t ***out);

/* engine_free's: every inline set, retired set and limbo rule. */
void inline_free_all(engine_t *e);

/* ---- overrides.c -------------------------------------------------------------------------- */

/* The table for an override's parameters (created on first use). NULL when out of memory. */
sl_table_t *override_table(engine_t *e, rule_tables_t *t, const sl_rule_t *rule);

/* Moves every key of t's override tables back to t's own table (converted): the rule has no
 * overrides any more, so no lookup will move them. Any thread; deciding goes on meanwhile. */
void override_tables_return(rule_tables_t *t, int64_t now_ns);

/* The worker's cached entry for (rs, key) if it is still valid at now_ns, else NULL. */
const ov_entry_t *override_cached(engine_worker_t *w, const rule_state_t *rs, const void *key,
                                  size_t key_len, int64_t now_ns);

/* Looks (rs, key) up in the store now, on this thread (no config thread: tests, tools), and
 * caches it. NULL when the store could not be read (apply on_store_error). */
const ov_entry_t *override_lookup_now(engine_worker_t *w, const rule_state_t *rs, const void *key,
                                      size_t key_len, int64_t now_ns);

/* Makes op wait for its key's override: joins a lookup in flight for the same (rule, key) or
 * submits one to the config thread. engine_op_continue(op, entry) runs on this worker's loop
 * when it is done. */
void override_wait(engine_worker_t *w, engine_op_t *op);

/* A worker leaving its loop: every decision waiting for a lookup is answered by
 * on_store_error now; the lookups in flight are dropped when they come back. Frees the cache. */
void override_worker_detach(engine_worker_t *w);
void override_worker_free(engine_worker_t *w);

#endif /* SLUICE_SERVER_ENGINE_IMPL_H */
