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

#include "proto/throttle_args.h"
#include "server/engine_impl.h"
#include "server/log.h"
#include "server/snapshot.h"

/* Memory for per-thread slots: whole cache lines, so two threads never share one. */
static void *alloc_lines(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* ---- rule states and tables ---------------------------------------------------------------- */

bool params_equal(const sl_rule_t *a, const sl_rule_t *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit && a->window_ns == b->window_ns &&
           a->burst == b->burst && a->buckets == b->buckets && a->max_delay_ns == b->max_delay_ns;
}

#define TABLE_SHARDS     64 /* lock shards of a table with no cap */
#define TABLE_SHARD_KEYS 64 /* under a cap, fewer shards until each can hold this many keys */

/* The table settings for a rule: under --max-memory, split into fewer shards when a shard's
 * share of the cap would hold few of its keys (sliding_log rings take 8 bytes per unit of the
 * limit). */
static sl_table_config_t table_config(const engine_t *e, const sl_rule_t *rule)
{
    sl_table_config_t tc = {
        .max_bytes = e->cfg.max_memory, .key_max = e->cfg.key_max, .shards = TABLE_SHARDS};
    while (tc.shards > 1 && !sl_table_can_hold(rule, &tc, TABLE_SHARD_KEYS)) {
        tc.shards /= 2;
    }
    return tc;
}

bool engine_rule_fits(const engine_t *e, const sl_rule_t *rule, char *err, size_t cap)
{
    sl_table_config_t one = {.max_bytes = e->cfg.max_memory, .shards = 1};
    if (e->redis || sl_table_can_hold(rule, &one, 1)) {
        return true;
    }
    snprintf(err, cap,
             "one key of this rule takes %zu bytes of state, more than --max-memory (%zu bytes "
             "for each rule's keys) can ever hold",
             sl_state_size(rule), e->cfg.max_memory);
    return false;
}

bool engine_rule_check(void *arg, const sl_rule_t *rule, char *err, size_t cap)
{
    return engine_rule_fits(arg, rule, err, cap);
}

sl_table_t *engine_new_table(const engine_t *e, const sl_rule_t *rule)
{
    sl_table_config_t tc = table_config(e, rule);
    sl_table_t *t = NULL;
    if (sl_table_create(rule, &tc, &t) != SL_OK) {
        return NULL;
    }
    return t;
}

rule_tables_t *engine_tables_create(const engine_t *e, const sl_rule_t *rule)
{
    rule_tables_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    t->rule = *rule;
    t->table = engine_new_table(e, rule);
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
    const sl_rule_t *from; /* the rule the visited states were written under */
    void *buf;             /* sl_state_size(to's rule) bytes */
    int64_t now_ns;
} migrate_ctx_t;

static int migrate_entry(void *arg, const void *key, size_t key_len, const void *state,
                         size_t state_size)
{
    (void)state_size;
    migrate_ctx_t *m = arg;
    if (sl_state_convert(m->from, state, sl_table_rule(m->to), m->buf, m->now_ns) == SL_OK) {
        sl_table_put(m->to, key, key_len, m->buf, m->now_ns); /* a key at the cap is dropped */
    }
    return 0;
}

/* Converts every state of `from` into `to` (a table no decision sees yet). */
static void table_migrate(sl_table_t *to, sl_table_t *from, int64_t now_ns)
{
    migrate_ctx_t m = {.to = to, .from = sl_table_rule(from), .now_ns = now_ns};
    m.buf = malloc(sl_state_size(sl_table_rule(to)));
    if (m.buf != NULL) {
        sl_table_foreach(from, migrate_entry, &m);
    }
    free(m.buf);
}

/*
 * A rule whose numbers changed keeps its keys' usage: every state is converted to the new rule
 * (sl_state_convert: exact where the layouts say the same, else counting more, never less), the
 * override tables' keys into the new rule's table too (a lookup moves each to its override's
 * new table). Decisions made on the old tables while the copy runs are not carried over
 * (docs/design.md). Returns false when the algorithm changed: nothing can be carried.
 */
static bool tables_migrate(rule_tables_t *to, rule_tables_t *from)
{
    if (to->rule.algorithm != from->rule.algorithm) {
        return false;
    }
    int64_t now_ns = sl_now_ns();
    table_migrate(to->table, from->table, now_ns);
    pthread_mutex_lock(&from->ov_lock);
    for (size_t i = 0; i < from->nov; i++) {
        table_migrate(to->table, from->ov[i].table, now_ns);
    }
    pthread_mutex_unlock(&from->ov_lock);
    return true;
}

void engine_tables_release(rule_tables_t *t)
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
rule_state_t *engine_state_create(ruledef_t *def, rule_tables_t *t)
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

static void counters_sum(const rule_counters_t *c, unsigned n, uint64_t *allowed, uint64_t *denied,
                         uint64_t *shadow_denied, uint64_t *store_errors)
{
    *allowed = *denied = *shadow_denied = *store_errors = 0;
    for (unsigned i = 0; i < n; i++) {
        *allowed += atomic_load_explicit(&c[i].allowed, memory_order_relaxed);
        *denied += atomic_load_explicit(&c[i].denied, memory_order_relaxed);
        *shadow_denied += atomic_load_explicit(&c[i].shadow_denied, memory_order_relaxed);
        *store_errors += atomic_load_explicit(&c[i].store_errors, memory_order_relaxed);
    }
}

void engine_state_release(rule_state_t *rs)
{
    if (rs == NULL || atomic_fetch_sub(&rs->refs, 1) > 1) {
        return;
    }
    engine_t *e = rs->engine;
    if (rs->inline_rule && e != NULL && rs->own_series) {
        atomic_fetch_sub(&e->inl_series, 1);
    } else if (rs->inline_rule && e != NULL) { /* "inline:other" keeps what it counted */
        uint64_t a, d, sh, err;
        counters_sum(rs->t->counters, e->cfg.workers, &a, &d, &sh, &err);
        atomic_fetch_add_explicit(&e->inl_other_gone.allowed, a, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->inl_other_gone.denied, d, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->inl_other_gone.shadow_denied, sh, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->inl_other_gone.store_errors, err, memory_order_relaxed);
    }
    engine_tables_release(rs->t);
    ruledef_free(&rs->def);
    free(rs);
}

static void set_free(ruleset_t *set)
{
    if (set == NULL) {
        return;
    }
    for (size_t i = 0; i < set->n; i++) {
        engine_state_release(set->rules[i]);
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
    if (e->cfg.max_inline == 0) {
        e->cfg.max_inline = ENGINE_INLINE_MAX;
    }
    if (e->store_url == NULL || e->workers == NULL) {
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        engine_free(e);
        return -1;
    }
    memset(e->workers, 0, sizeof(engine_worker_t) * cfg->workers);
    for (unsigned i = 0; i < cfg->workers; i++) {
        e->workers[i].engine = e;
        e->workers[i].index = i;
        e->workers[i].ops = (rc_freelist_t){.size = sizeof(engine_op_t), .keep = OPS_KEEP};
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
    engine_stop(e);
    set_free(atomic_load(&e->current));
    while (e->retired != NULL) {
        ruleset_t *next = e->retired->retired_next;
        set_free(e->retired);
        e->retired = next;
    }
    inline_free_all(e);
    if (e->workers != NULL) {
        for (unsigned i = 0; i < e->cfg.workers; i++) {
            override_worker_free(&e->workers[i]);
            rc_freelist_clear(&e->workers[i].ops);
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

size_t engine_key_max(const engine_t *e)
{
    return e->cfg.key_max;
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

/* A rule whose algorithm changed cannot carry its keys' usage: they start as after a start
 * without a snapshot, by the rule's cold_start (closed: as having used their whole quota, for
 * one window). Logged, since usage is lost. */
static void algorithm_changed(const engine_t *e, const ruledef_t *def, const sl_rule_t *old,
                              rule_tables_t *t)
{
    bool closed = def->cold_start == RULE_COLD_CLOSED;
    if (closed) {
        t->closed_from_ns = sl_now_ns();
        t->closed_until_ns = t->closed_from_ns + t->rule.window_ns;
    }
    log_warn("rule '%s' changed algorithm (%s to %s): its keys' usage cannot be carried over; "
             "they start %s",
             def->name, sl_algorithm_name(old->algorithm), sl_algorithm_name(def->rule.algorithm),
             e->redis ? "fresh (in Redis, cold_start does not apply)"
             : closed ? "as having used their whole quota, for one window (cold_start: closed)"
                      : "fresh (cold_start: open)");
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
            t = engine_tables_create(e, &def.rule);
            if (t != NULL && prev != NULL && !tables_migrate(t, prev->t)) {
                algorithm_changed(e, &def, &prev->t->rule, t);
            }
            char why[ENGINE_ERR_MAX];
            if (t != NULL && !engine_rule_fits(e, &def.rule, why, sizeof why)) {
                log_warn("rule '%s' is in force but %s: every new key gets its on_store_error",
                         def.name, why);
            }
        }
        rule_state_t *rs = t != NULL ? engine_state_create(&def, t) : NULL;
        if (rs != NULL) {
            rs->engine = e;
        }
        if (rs == NULL) {
            if (t != NULL && t->refs == 0) {
                t->refs = 1;
                engine_tables_release(t);
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
        if (!any && t == (prev != NULL ? prev->t : NULL)) {
            override_tables_return(t, sl_now_ns()); /* its last override went */
        }
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
        atomic_fetch_add(&e->store_errors, 1);
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
        atomic_fetch_add(&e->store_errors, 1);
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

/* The config thread's poll: a new version of the store is put in force; a store file that was
 * deleted or replaced is reported once (the rules in force stay). */
static void engine_poll(void *arg, config_store_t *store)
{
    engine_t *e = arg;
    char err[ENGINE_ERR_MAX];
    char serr[CONFIG_STORE_ERR_MAX];
    if (config_store_check(store, serr) != 0) {
        if (strcmp(serr, e->store_problem) != 0) { /* reported once per change */
            log_error("%s", serr);
            atomic_fetch_add(&e->store_errors, 1);
            snprintf(e->store_problem, sizeof e->store_problem, "%s", serr);
        }
    } else if (e->store_problem[0] != '\0') {
        log_info("config store file is back: changes are accepted again");
        e->store_problem[0] = '\0';
    }
    int rc = engine_reload(e, store, false, err);
    if (rc < 0) {
        log_error("rules not reloaded (the rules in force stay): %s", err);
    } else if (rc > 0) {
        log_info("rules version %lld in force", (long long)engine_version(e));
    }
    engine_collect(e);
    size_t swept = engine_inline_sweep(e, sl_now_ns());
    if (swept > 0) {
        log_debug("%zu idle inline rules taken out of force", swept);
    }
}

int engine_start(engine_t *e, int64_t poll_interval_ns, char *err)
{
    char terr[ENGINE_ERR_MAX];
    if (config_thread_start(e->store, e->cfg.workers, poll_interval_ns, engine_poll, e, &e->ct,
                            terr, sizeof terr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "%s", terr);
        return -1;
    }
    return 0;
}

void engine_stop(engine_t *e)
{
    config_thread_stop(e->ct);
    e->ct = NULL;
}

uint64_t engine_store_errors(engine_t *e)
{
    return atomic_load_explicit(&e->store_errors, memory_order_relaxed);
}

void engine_submit(engine_worker_t *w, config_job_t *job)
{
    engine_t *e = w->engine;
    if (e->ct != NULL) {
        job->inbox = w->inbox;
        config_job_submit(e->ct, job);
        return;
    }
    char serr[CONFIG_STORE_ERR_MAX];
    if (w->store == NULL && config_store_open(e->store_url, &w->store, serr) != 0) {
        w->store = NULL;
    }
    job->inbox = NULL;
    job->run(job, w->store, true);
    job->done(job);
}

void engine_submit_main(engine_t *e, config_job_t *job)
{
    job->inbox = NULL;
    if (e->ct != NULL) {
        config_job_submit(e->ct, job);
        return;
    }
    job->run(job, e->store, true);
    job->done(job);
}

/* ---- workers ------------------------------------------------------------------------------- */

engine_worker_t *engine_worker(engine_t *e, unsigned index)
{
    return index < e->cfg.workers ? &e->workers[index] : NULL;
}

const ruleset_t *engine_worker_begin(engine_worker_t *w)
{
    engine_t *e = w->engine;
    inline_worker_begin(w);
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
    inline_worker_end(w);
}

rule_state_t *engine_find(engine_worker_t *w, const char *name, size_t len)
{
    return set_find(w->set, name, len);
}

const rule_counters_t *engine_counters(const rule_state_t *rule, unsigned worker)
{
    return &rule->t->counters[worker];
}

void engine_counters_sum(const rule_state_t *rule, uint64_t *allowed, uint64_t *denied,
                         uint64_t *shadow_denied, uint64_t *store_errors)
{
    unsigned n = rule->engine != NULL ? rule->engine->cfg.workers : 0;
    counters_sum(rule->t->counters, n, allowed, denied, shadow_denied, store_errors);
}

void engine_inline_retired(engine_t *e, uint64_t *allowed, uint64_t *denied,
                           uint64_t *shadow_denied, uint64_t *store_errors)
{
    counters_sum(&e->inl_other_gone, 1, allowed, denied, shadow_denied, store_errors);
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

/*
 * cold_start closed: a key first seen inside the closed window starts as if it had taken the
 * whole capacity when the server started. An admission (cost > 0) stores that state before
 * deciding; a peek decides on a saturated copy and stores nothing, so it answers what an
 * admission would. Returns false when the key is not fresh (decide on the table as usual) or
 * memory ran out.
 */
static bool cold_start_decide(rule_tables_t *t, sl_table_t *table, const void *key, size_t key_len,
                              int64_t cost, int64_t now_ns, sl_decision_t *out)
{
    const sl_rule_t *rule = sl_table_rule(table);
    size_t size = sl_state_size(rule);
    unsigned char stack[STATE_STACK_MAX];
    unsigned char *state = size <= sizeof stack ? stack : malloc(size);
    bool peeked = false;
    if (state == NULL) {
        return false;
    }
    if (sl_table_get(table, key, key_len, state) == SL_OK) {
        bool fresh = true;
        for (size_t i = 0; i < size && fresh; i++) {
            fresh = state[i] == 0;
        }
        if (fresh) {
            sl_decision_t d;
            sl_decide(rule, state, rule->capacity, t->closed_from_ns, &d);
            if (cost > 0) {
                sl_table_put(table, key, key_len, state, now_ns);
            } else {
                sl_decide(rule, state, 0, now_ns, out);
                peeked = true;
            }
        }
    }
    if (state != stack) {
        free(state);
    }
    return peeked;
}

/* shadow mode, counters, and on_store_error: the end of every decision */
void engine_finish(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out)
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

/* A key its override blocks (limit 0): refused, never admissible. Returns true when en says so
 * (and fills out). */
static bool override_blocks(const ov_entry_t *en, engine_decision_t *out)
{
    if (en == NULL || !en->present || !en->blocked) {
        return false;
    }
    out->d = (sl_decision_t){.allowed = false, .retry_after_ns = -1};
    out->blocked = true;
    return true;
}

/* Decides or settles on the memory tables with the key's override known (en NULL: the rule has
 * none). */
static int apply_local(engine_worker_t *w, rule_state_t *rs, const ov_entry_t *en, const void *key,
                       size_t key_len, const engine_request_t *req, int64_t now_ns,
                       engine_decision_t *out)
{
    rule_tables_t *t = rs->t;
    *out = (engine_decision_t){.rule = rs, .window_ns = t->rule.window_ns};
    sl_table_t *table = t->table;
    if (override_blocks(en, out)) {
        engine_finish(w, rs, SL_OK, out);
        return ENGINE_OK;
    }
    if (en != NULL && en->present) {
        table = en->table;
        out->window_ns = en->window_ns;
    }
    int st;
    if (req->settle) {
        int64_t charged_ns = req->charged_ns < 0 ? now_ns : req->charged_ns;
        st = sl_table_settle(table, key, key_len, req->reserved, req->actual, charged_ns, now_ns,
                             &out->d);
    } else if (now_ns < t->closed_until_ns &&
               cold_start_decide(t, table, key, key_len, req->cost, now_ns, &out->d)) {
        st = SL_OK;
    } else {
        st = sl_table_decide(table, key, key_len, req->cost, now_ns, &out->d);
    }
    if (st == SL_EKEY) {
        return ENGINE_EKEY;
    }
    if (st == SL_ECOST) {
        return ENGINE_ECOST;
    }
    engine_finish(w, rs, st, out);
    return ENGINE_OK;
}

static int decide_local(engine_worker_t *w, rule_state_t *rs, const ov_entry_t *en, const void *key,
                        size_t key_len, int64_t cost, int64_t now_ns, engine_decision_t *out)
{
    engine_request_t req = {.cost = cost};
    return apply_local(w, rs, en, key, key_len, &req, now_ns, out);
}

static int check_request(const engine_worker_t *w, size_t key_len, int64_t cost)
{
    if (cost < 0) {
        return ENGINE_ECOST;
    }
    if (key_len > w->engine->cfg.key_max) {
        return ENGINE_EKEY;
    }
    return ENGINE_OK;
}

/* ---- all or nothing, on the memory tables --------------------------------------------------- */

/*
 * The memory store's side of engine_allowall (allowall.c): n distinct (rule, key) pairs whose
 * overrides are in the worker's cache. The pairs of rules in force (not in shadow mode) are
 * decided in one sl_table_decide_all, under every shard's lock at once: either every one is
 * charged or none. A shadow rule's pair never blocks the others: it is decided on its own once
 * the rest were admitted. An override that could not be read, or a key at the memory cap, takes
 * its rule's on_store_error: deny refuses the whole, allow lets that pair pass uncharged.
 * d[i] gets each pair's decision; *refused the pair that refused the whole, or n.
 */
void engine_decide_all_local(engine_worker_t *w, rule_state_t *const *rules,
                             const char *const *keys, const size_t *key_lens, const int64_t *costs,
                             size_t n, int64_t now_ns, engine_decision_t *d, size_t *refused)
{
    sl_multi_request_t reqs[SL_MULTI_MAX];
    sl_table_t *tables[SL_MULTI_MAX]; /* each pair's table (its override's, if any) */
    size_t at[SL_MULTI_MAX];          /* reqs[k] is pair at[k] */
    bool out[SL_MULTI_MAX] = {false}; /* decided apart: a store error let through */
    *refused = n;
    for (size_t i = 0; i < n; i++) {
        rule_state_t *rs = rules[i];
        d[i] = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
        const ov_entry_t *en =
            rs->has_overrides ? override_cached(w, rs, keys[i], key_lens[i], now_ns) : NULL;
        if (rs->has_overrides && en == NULL) {
            engine_finish(w, rs, SL_EINVAL, &d[i]); /* the lookup failed: on_store_error */
            out[i] = true;
            if (!d[i].d.allowed) {
                *refused = i;
                return;
            }
            continue;
        }
        if (override_blocks(en, &d[i])) {
            engine_finish(w, rs, SL_OK, &d[i]);
            *refused = i;
            return;
        }
        sl_table_t *table = rs->t->table;
        if (en != NULL && en->present) {
            table = en->table;
            d[i].window_ns = en->window_ns;
        }
        if (now_ns < rs->t->closed_until_ns && costs[i] > 0) { /* saturates a new key */
            cold_start_decide(rs->t, table, keys[i], key_lens[i], costs[i], now_ns, &d[i].d);
        }
        tables[i] = table;
    }
    for (size_t tries = 0; tries <= n; tries++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!out[i] && !rules[i]->def.shadow) {
                at[k] = i;
                reqs[k] = (sl_multi_request_t){
                    .table = tables[i], .key = keys[i], .key_len = key_lens[i], .cost = costs[i]};
                k++;
            }
        }
        size_t r = k;
        int rc = k > 0 ? sl_table_decide_all(reqs, k, now_ns, &r) : SL_OK;
        if (rc != SL_OK && r < k) { /* a key at the memory cap: its rule's on_store_error */
            size_t i = at[r];
            engine_finish(w, rules[i], rc, &d[i]);
            out[i] = true;
            if (!d[i].d.allowed) {
                *refused = i;
                return;
            }
            continue; /* let through uncharged: decide the rest again */
        }
        if (rc != SL_OK) {
            for (size_t j = 0; j < n; j++) { /* out of memory before anything: every pair */
                engine_finish(w, rules[j], rc, &d[j]);
            }
            *refused = 0;
            return;
        }
        for (size_t j = 0; j < k; j++) {
            d[at[j]].d = reqs[j].decision;
        }
        if (r < k) {
            engine_finish(w, rules[at[r]], SL_OK, &d[at[r]]); /* counted; nothing charged */
            *refused = at[r];
            return;
        }
        for (size_t j = 0; j < k; j++) {
            engine_finish(w, rules[at[j]], SL_OK, &d[at[j]]);
        }
        break;
    }
    /* every pair in force was charged: the shadow rules' pairs, each on its own */
    for (size_t i = 0; i < n; i++) {
        if (!out[i] && rules[i]->def.shadow) {
            const ov_entry_t *en = rules[i]->has_overrides
                                       ? override_cached(w, rules[i], keys[i], key_lens[i], now_ns)
                                       : NULL;
            decide_local(w, rules[i], en, keys[i], key_lens[i], costs[i], now_ns, &d[i]);
        }
    }
}

int engine_decide(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                  int64_t cost, int64_t now_ns, engine_decision_t *out)
{
    int rc = check_request(w, key_len, cost);
    if (rc != ENGINE_OK) {
        return rc;
    }
    const ov_entry_t *en = NULL;
    if (rs->has_overrides) {
        en = override_cached(w, rs, key, key_len, now_ns);
        if (en == NULL && (en = override_lookup_now(w, rs, key, key_len, now_ns)) == NULL) {
            *out = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
            engine_finish(w, rs, SL_EINVAL, out);
            return ENGINE_OK;
        }
    }
    return decide_local(w, rs, en, key, key_len, cost, now_ns, out);
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

void engine_foreach_rule(engine_t *e, engine_rule_fn fn, void *arg)
{
    /* Every rule is held, and fn runs with no lock: a snapshot or /metrics never delays a
     * reload or a new inline rule. */
    pthread_mutex_lock(&e->reload_lock);
    ruleset_t *set = atomic_load(&e->current);
    size_t n = set != NULL ? set->n : 0;
    rule_state_t **named = n > 0 ? malloc(n * sizeof *named) : NULL;
    n = named != NULL ? n : 0;
    for (size_t i = 0; i < n; i++) {
        named[i] = set->rules[i];
        atomic_fetch_add(&named[i]->refs, 1);
    }
    pthread_mutex_unlock(&e->reload_lock);
    rule_state_t **inl = NULL;
    size_t ninl = inline_hold_all(e, &inl);
    for (size_t i = 0; i < n + ninl; i++) {
        rule_state_t *rs = i < n ? named[i] : inl[i - n];
        fn(arg, rs);
        engine_state_release(rs);
    }
    free(named);
    free(inl);
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
 * parameters are the section's rule), "i:<name>" an inline rule. A rule whose numbers changed
 * while sluiced was stopped gets its keys converted (sl_state_convert), as a change at run time
 * does; one whose algorithm changed starts by its cold_start. An "r:" section carries the rule's
 * cold_start: closed window while it lasts, restored on load.
 */
typedef struct save_ctx {
    snapshot_writer_t *w;
    int64_t now_ns;
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

static void save_table(save_ctx_t *s, char kind, const char *name, sl_table_t *table,
                       const snapshot_closed_t *closed)
{
    if (s->failed) {
        return;
    }
    char id[RULE_NAME_MAX + 64];
    int n = snprintf(id, sizeof id, "%c:%s", kind, name);
    if (snapshot_section(s->w, id, (size_t)n, sl_table_rule(table), closed, s->err) != 0) {
        s->failed = 1;
        return;
    }
    /* no shard lock is held while save_entry writes (sl_table_foreach visits a copy) */
    int rc = sl_table_foreach(table, save_entry, s);
    if (rc != 0 && !s->failed) {
        snprintf(s->err, ENGINE_ERR_MAX, "table of '%s': %s", name, sl_strerror(rc));
        s->failed = 1;
    }
}

/*
 * A rule's table, then its override tables. The list of override tables is copied under ov_lock
 * and written without it: a loop takes ov_lock to find an override's table (a key's first
 * override decision) and a reset, and must not wait for the disk. The tables themselves live as
 * long as rs->t, which the caller holds; a table added meanwhile waits for the next snapshot.
 */
static void save_rule(void *arg, rule_state_t *rs)
{
    save_ctx_t *s = arg;
    /* a rule still in its cold_start: closed window keeps it across the restart: the keys it
     * has not seen since are not in the snapshot, yet may have used their quota before */
    snapshot_closed_t closed = {rs->t->closed_from_ns, rs->t->closed_until_ns};
    save_table(s, rs->inline_rule ? 'i' : 'r', rs->def.name, rs->t->table,
               s->now_ns < closed.until_ns ? &closed : NULL);
    pthread_mutex_lock(&rs->t->ov_lock);
    size_t nov = rs->t->nov;
    sl_table_t **ov = nov > 0 ? malloc(nov * sizeof *ov) : NULL;
    for (size_t i = 0; i < nov && ov != NULL; i++) {
        ov[i] = rs->t->ov[i].table;
    }
    pthread_mutex_unlock(&rs->t->ov_lock);
    if (nov > 0 && ov == NULL) {
        if (!s->failed) {
            snprintf(s->err, ENGINE_ERR_MAX, "override tables of '%s': out of memory",
                     rs->def.name);
        }
        s->failed = 1;
        return;
    }
    for (size_t i = 0; i < nov; i++) {
        save_table(s, 'o', rs->def.name, ov[i], NULL);
    }
    free(ov);
}

int engine_save_snapshot(engine_t *e, const char *path, int64_t now_ns, size_t *keys, char *err)
{
    save_ctx_t s = {.now_ns = now_ns, .err = err};
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
    sl_rule_t from;       /* the section's rule, when its states are converted to target's */
    bool convert;         /* the section's numbers differ from the rule's now */
    unsigned char *state; /* a converted state, sl_state_size(target's rule) bytes */
    size_t state_size;    /* bytes allocated at state */
    int64_t now_ns;
    size_t keys;
} load_ctx_t;

/* Sets up converting the section's states (under `from`) to `to`'s numbers. */
static bool load_convert(load_ctx_t *l, const sl_rule_t *from, const sl_rule_t *to)
{
    size_t size = sl_state_size(to);
    if (size > l->state_size) {
        unsigned char *p = realloc(l->state, size);
        if (p == NULL) {
            return false;
        }
        l->state = p;
        l->state_size = size;
    }
    l->from = *from;
    l->convert = true;
    return true;
}

static void cold_start(void *arg, rule_state_t *rs)
{
    int64_t now_ns = *(int64_t *)arg;
    if (rs->def.cold_start == RULE_COLD_CLOSED) {
        rs->t->closed_from_ns = now_ns;
        rs->t->closed_until_ns = now_ns + rs->t->rule.window_ns;
    }
}

static bool load_section(void *arg, const void *id, size_t id_len, const sl_rule_t *rule,
                         const snapshot_closed_t *closed)
{
    load_ctx_t *l = arg;
    l->target = NULL;
    l->convert = false;
    const char *s = id;
    if (id_len < 3 || s[1] != ':') {
        return false;
    }
    const char *name = s + 2;
    size_t name_len = id_len - 2;
    if (s[0] == 'i') {
        rule_state_t *rs = NULL;
        char err[ENGINE_ERR_MAX];
        if (engine_inline_rule(l->w, rule, NULL, l->now_ns, &rs, err) == ENGINE_OK) {
            l->target = rs->t->table;
        }
        return l->target != NULL;
    }
    rule_state_t *rs = set_find(atomic_load(&l->e->current), name, name_len);
    if (rs == NULL) {
        return false;
    }
    if (s[0] == 'r') {
        rule_tables_t *t = rs->t;
        if (rule->algorithm != t->rule.algorithm) { /* changed while sluiced was stopped */
            if (rs->def.cold_start == RULE_COLD_CLOSED && t->closed_until_ns <= l->now_ns) {
                cold_start(&l->now_ns, rs);
            }
            log_info("snapshot: rule '%s' has another algorithm now (was %s): its keys start by "
                     "its cold_start",
                     rs->def.name, sl_algorithm_name(rule->algorithm));
            return false;
        }
        if (closed->until_ns > l->now_ns && rs->def.cold_start == RULE_COLD_CLOSED) {
            t->closed_from_ns = closed->from_ns;
            t->closed_until_ns = closed->until_ns;
        }
        if (!params_equal(&t->rule, rule)) { /* numbers changed while stopped: carry usage */
            if (!load_convert(l, rule, &t->rule)) {
                return false;
            }
            log_info("rule '%s' changed its numbers since the snapshot: its keys' usage is "
                     "converted",
                     rs->def.name);
        }
        l->target = t->table;
    } else if (s[0] == 'o' && rule->algorithm == rs->t->rule.algorithm) {
        l->target = override_table(l->e, rs->t, rule);
    }
    return l->target != NULL;
}

static void load_entry(void *arg, const void *key, size_t key_len, const void *state)
{
    load_ctx_t *l = arg;
    if (l->target != NULL && l->convert) {
        if (sl_state_convert(&l->from, state, sl_table_rule(l->target), l->state, l->now_ns) !=
            SL_OK) {
            return;
        }
        state = l->state;
    }
    if (l->target != NULL && sl_table_put(l->target, key, key_len, state, l->now_ns) == SL_OK) {
        l->keys++;
    }
}

int engine_load_snapshot(engine_t *e, const char *path, int64_t now_ns, size_t *keys, char *err)
{
    load_ctx_t l = {.e = e, .w = &e->workers[0], .now_ns = now_ns};
    snapshot_visitor_t v = {.section = load_section, .entry = load_entry, .arg = &l};
    char serr[SNAPSHOT_ERR_MAX] = "";
    int rc = snapshot_load(path, &v, NULL, serr);
    free(l.state);
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

/* ---- decisions that complete later -------------------------------------------------------- */

engine_op_t *engine_op_get(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                           int64_t cost, int64_t now_ns)
{
    engine_op_t *op = w->attached ? rc_freelist_get(&w->ops) : malloc(sizeof *op);
    if (op == NULL) {
        return NULL;
    }
    *op = (engine_op_t){
        .w = w, .rs = rs, .req = {.cost = cost}, .now_ns = now_ns, .key_len = key_len};
    op->out = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
    if (key != NULL) {
        op->key = key_len <= sizeof op->key_buf ? op->key_buf : malloc(key_len);
        if (op->key == NULL) {
            rc_freelist_put(&w->ops, op);
            return NULL;
        }
        memcpy(op->key, key, key_len);
    }
    atomic_fetch_add(&rs->refs, 1);
    return op;
}

/* A detached worker (its loop stopping) keeps nothing: a late answer frees its op. */
static void op_release(engine_op_t *op)
{
    engine_worker_t *w = op->w;
    engine_state_release(op->rs);
    if (op->key != NULL && op->key != op->key_buf) {
        free(op->key);
    }
    if (w->attached) {
        rc_freelist_put(&w->ops, op);
    } else {
        free(op);
    }
}

void engine_op_complete(engine_op_t *op)
{
    if (op->starting) {
        *op->sync_out = op->out;
        op->finished = true; /* engine_decide_start releases it */
        return;
    }
    op->fn(op->arg, ENGINE_OK, &op->out);
    op_release(op);
}

static void remote_done(void *arg, int status, const sl_decision_t *d, const char *err);

void engine_op_continue(engine_op_t *op, const ov_entry_t *en)
{
    engine_worker_t *w = op->w;
    rule_state_t *rs = op->rs;
    if (op->resolve_only) {
        op->out.store_error = en == NULL;
        engine_op_complete(op);
        return;
    }
    if (op->rs->has_overrides && en == NULL) {
        log_debug("rule '%s': override lookup failed", rs->def.name);
        engine_finish(w, rs, SL_EINVAL, &op->out);
        engine_op_complete(op);
        return;
    }
    if (w->redis == NULL) {
        /* key and cost were checked when the decision started */
        apply_local(w, rs, en, op->key, op->key_len, &op->req, op->now_ns, &op->out);
        engine_op_complete(op);
        return;
    }
    if (override_blocks(en, &op->out)) {
        engine_finish(w, rs, SL_OK, &op->out);
        engine_op_complete(op);
        return;
    }
    const sl_rule_t *rule = &rs->t->rule;
    if (en != NULL && en->present) {
        rule = &en->ov_rule;
        op->out.window_ns = en->window_ns;
    }
    if (op->req.settle) {
        redis_store_settle(w->redis, rs->def.name, rule, op->key, op->key_len, op->req.reserved,
                           op->req.actual, op->req.charged_ns, op->now_ns, remote_done, op);
    } else {
        redis_store_decide(w->redis, rs->def.name, rule, op->key, op->key_len, op->req.cost,
                           op->now_ns, remote_done, op);
    }
}

/* engine_decide_start and engine_settle_start: req says which (the request was checked). */
static int op_start(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                    const engine_request_t *req, int64_t now_ns, engine_decision_t *out,
                    engine_pending_t **pending)
{
    const ov_entry_t *en = NULL;
    bool wait = false;
    if (rs->has_overrides) {
        en = override_cached(w, rs, key, key_len, now_ns);
        if (en == NULL && w->engine->ct == NULL) {
            if ((en = override_lookup_now(w, rs, key, key_len, now_ns)) == NULL) {
                *out = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
                engine_finish(w, rs, SL_EINVAL, out);
                return ENGINE_OK;
            }
        }
        wait = en == NULL;
    }
    if (!wait && w->redis == NULL) {
        return apply_local(w, rs, en, key, key_len, req, now_ns, out);
    }
    /* The key is copied only for a lookup: a Redis command is formatted before this returns. */
    engine_op_t *op = engine_op_get(w, rs, wait ? key : NULL, key_len, req->cost, now_ns);
    if (op == NULL) {
        *out = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
        engine_finish(w, rs, SL_ENOMEM, out);
        return ENGINE_OK;
    }
    op->req = *req;
    op->starting = true;
    op->sync_out = out;
    if (wait) {
        override_wait(w, op);
    } else {
        op->key = (char *)key; /* for the Redis command only; not kept */
        engine_op_continue(op, en);
        op->key = NULL;
    }
    op->starting = false;
    if (op->finished) {
        op_release(op);
        return ENGINE_OK;
    }
    *pending = (engine_pending_t *)op;
    return ENGINE_PENDING;
}

int engine_request_start(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                         const engine_request_t *req, int64_t now_ns, engine_decision_t *out,
                         engine_pending_t **pending)
{
    int64_t units = req->settle ? (req->reserved < 0 ? req->reserved : req->actual) : req->cost;
    int rc = check_request(w, key_len, units);
    if (rc != ENGINE_OK) {
        return rc;
    }
    return op_start(w, rs, key, key_len, req, now_ns, out, pending);
}

int engine_decide_start(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                        int64_t cost, int64_t now_ns, engine_decision_t *out,
                        engine_pending_t **pending)
{
    engine_request_t req = {.cost = cost};
    return engine_request_start(w, rs, key, key_len, &req, now_ns, out, pending);
}

void engine_pending_then(engine_pending_t *pending, engine_decision_fn fn, void *arg)
{
    engine_op_t *op = (engine_op_t *)pending;
    op->fn = fn;
    op->arg = arg;
}

int engine_request_async(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                         const engine_request_t *req, int64_t now_ns, engine_decision_fn fn,
                         void *arg)
{
    engine_decision_t out;
    engine_pending_t *pending = NULL;
    int rc = engine_request_start(w, rs, key, key_len, req, now_ns, &out, &pending);
    if (rc == ENGINE_PENDING) {
        engine_pending_then(pending, fn, arg);
        return ENGINE_OK;
    }
    if (rc == ENGINE_OK) {
        fn(arg, rc, &out);
    }
    return rc;
}

int engine_decide_async(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                        int64_t cost, int64_t now_ns, engine_decision_fn fn, void *arg)
{
    engine_request_t req = {.cost = cost};
    return engine_request_async(w, rs, key, key_len, &req, now_ns, fn, arg);
}

typedef struct resolve {
    size_t left;
    engine_done_fn fn;
    void *arg;
} resolve_t;

static void resolved_one(void *arg, int status, const engine_decision_t *d)
{
    (void)status;
    (void)d;
    resolve_t *r = arg;
    if (--r->left == 0) {
        r->fn(r->arg, ENGINE_OK);
        free(r);
    }
}

int engine_resolve_overrides(engine_worker_t *w, rule_state_t *const *rules,
                             const char *const *keys, const size_t *key_lens, size_t n,
                             int64_t now_ns, engine_done_fn fn, void *arg)
{
    if (w->engine->ct == NULL) {
        return ENGINE_OK; /* looked up at once when decided */
    }
    resolve_t *r = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!rules[i]->has_overrides || key_lens[i] > w->engine->cfg.key_max ||
            override_cached(w, rules[i], keys[i], key_lens[i], now_ns) != NULL) {
            continue;
        }
        if (r == NULL) {
            if ((r = calloc(1, sizeof *r)) == NULL) {
                return ENGINE_OK; /* decided without: each decision looks its override up */
            }
            *r = (resolve_t){.left = 1, .fn = fn, .arg = arg}; /* held until all are asked */
        }
        engine_op_t *op = engine_op_get(w, rules[i], keys[i], key_lens[i], 0, now_ns);
        if (op == NULL) {
            continue;
        }
        r->left++;
        op->resolve_only = true;
        op->fn = resolved_one;
        op->arg = r;
        override_wait(w, op);
    }
    if (r == NULL) {
        return ENGINE_OK;
    }
    resolved_one(r, ENGINE_OK, NULL); /* fn runs now if every lookup was answered at once */
    return ENGINE_PENDING;
}

static void redis_mode_changed(const char *node, redis_mode_t mode);

/* ---- the loops ----------------------------------------------------------------------------- */

int engine_worker_attach(engine_worker_t *w, uv_loop_t *loop, char *err)
{
    engine_t *e = w->engine;
    w->attached = true;
    w->inbox = config_thread_inbox(e->ct, w->index);
    if (config_inbox_attach(w->inbox, loop) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "cannot attach to the config store thread");
        w->inbox = NULL;
        return -1;
    }
    if (!e->redis) {
        return 0;
    }
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
    config_inbox_detach(w->inbox); /* lookups already answered go on first */
    w->inbox = NULL;
    override_worker_detach(w);
    redis_store_t *r = w->redis;
    if (r != NULL) {
        redis_shared_set(w->engine->redis_shared, &w->redis, NULL);
        redis_store_free(r);
    }
    w->attached = false;
    rc_freelist_clear(&w->ops);
}

/* ---- the Redis request store --------------------------------------------------------------- */

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

static void remote_done(void *arg, int status, const sl_decision_t *d, const char *err)
{
    engine_op_t *op = arg;
    if (status != 0) {
        log_debug("rule '%s': request store error: %s", op->rs->def.name, err);
    }
    if (status == 0) {
        op->out.d = *d;
    }
    engine_finish(op->w, op->rs, status == 0 ? SL_OK : SL_EINVAL, &op->out);
    engine_op_complete(op);
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
        const ov_entry_t *en = override_cached(w, rs, key, key_len, now_ns);
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
    engine_state_release(op->rs);
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
    engine_state_release(rs);
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
    if (status == REDIS_ALL_RETRY) { /* nothing decided: the caller goes step by step */
        log_debug("SL.ALLOWALL: %s: deciding pair by pair", err);
        op->fn(op->arg, NULL, 0, ENGINE_ALL_RETRY);
        for (size_t i = 0; i < op->n; i++) {
            engine_state_release(op->rules[i]);
        }
        free(op);
        return;
    }
    if (status != 0) {
        log_debug("SL.ALLOWALL: request store error: %s", err);
    }
    (void)n; /* op->n: the script answers one decision per pair */
    for (size_t i = 0; i < op->n; i++) {
        out[i] = (engine_decision_t){.rule = op->rules[i], .window_ns = op->window_ns[i]};
        if (status == 0) {
            out[i].d = d[i];
        }
        if (status != 0 || refused < 0 || (size_t)refused == i) { /* counted: what decided */
            engine_finish(op->w, op->rules[i], status == 0 ? SL_OK : SL_EINVAL, &out[i]);
        }
    }
    op->fn(op->arg, out, op->n, status == 0 ? refused : -1);
    for (size_t i = 0; i < op->n; i++) {
        engine_state_release(op->rules[i]);
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
            const ov_entry_t *en = override_cached(w, rs, keys[i], key_lens[i], now_ns);
            if (en == NULL || (en->present && en->blocked)) {
                free(op); /* blocked keys and lookups to make: the step-by-step path */
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
            engine_state_release(op->rules[i]);
        }
        free(op);
        return ENGINE_ENOTSUP;
    }
    return ENGINE_OK;
}
