/*
 * ruleset.c - rule states, their request-store data and counters, and the rule sets that hold
 * them: building a set from the config store, reloads, and freeing what no worker holds (see
 * engine.h).
 *
 * Ownership. A rule set (ruleset_t) is immutable once published and holds references to rule
 * states; a rule state holds a reference to its tables (rule_tables_t: the store's data for the
 * rule and its counters), which outlive any one set: a reload that keeps a rule's parameters
 * gives the new rule state the same tables, so keys keep their usage. All reference counts of
 * sets change under reload_lock, only in the thread that reloads or collects; deciding threads
 * never touch them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/descriptors.h"
#include "engine/engine_impl.h"
#include "engine/log.h"

void *engine_alloc_lines(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* ---- rule states and tables ---------------------------------------------------------------- */

bool engine_rule_fits(const engine_t *e, const sl_rule_t *rule, char *err, size_t cap)
{
    const request_store_ops_t *ops = e->requests->ops;
    if (ops->rule_fits == NULL || ops->rule_fits(e->requests, rule)) {
        return true;
    }
    snprintf(err, cap,
             "one key of this rule can take up to %zu bytes of state, more than --max-memory "
             "(%zu bytes for every rule's keys) can ever hold",
             sl_state_size(rule), e->cfg.max_memory);
    return false;
}

bool engine_rule_check(void *arg, const sl_rule_t *rule, char *err, size_t cap)
{
    return engine_rule_fits(arg, rule, err, cap);
}

rule_tables_t *engine_tables_create(const engine_t *e, const sl_rule_t *rule)
{
    rule_tables_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    t->rule = *rule;
    t->ops = e->requests->ops;
    int rc = t->ops->rule_new != NULL ? t->ops->rule_new(e->requests, rule, &t->data) : 0;
    size_t bytes = sizeof(rule_counters_t) * e->cfg.workers;
    t->counters = engine_alloc_lines(bytes);
    if (rc != 0 || t->counters == NULL) {
        if (rc == 0 && t->ops->rule_free != NULL) {
            t->ops->rule_free(t->data);
        }
        free(t->counters);
        free(t);
        return NULL;
    }
    memset(t->counters, 0, bytes);
    return t;
}

void engine_tables_release(rule_tables_t *t)
{
    if (t == NULL || atomic_fetch_sub(&t->refs, 1) > 1) {
        return;
    }
    if (t->ops->rule_free != NULL) {
        t->ops->rule_free(t->data);
    }
    free(t->counters);
    watch_release(t->watch);
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
    rs->name_hash = sl_hash64(rs->def.name, strlen(rs->def.name), 0x0e77);
    rs->lease_ns = ruledef_lease_ns(&rs->def);
    rs->sync_ns = ruledef_sync_ns(&rs->def);
    rs->replica_wait_ms = ruledef_replica_wait_ns(&rs->def) / SL_NS_PER_MS;
    rs->t = t;
    atomic_fetch_add(&t->refs, 1);
    return rs;
}

void rule_counters_sum(const rule_counters_t *c, unsigned n, uint64_t *allowed, uint64_t *denied,
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
        rule_counters_sum(rs->t->counters, e->cfg.workers, &a, &d, &sh, &err);
        atomic_fetch_add_explicit(&e->inl_other_gone.allowed, a, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->inl_other_gone.denied, d, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->inl_other_gone.shadow_denied, sh, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->inl_other_gone.store_errors, err, memory_order_relaxed);
    }
    engine_tables_release(rs->t);
    ruledef_free(&rs->def);
    free(rs);
}

void ruleset_free(ruleset_t *set)
{
    if (set == NULL) {
        return;
    }
    for (size_t i = 0; i < set->n; i++) {
        engine_state_release(set->rules[i]);
    }
    free(set->rules);
    descriptors_free(set->descriptors);
    free(set);
}

static int cmp_state(const void *a, const void *b)
{
    const rule_state_t *x = *(rule_state_t *const *)a, *y = *(rule_state_t *const *)b;
    return strcmp(x->def.name, y->def.name);
}

rule_state_t *ruleset_find(const ruleset_t *set, const char *name, size_t len)
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

void engine_rule_hold(rule_state_t *rs)
{
    atomic_fetch_add(&rs->refs, 1);
}

void engine_rule_release(rule_state_t *rs)
{
    engine_state_release(rs);
}

void engine_rule_stats(rule_state_t *rs, sl_table_stats_t *out)
{
    const rule_tables_t *t = rs->t;
    *out = (sl_table_stats_t){0};
    if (t->ops->rule_stats != NULL) {
        t->ops->rule_stats(t->data, out);
    }
}

const rule_counters_t *engine_counters(const rule_state_t *rule, unsigned worker)
{
    return &rule->t->counters[worker];
}

long engine_top(const rule_state_t *rule, bool denied, int64_t now_ns, size_t n, topk_item_t *out,
                uint64_t *total)
{
    *total = 0;
    return rule->t->watch != NULL ? watch_top(rule->t->watch, denied, now_ns, n, out, total) : -1;
}

bool engine_rates(const rule_state_t *rule, int64_t end_s, size_t n, uint64_t *allowed,
                  uint64_t *denied, uint64_t *shadow_denied)
{
    if (rule->t->watch == NULL) {
        return false;
    }
    watch_rates(rule->t->watch, end_s, n, allowed, denied, shadow_denied);
    return true;
}

void engine_counters_sum(const rule_state_t *rule, uint64_t *allowed, uint64_t *denied,
                         uint64_t *shadow_denied, uint64_t *store_errors)
{
    unsigned n = rule->engine != NULL ? rule->engine->cfg.workers : 0;
    rule_counters_sum(rule->t->counters, n, allowed, denied, shadow_denied, store_errors);
}

void engine_rule_holds(const rule_state_t *rule, int64_t now_ns, engine_holds_t *out)
{
    unsigned n = rule->engine != NULL ? rule->engine->cfg.workers : 0;
    *out = (engine_holds_t){.in_flight = -1};
    for (unsigned i = 0; i < n; i++) {
        const rule_counters_t *c = &rule->t->counters[i];
        out->expired += atomic_load_explicit(&c->holds_expired, memory_order_relaxed);
        out->releases_refused += atomic_load_explicit(&c->releases_refused, memory_order_relaxed);
    }
    out->limit_now = atomic_load_explicit(&rule->t->limit_now, memory_order_relaxed);
    const request_store_ops_t *ops = rule->t->ops;
    if (ops != NULL && ops->rule_in_flight != NULL && rule->t->data != NULL) {
        out->in_flight = ops->rule_in_flight(rule->t->data, now_ns, NULL, 0, NULL);
    }
}

int64_t engine_rule_holders(const rule_state_t *rule, int64_t now_ns, topk_item_t *top, size_t n,
                            size_t *got)
{
    *got = 0;
    const request_store_ops_t *ops = rule->t->ops;
    if (ops == NULL || ops->rule_in_flight == NULL || rule->t->data == NULL) {
        return -1;
    }
    return ops->rule_in_flight(rule->t->data, now_ns, top, n, got);
}

const ruleset_t *engine_worker_set(const engine_worker_t *w)
{
    return w->set;
}

rule_state_t *engine_find(engine_worker_t *w, const char *name, size_t len)
{
    return ruleset_find(w->set, name, len);
}

rule_state_t *engine_descriptor(engine_worker_t *w, const char *domain, size_t domain_len,
                                const rls_entry_t *entries, size_t n, bool *domain_known,
                                const char **counted)
{
    const descriptors_t *d = w->set != NULL ? w->set->descriptors : NULL;
    *domain_known = descriptors_domain_known(d, domain, domain_len);
    if (!*domain_known) {
        for (size_t i = 0; counted != NULL && i < n; i++) {
            counted[i] = NULL;
        }
        return NULL;
    }
    return descriptors_match(d, domain, domain_len, entries, n, counted);
}

/* ---- rule sets ----------------------------------------------------------------------------- */

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
    const request_store_ops_t *ops = e->requests->ops;
    bool closed = def->cold_start == RULE_COLD_CLOSED && ops->cold_start != NULL;
    if (closed) {
        int64_t from_ns = sl_now_ns();
        ops->cold_start(t->data, from_ns, from_ns + t->rule.window_ns, true);
    }
    log_warn("rule '%s' changed algorithm (%s to %s): its keys' usage cannot be carried over; "
             "they start %s",
             def->name, sl_algorithm_name(old->algorithm), sl_algorithm_name(def->rule.algorithm),
             closed ? "as having used their whole quota, for one window (cold_start: closed)"
             : def->cold_start == RULE_COLD_CLOSED ? "fresh (the store has no closed start)"
                                                   : "fresh (cold_start: open)");
}

/*
 * A rule whose numbers changed keeps its keys' usage: the store carries every key over to the
 * new numbers (docs/dev/design.md). When the algorithm changed nothing can be carried.
 */
static void tables_migrate(const engine_t *e, const ruledef_t *def, rule_tables_t *to,
                           rule_tables_t *from)
{
    if (to->rule.algorithm != from->rule.algorithm) {
        algorithm_changed(e, def, &from->rule, to);
    } else if (to->ops->rule_migrate != NULL) {
        to->ops->rule_migrate(to->data, from->data, sl_now_ns());
    }
}

/* A named rule's watch: its rates and top keys follow it by name when its numbers change
 * (another table), so the console's charts go on; a new rule gets a new one. Without one
 * (out of memory) the rule is decided and not watched. */
static void tables_watch(const engine_t *e, rule_tables_t *t, const rule_state_t *prev)
{
    if (t == NULL) {
        return;
    }
    if (prev != NULL && prev->t->watch != NULL) {
        t->watch = prev->t->watch;
        watch_hold(t->watch);
    } else {
        t->watch = watch_create(e->cfg.workers, e->watch_seed);
    }
}

/* The tables for def: those of prev (its rule of the same name in the set in force) when its
 * parameters are the same, else new ones, the usage carried from prev's. NULL when out of
 * memory. */
static rule_tables_t *tables_for(engine_t *e, const ruledef_t *def, const rule_state_t *prev)
{
    if (prev != NULL && sl_rule_same(&prev->t->rule, &def->rule)) {
        return prev->t;
    }
    rule_tables_t *t = engine_tables_create(e, &def->rule);
    if (t != NULL && prev != NULL) {
        tables_migrate(e, def, t, prev->t);
    }
    tables_watch(e, t, prev);
    char why[ENGINE_ERR_MAX];
    if (t != NULL && !engine_rule_fits(e, &def->rule, why, sizeof why)) {
        log_warn("rule '%s' is in force but %s: every new key gets its on_store_error", def->name,
                 why);
    }
    return t;
}

/* The state of one rule of the new set, taking def (freed on failure); prev is its rule of the
 * same name in the set in force, or NULL. NULL when out of memory. */
static rule_state_t *state_build(engine_t *e, config_store_t *store, ruledef_t *def,
                                 const rule_state_t *prev)
{
    rule_tables_t *t = tables_for(e, def, prev);
    if (def->mode != RULE_MODE_STRICT && !e->requests->ops->leases &&
        (prev == NULL || prev->def.mode != def->mode)) {
        log_info("rule '%s' has mode: %s, but the %s store keeps every key in this process: it "
                 "decides strictly here",
                 def->name, rule_mode_names[def->mode], e->requests->ops->name);
    }
    rule_state_t *rs = t != NULL ? engine_state_create(def, t) : NULL;
    if (rs == NULL) {
        if (t != NULL && t->refs == 0) {
            t->refs = 1;
            engine_tables_release(t);
        }
        ruledef_free(def);
        return NULL;
    }
    rs->engine = e;
    rs->refs = 1;
    bool any = false;
    char serr[CONFIG_STORE_ERR_MAX];
    if (config_store_foreach_override(store, rs->def.name, 1, has_override_fn, &any, serr) != 0) {
        any = true; /* look keys up; a failure there applies on_store_error */
    }
    rs->has_overrides = any;
    if (!any && prev != NULL && t == prev->t && t->ops->overrides_gone != NULL) {
        t->ops->overrides_gone(t->data, sl_now_ns()); /* its last override went */
    }
    return rs;
}

/* Sorts the set's rules by name and builds its descriptor index. -1 when out of memory. */
static int set_index(ruleset_t *set)
{
    if (set->n > 1) {
        qsort(set->rules, set->n, sizeof *set->rules, cmp_state);
    }
    const ruledef_t **defs = calloc(set->n > 0 ? set->n : 1, sizeof *defs);
    for (size_t i = 0; defs != NULL && i < set->n; i++) {
        defs[i] = &set->rules[i]->def;
    }
    set->descriptors =
        defs != NULL ? descriptors_build(defs, (void *const *)set->rules, set->n) : NULL;
    free(defs);
    return set->descriptors != NULL ? 0 : -1;
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
        rule_state_t *rs =
            state_build(e, store, &def, ruleset_find(old, def.name, strlen(def.name)));
        if (rs == NULL) {
            ruleset_free(set);
            config_rules_free(rows, n);
            snprintf(err, ENGINE_ERR_MAX, "out of memory");
            return NULL;
        }
        set->rules[set->n++] = rs;
    }
    config_rules_free(rows, n);
    if (set_index(set) != 0) {
        ruleset_free(set);
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        return NULL;
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
            ruleset_free(set);
        }
    }
    pthread_mutex_unlock(&e->reload_lock);
}

/* Whether the rule named name, in the set arg, may have overrides (ov_known_prune's test). */
static bool rule_has_overrides(void *arg, const char *name)
{
    const rule_state_t *rs = ruleset_find(arg, name, strlen(name));
    return rs != NULL && rs->has_overrides;
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
    ov_known_prune(e->known, rule_has_overrides, set);
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

uint64_t engine_store_errors(engine_t *e)
{
    return atomic_load_explicit(&e->store_errors, memory_order_relaxed);
}

int64_t engine_version(engine_t *e)
{
    return atomic_load_explicit(&e->version, memory_order_relaxed);
}

uint64_t engine_reloads(engine_t *e)
{
    return atomic_load_explicit(&e->reloads, memory_order_relaxed);
}
