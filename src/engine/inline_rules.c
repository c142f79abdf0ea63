/*
 * inline_rules.c - the rules SL.THROTTLE and CL.THROTTLE make from their arguments: one rule
 * state (and table) per parameter set, found without a lock, reclaimed when idle.
 *
 * The inline rules in force form an immutable set (inline_set_t: the rules, and an open-addressed
 * index by parameters) published with one atomic store, held by each worker with a hazard pointer
 * exactly as rule sets are (engine_worker_begin). A lookup is a per-worker most-recently-used
 * list, then the index of the worker's set: no lock. Only a miss takes inline_lock, to create the
 * rule and publish a set with it; nothing slow (no I/O) ever runs under that lock.
 *
 * Reclaiming. The config thread sweeps now and then: a rule unused for INLINE_IDLE_NS whose table
 * holds no key with usage left (its keys are fresh: dropping them loses nothing) leaves the set.
 * A worker still on an older set may decide on it meanwhile, so a removed rule waits in limbo
 * until no set holds it: then it is freed if its table is still empty, and put back in force if a
 * late decision left usage in it. A lookup that misses while the rule waits in limbo takes it back
 * from there. So there is never a second table for one parameter set, and no key's usage is lost.
 *
 * Bounds: at most cfg.max_inline rules; one connection may create at most
 * engine_inline_budget() of them, and the connections of one client address (an IPv6 client's
 * /64) together at most cfg.max_inline_address of those in force (each rule remembers the
 * address that made it; a miss counts them under inline_lock), so neither one client inventing
 * parameters nor one host opening many connections can take them all (a client with many
 * addresses, an IPv6 prefix wider than a /64, still can: the server-wide cap is what bounds
 * memory). Each refusal names the setting, and is counted and logged at a limited rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/events.h"
#include "engine/log.h"
#include "proto/throttle_args.h"

#define INLINE_IDLE_NS  (INT64_C(10) * 1000000000) /* unused this long: may be reclaimed */
#define INLINE_TOUCH_NS INT64_C(1000000000)        /* last_used is refreshed this often */

struct inline_set {
    size_t n;
    rule_state_t **rules; /* held (one reference each) */
    size_t mask;          /* index size - 1, a power of two minus one */
    rule_state_t **index; /* open addressing by params_hash, NULL = empty */
    inline_set_t *retired_next;
};

static uint64_t params_hash(const sl_rule_t *r)
{
    int64_t v[7] = {r->algorithm, r->limit,        r->window_ns, r->burst,
                    r->buckets,   r->max_delay_ns, r->max_debt};
    return sl_hash64(v, sizeof v, 0x5a17);
}

static rule_state_t *set_lookup(const inline_set_t *s, const sl_rule_t *rule)
{
    if (s == NULL || s->n == 0) {
        return NULL;
    }
    for (size_t i = params_hash(rule) & s->mask; s->index[i] != NULL; i = (i + 1) & s->mask) {
        if (sl_rule_same(&s->index[i]->t->rule, rule)) {
            return s->index[i];
        }
    }
    return NULL;
}

static void set_free(inline_set_t *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        engine_state_release(s->rules[i]);
    }
    free(s->rules);
    free(s->index);
    free(s);
}

/* A set of the rules of `from` but `drop`, plus `add` (each may be NULL). NULL when out of
 * memory. */
static inline_set_t *set_with(const inline_set_t *from, const rule_state_t *drop, rule_state_t *add)
{
    size_t n = from != NULL ? from->n : 0;
    inline_set_t *s = calloc(1, sizeof *s);
    size_t size = 8;
    while (size < 2 * (n + 1)) {
        size *= 2;
    }
    if (s == NULL || (s->rules = calloc(n + 1, sizeof *s->rules)) == NULL ||
        (s->index = calloc(size, sizeof *s->index)) == NULL) {
        set_free(s);
        return NULL;
    }
    s->mask = size - 1;
    for (size_t i = 0; i <= n; i++) {
        rule_state_t *rs = i < n ? from->rules[i] : add;
        if (rs == NULL || rs == drop) {
            continue;
        }
        atomic_fetch_add(&rs->refs, 1);
        s->rules[s->n++] = rs;
        size_t j = params_hash(&rs->t->rule) & s->mask;
        while (s->index[j] != NULL) {
            j = (j + 1) & s->mask;
        }
        s->index[j] = rs;
    }
    return s;
}

/* Makes s the set in force; the one before is retired (freed when no worker holds it). Under
 * inline_lock. */
static void publish(engine_t *e, inline_set_t *s)
{
    inline_set_t *old = atomic_load(&e->inl_current);
    atomic_store(&e->inl_current, s);
    if (old != NULL) {
        old->retired_next = e->inl_retired;
        e->inl_retired = old;
    }
}

/* ---- workers ------------------------------------------------------------------------------ */

void inline_worker_begin(engine_worker_t *w)
{
    engine_t *e = w->engine;
    inline_set_t *p = atomic_load_explicit(&e->inl_current, memory_order_acquire);
    if (p == w->inl_set) {
        return;
    }
    for (;;) { /* the hazard pointer, as engine_worker_begin does for rule sets */
        atomic_store(&w->inl_hazard, p);
        inline_set_t *again = atomic_load(&e->inl_current);
        if (again == p) {
            break;
        }
        p = again;
    }
    w->inl_set = p;
    memset(w->inl, 0, sizeof w->inl); /* its rules belong to the set given up */
}

void inline_worker_end(engine_worker_t *w)
{
    w->inl_set = NULL;
    memset(w->inl, 0, sizeof w->inl);
    atomic_store(&w->inl_hazard, NULL);
}

/* The name of an inline rule: its parameters, as stable as they are (a restart, a snapshot, two
 * spellings of the same numbers give one name). burst and buckets at their defaults read -1, as
 * SL.THROTTLE's arguments left out would (throttle_rule_given); max_delay is added only when
 * set. Metrics and snapshots know it; errors name the rule as the user wrote it
 * (engine_rule_label). */
static void inline_name(const sl_rule_t *r, char name[RULE_NAME_MAX + 1])
{
    sl_rule_t g = throttle_rule_given(r);
    int n = snprintf(name, RULE_NAME_MAX + 1, "inline:%s:%lld:%lld:%lld:%lld",
                     sl_algorithm_name(r->algorithm), (long long)r->limit,
                     (long long)(r->window_ns / SL_NS_PER_MS), (long long)g.burst,
                     (long long)g.buckets);
    if (r->max_delay_ns > 0 && n > 0 && n < RULE_NAME_MAX) {
        n += snprintf(name + n, (size_t)(RULE_NAME_MAX + 1 - n), ":%lld",
                      (long long)(r->max_delay_ns / SL_NS_PER_MS));
    }
    if (g.max_debt != SL_DEFAULT && n > 0 && n < RULE_NAME_MAX) { /* MAX_DEBT given */
        snprintf(name + n, (size_t)(RULE_NAME_MAX + 1 - n), ":debt%lld", (long long)r->max_debt);
    }
}

_Static_assert(ENGINE_LABEL_MAX == THROTTLE_LABEL_MAX, "one label size");

void engine_rule_label(const rule_state_t *rs, char label[ENGINE_LABEL_MAX])
{
    if (rs->inline_rule) {
        throttle_rule_label(&rs->def.rule, label);
    } else {
        snprintf(label, ENGINE_LABEL_MAX, "rule '%s'", rs->def.name);
    }
}

/* A new inline rule for a prepared rule, holding one reference (the caller's). */
static rule_state_t *inline_create(engine_t *e, const sl_rule_t *rule)
{
    rule_tables_t *t = engine_tables_create(e, rule);
    if (t == NULL) {
        return NULL;
    }
    ruledef_t def = {.rule = *rule};
    inline_name(rule, def.name);
    rule_state_t *rs = engine_state_create(&def, t);
    if (rs == NULL) {
        t->refs = 1;
        engine_tables_release(t);
        return NULL;
    }
    rs->inline_rule = true;
    rs->refs = 1;
    rs->engine = e;
    /* the first inline rules in force get /metrics series of their own, the rest share one */
    size_t held = atomic_load(&e->inl_series);
    while (held < e->cfg.metrics_inline &&
           !atomic_compare_exchange_weak(&e->inl_series, &held, held + 1)) {
    }
    rs->own_series = held < e->cfg.metrics_inline;
    return rs;
}

/* Takes the rule for these parameters out of limbo (its reference moves to the caller). */
static rule_state_t *limbo_take(engine_t *e, const sl_rule_t *rule)
{
    for (rule_state_t **pp = &e->inl_limbo; *pp != NULL; pp = &(*pp)->limbo_next) {
        rule_state_t *rs = *pp;
        if (sl_rule_same(&rs->t->rule, rule)) {
            *pp = rs->limbo_next;
            rs->limbo_next = NULL;
            return rs;
        }
    }
    return NULL;
}

/* Inline rules in force that connections from addr made (as --max-inline-rules counts those in
 * force). Under inline_lock. */
static size_t made_by(const inline_set_t *cur, const netaddr_t *addr)
{
    size_t n = 0;
    for (size_t i = 0; cur != NULL && i < cur->n; i++) {
        n += memcmp(&cur->rules[i]->maker, addr, sizeof *addr) == 0;
    }
    return n;
}

/* Whether budget's client may make one more inline rule; if not, err says which cap refused
 * it (counted and logged). Under inline_lock. */
static bool may_create(engine_t *e, const inline_set_t *cur, const engine_inline_budget_t *budget,
                       char *err)
{
    char addr[NETADDR_STRLEN] = "?";
    if (budget != NULL && budget->addr.family != 0) {
        netaddr_format(&budget->addr, addr, sizeof addr);
    }
    if (cur != NULL && cur->n >= e->cfg.max_inline) {
        snprintf(err, ENGINE_ERR_MAX,
                 "too many distinct inline rules (at most %zu: --max-inline-rules); reuse "
                 "parameters or define a named rule",
                 e->cfg.max_inline);
        event_note(EV_INLINE_SERVER, "client %s: %s", addr, err);
        return false;
    }
    if (budget != NULL && budget->left == 0) {
        snprintf(err, ENGINE_ERR_MAX,
                 "this connection made %u distinct inline rules, the most one connection may "
                 "(an eighth of --max-inline-rules); reuse their parameters or define a named "
                 "rule",
                 engine_inline_budget(e).left);
        event_note(EV_INLINE_CONNECTION, "client %s: %s", addr, err);
        return false;
    }
    if (budget != NULL && budget->addr.family != 0 &&
        made_by(cur, &budget->addr) >= e->cfg.max_inline_address) {
        snprintf(err, ENGINE_ERR_MAX,
                 "the connections from %s made %zu distinct inline rules, the most one client "
                 "address may (--max-inline-per-address); reuse their parameters or "
                 "define a named rule",
                 addr, e->cfg.max_inline_address);
        event_note(EV_INLINE_ADDRESS, "%s", err);
        return false;
    }
    return true;
}

/* The miss path, under inline_lock: the rule from the set in force, from limbo, or new. */
static int inline_find_or_create(engine_t *e, const sl_rule_t *rule, engine_inline_budget_t *budget,
                                 int64_t now_ns, rule_state_t **out, char *err)
{
    inline_set_t *cur = atomic_load(&e->inl_current);
    if ((*out = set_lookup(cur, rule)) != NULL) {
        return ENGINE_OK;
    }
    rule_state_t *rs = limbo_take(e, rule);
    if (rs == NULL) {
        if (!may_create(e, cur, budget, err)) {
            return ENGINE_EINLINE;
        }
        if ((rs = inline_create(e, rule)) == NULL) {
            snprintf(err, ENGINE_ERR_MAX, "out of memory");
            return ENGINE_EINLINE;
        }
        if (budget != NULL) {
            budget->left--;
            rs->maker = budget->addr;
        }
    }
    atomic_store_explicit(&rs->last_used_ns, now_ns, memory_order_relaxed);
    inline_set_t *s = set_with(cur, NULL, rs);
    engine_state_release(rs); /* the set holds it now (or, out of memory, it is freed) */
    if (s == NULL) {
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        return ENGINE_EINLINE;
    }
    publish(e, s);
    *out = rs;
    return ENGINE_OK;
}

int engine_inline_rule(engine_worker_t *w, const sl_rule_t *params, engine_inline_budget_t *budget,
                       int64_t now_ns, rule_state_t **out, char *err)
{
    rule_state_t *found = NULL;
    for (unsigned i = 0; i < INLINE_CACHE && found == NULL; i++) {
        if (w->inl[i].rule != NULL && sl_rule_same(&w->inl[i].params, params)) {
            found = w->inl[i].rule;
        }
    }
    if (found == NULL) {
        sl_rule_t rule = *params;
        int rc = sl_rule_prepare(&rule);
        if (rc != SL_OK) {
            snprintf(err, ENGINE_ERR_MAX, "%s", sl_strerror(rc));
            return ENGINE_ERULE;
        }
        engine_t *e = w->engine;
        if (w->inl_set == NULL) {
            inline_worker_begin(w);
        }
        found = set_lookup(w->inl_set, &rule);
        if (found == NULL) {
            pthread_mutex_lock(&e->inline_lock);
            rc = inline_find_or_create(e, &rule, budget, now_ns, &found, err);
            /* hold the set with it before a sweep can take it out: it stays valid while w does */
            inline_worker_begin(w);
            pthread_mutex_unlock(&e->inline_lock);
            if (rc != ENGINE_OK) {
                return rc;
            }
        }
        w->inl[w->inl_next] = (inline_slot_t){.params = *params, .rule = found};
        w->inl_next = (w->inl_next + 1) % INLINE_CACHE;
    }
    int64_t last = atomic_load_explicit(&found->last_used_ns, memory_order_relaxed);
    if (now_ns - last > INLINE_TOUCH_NS) {
        atomic_store_explicit(&found->last_used_ns, now_ns, memory_order_relaxed);
    }
    *out = found;
    return ENGINE_OK;
}

engine_inline_budget_t engine_inline_budget(const engine_t *e)
{
    size_t per = e->cfg.max_inline / 8;
    return (engine_inline_budget_t){.left = (unsigned)(per < 16 ? 16 : per)};
}

void engine_inline_budget_address(engine_inline_budget_t *budget, const netaddr_t *peer)
{
    budget->addr = (netaddr_t){.family = peer->family};
    if (peer->family == 4) {
        memcpy(budget->addr.addr, peer->addr, 4);
    } else if (peer->family == 6) {
        memcpy(budget->addr.addr, peer->addr, 8); /* its /64 */
    }
}

void engine_inline_retired(engine_t *e, uint64_t *allowed, uint64_t *denied,
                           uint64_t *shadow_denied, uint64_t *store_errors)
{
    rule_counters_sum(&e->inl_other_gone, 1, allowed, denied, shadow_denied, store_errors);
}

/* ---- reclaiming ---------------------------------------------------------------------------- */

/* True when rs's keys hold no usage left at now_ns (the store drops fresh ones). */
static bool inline_empty(const engine_t *e, rule_state_t *rs, int64_t now_ns)
{
    (void)e;
    const rule_tables_t *t = rs->t;
    return t->ops->rule_idle == NULL || t->ops->rule_idle(t->data, now_ns);
}

/* Frees retired sets no worker holds. Under inline_lock. */
static void collect_sets(engine_t *e)
{
    inline_set_t **pp = &e->inl_retired;
    while (*pp != NULL) {
        inline_set_t *s = *pp;
        bool held = false;
        for (unsigned i = 0; i < e->cfg.workers && !held; i++) {
            held = atomic_load(&e->workers[i].inl_hazard) == s;
        }
        if (held) {
            pp = &s->retired_next;
        } else {
            *pp = s->retired_next;
            set_free(s);
        }
    }
}

/* Limbo rules no set holds any more: freed when still empty, else back in force. */
static void collect_limbo(engine_t *e, int64_t now_ns)
{
    rule_state_t **pp = &e->inl_limbo;
    while (*pp != NULL) {
        rule_state_t *rs = *pp;
        if (atomic_load(&rs->refs) > 1) { /* a set or a decision in flight still has it */
            pp = &rs->limbo_next;
            continue;
        }
        *pp = rs->limbo_next;
        rs->limbo_next = NULL;
        if (!inline_empty(e, rs, now_ns)) {
            /* a worker on an older set decided on it after it was taken out: keep its usage */
            inline_set_t *s = set_with(atomic_load(&e->inl_current), NULL, rs);
            if (s != NULL) {
                publish(e, s);
                log_debug("inline rule %s back in force", rs->def.name);
            }
        }
        engine_state_release(rs);
    }
}

size_t engine_inline_sweep(engine_t *e, int64_t now_ns)
{
    size_t removed = 0;
    pthread_mutex_lock(&e->inline_lock);
    inline_set_t *cur = atomic_load(&e->inl_current);
    for (size_t i = 0; cur != NULL && i < cur->n; i++) {
        rule_state_t *rs = cur->rules[i];
        int64_t last = atomic_load_explicit(&rs->last_used_ns, memory_order_relaxed);
        if (now_ns - last < INLINE_IDLE_NS || !inline_empty(e, rs, now_ns)) {
            continue;
        }
        inline_set_t *s = set_with(cur, rs, NULL);
        if (s == NULL) {
            break;
        }
        atomic_fetch_add(&rs->refs, 1); /* limbo's */
        rs->limbo_next = e->inl_limbo;
        e->inl_limbo = rs;
        publish(e, s);
        cur = s;
        i--; /* the rule after it moved down */
        removed++;
    }
    collect_sets(e);
    collect_limbo(e, now_ns);
    pthread_mutex_unlock(&e->inline_lock);
    return removed;
}

size_t engine_inline_count(engine_t *e)
{
    pthread_mutex_lock(&e->inline_lock);
    inline_set_t *cur = atomic_load(&e->inl_current);
    size_t n = cur != NULL ? cur->n : 0;
    pthread_mutex_unlock(&e->inline_lock);
    return n;
}

/* Adds rs's numbers to *o when it shares the "inline:other" series. */
static void other_add(const rule_state_t *rs, engine_inline_other_t *o, bool tables)
{
    if (rs->own_series) {
        return;
    }
    uint64_t a, d, sh, err;
    engine_counters_sum(rs, &a, &d, &sh, &err);
    o->allowed += a;
    o->denied += d;
    o->shadow_denied += sh;
    o->store_errors += err;
    if (tables) {
        sl_table_stats_t st;
        engine_rule_stats((rule_state_t *)rs, &st);
        o->keys += st.keys;
        o->bytes += st.bytes;
    }
}

void engine_inline_other(engine_t *e, engine_inline_other_t *out)
{
    *out = (engine_inline_other_t){0};
    /* Under inline_lock a rule is in force, in limbo or freed (its counts then in
     * inl_other_gone), each exactly once: the sum never goes down. */
    pthread_mutex_lock(&e->inline_lock);
    inline_set_t *cur = atomic_load(&e->inl_current);
    for (size_t i = 0; cur != NULL && i < cur->n; i++) {
        other_add(cur->rules[i], out, true);
    }
    for (const rule_state_t *rs = e->inl_limbo; rs != NULL; rs = rs->limbo_next) {
        other_add(rs, out, false);
    }
    uint64_t a, d, sh, err;
    engine_inline_retired(e, &a, &d, &sh, &err);
    out->allowed += a;
    out->denied += d;
    out->shadow_denied += sh;
    out->store_errors += err;
    pthread_mutex_unlock(&e->inline_lock);
}

size_t inline_hold_all(engine_t *e, rule_state_t ***out)
{
    pthread_mutex_lock(&e->inline_lock);
    inline_set_t *cur = atomic_load(&e->inl_current);
    size_t n = cur != NULL ? cur->n : 0;
    *out = n > 0 ? malloc(n * sizeof **out) : NULL;
    if (*out == NULL) {
        n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        (*out)[i] = cur->rules[i];
        atomic_fetch_add(&cur->rules[i]->refs, 1);
    }
    pthread_mutex_unlock(&e->inline_lock);
    return n;
}

void inline_free_all(engine_t *e)
{
    set_free(atomic_load(&e->inl_current));
    atomic_store(&e->inl_current, NULL);
    while (e->inl_retired != NULL) {
        inline_set_t *next = e->inl_retired->retired_next;
        set_free(e->inl_retired);
        e->inl_retired = next;
    }
    while (e->inl_limbo != NULL) {
        rule_state_t *next = e->inl_limbo->limbo_next;
        engine_state_release(e->inl_limbo);
        e->inl_limbo = next;
    }
}
