/*
 * engine_snapshot.c - snapshots of the request store (see engine_save_snapshot in engine.h):
 * which rule each section belongs to, and what a rule's cold_start says when there is none. The
 * sections' contents are the store's (request_store.h: save_rule, load_*); a store without
 * snapshots writes none and loads none.
 *
 * Section ids: "r:<name>" a named rule's table, "o:<name>" one of its override tables (the
 * parameters are the section's rule), "i:<name>" an inline rule. A rule whose numbers changed
 * while sluiced was stopped gets its keys converted (sl_state_convert), as a change at run time
 * does; one whose algorithm changed starts by its cold_start. An "r:" section carries the rule's
 * cold_start: closed window while it lasts, restored on load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/log.h"
#include "store/snapshot.h"

typedef struct save_ctx {
    snapshot_writer_t *w;
    int64_t now_ns;
    char *err;
    size_t keys;
    int failed;
} save_ctx_t;

static void save_rule(void *arg, rule_state_t *rs)
{
    save_ctx_t *s = arg;
    const rule_tables_t *t = rs->t;
    if (s->failed || !t->ops->has_snapshots) {
        return;
    }
    if (t->ops->save_rule(t->data, s->w, rs->inline_rule ? 'i' : 'r', rs->def.name, s->now_ns,
                          &s->keys, s->err) != 0) {
        s->failed = 1;
    }
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
    engine_worker_t *w;     /* worker 0's slot, used before the loops start */
    store_loader_t *loader; /* NULL: a store without snapshots, or out of memory */
    int64_t now_ns;
} load_ctx_t;

/* A rule with cold_start: closed starts as having used its whole quota, for one window from
 * from_ns (renew false: unless a window is in force then). */
static void cold_start_at(rule_state_t *rs, int64_t from_ns, bool renew)
{
    const rule_tables_t *t = rs->t;
    if (rs->def.cold_start == RULE_COLD_CLOSED && t->ops->cold_start != NULL) {
        t->ops->cold_start(t->data, from_ns, from_ns + t->rule.window_ns, renew);
    }
}

static void cold_start(void *arg, rule_state_t *rs)
{
    cold_start_at(rs, *(int64_t *)arg, true);
}

/* An "r:" section: the rule's own table, unless its algorithm changed while stopped. */
static bool load_rule(load_ctx_t *l, rule_state_t *rs, const sl_rule_t *rule,
                      const snapshot_closed_t *closed)
{
    const rule_tables_t *t = rs->t;
    if (rule->algorithm != t->rule.algorithm) { /* changed while sluiced was stopped */
        cold_start_at(rs, l->now_ns, false);
        log_info("snapshot: rule '%s' has another algorithm now (was %s): its keys start by "
                 "its cold_start",
                 rs->def.name, sl_algorithm_name(rule->algorithm));
        return false;
    }
    if (closed->until_ns > l->now_ns && rs->def.cold_start == RULE_COLD_CLOSED &&
        t->ops->cold_start != NULL) {
        t->ops->cold_start(t->data, closed->from_ns, closed->until_ns, true);
    }
    int rc = t->ops->load_section(l->loader, t->data, 'r', rule);
    if (rc > 0) { /* numbers changed while stopped: usage carried */
        log_info("rule '%s' changed its numbers since the snapshot: its keys' usage is "
                 "converted",
                 rs->def.name);
    }
    return rc >= 0;
}

static bool load_section(void *arg, const void *id, size_t id_len, const sl_rule_t *rule,
                         const snapshot_closed_t *closed)
{
    load_ctx_t *l = arg;
    const char *s = id;
    if (id_len < 3 || s[1] != ':') {
        return false;
    }
    const char *name = s + 2;
    size_t name_len = id_len - 2;
    rule_state_t *rs = NULL;
    /* a section does not record max_debt, which no state depends on: an inline rule's is the
     * default (what SL.THROTTLE without MAX_DEBT names); a named rule's and its overrides' the
     * one the rule gives now, or the default (each its own capacity) */
    sl_rule_t with_debt = *rule;
    with_debt.max_debt = SL_DEFAULT;
    if (s[0] == 'i') {
        char err[ENGINE_ERR_MAX];
        if (sl_rule_prepare(&with_debt) != SL_OK ||
            engine_inline_rule(l->w, &with_debt, NULL, l->now_ns, &rs, err) != ENGINE_OK) {
            return false;
        }
    } else {
        rs = ruleset_find(atomic_load(&l->e->current), name, name_len);
    }
    if (rs == NULL || l->loader == NULL) {
        return false;
    }
    if (s[0] != 'i') {
        with_debt.max_debt = rs->def.max_debt_given ? rs->def.rule.max_debt : SL_DEFAULT;
        if (sl_rule_prepare(&with_debt) != SL_OK) {
            return false;
        }
    }
    rule = &with_debt;
    if (s[0] == 'r') {
        return load_rule(l, rs, rule, closed);
    }
    if (s[0] != 'o' && s[0] != 'i') {
        return false;
    }
    return rs->t->ops->load_section(l->loader, rs->t->data, s[0], rule) >= 0;
}

static void load_entry(void *arg, const void *key, size_t key_len, const void *state,
                       size_t state_len)
{
    load_ctx_t *l = arg;
    l->e->requests->ops->load_entry(l->loader, key, key_len, state, state_len);
}

int engine_load_snapshot(engine_t *e, const char *path, int64_t now_ns, size_t *keys, char *err)
{
    const request_store_ops_t *ops = e->requests->ops;
    load_ctx_t l = {.e = e, .w = &e->workers[0], .now_ns = now_ns};
    l.loader = ops->has_snapshots ? ops->load_open(now_ns) : NULL;
    snapshot_visitor_t v = {.section = load_section, .entry = load_entry, .arg = &l};
    char serr[SNAPSHOT_ERR_MAX] = "";
    int rc = snapshot_load(path, &v, NULL, serr);
    size_t loaded = ops->has_snapshots ? ops->load_close(l.loader) : 0;
    if (keys != NULL) {
        *keys = loaded;
    }
    if (rc == SNAPSHOT_LOADED) {
        return 0;
    }
    if (ops->has_snapshots) { /* a store without (Redis) keeps its keys' usage by itself */
        engine_foreach_rule(e, cold_start, &now_ns);
    }
    if (rc == SNAPSHOT_MISSING) {
        return 1;
    }
    snprintf(err, ENGINE_ERR_MAX, "%s", serr);
    return -1;
}
