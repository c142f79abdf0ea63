/*
 * engine_impl.h - the engine's internals, shared by its files. Each calls only those listed
 * before it (no file calls back into one that calls it):
 *   override_known.c the overrides every lookup found, kept engine-wide for an outage
 *   ruleset.c        rule states, their per-rule data and counters, rule sets, reloads
 *   overrides.c      each worker's cache of per-key overrides and the lookups behind it
 *   inline_rules.c   rules made by SL.THROTTLE / CL.THROTTLE
 *   engine_decide.c  decisions, resets, and the decisions that complete later
 *   allowall.c       all-or-nothing decisions over several checks
 *   engine.c         create/free, workers and their loops, the config thread's poll
 *   engine_snapshot.c  snapshots of the request store
 * Nothing but these files (and white-box tests) includes this.
 */
#ifndef SLUICE_ENGINE_ENGINE_IMPL_H
#define SLUICE_ENGINE_ENGINE_IMPL_H

#include "engine/config_thread.h"
#include "engine/engine.h"
#include "store/freelist.h"
#include "store/request_store.h"

#define OV_CACHE_SLOTS 4096 /* per worker; a power of two */
#define OV_WAITS_MAX   4096 /* override lookups in flight per worker; more wait their turn */
#define OV_INDEX_SLOTS 8192 /* the lookups in flight by (rule, key), chained; a power of two */
#define OV_STALE_NS                                                                                \
    INT64_C(1000000000)           /* a last known answer standing in for a lookup                  \
                                     that failed is cached this long, ns */
#define OV_KNOWN_MAX        65536 /* overrides remembered engine-wide for an outage */
#define INLINE_CACHE        8     /* per worker, most recently used inline rules */
#define OPS_KEEP            4096  /* free engine_op_t kept per worker */
#define ALLOWALL_KEPT_BYTES 4096  /* an all-or-nothing call this size or less reuses a block */
#define ALLS_KEEP           64    /* free such blocks kept per worker */
#define OP_KEY_INLINE       128   /* keys up to this long live inside their op */

struct rule_tables {
    sl_rule_t rule;
    const request_store_ops_t *ops; /* the store data belongs to */
    store_rule_t *data;             /* the request store's for this rule (NULL: it keeps none) */
    rule_counters_t *counters;      /* [workers] */
    watch_t *watch;                 /* named rules: what the console shows (held; NULL for
                                       inline rules) */
    _Atomic int refs;               /* rule states using these */
    _Atomic int64_t limit_now;      /* an adaptive rule: the limit of the latest acquire or
                                       release decided on it (the key it decided's); 0 none */
};

/* What a worker knows of one (rule, key)'s override. The slot is chosen by the rule's name
 * and the key, so an answer outlives its rule state: after a rule change or past its TTL it is
 * no longer fresh, but it is still the last known answer for when the store cannot be read. */
typedef struct ov_entry {
    uint64_t hash;            /* of (rule name, key); 0: an empty slot */
    uint64_t generation;      /* fresh only while the worker's set is of this generation */
    const rule_state_t *rule; /* the rule state it was read under: compared, followed only
                                 while generation is the worker's */
    int64_t expires_ns;       /* fresh until then, ns since the Unix epoch */
    bool present;             /* the key has an override */
    bool blocked;
    void *handle;      /* the store's handle of the override's numbers, when present and not
                          blocked (request_store.h); valid while `rule` is */
    sl_rule_t ov_rule; /* the override's parameters when present */
    int64_t window_ns;
    char *key;        /* key_len bytes, then the rule's name and the override's JSON ("" for
                         none), each NUL-terminated: one allocation, owned */
    size_t key_len;   /* bytes */
    const char *name; /* in key's allocation */
    const char *json; /* in key's allocation */
} ov_entry_t;

/* The overrides lookups found, engine-wide (override_known.c). */
typedef struct ov_known ov_known_t;

typedef struct inline_slot {
    sl_rule_t params;
    rule_state_t *rule;
} inline_slot_t;

typedef struct ov_wait ov_wait_t;
typedef struct inline_set inline_set_t;

/* Something waiting for a key's override (override_wait): resume(waiter, entry) runs on the
 * worker's loop when it is known (entry NULL: the lookup failed, apply on_store_error). */
typedef struct ov_waiter ov_waiter_t;
struct ov_waiter {
    void (*resume)(ov_waiter_t *waiter, const ov_entry_t *en);
    ov_waiter_t *next; /* in the lookup's waiters, or the worker's queue, oldest first */
    int64_t now_ns;    /* when the decision was asked */
    rule_state_t *rs;  /* what it waits for (override_wait sets them): the rule (held by the */
    const char *key;   /* waiter's owner) and key_len bytes of key, valid while it waits */
    size_t key_len;
};

/*
 * A decision that completes later: waiting for an override lookup, or for a store that answers
 * later. Reused through the worker's free list. Neither calls back inside the call that started
 * the wait (override_wait, request_store.h), so an op that completes while it is being started
 * is answered by the start's return value, and fn(arg) is called only for a later completion.
 */
typedef struct engine_op {
    ov_waiter_t wait; /* first */
    engine_worker_t *w;
    rule_state_t *rs; /* held */
    engine_decision_fn fn;
    void *arg;
    engine_decision_t out;
    bool resolve_only; /* only waits for the override: completes without deciding */
    engine_request_t req;
    int64_t now_ns;
    char *key; /* key_buf or an allocation of its own */
    size_t key_len;
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
    ov_wait_t **ov_index;  /* [OV_INDEX_SLOTS]: lookups in flight that decisions wait for */
    ov_wait_t *ov_first;   /* override lookups in flight, oldest first */
    ov_wait_t *ov_last;
    size_t nov_waits;            /* in that list */
    ov_waiter_t *ov_queue;       /* decisions waiting for a lookup to be free (nov_waits at */
    ov_waiter_t *ov_queue_tail;  /* OV_WAITS_MAX), oldest first */
    bool ov_stuck;               /* lookups timed out and none came back since: a miss is decided
                                    by what is known, without asking the store */
    bool ov_timer_on;            /* ov_timer is initialized (on the loop attached) */
    uv_timer_t ov_timer;         /* times out lookups the store does not answer */
    void (*ov_ready)(void *arg); /* engine_worker_when_ready's, until called */
    void *ov_ready_arg;
    _Atomic(inline_set_t *) inl_hazard; /* the inline set this worker uses */
    inline_set_t *inl_set;
    inline_slot_t inl[INLINE_CACHE]; /* most recently used rules of inl_set */
    unsigned inl_next;
    store_loop_t *requests; /* the request store's handle on this loop (NULL: none) */
    bool attached;          /* to a loop (engine_worker_attach) */
    freelist_t ops;         /* engine_op_t to reuse while attached */
    freelist_t alls;        /* all-or-nothing calls (allowall.c) of ALLOWALL_KEPT_BYTES to reuse
                               while attached */
    char pad[64];
};

struct engine {
    engine_settings_t cfg;
    char *store_url;
    config_store_t *store;                    /* owned by ct once it runs */
    config_thread_t *ct;                      /* NULL until engine_start (and in tests) */
    char store_problem[CONFIG_STORE_ERR_MAX]; /* the store file's last reported problem, or ""
                                                 (config thread only) */
    char poll_problem[ENGINE_ERR_MAX];        /* the last poll failure logged, or "" (config
                                                 thread only) */
    config_watch_t *watch;                    /* the store's push (NULL: it has none) */
    _Atomic bool store_up;                    /* the store can be reached (and is the file
                                                 opened) */
    _Atomic bool store_writable;              /* changes can be written to it */
    char write_problem[CONFIG_STORE_ERR_MAX]; /* why not, as last logged, or "" (config
                                                 thread only) */
    ov_known_t *known;                        /* the overrides lookups found */
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
    request_store_t *requests;           /* where per-key state lives (request_store.h) */
    uint64_t watch_seed;                 /* the named rules' watches hash keys with it */
};

/* ---- override_known.c ---------------------------------------------------------------------- */

/* An empty memory of at most max overrides; NULL when out of memory. */
ov_known_t *ov_known_create(size_t max);
void ov_known_free(ov_known_t *k);

/* What a lookup of (rule, key) found: the override's json, or NULL for none (forgotten).
 * Returns false when json could not be remembered (full, or out of memory). Any thread. */
bool ov_known_note(ov_known_t *k, const char *rule, const void *key, size_t key_len,
                   const char *json);

/* A copy (malloc'ed, the caller frees it) of the JSON last found for (rule, key), or NULL when
 * none is remembered. Any thread. */
char *ov_known_get(ov_known_t *k, const char *rule, const void *key, size_t key_len);

/* Forgets every override of the rules keep(arg, name) says no longer have overrides. */
void ov_known_prune(ov_known_t *k, bool (*keep)(void *arg, const char *rule), void *arg);

/* Overrides remembered. Any thread. */
size_t ov_known_count(ov_known_t *k);

/* ---- ruleset.c ---------------------------------------------------------------------------- */

/* Memory for per-thread slots: whole cache lines, so two threads never share one. */
void *engine_alloc_lines(size_t bytes);

rule_tables_t *engine_tables_create(const engine_t *e, const sl_rule_t *rule);
void engine_tables_release(rule_tables_t *t);
/* A rule state over tables t (takes ownership of def's contents); refs 0. NULL: out of memory. */
rule_state_t *engine_state_create(ruledef_t *def, rule_tables_t *t);
void engine_state_release(rule_state_t *rs);

/* The rule named name in set (NULL: none). */
rule_state_t *ruleset_find(const ruleset_t *set, const char *name, size_t len);
/* Releases every rule of set and frees it; NULL is a no-op. */
void ruleset_free(ruleset_t *set);

/* Sums n workers' counters. */
void rule_counters_sum(const rule_counters_t *c, unsigned n, uint64_t *allowed, uint64_t *denied,
                       uint64_t *shadow_denied, uint64_t *store_errors);

/* ---- overrides.c -------------------------------------------------------------------------- */

/* The store's handle for an override's numbers under rule tables t (the memory store: the
 * override's table, created on first use). NULL when out of memory or the store has none. */
void *override_table(rule_tables_t *t, const sl_rule_t *rule);

/* The worker's cached entry for (rs, key) if it is still valid at now_ns, else NULL. */
const ov_entry_t *override_cached(engine_worker_t *w, const rule_state_t *rs, const void *key,
                                  size_t key_len, int64_t now_ns);

/* Looks (rs, key) up in the store now, on this thread (no config thread: tests, tools), and
 * caches it. When the store cannot be read, the last known answer for (rule, key) stands in;
 * NULL when there is none (apply on_store_error). */
const ov_entry_t *override_lookup_now(engine_worker_t *w, rule_state_t *rs, const void *key,
                                      size_t key_len, int64_t now_ns);

/* Makes waiter wait for (rs, key)'s override (key: key_len bytes that stay valid while it
 * waits; rs held by the waiter's owner): joins a lookup in flight for the same (rule, key), or
 * submits one to the config thread, or, with OV_WAITS_MAX in flight, waits its turn in order.
 * waiter->resume runs later on this worker's loop, never inside this call, when the answer is
 * known: the store's, or the last known answer when the store failed or did not answer within
 * the override timeout, or NULL when there is none (apply on_store_error). Returns true instead,
 * with *known (in *copy, or NULL) and nothing waiting, when the answer is known now: cached, or
 * the store stuck or out of memory. */
bool override_wait(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                   ov_waiter_t *waiter, ov_entry_t *copy, const ov_entry_t **known);

/* Gives the worker its loop's timer for lookups' deadlines (engine_worker_attach). */
void override_worker_attach(engine_worker_t *w, uv_loop_t *loop);
/* A worker leaving its loop: everything waiting for a lookup resumes now, by what is known
 * (else on_store_error); the lookups in flight are dropped when they come back. */
void override_worker_detach(engine_worker_t *w);
/* Frees the worker's cache and store handle. */
void override_worker_free(engine_worker_t *w);

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

/* ---- engine_decide.c ---------------------------------------------------------------------- */

/* The end of every decision: shadow mode, counters, the rule's watch (key: key_len bytes, or
 * NULL when not at hand: counted per second only; now_ns: when it was asked), and
 * on_store_error when st != SL_OK. */
void engine_decision_done(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out,
                          const void *key, size_t key_len, int64_t now_ns);

/* A key its override blocks (limit 0), or any key of a rule of limit 0: refused, never
 * admissible. Returns true when rs or en says so (and fills out). Inline: every decision asks. */
static inline bool engine_blocked(const rule_state_t *rs, const ov_entry_t *en,
                                  engine_decision_t *out)
{
    if (!rs->def.blocked && (en == NULL || !en->present || !en->blocked)) {
        return false;
    }
    out->d = (sl_decision_t){.allowed = false, .retry_after_ns = -1};
    out->blocked = true;
    return true;
}

/* The units a decision or acquire of req->priority must leave under the numbers in force
 * (tg->numbers: an override's capacity scales a reserve in percent); 0 for a rule without
 * priorities, and for settles and releases. */
static inline int64_t engine_reserve(const rule_state_t *rs, const store_target_t *tg,
                                     const engine_request_t *req)
{
    if (req->settle || req->hold_op == STORE_HOLD_RELEASE)
        return 0;
    if (rs->def.prio.n == 0)
        return req->reserve; /* an inline rule's RESERVE, as sluice.so takes it */
    return prio_reserve_above(&rs->def.prio, req->priority, tg->numbers->capacity);
}

/* What the store is asked about (rs, key) with its override en (NULL: none); out->window_ns
 * and out->max_debt become the numbers' in force. tg points into en and rs: valid while they
 * are. Inline: every decision asks. */
static inline void engine_target(rule_state_t *rs, const ov_entry_t *en, const void *key,
                                 size_t key_len, store_target_t *tg, engine_decision_t *out)
{
    *tg = (store_target_t){.rule = rs->t->data,
                           .name = rs->def.name,
                           .numbers = &rs->t->rule,
                           .key = key,
                           .key_len = key_len,
                           .closed = rs->def.cold_start == RULE_COLD_CLOSED,
                           .lease_ns = rs->lease_ns,
                           .sync_ns = rs->sync_ns,
                           .replicas = (int)rs->def.replicas,
                           .replica_wait_ms = rs->replica_wait_ms};
    if (en != NULL && en->present) {
        tg->handle = en->handle;
        tg->numbers = &en->ov_rule;
        out->window_ns = en->window_ns;
        if (tg->lease_ns > 0 && tg->lease_ns > ruledef_lease_room_ns(&en->ov_rule)) {
            tg->lease_ns = ruledef_lease_room_ns(&en->ov_rule); /* a smaller burst: 0 strict */
        }
    }
    out->max_debt = tg->numbers->max_debt;
}

/* Decides req on a store that completes at once, its override known (en). ENGINE_OK with *out,
 * or ENGINE_EKEY / ENGINE_ECOST. */
int engine_decide_now(engine_worker_t *w, rule_state_t *rs, const ov_entry_t *en, const void *key,
                      size_t key_len, const engine_request_t *req, int64_t now_ns,
                      engine_decision_t *out);

#endif /* SLUICE_ENGINE_ENGINE_IMPL_H */
