/*
 * engine_decide.c - decisions on a key: at once when the store decides at once and the key's
 * override is known, else as an op (engine_op_t) that completes later, when the config thread
 * has looked the override up or the store has answered (see engine.h). Resets, and the end of
 * every decision (shadow mode, counters, on_store_error).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/events.h"
#include "engine/log.h"

/* ---- the end of every decision ------------------------------------------------------------- */

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

/* An acquire or release refused as a request error (nothing changed): counted; a release of no
 * live hold is an event too (a client that releases twice, late, or a hold it never had). */
static void hold_refused(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out)
{
    out->hold_status = st;
    if (st == SL_EHOLD) {
        atomic_fetch_add_explicit(&rs->t->counters[w->index].releases_refused, 1,
                                  memory_order_relaxed);
        event_note(EV_RELEASE_REFUSED,
                   "rule '%s': a release of a hold the key does not hold (expired, released "
                   "before, or never made): nothing changed",
                   rs->def.name);
    }
}

void engine_decision_done(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out,
                          const void *key, size_t key_len, int64_t now_ns)
{
    rule_counters_t *c = &rs->t->counters[w->index];
    if (st == SL_EHOLD || st == SL_EHOLDTIME || st == SL_ENOHOLDS) { /* the request's error */
        hold_refused(w, rs, st, out);
        return;
    }
    if (st == SL_OK && rs->t->rule.adaptive.algorithm != SL_ADAPTIVE_NONE && out->d.limit > 0) {
        atomic_store_explicit(&rs->t->limit_now, out->d.limit, memory_order_relaxed);
    }
    if (st == SL_OK && out->hold.expired > 0) {
        atomic_fetch_add_explicit(&c->holds_expired, (uint64_t)out->hold.expired,
                                  memory_order_relaxed);
    }
    if (st == SL_EDEBT) { /* a settle past max_debt: refused, nothing charged */
        out->debt_refused = true;
        event_note(EV_SETTLE_DEBT,
                   "rule '%s': a settle refused: it would leave a key owing more "
                   "than max_debt (%lld units past its limit)",
                   rs->def.name, (long long)out->max_debt);
        return;
    }
    if (st != SL_OK) {
        if (st == SL_EFULL) {
            event_note(EV_MEMORY_FULL,
                       "rule '%s': no room for a new key under --max-memory (every key in use): "
                       "on_store_error %s decided",
                       rs->def.name,
                       rs->def.on_store_error == RULE_ON_ERROR_ALLOW ? "allow" : "deny");
        }
        store_error_decision(rs, out);
        atomic_fetch_add_explicit(&c->store_errors, 1, memory_order_relaxed);
        return;
    }
    out->never = !out->d.allowed && out->d.retry_after_ns < 0;
    if (!out->d.allowed && out->reserve > 0) {
        event_note(EV_PRIORITY_SHED,
                   "rule '%s': a request below the top priority shed: its cost and the %lld units "
                   "kept for higher priorities did not fit",
                   rs->def.name, (long long)out->reserve);
    }
    watch_outcome_t seen = WATCH_ALLOWED;
    if (out->d.allowed) {
        atomic_fetch_add_explicit(&c->allowed, 1, memory_order_relaxed);
    } else if (rs->def.shadow) {
        out->shadowed = true;
        out->shadowed_retry_after_ns = out->d.retry_after_ns;
        out->d.allowed = true;
        out->d.retry_after_ns = 0;
        atomic_fetch_add_explicit(&c->shadow_denied, 1, memory_order_relaxed);
        seen = WATCH_SHADOW_DENIED;
    } else {
        atomic_fetch_add_explicit(&c->denied, 1, memory_order_relaxed);
        seen = WATCH_DENIED;
    }
    if (rs->t->watch != NULL && !out->peek) {
        watch_record(rs->t->watch, w->index, key, key_len, seen, now_ns);
    }
}

/* ---- decisions at once --------------------------------------------------------------------- */

int engine_decide_now(engine_worker_t *w, rule_state_t *rs, const ov_entry_t *en, const void *key,
                      size_t key_len, const engine_request_t *req, int64_t now_ns,
                      engine_decision_t *out)
{
    *out =
        (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns, .peek = req->cost == 0};
    if (engine_blocked(rs, en, out)) {
        engine_decision_done(w, rs, SL_OK, out, key, key_len, now_ns);
        return ENGINE_OK;
    }
    request_store_t *s = w->engine->requests;
    store_target_t tg;
    engine_target(rs, en, key, key_len, &tg, out);
    engine_request_t with_hold = *req;
    with_hold.hold = &out->hold;
    with_hold.reserve = engine_reserve(rs, &tg, req);
    out->reserve = with_hold.reserve;
    int st = s->ops->decide(s, w->requests, &tg, &with_hold, now_ns, &out->d, NULL, NULL);
    if (st == SL_EKEY) {
        return ENGINE_EKEY;
    }
    if (st == SL_ECOST) {
        return ENGINE_ECOST;
    }
    engine_decision_done(w, rs, st, out, key, key_len, now_ns);
    return ENGINE_OK;
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

/* The decision of on_store_error for rs, counted. */
static void store_error(engine_worker_t *w, rule_state_t *rs, int st, engine_decision_t *out)
{
    *out = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
    engine_decision_done(w, rs, st, out, NULL, 0, 0); /* st != SL_OK: not watched */
}

int engine_decide(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                  int64_t cost, int64_t now_ns, engine_decision_t *out)
{
    int rc = check_request(w, key_len, cost);
    if (rc != ENGINE_OK) {
        return rc;
    }
    if (!w->engine->requests->ops->completes_at_once) {
        store_error(w, rs, SL_EINVAL, out); /* no loop to wait on */
        return ENGINE_OK;
    }
    const ov_entry_t *en = NULL;
    if (rs->has_overrides) {
        en = override_cached(w, rs, key, key_len, now_ns);
        if (en == NULL && (en = override_lookup_now(w, rs, key, key_len, now_ns)) == NULL) {
            store_error(w, rs, SL_EINVAL, out);
            return ENGINE_OK;
        }
    }
    engine_request_t req = {.cost = cost};
    return engine_decide_now(w, rs, en, key, key_len, &req, now_ns, out);
}

/* ---- decisions that complete later -------------------------------------------------------- */

static void op_resume(ov_waiter_t *waiter, const ov_entry_t *en);

/* An op from the worker's free list for rule rs (held), or NULL when out of memory. The key is
 * copied when key != NULL. */
static engine_op_t *op_get(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                           int64_t cost, int64_t now_ns)
{
    engine_op_t *op = w->attached ? freelist_get(&w->ops) : malloc(sizeof *op);
    if (op == NULL) {
        return NULL;
    }
    *op = (engine_op_t){.wait = {.resume = op_resume, .now_ns = now_ns},
                        .w = w,
                        .rs = rs,
                        .req = {.cost = cost},
                        .now_ns = now_ns,
                        .key_len = key_len};
    op->out =
        (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns, .peek = cost == 0};
    if (key != NULL) {
        op->key = key_len <= sizeof op->key_buf ? op->key_buf : malloc(key_len);
        if (op->key == NULL) {
            freelist_put(&w->ops, op);
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
        freelist_put(&w->ops, op);
    } else {
        free(op);
    }
}

/* Answers op's later completion through fn, then releases it. */
static void op_finish(engine_op_t *op)
{
    op->fn(op->arg, ENGINE_OK, &op->out);
    op_release(op);
}

/* The store's answer to op: after decide returned STORE_PENDING (request_store.h). */
static void store_answered(void *arg, int status, const sl_decision_t *d, const char *err)
{
    engine_op_t *op = arg;
    if (status != 0 && status != SL_EDEBT && status != SL_EHOLD) {
        log_debug("rule '%s': request store error: %s", op->rs->def.name, err);
    }
    if (status == 0) {
        op->out.d = *d;
    }
    bool passed = status == SL_EDEBT || status == SL_EHOLD || status == SL_EHOLDTIME ||
                  status == SL_ENOHOLDS; /* the request's own errors, not the store's */
    engine_decision_done(op->w, op->rs,
                         status == 0 ? SL_OK
                         : passed    ? status
                                     : SL_EINVAL,
                         &op->out, op->key, op->key_len, op->now_ns);
    op_finish(op);
}

/* Continues a decision whose override is now known (en NULL: the lookup failed, apply
 * on_store_error): asks the store. Returns true when op->out is its answer now, false when the
 * store answers later (store_answered). */
static bool op_continue(engine_op_t *op, const ov_entry_t *en)
{
    engine_worker_t *w = op->w;
    rule_state_t *rs = op->rs;
    if (op->resolve_only) {
        op->out.store_error = en == NULL;
        return true;
    }
    if (rs->has_overrides && en == NULL) {
        log_debug("rule '%s': override lookup failed", rs->def.name);
        engine_decision_done(w, rs, SL_EINVAL, &op->out, NULL, 0, 0);
        return true;
    }
    if (engine_blocked(rs, en, &op->out)) {
        engine_decision_done(w, rs, SL_OK, &op->out, op->key, op->key_len, op->now_ns);
        return true;
    }
    request_store_t *s = w->engine->requests;
    store_target_t tg;
    engine_target(rs, en, op->key, op->key_len, &tg, &op->out);
    /* key and cost were checked when the decision started */
    op->req.reserve = engine_reserve(rs, &tg, &op->req);
    op->out.reserve = op->req.reserve;
    int st =
        s->ops->decide(s, w->requests, &tg, &op->req, op->now_ns, &op->out.d, store_answered, op);
    if (st == STORE_PENDING) {
        return false;
    }
    engine_decision_done(w, rs, st, &op->out, op->key, op->key_len, op->now_ns);
    return true;
}

/* The override lookup op waited for is answered (after override_wait returned). */
static void op_resume(ov_waiter_t *waiter, const ov_entry_t *en)
{
    engine_op_t *op = (engine_op_t *)waiter; /* wait is op's first member */
    if (op_continue(op, en)) {
        op_finish(op);
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
                store_error(w, rs, SL_EINVAL, out);
                return ENGINE_OK;
            }
        }
        wait = en == NULL;
    }
    if (!wait && w->engine->requests->ops->completes_at_once) {
        return engine_decide_now(w, rs, en, key, key_len, req, now_ns, out);
    }
    /* The key is copied: a lookup needs it, and the rule's watch counts it when the store
     * answers (keys up to OP_KEY_INLINE bytes live in the op, which is reused). */
    engine_op_t *op = op_get(w, rs, key, key_len, req->cost, now_ns);
    if (op == NULL) {
        store_error(w, rs, SL_ENOMEM, out);
        return ENGINE_OK;
    }
    op->req = *req;
    op->req.hold = &op->out.hold; /* the op lives until the store has answered */
    ov_entry_t copy;
    bool now = !wait || override_wait(w, rs, op->key, op->key_len, &op->wait, &copy, &en);
    if (!now || !op_continue(op, en)) {
        *pending = (engine_pending_t *)op; /* answered through engine_pending_then's fn */
        return ENGINE_PENDING;
    }
    *out = op->out;
    op_release(op);
    return ENGINE_OK;
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
    if (req->hold_op != STORE_HOLD_NONE && !sl_rule_holds(&rs->t->rule)) {
        return ENGINE_ENOHOLDS;
    }
    if (req->hold_op != STORE_HOLD_NONE && !w->engine->requests->ops->holds) {
        return ENGINE_ENOTSUP; /* the store cannot hold: never decided as a plain request */
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
        engine_op_t *op = op_get(w, rules[i], keys[i], key_lens[i], 0, now_ns);
        if (op == NULL) {
            continue;
        }
        op->resolve_only = true;
        op->fn = resolved_one;
        op->arg = r;
        ov_entry_t copy;
        const ov_entry_t *en;
        if (override_wait(w, rules[i], op->key, op->key_len, &op->wait, &copy, &en)) {
            op_release(op); /* known now: nothing to wait for */
            continue;
        }
        r->left++;
    }
    if (r == NULL) {
        return ENGINE_OK;
    }
    resolved_one(r, ENGINE_OK, NULL); /* fn runs now if every lookup was answered at once */
    return ENGINE_PENDING;
}

/* ---- resets and refusals ------------------------------------------------------------------ */

int engine_reset(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len)
{
    if (key_len > w->engine->cfg.key_max) {
        return ENGINE_EKEY;
    }
    request_store_t *s = w->engine->requests;
    if (!s->ops->completes_at_once) {
        return ENGINE_ESTORE; /* engine_reset_async's */
    }
    store_target_t tg;
    engine_decision_t unused;
    engine_target(rs, NULL, key, key_len, &tg, &unused);
    s->ops->reset(s, w->requests, &tg, NULL, NULL);
    return ENGINE_OK;
}

void engine_forget_refusals(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                            int64_t now_ns)
{
    const request_store_ops_t *ops = w->engine->requests->ops;
    if (ops->forget == NULL || w->requests == NULL) {
        return;
    }
    /* the base parameters' key, and the override's that decisions use now, if any */
    store_target_t tg;
    engine_decision_t unused;
    engine_target(rs, NULL, key, key_len, &tg, &unused);
    ops->forget(w->requests, &tg);
    if (rs->has_overrides) {
        const ov_entry_t *en = override_cached(w, rs, key, key_len, now_ns);
        if (en != NULL && en->present && !en->blocked) {
            engine_target(rs, en, key, key_len, &tg, &unused);
            ops->forget(w->requests, &tg);
        }
    }
}

typedef struct reset_op {
    rule_state_t *rs;
    engine_done_fn fn;
    void *arg;
} reset_op_t;

static void reset_answered(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)d;
    (void)err;
    reset_op_t *op = arg;
    op->fn(op->arg, status == 0 ? ENGINE_OK : ENGINE_ESTORE);
    engine_state_release(op->rs);
    free(op);
}

int engine_reset_async(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                       engine_done_fn fn, void *arg)
{
    request_store_t *s = w->engine->requests;
    if (s->ops->completes_at_once) {
        int rc = engine_reset(w, rs, key, key_len);
        if (rc == ENGINE_OK) {
            fn(arg, rc);
        }
        return rc;
    }
    if (key_len > w->engine->cfg.key_max) {
        return ENGINE_EKEY;
    }
    reset_op_t *op = malloc(sizeof *op);
    if (op == NULL) {
        fn(arg, ENGINE_ESTORE);
        return ENGINE_OK;
    }
    *op = (reset_op_t){.rs = rs, .fn = fn, .arg = arg};
    atomic_fetch_add(&rs->refs, 1);
    /* the base parameters' key; an override's key (other parameters) expires by itself */
    store_target_t tg;
    engine_decision_t unused;
    engine_target(rs, NULL, key, key_len, &tg, &unused);
    int st = s->ops->reset(s, w->requests, &tg, reset_answered, op);
    if (st != STORE_PENDING) {
        reset_answered(op, st, NULL, NULL); /* answered within the call */
    }
    return ENGINE_OK;
}
