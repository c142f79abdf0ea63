/*
 * engine.c - rule sets, their tables, overrides and decisions (see engine.h).
 *
 * Ownership. A rule set (ruleset_t) is immutable once published and holds references to rule
 * states; a rule state holds a reference to its tables (rule_tables_t), which outlive any one
 * set: a reload that keeps a rule's parameters gives the new rule state the same tables, so keys
 * keep their usage. All reference counts change under reload_lock, only in the thread that
 * reloads or collects; deciding threads never touch them.
 */
#include "server/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "rules/throttle_args.h"
#include "server/log.h"
#include "server/snapshot.h"
#include "store/redis_store.h"

#define OV_CACHE_SLOTS  4096 /* per worker; a power of two */
#define INLINE_CACHE    8    /* per worker, most recently used inline rules */
#define STATE_STACK_MAX 4096 /* cold-start states up to this size live on the stack */

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

struct engine_worker {
    engine_t *engine;
    unsigned index;
    _Atomic(ruleset_t *) hazard; /* the set this worker uses; NULL between uses */
    ruleset_t *set;
    config_store_t *store;
    ov_entry_t *ov_cache; /* [OV_CACHE_SLOTS] */
    inline_slot_t inl[INLINE_CACHE];
    unsigned inl_next;
    redis_store_t *redis; /* the loop's Redis request store, when the engine has one */
    rc_freelist_t ops;    /* remote_op_t to reuse (while attached to a loop) */
    char pad[64];
};

struct engine {
    engine_config_t cfg;
    char *store_url;
    config_store_t *store;
    _Atomic(ruleset_t *) current;
    pthread_mutex_t reload_lock;
    ruleset_t *retired; /* published before, maybe still in use */
    _Atomic uint64_t reloads;
    _Atomic int64_t version;
    uint64_t generation; /* of the last set published; under reload_lock */
    engine_worker_t *workers;
    pthread_mutex_t inline_lock;
    rule_state_t **inl; /* [ENGINE_INLINE_MAX] */
    size_t ninl;
    bool redis;                   /* the request store is Redis (else the memory tables) */
    rc_config_t rc;               /* where */
    redis_shared_t *redis_shared; /* what every loop's Redis store shares (modes, caches) */
};

/* Memory for per-thread slots: whole cache lines, so two threads never share one. */
static void *alloc_lines(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* ---- rule states and tables ---------------------------------------------------------------- */

static bool params_equal(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit && a->window_ns == b->window_ns &&
           a->burst == b->burst && a->buckets == b->buckets && a->max_delay_ns == b->max_delay_ns;
}

static sl_table_t *new_table(const engine_t *e, const sl_rule_t *rule)
{
    sl_table_config_t tc = {.max_bytes = e->cfg.max_memory, .key_max = e->cfg.key_max};
    sl_table_t *t = NULL;
    if (sl_table_create(rule, &tc, &t) != SL_OK) {
        return NULL;
    }
    return t;
}

static rule_tables_t *tables_create(const engine_t *e, const sl_rule_t *rule)
{
    rule_tables_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    t->rule = *rule;
    t->table = new_table(e, rule);
    size_t bytes = sizeof(rule_counters_t) * e->cfg.workers;
    t->counters = alloc_lines(bytes);
    if (t->table == NULL || t->counters == NULL) {
        sl_table_free(t->table);
        free(t->counters);
        free(t);
        return NULL;
    }
    memset(t->counters, 0, bytes);
    pthread_mutex_init(&t->ov_lock, NULL);
    return t;
}

typedef struct migrate_ctx {
    sl_table_t *to;
    int64_t now_ns;
} migrate_ctx_t;

static int migrate_entry(void *arg, const void *key, size_t key_len, const void *state,
                         size_t state_size)
{
    (void)state_size;
    migrate_ctx_t *m = arg;
    sl_table_put(m->to, key, key_len, state, m->now_ns); /* checked; a misfit is dropped */
    return 0;
}

/*
 * A rule whose parameters changed keeps its keys' usage when the state layout allows: same
 * algorithm and state size (fixed_window, sliding_window, token_bucket, gcra always; a
 * sliding_log of the same limit; sliding_buckets with the same bucket count). Each state is
 * checked against the new rule (sl_table_put). Decisions made on the old table while the copy
 * runs are not carried over (docs/design.md). Override tables start fresh.
 */
static void tables_migrate(rule_tables_t *to, rule_tables_t *from)
{
    if (to->rule.algorithm != from->rule.algorithm ||
        to->rule.state_size != from->rule.state_size) {
        return;
    }
    migrate_ctx_t m = {.to = to->table, .now_ns = sl_now_ns()};
    sl_table_foreach(from->table, migrate_entry, &m);
}

static void tables_release(rule_tables_t *t)
{
    if (t == NULL || atomic_fetch_sub(&t->refs, 1) > 1) {
        return;
    }
    sl_table_free(t->table);
    for (size_t i = 0; i < t->nov; i++) {
        sl_table_free(t->ov[i].table);
    }
    free(t->ov);
    free(t->counters);
    pthread_mutex_destroy(&t->ov_lock);
    free(t);
}

/* Takes ownership of def's contents (overrides are dropped: they live in the store). */
static rule_state_t *state_create(ruledef_t *def, rule_tables_t *t)
{
    rule_state_t *rs = calloc(1, sizeof *rs);
    if (rs == NULL) {
        return NULL;
    }
    rs->def = *def;
    rs->def.overrides = NULL;
    rs->def.noverrides = 0;
    for (size_t i = 0; i < def->noverrides; i++) {
        override_free(&def->overrides[i]);
    }
    free(def->overrides);
    def->overrides = NULL;
    def->noverrides = 0;
    rs->t = t;
    atomic_fetch_add(&t->refs, 1);
    return rs;
}

static void state_release(rule_state_t *rs)
{
    if (rs == NULL || atomic_fetch_sub(&rs->refs, 1) > 1) {
        return;
    }
    tables_release(rs->t);
    ruledef_free(&rs->def);
    free(rs);
}

static void set_free(ruleset_t *set)
{
    if (set == NULL) {
        return;
    }
    for (size_t i = 0; i < set->n; i++) {
        state_release(set->rules[i]);
    }
    free(set->rules);
    free(set);
}

static int cmp_state(const void *a, const void *b)
{
    const rule_state_t *x = *(rule_state_t *const *)a, *y = *(rule_state_t *const *)b;
    return strcmp(x->def.name, y->def.name);
}

static rule_state_t *set_find(const ruleset_t *set, const char *name, size_t len)
{
    if (set == NULL || len > RULE_NAME_MAX) {
        return NULL;
    }
    size_t lo = 0, hi = set->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *mn = set->rules[mid]->def.name;
        int c = strncmp(mn, name, len);
        if (c == 0 && mn[len] != '\0') {
            c = 1;
        }
        if (c == 0) {
            return set->rules[mid];
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

/* ---- the engine ---------------------------------------------------------------------------- */

int engine_create(const engine_config_t *cfg, engine_t **out, char *err)
{
    if (cfg->workers == 0 || cfg->workers > ENGINE_WORKERS_MAX) {
        snprintf(err, ENGINE_ERR_MAX, "workers must be 1..%d", ENGINE_WORKERS_MAX);
        return -1;
    }
    if (cfg->max_memory != 0 && cfg->max_memory < ENGINE_TABLE_MIN_BYTES) {
        snprintf(err, ENGINE_ERR_MAX,
                 "--max-memory must be 0 (no cap) or at least 64k: it caps each rule's table, "
                 "and an empty table takes about 48 KiB");
        return -1;
    }
    engine_t *e = calloc(1, sizeof *e);
    if (e == NULL) {
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        return -1;
    }
    e->cfg = *cfg;
    e->store_url = strdup(cfg->store_url);
    e->cfg.store_url = e->store_url;
    pthread_mutex_init(&e->reload_lock, NULL);
    pthread_mutex_init(&e->inline_lock, NULL);
    e->workers = alloc_lines(sizeof(engine_worker_t) * cfg->workers);
    e->inl = calloc(ENGINE_INLINE_MAX, sizeof *e->inl);
    if (e->store_url == NULL || e->workers == NULL || e->inl == NULL) {
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        engine_free(e);
        return -1;
    }
    memset(e->workers, 0, sizeof(engine_worker_t) * cfg->workers);
    for (unsigned i = 0; i < cfg->workers; i++) {
        e->workers[i].engine = e;
        e->workers[i].index = i;
    }
    if (cfg->request_store != NULL && strcmp(cfg->request_store, "memory") != 0) {
        char rerr[RC_ERR_MAX > REDIS_STORE_ERR_MAX ? RC_ERR_MAX : REDIS_STORE_ERR_MAX];
        if (rc_parse_url(cfg->request_store, &e->rc, rerr) != 0 ||
            redis_shared_create(&e->rc, cfg->redis_timeout_ns, &e->redis_shared, rerr) != 0) {
            snprintf(err, ENGINE_ERR_MAX, "--store: %s", rerr);
            engine_free(e);
            return -1;
        }
        e->redis = true;
    }
    char serr[CONFIG_STORE_ERR_MAX];
    if (config_store_open(e->store_url, &e->store, serr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "config store: %s", serr);
        engine_free(e);
        return -1;
    }
    if (engine_reload(e, e->store, true, err) < 0) {
        engine_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

void engine_free(engine_t *e)
{
    if (e == NULL) {
        return;
    }
    set_free(atomic_load(&e->current));
    while (e->retired != NULL) {
        ruleset_t *next = e->retired->retired_next;
        set_free(e->retired);
        e->retired = next;
    }
    for (size_t i = 0; i < e->ninl; i++) {
        state_release(e->inl[i]);
    }
    free(e->inl);
    if (e->workers != NULL) {
        for (unsigned i = 0; i < e->cfg.workers; i++) {
            engine_worker_t *w = &e->workers[i];
            config_store_close(w->store);
            if (w->ov_cache != NULL) {
                for (size_t j = 0; j < OV_CACHE_SLOTS; j++) {
                    free(w->ov_cache[j].key);
                }
                free(w->ov_cache);
            }
        }
        free(e->workers);
    }
    config_store_close(e->store);
    redis_shared_free(e->redis_shared);
    pthread_mutex_destroy(&e->reload_lock);
    pthread_mutex_destroy(&e->inline_lock);
    free(e->store_url);
    free(e);
}

config_store_t *engine_store(engine_t *e)
{
    return e->store;
}

unsigned engine_workers(engine_t *e)
{
    return e->cfg.workers;
}

int64_t engine_version(engine_t *e)
{
    return atomic_load_explicit(&e->version, memory_order_relaxed);
}

uint64_t engine_reloads(engine_t *e)
{
    return atomic_load_explicit(&e->reloads, memory_order_relaxed);
}

static int has_override_fn(void *arg, const void *key, size_t key_len, const char *json)
{
    (void)key;
    (void)key_len;
    (void)json;
    *(bool *)arg = true;
    return 1;
}

/* Builds a rule set from the store's rules; reuses the tables of `old` where the parameters
 * match. Called under reload_lock. */
static ruleset_t *set_build(engine_t *e, config_store_t *store, const ruleset_t *old, char *err)
{
    char serr[CONFIG_STORE_ERR_MAX];
    config_rule_t *rows = NULL;
    size_t n = 0;
    int64_t version = 0;
    if (config_store_list_rules(store, &rows, &n, &version, serr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "config store: %s", serr);
        return NULL;
    }
    ruleset_t *set = calloc(1, sizeof *set);
    if (set == NULL || (n > 0 && (set->rules = calloc(n, sizeof *set->rules)) == NULL)) {
        free(set);
        config_rules_free(rows, n);
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        return NULL;
    }
    set->version = version;
    for (size_t i = 0; i < n; i++) {
        ruledef_t def;
        char perr[RULEDEF_ERR_MAX];
        if (ruledef_parse_json(rows[i].json, strlen(rows[i].json), rows[i].name, &def, perr) != 0) {
            /* Only validated rules are written; one that is not is skipped, not fatal. */
            fprintf(stderr, "sluiced: config store rule '%s' skipped: %s\n", rows[i].name, perr);
            continue;
        }
        rule_state_t *prev = set_find(old, def.name, strlen(def.name));
        rule_tables_t *t = NULL;
        if (prev != NULL && params_equal(&prev->t->rule, &def.rule)) {
            t = prev->t;
        } else {
            t = tables_create(e, &def.rule);
            if (t != NULL && prev != NULL) {
                tables_migrate(t, prev->t);
            }
        }
        rule_state_t *rs = t != NULL ? state_create(&def, t) : NULL;
        if (rs == NULL) {
            if (t != NULL && t->refs == 0) {
                t->refs = 1;
                tables_release(t);
            }
            ruledef_free(&def);
            set_free(set);
            config_rules_free(rows, n);
            snprintf(err, ENGINE_ERR_MAX, "out of memory");
            return NULL;
        }
        rs->refs = 1;
        bool any = false;
        if (config_store_foreach_override(store, rs->def.name, 1, has_override_fn, &any, serr) !=
            0) {
            any = true; /* look keys up; a failure there applies on_store_error */
        }
        rs->has_overrides = any;
        set->rules[set->n++] = rs;
    }
    config_rules_free(rows, n);
    if (set->n > 1) {
        qsort(set->rules, set->n, sizeof *set->rules, cmp_state);
    }
    return set;
}

void engine_collect(engine_t *e)
{
    pthread_mutex_lock(&e->reload_lock);
    ruleset_t **pp = &e->retired;
    while (*pp != NULL) {
        ruleset_t *set = *pp;
        bool held = false;
        for (unsigned i = 0; i < e->cfg.workers && !held; i++) {
            held = atomic_load(&e->workers[i].hazard) == set;
        }
        if (held) {
            pp = &set->retired_next;
        } else {
            *pp = set->retired_next;
            set_free(set);
        }
    }
    pthread_mutex_unlock(&e->reload_lock);
}

int engine_reload(engine_t *e, config_store_t *store, bool force, char *err)
{
    char serr[CONFIG_STORE_ERR_MAX];
    int64_t version = 0;
    if (config_store_version(store, &version, serr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "config store: %s", serr);
        return -1;
    }
    pthread_mutex_lock(&e->reload_lock);
    ruleset_t *old = atomic_load(&e->current);
    if (!force && old != NULL && old->version == version) {
        pthread_mutex_unlock(&e->reload_lock);
        return 0;
    }
    ruleset_t *set = set_build(e, store, old, err);
    if (set == NULL) {
        pthread_mutex_unlock(&e->reload_lock);
        return -1;
    }
    set->generation = ++e->generation;
    atomic_store(&e->current, set);
    atomic_store_explicit(&e->version, set->version, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->reloads, 1, memory_order_relaxed);
    if (old != NULL) {
        old->retired_next = e->retired;
        e->retired = old;
    }
    pthread_mutex_unlock(&e->reload_lock);
    engine_collect(e);
    return 1;
}

/* ---- workers ------------------------------------------------------------------------------- */

engine_worker_t *engine_worker(engine_t *e, unsigned index)
{
    return index < e->cfg.workers ? &e->workers[index] : NULL;
}

const ruleset_t *engine_worker_begin(engine_worker_t *w)
{
    engine_t *e = w->engine;
    ruleset_t *p = atomic_load_explicit(&e->current, memory_order_acquire);
    if (p == w->set) {
        return p;
    }
    /* Hazard pointer: announce, then confirm the set is still current, so a reloader that
     * retires it afterwards sees our announcement. */
    for (;;) {
        atomic_store(&w->hazard, p);
        ruleset_t *again = atomic_load(&e->current);
        if (again == p) {
            break;
        }
        p = again;
    }
    w->set = p;
    return p;
}

void engine_worker_end(engine_worker_t *w)
{
    w->set = NULL;
    atomic_store(&w->hazard, NULL);
}

config_store_t *engine_worker_store(engine_worker_t *w, char *err)
{
    if (w->store == NULL) {
        char serr[CONFIG_STORE_ERR_MAX];
        if (config_store_open(w->engine->store_url, &w->store, serr) != 0) {
            snprintf(err, ENGINE_ERR_MAX, "config store: %s", serr);
            w->store = NULL;
        }
    }
    return w->store;
}

rule_state_t *engine_find(engine_worker_t *w, const char *name, size_t len)
{
    return set_find(w->set, name, len);
}

const rule_counters_t *engine_counters(const rule_state_t *rule, unsigned worker)
{
    return &rule->t->counters[worker];
}

/* ---- overrides ----------------------------------------------------------------------------- */

/* The table for an override's parameters (created on first use). NULL when out of memory. */
static sl_table_t *override_table(engine_t *e, rule_tables_t *t, const sl_rule_t *rule)
{
    sl_table_t *found = NULL;
    pthread_mutex_lock(&t->ov_lock);
    for (size_t i = 0; i < t->nov && found == NULL; i++) {
        if (params_equal(&t->ov[i].rule, rule)) {
            found = t->ov[i].table;
        }
    }
    if (found == NULL) {
        override_table_t *grown = realloc(t->ov, (t->nov + 1) * sizeof *t->ov);
        if (grown != NULL) {
            t->ov = grown;
            found = new_table(e, rule);
            if (found != NULL) {
                t->ov[t->nov].rule = *rule;
                t->ov[t->nov].table = found;
                t->nov++;
            }
        }
    }
    pthread_mutex_unlock(&t->ov_lock);
    return found;
}

/* Resolves key's override under rule through the worker's cache. Returns the entry, or NULL
 * when the store could not be read (the caller applies on_store_error). */
static const ov_entry_t *override_lookup(engine_worker_t *w, const rule_state_t *rs,
                                         const void *key, size_t key_len, int64_t now_ns)
{
    if (w->ov_cache == NULL) {
        w->ov_cache = calloc(OV_CACHE_SLOTS, sizeof *w->ov_cache);
        if (w->ov_cache == NULL) {
            return NULL;
        }
    }
    uint64_t h = hash_bytes(key, key_len, (uint64_t)(uintptr_t)rs);
    ov_entry_t *en = &w->ov_cache[h & (OV_CACHE_SLOTS - 1)];
    if (en->hash == h && en->generation == w->set->generation && en->rule == rs &&
        en->expires_ns > now_ns && en->key_len == key_len && memcmp(en->key, key, key_len) == 0) {
        return en;
    }
    char err[ENGINE_ERR_MAX];
    config_store_t *store = engine_worker_store(w, err);
    if (store == NULL) {
        return NULL;
    }
    char *json = NULL;
    char serr[CONFIG_STORE_ERR_MAX];
    int rc = config_store_get_override(store, rs->def.name, key, key_len, &json, serr);
    if (rc < 0) {
        return NULL;
    }
    char *copy = malloc(key_len + 1);
    if (copy == NULL) {
        free(json);
        return NULL;
    }
    memcpy(copy, key, key_len);
    free(en->key);
    *en = (ov_entry_t){.hash = h,
                       .generation = w->set->generation,
                       .rule = rs,
                       .expires_ns = now_ns + w->engine->cfg.override_ttl_ns,
                       .key = copy,
                       .key_len = key_len,
                       .window_ns = rs->def.rule.window_ns};
    if (rc == CONFIG_STORE_NOTFOUND) {
        return en; /* the negative cache */
    }
    rule_override_t ov;
    char perr[RULEDEF_ERR_MAX];
    rc = override_parse_json(&rs->def, key, key_len, json, strlen(json), &ov, perr);
    free(json);
    if (rc != 0) {
        en->hash = 0;
        return NULL;
    }
    en->present = true;
    en->blocked = ov.blocked;
    en->window_ns = ov.rule.window_ns;
    en->ov_rule = ov.rule;
    if (!ov.blocked && w->redis == NULL) {
        en->table = override_table(w->engine, rs->t, &ov.rule);
        if (en->table == NULL) {
            en->hash = 0;
            override_free(&ov);
            return NULL;
        }
    }
    override_free(&ov);
    return en;
}

/* ---- decisions ----------------------------------------------------------------------------- */

static void store_error_decision(const rule_state_t *rs, engine_decision_t *out)
{
    out->store_error = true;
    out->d = (sl_decision_t){.limit = rs->t->rule.capacity};
    if (rs->def.on_store_error == RULE_ON_ERROR_ALLOW) {
        out->d.allowed = true;
    } else {
        int64_t retry = rs->t->rule.window_ns < 1000000000 ? rs->t->rule.window_ns : 1000000000;
        out->d.retry_after_ns = retry;
    }
}

static void finish(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out);

/* cold_start closed: a key first seen inside the closed window starts as if it had taken the
 * whole capacity when the server started. */
static void cold_start_saturate(rule_tables_t *t, sl_table_t *table, const void *key,
                                size_t key_len, int64_t now_ns)
{
    const sl_rule_t *rule = sl_table_rule(table);
    size_t size = sl_state_size(rule);
    unsigned char stack[STATE_STACK_MAX];
    unsigned char *state = size <= sizeof stack ? stack : malloc(size);
    if (state == NULL) {
        return;
    }
    if (sl_table_get(table, key, key_len, state) == SL_OK) {
        bool fresh = true;
        for (size_t i = 0; i < size && fresh; i++) {
            fresh = state[i] == 0;
        }
        if (fresh) {
            sl_decision_t d;
            sl_decide(rule, state, rule->capacity, t->closed_from_ns, &d);
            sl_table_put(table, key, key_len, state, now_ns);
        }
    }
    if (state != stack) {
        free(state);
    }
}

int engine_decide(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                  int64_t cost, int64_t now_ns, engine_decision_t *out)
{
    if (cost < 0) {
        return ENGINE_ECOST;
    }
    if (key_len > w->engine->cfg.key_max) {
        return ENGINE_EKEY;
    }
    rule_tables_t *t = rs->t;
    rule_counters_t *c = &t->counters[w->index];
    *out = (engine_decision_t){.rule = rs, .window_ns = t->rule.window_ns};
    sl_table_t *table = t->table;
    if (rs->has_overrides) {
        const ov_entry_t *en = override_lookup(w, rs, key, key_len, now_ns);
        if (en == NULL) {
            store_error_decision(rs, out);
            atomic_fetch_add_explicit(&c->store_errors, 1, memory_order_relaxed);
            return ENGINE_OK;
        }
        if (en->present && en->blocked) {
            out->d = (sl_decision_t){.allowed = false, .retry_after_ns = -1};
            out->blocked = true;
            atomic_fetch_add_explicit(&c->denied, 1, memory_order_relaxed);
            return ENGINE_OK;
        }
        if (en->present) {
            table = en->table;
            out->window_ns = en->window_ns;
        }
    }
    if (now_ns < t->closed_until_ns && cost > 0) {
        cold_start_saturate(t, table, key, key_len, now_ns);
    }
    int st = sl_table_decide(table, key, key_len, cost, now_ns, &out->d);
    if (st == SL_EKEY) {
        return ENGINE_EKEY;
    }
    if (st == SL_ECOST) {
        return ENGINE_ECOST;
    }
    finish(w, rs, st, out);
    return ENGINE_OK;
}

int engine_reset(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len)
{
    if (key_len > w->engine->cfg.key_max) {
        return ENGINE_EKEY;
    }
    rule_tables_t *t = rs->t;
    sl_table_reset(t->table, key, key_len);
    pthread_mutex_lock(&t->ov_lock);
    for (size_t i = 0; i < t->nov; i++) {
        sl_table_reset(t->ov[i].table, key, key_len);
    }
    pthread_mutex_unlock(&t->ov_lock);
    return ENGINE_OK;
}

/* ---- inline rules -------------------------------------------------------------------------- */

int engine_inline_rule(engine_worker_t *w, const sl_rule_t *params, rule_state_t **out, char *err)
{
    for (unsigned i = 0; i < INLINE_CACHE; i++) {
        if (w->inl[i].rule != NULL && params_equal(&w->inl[i].params, params)) {
            *out = w->inl[i].rule;
            return ENGINE_OK;
        }
    }
    sl_rule_t rule = *params;
    int rc = sl_rule_prepare(&rule);
    if (rc != SL_OK) {
        snprintf(err, ENGINE_ERR_MAX, "%s", sl_strerror(rc));
        return ENGINE_ERULE;
    }
    engine_t *e = w->engine;
    rule_state_t *found = NULL;
    pthread_mutex_lock(&e->inline_lock);
    for (size_t i = 0; i < e->ninl && found == NULL; i++) {
        if (params_equal(&e->inl[i]->t->rule, &rule)) {
            found = e->inl[i];
        }
    }
    if (found == NULL && e->ninl < ENGINE_INLINE_MAX) {
        rule_tables_t *t = tables_create(e, &rule);
        if (t != NULL) {
            ruledef_t def = {.rule = rule};
            throttle_rule_name(params, def.name);
            found = state_create(&def, t);
            if (found == NULL) {
                t->refs = 1;
                tables_release(t);
            } else {
                found->inline_rule = true;
                found->refs = 1;
                e->inl[e->ninl++] = found;
            }
        }
    }
    pthread_mutex_unlock(&e->inline_lock);
    if (found == NULL) {
        snprintf(err, ENGINE_ERR_MAX, "too many distinct inline rules (at most %d)",
                 ENGINE_INLINE_MAX);
        return ENGINE_EINLINE;
    }
    w->inl[w->inl_next] = (inline_slot_t){.params = *params, .rule = found};
    w->inl_next = (w->inl_next + 1) % INLINE_CACHE;
    *out = found;
    return ENGINE_OK;
}

void engine_foreach_rule(engine_t *e, engine_rule_fn fn, void *arg)
{
    pthread_mutex_lock(&e->reload_lock);
    ruleset_t *set = atomic_load(&e->current);
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        fn(arg, set->rules[i]);
    }
    pthread_mutex_lock(&e->inline_lock);
    size_t ninl = e->ninl;
    pthread_mutex_unlock(&e->inline_lock);
    for (size_t i = 0; i < ninl; i++) {
        fn(arg, e->inl[i]);
    }
    pthread_mutex_unlock(&e->reload_lock);
}

void engine_rule_stats(rule_state_t *rs, sl_table_stats_t *out)
{
    rule_tables_t *t = rs->t;
    sl_table_stats(t->table, out);
    pthread_mutex_lock(&t->ov_lock);
    for (size_t i = 0; i < t->nov; i++) {
        sl_table_stats_t st;
        if (sl_table_stats(t->ov[i].table, &st) == SL_OK) {
            out->keys += st.keys;
            out->bytes += st.bytes;
            out->rebuilds += st.rebuilds;
            out->reclaimed += st.reclaimed;
            out->refused += st.refused;
        }
    }
    pthread_mutex_unlock(&t->ov_lock);
}

/* ---- snapshots ----------------------------------------------------------------------------- */

/*
 * Section ids: "r:<name>" a named rule's table, "o:<name>" one of its override tables (the
 * parameters are the section's rule), "i:<name>" an inline rule. A section is loaded only into
 * a table with exactly its parameters; anything else is dropped (the rule changed meanwhile).
 */
typedef struct save_ctx {
    snapshot_writer_t *w;
    char *err;
    size_t keys;
    int failed;
} save_ctx_t;

static int save_entry(void *arg, const void *key, size_t key_len, const void *state,
                      size_t state_size)
{
    (void)state_size;
    save_ctx_t *s = arg;
    if (snapshot_entry(s->w, key, key_len, state, s->err) != 0) {
        s->failed = 1;
        return 1;
    }
    s->keys++;
    return 0;
}

static void save_table(save_ctx_t *s, char kind, const char *name, sl_table_t *table)
{
    if (s->failed) {
        return;
    }
    char id[RULE_NAME_MAX + 64];
    int n = snprintf(id, sizeof id, "%c:%s", kind, name);
    if (snapshot_section(s->w, id, (size_t)n, sl_table_rule(table), s->err) != 0) {
        s->failed = 1;
        return;
    }
    sl_table_foreach(table, save_entry, s);
}

static void save_rule(void *arg, rule_state_t *rs)
{
    save_ctx_t *s = arg;
    save_table(s, rs->inline_rule ? 'i' : 'r', rs->def.name, rs->t->table);
    pthread_mutex_lock(&rs->t->ov_lock);
    for (size_t i = 0; i < rs->t->nov; i++) {
        save_table(s, 'o', rs->def.name, rs->t->ov[i].table);
    }
    pthread_mutex_unlock(&rs->t->ov_lock);
}

int engine_save_snapshot(engine_t *e, const char *path, int64_t now_ns, size_t *keys, char *err)
{
    save_ctx_t s = {.err = err};
    if (snapshot_begin(path, now_ns, &s.w, err) != 0) {
        return -1;
    }
    engine_foreach_rule(e, save_rule, &s);
    if (s.failed) {
        snapshot_abort(s.w);
        return -1;
    }
    if (snapshot_commit(s.w, err) != 0) {
        return -1;
    }
    if (keys != NULL) {
        *keys = s.keys;
    }
    return 0;
}

typedef struct load_ctx {
    engine_t *e;
    engine_worker_t *w; /* worker 0's slot, used before the loops start */
    sl_table_t *target;
    int64_t now_ns;
    size_t keys;
} load_ctx_t;

static bool load_section(void *arg, const void *id, size_t id_len, const sl_rule_t *rule)
{
    load_ctx_t *l = arg;
    l->target = NULL;
    const char *s = id;
    if (id_len < 3 || s[1] != ':') {
        return false;
    }
    const char *name = s + 2;
    size_t name_len = id_len - 2;
    if (s[0] == 'i') {
        rule_state_t *rs = NULL;
        char err[ENGINE_ERR_MAX];
        if (engine_inline_rule(l->w, rule, &rs, err) == ENGINE_OK) {
            l->target = rs->t->table;
        }
        return l->target != NULL;
    }
    rule_state_t *rs = set_find(atomic_load(&l->e->current), name, name_len);
    if (rs == NULL) {
        return false;
    }
    if (s[0] == 'r' && params_equal(&rs->t->rule, rule)) {
        l->target = rs->t->table;
    } else if (s[0] == 'o' && rule->algorithm == rs->t->rule.algorithm) {
        l->target = override_table(l->e, rs->t, rule);
    }
    return l->target != NULL;
}

static void load_entry(void *arg, const void *key, size_t key_len, const void *state)
{
    load_ctx_t *l = arg;
    if (l->target != NULL && sl_table_put(l->target, key, key_len, state, l->now_ns) == SL_OK) {
        l->keys++;
    }
}

static void cold_start(void *arg, rule_state_t *rs)
{
    int64_t now_ns = *(int64_t *)arg;
    if (rs->def.cold_start == RULE_COLD_CLOSED) {
        rs->t->closed_from_ns = now_ns;
        rs->t->closed_until_ns = now_ns + rs->t->rule.window_ns;
    }
}

int engine_load_snapshot(engine_t *e, const char *path, int64_t now_ns, size_t *keys, char *err)
{
    load_ctx_t l = {.e = e, .w = &e->workers[0], .now_ns = now_ns};
    snapshot_visitor_t v = {.section = load_section, .entry = load_entry, .arg = &l};
    char serr[SNAPSHOT_ERR_MAX] = "";
    int rc = snapshot_load(path, &v, NULL, serr);
    if (keys != NULL) {
        *keys = l.keys;
    }
    if (rc == SNAPSHOT_LOADED) {
        return 0;
    }
    engine_foreach_rule(e, cold_start, &now_ns);
    if (rc == SNAPSHOT_MISSING) {
        return 1;
    }
    snprintf(err, ENGINE_ERR_MAX, "%s", serr);
    return -1;
}

/* ---- the Redis request store --------------------------------------------------------------- */

/* A decision waiting on Redis: holds its rule state (and so its tables and counters). Reused
 * through the worker's free list while the worker is attached to its loop. */
typedef struct remote_op {
    engine_worker_t *w;
    rule_state_t *rs;
    engine_decision_fn fn;
    void *arg;
    engine_decision_t out;
} remote_op_t;

#define OPS_KEEP 4096 /* free remote_op_t kept per worker */

bool engine_is_remote(const engine_t *e)
{
    return e->redis;
}

const char *engine_store_name(const engine_t *e)
{
    if (!e->redis) {
        return "memory";
    }
    size_t module, lua;
    redis_shared_modes(e->redis_shared, &module, &lua);
    if (lua == 0) {
        return "redis (sluice.so module)";
    }
    return module == 0 ? "redis (Lua scripts)"
                       : "redis (sluice.so module on some nodes, Lua scripts on others)";
}

void engine_redis_modes(const engine_t *e, size_t *module_nodes, size_t *lua_nodes)
{
    *module_nodes = *lua_nodes = 0;
    if (e->redis) {
        redis_shared_modes(e->redis_shared, module_nodes, lua_nodes);
    }
}

/* A Redis node's mode changed (found on a connection to it): one line, from whichever loop saw
 * it first. */
static void redis_mode_changed(const char *node, redis_mode_t mode)
{
    if (mode == REDIS_MODE_MODULE) {
        log_info("redis %s: sluice.so is loaded: deciding with its commands", node);
    } else {
        log_warn("redis %s: sluice.so is not loaded: deciding with the Lua scripts", node);
    }
}

int engine_worker_attach(engine_worker_t *w, uv_loop_t *loop, char *err)
{
    engine_t *e = w->engine;
    if (!e->redis) {
        return 0;
    }
    w->ops = (rc_freelist_t){.size = sizeof(remote_op_t), .keep = OPS_KEEP};
    char rerr[REDIS_STORE_ERR_MAX];
    redis_store_t *r;
    if (redis_store_create(loop, &e->rc, e->redis_shared, e->cfg.redis_timeout_ns,
                           redis_mode_changed, &r, rerr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "redis store: %s", rerr);
        return -1;
    }
    redis_shared_set(e->redis_shared, &w->redis, r); /* engine_worker_stats reads it */
    return 0;
}

void engine_worker_detach(engine_worker_t *w)
{
    redis_store_t *r = w->redis;
    if (r != NULL) {
        redis_shared_set(w->engine->redis_shared, &w->redis, NULL);
        redis_store_free(r);
    }
    rc_freelist_clear(&w->ops);
}

/* The counters of a store, under the lock that keeps it from being freed meanwhile. */
static void store_stats(void *arg, const redis_store_t *store)
{
    engine_store_stats_t *out = arg;
    const redis_store_stats_t *s = redis_store_stats(store);
    const rc_stats_t *r = redis_store_client_stats(store);
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
    *out = (engine_store_stats_t){.decisions = LOAD(s->decisions),
                                  .cache_hits = LOAD(s->cache_hits),
                                  .timeouts = LOAD(s->timeouts),
                                  .errors = LOAD(s->errors),
                                  .noscript = LOAD(s->noscript),
                                  .redirects = LOAD(r->redirects),
                                  .refreshes = LOAD(r->refreshes),
                                  .reconnects = LOAD(r->reconnects)};
#undef LOAD
}

void engine_worker_stats(const engine_worker_t *w, engine_store_stats_t *out)
{
    *out = (engine_store_stats_t){0};
    if (w->engine->redis) {
        redis_shared_visit(w->engine->redis_shared, &w->redis, store_stats, out);
    }
}

/* A detached worker (its loop stopping) keeps nothing: a late answer frees its op. */
static void op_release(engine_worker_t *w, remote_op_t *op)
{
    if (w->redis == NULL) {
        free(op);
        return;
    }
    rc_freelist_put(&w->ops, op);
}

/* shadow mode, counters, and on_store_error: the end of every decision */
static void finish(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out)
{
    rule_counters_t *c = &rs->t->counters[w->index];
    if (st != SL_OK) {
        store_error_decision(rs, out);
        atomic_fetch_add_explicit(&c->store_errors, 1, memory_order_relaxed);
        return;
    }
    out->never = !out->d.allowed && out->d.retry_after_ns < 0;
    if (out->d.allowed) {
        atomic_fetch_add_explicit(&c->allowed, 1, memory_order_relaxed);
    } else if (rs->def.shadow) {
        out->shadowed = true;
        out->d.allowed = true;
        out->d.retry_after_ns = 0;
        atomic_fetch_add_explicit(&c->shadow_denied, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&c->denied, 1, memory_order_relaxed);
    }
}

static void remote_done(void *arg, int status, const sl_decision_t *d, const char *err)
{
    remote_op_t *op = arg;
    if (status != 0) {
        log_debug("rule '%s': request store error: %s", op->rs->def.name, err);
    }
    if (status == 0) {
        op->out.d = *d;
    }
    finish(op->w, op->rs, status == 0 ? SL_OK : SL_EINVAL, &op->out);
    op->fn(op->arg, ENGINE_OK, &op->out);
    state_release(op->rs);
    op_release(op->w, op);
}

int engine_decide_async(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                        int64_t cost, int64_t now_ns, engine_decision_fn fn, void *arg)
{
    if (w->redis == NULL) {
        engine_decision_t out;
        int rc = engine_decide(w, rs, key, key_len, cost, now_ns, &out);
        if (rc == ENGINE_OK) {
            fn(arg, rc, &out);
        }
        return rc;
    }
    if (cost < 0) {
        return ENGINE_ECOST;
    }
    if (key_len > w->engine->cfg.key_max) {
        return ENGINE_EKEY;
    }
    remote_op_t *op = rc_freelist_get(&w->ops);
    if (op == NULL) {
        engine_decision_t out = {.rule = rs, .window_ns = rs->t->rule.window_ns};
        finish(w, rs, SL_ENOMEM, &out);
        fn(arg, ENGINE_OK, &out);
        return ENGINE_OK;
    }
    *op = (remote_op_t){.w = w, .rs = rs, .fn = fn, .arg = arg};
    op->out = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
    atomic_fetch_add(&rs->refs, 1);
    const sl_rule_t *rule = &rs->t->rule;
    if (rs->has_overrides) {
        const ov_entry_t *en = override_lookup(w, rs, key, key_len, now_ns);
        if (en == NULL) {
            remote_done(op, -1, NULL, "override lookup failed");
            return ENGINE_OK;
        }
        if (en->present && en->blocked) {
            op->out.d = (sl_decision_t){.allowed = false, .retry_after_ns = -1};
            op->out.blocked = true;
            remote_done(op, 0, &op->out.d, NULL);
            return ENGINE_OK;
        }
        if (en->present) {
            rule = &en->ov_rule;
            op->out.window_ns = en->window_ns;
        }
    }
    redis_store_decide(w->redis, rs->def.name, rule, key, key_len, cost, now_ns, remote_done, op);
    return ENGINE_OK;
}

void engine_forget_refusals(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                            int64_t now_ns)
{
    if (w->redis == NULL) {
        return;
    }
    /* the base parameters' key, and the override's that decisions use now, if any */
    redis_store_forget(w->redis, rs->def.name, &rs->t->rule, key, key_len);
    if (rs->has_overrides) {
        const ov_entry_t *en = override_lookup(w, rs, key, key_len, now_ns);
        if (en != NULL && en->present && !en->blocked) {
            redis_store_forget(w->redis, rs->def.name, &en->ov_rule, key, key_len);
        }
    }
}

typedef struct remote_reset {
    engine_worker_t *w;
    rule_state_t *rs;
    engine_done_fn fn;
    void *arg;
} remote_reset_t;

static void remote_reset_done(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)d;
    (void)err;
    remote_reset_t *op = arg;
    op->fn(op->arg, status == 0 ? ENGINE_OK : ENGINE_ESTORE);
    state_release(op->rs);
    free(op);
}

int engine_reset_async(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                       engine_done_fn fn, void *arg)
{
    if (w->redis == NULL) {
        int rc = engine_reset(w, rs, key, key_len);
        if (rc == ENGINE_OK) {
            fn(arg, rc);
        }
        return rc;
    }
    if (key_len > w->engine->cfg.key_max) {
        return ENGINE_EKEY;
    }
    remote_reset_t *op = malloc(sizeof *op);
    if (op == NULL) {
        fn(arg, ENGINE_ESTORE);
        return ENGINE_OK;
    }
    *op = (remote_reset_t){.w = w, .rs = rs, .fn = fn, .arg = arg};
    atomic_fetch_add(&rs->refs, 1);
    /* the base parameters' key; an override's key (other parameters) expires by itself */
    redis_store_reset(w->redis, rs->def.name, &rs->t->rule, key, key_len, remote_reset_done, op);
    return ENGINE_OK;
}

void engine_rule_hold(rule_state_t *rs)
{
    atomic_fetch_add(&rs->refs, 1);
}

void engine_rule_release(rule_state_t *rs)
{
    state_release(rs);
}

/* ---- SL.ALLOWALL in one step with the Redis store ----------------------------------------- */

typedef struct all_op {
    engine_worker_t *w;
    size_t n;
    rule_state_t *rules[REDIS_ALL_MAX];
    int64_t window_ns[REDIS_ALL_MAX];
    engine_all_fn fn;
    void *arg;
} engine_all_op_t;

static void all_done(void *arg, int status, const sl_decision_t *d, size_t n, long refused,
                     const char *err)
{
    engine_all_op_t *op = arg;
    engine_decision_t out[REDIS_ALL_MAX];
    size_t count = status == 0 ? n : op->n;
    if (status != 0) {
        log_debug("SL.ALLOWALL: request store error: %s", err);
    }
    for (size_t k = 0; k < count; k++) {
        size_t i = refused >= 0 ? (size_t)refused : k;
        out[k] = (engine_decision_t){.rule = op->rules[i], .window_ns = op->window_ns[i]};
        if (status == 0) {
            out[k].d = d[k];
        }
        finish(op->w, op->rules[i], status == 0 ? SL_OK : SL_EINVAL, &out[k]);
    }
    op->fn(op->arg, out, count, status == 0 ? refused : -1);
    for (size_t i = 0; i < op->n; i++) {
        state_release(op->rules[i]);
    }
    free(op);
}

int engine_allowall_async(engine_worker_t *w, rule_state_t **rules, const char *const *keys,
                          const size_t *key_lens, size_t n, int64_t cost, int64_t now_ns,
                          engine_all_fn fn, void *arg)
{
    if (w->redis == NULL || n == 0 || n > REDIS_ALL_MAX) {
        return ENGINE_ENOTSUP;
    }
    redis_pair_t pairs[REDIS_ALL_MAX];
    engine_all_op_t *op = calloc(1, sizeof *op);
    if (op == NULL) {
        return ENGINE_ENOTSUP;
    }
    *op = (engine_all_op_t){.w = w, .n = n, .fn = fn, .arg = arg};
    for (size_t i = 0; i < n; i++) {
        rule_state_t *rs = rules[i];
        const sl_rule_t *rule = &rs->t->rule;
        op->window_ns[i] = rule->window_ns;
        if (rs->has_overrides) {
            const ov_entry_t *en = override_lookup(w, rs, keys[i], key_lens[i], now_ns);
            if (en == NULL || (en->present && en->blocked)) {
                free(op); /* blocked keys and lookup failures: the step-by-step path */
                return ENGINE_ENOTSUP;
            }
            if (en->present) {
                rule = &en->ov_rule;
                op->window_ns[i] = en->window_ns;
            }
        }
        pairs[i] = (redis_pair_t){.name = rs->def.name,
                                  .rule = rule,
                                  .key = keys[i],
                                  .key_len = key_lens[i],
                                  .shadow = rs->def.shadow};
    }
    for (size_t i = 0; i < n; i++) {
        op->rules[i] = rules[i];
        atomic_fetch_add(&rules[i]->refs, 1);
    }
    if (redis_store_decide_all(w->redis, pairs, n, cost, all_done, op) != 0) {
        for (size_t i = 0; i < n; i++) {
            state_release(op->rules[i]);
        }
        free(op);
        return ENGINE_ENOTSUP;
    }
    return ENGINE_OK;
}
