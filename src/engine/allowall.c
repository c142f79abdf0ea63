/*
 * allowall.c - all-or-nothing decisions over several (rule, key, cost) checks: SL.ALLOWALL and
 * /v1/allow's checks (see engine_allowall in engine.h).
 *
 * The checks are first merged: a (rule, key) named twice is one check of the summed cost, since
 * two requests on one key must count together (`SL.ALLOWALL api dd api dd COST 150` on a limit of
 * 200 asks for 300). Then every check's override is looked up (on the config thread, when a loop's
 * cache lacks it), and the checks are decided:
 *
 *   a store that completes at once (memory): in one decide_all under every shard's lock
 *                 (decide_all_now): either every check is charged, or none;
 *   a store that answers later (Redis): with sluice.so and every key in one cluster slot, in one
 *                 script inside Redis (decide_all_later); otherwise (the store's decide_all says
 *                 ENOTSUP) every check is charged (all sent at once), and when one is refused,
 *                 each check that was charged is refunded (a settle of actual 0, at once:
 *                 exact, the units go back where they were taken). Meanwhile another client may
 *                 find the refunded units taken and be refused: a refused whole never keeps its
 *                 units, but can delay others for a round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/log.h"

/* With ENGINE_ALL_INDEPENDENT the checks are validated together (an invalid one fails the whole
 * before anything is decided) and then decided one by one, each charged or not on its own. */

typedef enum phase { PHASE_CHARGE, PHASE_REFUND } phase_t;

/* a + b for costs, saturating at INT64_MAX (both >= 0) */
static int64_t cost_sum(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

typedef struct allowall allowall_t;

typedef struct allowall_ref {
    allowall_t *a;
    size_t i;
} allowall_ref_t;

struct allowall {
    engine_worker_t *w;
    int64_t now_ns;
    engine_allowall_fn fn;
    void *arg;
    size_t n; /* checks asked for */
    size_t m; /* merged checks */
    phase_t phase;
    bool independent; /* ENGINE_ALL_INDEPENDENT: each check on its own, none merged */
    bool acquire;     /* ENGINE_ALL_ACQUIRE: every check an acquire, refunded by a release */
    size_t left;
    size_t refused; /* PHASE_REFUND: the first check refused */
    bool error;     /* a step could not start: every check a store error */
    bool kept;      /* from its worker's alls (allowall_new), given back there */
    /* [0, n) each, in the allocation's tail (allowall_new): a call of 3 checks allocates and
     * zeroes room for 3, not for ENGINE_CHECKS_MAX */
    engine_decision_t *got;
    allowall_ref_t *ref;
    size_t *map; /* check -> the merged check it counts in */
    rule_state_t **rules;
    const char **keys;
    size_t *key_lens;
    int64_t *costs;
    int64_t *holds_ns; /* acquire: each merged check's hold time, the shortest merged (0: the
                          hold_timeout in force) */
    unsigned *prios;   /* each merged check's priority: the lowest of those merged into it */
    char *bytes;       /* the keys */
};

_Static_assert(sizeof(allowall_t) % _Alignof(engine_decision_t) == 0 &&
                   sizeof(engine_decision_t) % _Alignof(allowall_ref_t) == 0,
               "each check's arrays follow the call aligned");

/* An all-or-nothing call of n checks whose keys take `bytes`, zeroed, in one allocation: a
 * block w keeps when it fits one and w is attached to its loop (calloc and free were a tenth of
 * a 3-check call's work: docs/dev/benchmarks.md), else its own; NULL when out of memory. */
static allowall_t *allowall_new(engine_worker_t *w, size_t n, size_t bytes)
{
    size_t each = sizeof(engine_decision_t) + sizeof(allowall_ref_t) + sizeof(size_t) +
                  sizeof(rule_state_t *) + sizeof(const char *) + sizeof(size_t) +
                  2 * sizeof(int64_t) + sizeof(unsigned); /* the keys' bytes last */
    size_t size = sizeof(allowall_t) + n * each + bytes;
    bool kept = w->attached && size <= ALLOWALL_KEPT_BYTES;
    allowall_t *a = kept ? freelist_get(&w->alls) : calloc(1, size);
    if (a != NULL && kept) {
        memset(a, 0, size);
        a->kept = true;
    }
    if (a != NULL) {
        a->got = (engine_decision_t *)(a + 1);
        a->ref = (allowall_ref_t *)(a->got + n);
        a->map = (size_t *)(a->ref + n);
        a->rules = (rule_state_t **)(a->map + n);
        a->keys = (const char **)(a->rules + n);
        a->key_lens = (size_t *)(a->keys + n);
        a->costs = (int64_t *)(a->key_lens + n);
        a->holds_ns = a->costs + n;
        a->prios = (unsigned *)(a->holds_ns + n);
        a->bytes = (char *)(a->prios + n);
    }
    return a;
}

/* Answers with the merged checks' decisions spread back over the checks asked for. */
static void allowall_end(allowall_t *a, size_t refused_merged)
{
    engine_decision_t d[ENGINE_CHECKS_MAX];
    size_t refused = a->n;
    bool merged = a->m < a->n; /* else check i is merged check i: its decision is a->got[i] */
    for (size_t i = 0; i < a->n; i++) {
        if (merged) {
            d[i] = a->got[a->map[i]];
        }
        if (refused == a->n && refused_merged < a->m && a->map[i] == refused_merged) {
            refused = i;
        }
    }
    a->fn(a->arg, merged ? d : a->got, a->n, refused);
    for (size_t j = 0; j < a->m; j++) {
        engine_state_release(a->rules[j]);
    }
    if (a->kept) {
        freelist_put(&a->w->alls, a);
    } else {
        free(a);
    }
}

static void allowall_step(allowall_t *a);

static void allowall_decided(void *arg, int status, const engine_decision_t *ed)
{
    (void)status;
    allowall_ref_t *ref = arg;
    allowall_t *a = ref->a;
    int64_t reserve = a->got[ref->i].reserve; /* the charge's, for a refund's answer */
    a->got[ref->i] = *ed; /* a refund's answer: what the key holds after it, as a peek */
    engine_decision_t *got = &a->got[ref->i];
    if (a->phase == PHASE_REFUND && reserve > ed->reserve) { /* its priority's view, as a peek's */
        got->d.remaining = got->d.remaining > reserve ? got->d.remaining - reserve : 0;
        got->reserve = reserve;
    }
    if (a->phase == PHASE_REFUND) { /* a hold released, or none made: none kept */
        got->hold = (sl_hold_t){0, 0, 0};
    }
    if (a->phase == PHASE_REFUND && got->shadowed) { /* a shadow rule's key as it stands */
        got->shadowed = false;
        got->d.allowed = false;
        got->d.retry_after_ns = got->shadowed_retry_after_ns;
    }
    if (--a->left == 0) {
        allowall_step(a);
    }
}

/* Starts, for merged checks [0, m) that `want` selects, a decision of its cost (PHASE_CHARGE), or
 * the refund of its charged cost or a shadow rule's peek (PHASE_REFUND: the whole refused, a
 * shadow rule's check reports its key as it stands, as decide_all_now's do). */
/* A check whose charge took units: admitted for real (not by shadow mode or on_store_error). */
static bool charged(const allowall_t *a, size_t j)
{
    const engine_decision_t *ed = &a->got[j];
    return a->costs[j] > 0 && ed->d.allowed && !ed->shadowed && !ed->store_error;
}

static void allowall_send(allowall_t *a, bool (*want)(const allowall_t *a, size_t j))
{
    a->left = 1; /* held until every request is started, so none completes the phase early */
    for (size_t j = 0; j < a->m; j++) {
        if (!want(a, j)) {
            continue;
        }
        engine_request_t req = {.cost = a->costs[j], .priority = a->prios[j]};
        if (a->acquire) {
            req.hold_op = STORE_HOLD_ACQUIRE;
            req.hold_ns = a->holds_ns[j];
        }
        if (a->phase == PHASE_REFUND && a->acquire && charged(a, j) && a->got[j].hold.id != 0) {
            /* its hold released: exact, whenever it runs (a hold frees only its own units) */
            req = (engine_request_t){.hold_op = STORE_HOLD_RELEASE, .hold_id = a->got[j].hold.id};
        } else if (a->phase == PHASE_REFUND) {
            /* dated no later than the charge (when the request was read, before the charges
             * were sent): a refund dated when it runs, after other admissions on the key,
             * would give back their newer units or a refill the charge no longer holds */
            req = (engine_request_t){
                .settle = true, .reserved = a->costs[j], .actual = 0, .charged_ns = a->now_ns};
            if (!charged(a, j) || a->acquire) {
                req = (engine_request_t){.cost = 0, .priority = a->prios[j]};
            }
        }
        a->left++;
        if (engine_request_async(a->w, a->rules[j], a->keys[j], a->key_lens[j], &req, a->now_ns,
                                 allowall_decided, &a->ref[j]) != ENGINE_OK) {
            a->left--; /* checked before: a store refusing */
            if (a->phase == PHASE_CHARGE) {
                a->error = true;
                a->got[j] = (engine_decision_t){.rule = a->rules[j], .store_error = true};
            }
        }
    }
    if (--a->left == 0) {
        allowall_step(a);
    }
}

static bool every_check(const allowall_t *a, size_t j)
{
    (void)a;
    (void)j;
    return true;
}

/* A check whose charge took units (to give back when the whole is refused), or a shadow rule's
 * check not decided apart (to peek at). */
static bool refund_or_peek(const allowall_t *a, size_t j)
{
    const engine_decision_t *ed = &a->got[j];
    return charged(a, j) ||
           (a->rules[j]->def.shadow && !ed->store_error && !ed->blocked && !ed->never);
}

/* The step-by-step path (the Redis store without one atomic script). */
static void allowall_step(allowall_t *a)
{
    if (a->phase == PHASE_REFUND) {
        allowall_end(a, a->refused);
        return;
    }
    if (a->error) { /* refused by the first check that could not be sent; the others' charges
                       go back, as any refusal's do */
        size_t bad = 0;
        while (bad + 1 < a->m && !(a->got[bad].store_error && !a->got[bad].d.allowed)) {
            bad++;
        }
        a->error = false;
        a->phase = PHASE_REFUND;
        a->refused = bad;
        allowall_send(a, refund_or_peek);
        return;
    }
    size_t refused = a->m;
    for (size_t j = 0; j < a->m && !a->independent && refused == a->m; j++) {
        if (!a->got[j].d.allowed) {
            refused = j;
        }
    }
    if (refused == a->m) {
        allowall_end(a, a->m);
        return;
    }
    a->phase = PHASE_REFUND;
    a->refused = refused;
    allowall_send(a, refund_or_peek);
}

/* The one atomic step's answer: the refusal, or every check charged. */
static void allowall_atomic(allowall_t *a, const engine_decision_t *d, size_t n, long refused)
{
    if (refused == STORE_ALL_RETRY) { /* the node lost sluice.so: nothing was decided */
        a->phase = PHASE_CHARGE;
        allowall_send(a, every_check);
        return;
    }
    if (refused >= 0) {
        for (size_t j = 0; j < n; j++) {
            a->got[j] = d[j]; /* the refusal, and the others' peeks */
        }
        allowall_end(a, (size_t)refused);
        return;
    }
    size_t first_denied = a->m;
    for (size_t j = 0; j < n; j++) {
        a->got[j] = d[j];
        if (first_denied == a->m && !d[j].d.allowed) { /* a store error on a deny rule */
            first_denied = j;
        }
    }
    allowall_end(a, first_denied);
}

/* ---- all or nothing on a store that completes at once ------------------------------------- */

/* decide_all_now's pairs. */
typedef struct all_now {
    engine_worker_t *w;
    rule_state_t *const *rules;
    engine_decision_t *d;
    size_t n;
    int64_t now_ns;
    const char *const *keys; /* [n], key_lens[i] bytes each */
    const size_t *key_lens;
    const int64_t *holds_ns; /* [n]: every pair an acquire of that time (0: the window in
                                force); NULL: decisions */
    store_pair_t pairs[ENGINE_CHECKS_MAX]; /* each pair's target (its override's, if any) */
    const ov_entry_t *ens[ENGINE_CHECKS_MAX];
    bool out[ENGINE_CHECKS_MAX]; /* decided apart: a store error let through */
} all_now_t;

/* Pair i's decision apart from the others, by on_store_error (st) or its blocking override:
 * true when it refuses the whole. */
static bool all_now_apart(all_now_t *x, size_t i, int st)
{
    engine_decision_done(x->w, x->rules[i], st, &x->d[i], x->keys[i], x->key_lens[i], x->now_ns);
    x->out[i] = true;
    return !x->d[i].d.allowed;
}

/* Every pair's target and override. Returns n, or the pair that refuses the whole already (a
 * failed lookup under on_store_error deny, a blocked key). */
static size_t all_now_targets(all_now_t *x, const char *const *keys, const size_t *key_lens,
                              const int64_t *costs, const unsigned *prios)
{
    for (size_t i = 0; i < x->n; i++) {
        rule_state_t *rs = x->rules[i];
        x->d[i] = (engine_decision_t){.rule = rs, .window_ns = rs->t->rule.window_ns};
        const ov_entry_t *en =
            rs->has_overrides ? override_cached(x->w, rs, keys[i], key_lens[i], x->now_ns) : NULL;
        if (rs->has_overrides && en == NULL) { /* the lookup failed: on_store_error */
            if (all_now_apart(x, i, SL_EINVAL)) {
                return i;
            }
            continue;
        }
        if (engine_blocked(rs, en, &x->d[i])) {
            all_now_apart(x, i, SL_OK);
            return i;
        }
        x->ens[i] = en;
        x->pairs[i] = (store_pair_t){.cost = costs[i], .shadow = rs->def.shadow};
        engine_target(rs, en, keys[i], key_lens[i], &x->pairs[i].tg, &x->d[i]);
        x->pairs[i].reserve =
            engine_reserve(rs, &x->pairs[i].tg, &(engine_request_t){.priority = prios[i]});
        x->d[i].reserve = x->pairs[i].reserve;
        if (x->holds_ns != NULL) { /* holds_in_force() bounded the time asked */
            x->pairs[i].acquire = true;
            x->pairs[i].hold_ns = x->holds_ns[i];
            x->pairs[i].hold = &x->d[i].hold;
        }
    }
    return x->n;
}

/* One try at charging every pair in force (not apart, not shadow) at once. Returns true when
 * the whole is answered: *refused the pair that refused it, or n with every pair charged; false
 * when a key at the memory cap was let through uncharged (try the rest again). */
static bool all_now_charge(all_now_t *x, size_t *refused)
{
    request_store_t *s = x->w->engine->requests;
    store_pair_t reqs[ENGINE_CHECKS_MAX];
    sl_decision_t got[ENGINE_CHECKS_MAX];
    size_t at[ENGINE_CHECKS_MAX]; /* reqs[k] is pair at[k] */
    size_t k = 0;
    for (size_t i = 0; i < x->n; i++) {
        if (!x->out[i] && !x->rules[i]->def.shadow) {
            at[k] = i;
            reqs[k++] = x->pairs[i];
        }
    }
    size_t r = k;
    int rc = k > 0 ? s->ops->decide_all(s, x->w->requests, reqs, k, x->now_ns, got, &r, NULL, NULL)
                   : SL_OK;
    if (rc != SL_OK && r < k) { /* a key at the memory cap: its rule's on_store_error */
        *refused = all_now_apart(x, at[r], rc) ? at[r] : x->n;
        return *refused < x->n;
    }
    if (rc != SL_OK) {
        for (size_t j = 0; j < x->n; j++) { /* out of memory before anything: every pair */
            engine_decision_done(x->w, x->rules[j], rc, &x->d[j], NULL, 0, 0);
        }
        *refused = 0;
        return true;
    }
    for (size_t j = 0; j < k; j++) {
        x->d[at[j]].d = got[j];
    }
    if (r < k) {
        size_t i = at[r]; /* nothing charged */
        engine_decision_done(x->w, x->rules[i], SL_OK, &x->d[i], x->keys[i], x->key_lens[i],
                             x->now_ns);
        *refused = at[r];
        return true;
    }
    for (size_t j = 0; j < k; j++) {
        size_t i = at[j];
        engine_decision_done(x->w, x->rules[i], SL_OK, &x->d[i], x->keys[i], x->key_lens[i],
                             x->now_ns);
    }
    *refused = x->n;
    return true;
}

/* The whole refused after the charge was tried: a shadow rule's pair, not decided, reports its
 * key as it stands (a peek, not counted), as every pair the refusal did not charge does. */
static void all_now_peek_shadows(all_now_t *x)
{
    request_store_t *s = x->w->engine->requests;
    const engine_request_t peek = {.cost = 0};
    for (size_t i = 0; i < x->n; i++) {
        if (!x->out[i] && x->rules[i]->def.shadow) {
            s->ops->decide(s, x->w->requests, &x->pairs[i].tg, &peek, x->now_ns, &x->d[i].d, NULL,
                           NULL);
        }
    }
}

/*
 * n distinct (rule, key) pairs whose overrides are in the worker's cache. The pairs of rules in
 * force (not in shadow mode) are decided in one decide_all, under every shard's lock at once:
 * either every one is charged or none. A shadow rule's pair never blocks the others: it is
 * decided on its own once the rest were admitted. An override that could not be read, or a key
 * at the memory cap, takes its rule's on_store_error: deny refuses the whole, allow lets that
 * pair pass uncharged. d[i] gets each pair's decision; *refused the pair that refused the whole,
 * or n.
 */
static void decide_all_now(engine_worker_t *w, rule_state_t *const *rules, const char *const *keys,
                           const size_t *key_lens, const int64_t *costs, const unsigned *prios,
                           const int64_t *holds_ns, size_t n, int64_t now_ns, engine_decision_t *d,
                           size_t *refused)
{
    all_now_t x; /* [0, n) of its arrays written before read: none zeroed but out */
    x.w = w;
    x.rules = rules;
    x.d = d;
    x.n = n;
    x.now_ns = now_ns;
    x.keys = keys;
    x.key_lens = key_lens;
    x.holds_ns = holds_ns;
    memset(x.out, 0, n * sizeof x.out[0]);
    *refused = all_now_targets(&x, keys, key_lens, costs, prios);
    if (*refused < n) {
        return;
    }
    bool answered = false;
    for (size_t tries = 0; tries <= n && !answered; tries++) {
        answered = all_now_charge(&x, refused);
    }
    if (*refused < n) {
        all_now_peek_shadows(&x);
        return;
    }
    /* every pair in force was charged: the shadow rules' pairs, each on its own */
    for (size_t i = 0; i < n; i++) {
        if (!x.out[i] && rules[i]->def.shadow) {
            engine_request_t req = {.cost = costs[i], .priority = prios[i]};
            if (holds_ns != NULL) {
                req.hold_op = STORE_HOLD_ACQUIRE;
                req.hold_ns = x.pairs[i].hold_ns;
            }
            engine_decide_now(w, rules[i], x.ens[i], keys[i], key_lens[i], &req, now_ns, &d[i]);
        }
    }
}

/* ---- all or nothing in one step on a store that answers later ------------------------------ */

typedef struct all_op {
    engine_worker_t *w;
    size_t n;
    rule_state_t *rules[STORE_ALL_MAX];
    int64_t window_ns[STORE_ALL_MAX];
    allowall_t *a;
} all_op_t;

static void all_answered(void *arg, int status, const sl_decision_t *d, size_t n, long refused,
                         const char *err)
{
    all_op_t *op = arg;
    engine_decision_t out[STORE_ALL_MAX];
    if (status == STORE_ALL_RETRY) { /* nothing decided: the caller goes step by step */
        log_debug("SL.ALLOWALL: %s: deciding pair by pair", err);
        allowall_atomic(op->a, NULL, 0, STORE_ALL_RETRY);
    } else {
        if (status != 0) {
            log_debug("SL.ALLOWALL: request store error: %s", err);
        }
        (void)n; /* op->n: the store answers one decision per pair */
        for (size_t i = 0; i < op->n; i++) {
            out[i] = (engine_decision_t){.rule = op->rules[i], .window_ns = op->window_ns[i]};
            if (status == 0) {
                out[i].d = d[i];
            }
            if (status != 0 || refused < 0 || (size_t)refused == i) { /* counted: what decided */
                engine_decision_done(op->w, op->rules[i], status == 0 ? SL_OK : SL_EINVAL, &out[i],
                                     NULL, 0, op->a->now_ns); /* counted per second only */
            }
        }
        allowall_atomic(op->a, out, op->n, status == 0 ? refused : -1);
    }
    for (size_t i = 0; i < op->n; i++) {
        engine_state_release(op->rules[i]);
    }
    free(op);
}

/* The pairs in one step of the store's (one script inside Redis). Returns ENGINE_OK (answered
 * through allowall_atomic, now or later), or ENGINE_ENOTSUP with nothing done (a blocked key, a
 * lookup to make, a store that cannot: decide pair by pair). */
static int decide_all_later(engine_worker_t *w, allowall_t *a, rule_state_t **rules,
                            const char *const *keys, const size_t *key_lens, const int64_t *costs,
                            size_t n, int64_t now_ns)
{
    request_store_t *s = w->engine->requests;
    store_pair_t pairs[STORE_ALL_MAX];
    if (n == 0 || n > STORE_ALL_MAX) {
        return ENGINE_ENOTSUP;
    }
    all_op_t *op = calloc(1, sizeof *op);
    if (op == NULL) {
        return ENGINE_ENOTSUP;
    }
    *op = (all_op_t){.w = w, .n = n, .a = a};
    for (size_t i = 0; i < n; i++) {
        rule_state_t *rs = rules[i];
        const ov_entry_t *en = NULL;
        if (rs->def.blocked) {
            free(op); /* a rule of limit 0: the step-by-step path refuses it */
            return ENGINE_ENOTSUP;
        }
        if (rs->has_overrides) {
            en = override_cached(w, rs, keys[i], key_lens[i], now_ns);
            if (en == NULL || (en->present && en->blocked)) {
                free(op); /* blocked keys and lookups to make: the step-by-step path */
                return ENGINE_ENOTSUP;
            }
        }
        engine_decision_t window = {.window_ns = rs->t->rule.window_ns};
        engine_target(rs, en, keys[i], key_lens[i], &pairs[i].tg, &window);
        op->window_ns[i] = window.window_ns;
        pairs[i].cost = costs[i];
        pairs[i].shadow = rs->def.shadow;
    }
    for (size_t i = 0; i < n; i++) {
        op->rules[i] = rules[i];
        engine_rule_hold(rules[i]);
    }
    sl_decision_t d[STORE_ALL_MAX];
    size_t at = n;
    int st = s->ops->decide_all(s, w->requests, pairs, n, now_ns, d, &at, all_answered, op);
    if (st == STORE_ENOTSUP) {
        for (size_t i = 0; i < n; i++) {
            engine_state_release(op->rules[i]);
        }
        free(op);
        return ENGINE_ENOTSUP;
    }
    if (st != STORE_PENDING) { /* answered within the call: at is the refused pair, or n */
        all_answered(op, st == SL_OK ? 0 : -1, st == SL_OK ? d : NULL, n, at < n ? (long)at : -1,
                     "the request store failed");
    }
    return ENGINE_OK;
}

/* A check whose cost its rule (or its key's override) can never admit: the whole is answered by
 * it before anything is decided, so an invalid batch charges nothing. Returns its index or m. */
static size_t never_admissible(allowall_t *a)
{
    for (size_t j = 0; j < a->m; j++) {
        rule_state_t *rs = a->rules[j];
        const sl_rule_t *rule = &rs->t->rule;
        if (rs->def.blocked) {
            continue; /* refused when decided */
        }
        const ov_entry_t *en =
            rs->has_overrides ? override_cached(a->w, rs, a->keys[j], a->key_lens[j], a->now_ns)
                              : NULL;
        if (en != NULL && en->present) {
            if (en->blocked) {
                continue; /* refused when decided, as a blocked key is */
            }
            rule = &en->ov_rule;
        }
        if (a->costs[j] > rule->capacity) {
            a->got[j] = (engine_decision_t){
                .rule = rs,
                .window_ns = rule->window_ns,
                .never = true,
                .cost = a->costs[j],
                .d = {.allowed = false, .limit = rule->capacity, .retry_after_ns = -1}};
            return j;
        }
    }
    return a->m;
}

/* Whether a merged check's rule has priorities (its decisions may carry a reserve). */
static bool with_priorities(const allowall_t *a)
{
    for (size_t j = 0; j < a->m; j++) {
        if (a->rules[j]->def.prio.n > 0) {
            return true;
        }
    }
    return false;
}

/* Acquires: a time asked past the hold_timeout of a key's override (shorter than its rule's,
 * which the time was checked against) is that hold_timeout, as the override bounds every hold. */
static void holds_in_force(allowall_t *a)
{
    for (size_t j = 0; j < a->m && a->acquire; j++) {
        rule_state_t *rs = a->rules[j];
        const ov_entry_t *en =
            rs->has_overrides ? override_cached(a->w, rs, a->keys[j], a->key_lens[j], a->now_ns)
                              : NULL;
        if (en != NULL && en->present && !en->blocked && a->holds_ns[j] > en->ov_rule.window_ns) {
            a->holds_ns[j] = en->ov_rule.window_ns;
        }
    }
}

static void allowall_resolved(void *arg, int status)
{
    (void)status;
    allowall_t *a = arg;
    engine_worker_t *w = a->w;
    holds_in_force(a);
    size_t never = never_admissible(a);
    if (never < a->m) {
        allowall_end(a, never);
        return;
    }
    if (a->independent) {
        a->phase = PHASE_CHARGE;
        allowall_send(a, every_check);
        return;
    }
    if (w->engine->requests->ops->completes_at_once) {
        size_t refused;
        decide_all_now(w, a->rules, a->keys, a->key_lens, a->costs, a->prios,
                       a->acquire ? a->holds_ns : NULL, a->m, a->now_ns, a->got, &refused);
        allowall_end(a, refused);
        return;
    }
    /* a rule with priorities goes step by step (each decision its reserve's): one script has none;
     * so do acquires, which it does not make */
    if (!with_priorities(a) && !a->acquire &&
        decide_all_later(w, a, a->rules, a->keys, a->key_lens, a->costs, a->m, a->now_ns) ==
            ENGINE_OK) {
        return;
    }
    a->phase = PHASE_CHARGE;
    allowall_send(a, every_check);
}

int engine_allowall(engine_worker_t *w, const engine_check_t *checks, size_t n, int64_t now_ns,
                    unsigned flags, engine_allowall_fn fn, void *arg, size_t *bad)
{
    size_t bytes = 0;
    *bad = n;
    if (n == 0 || n > ENGINE_CHECKS_MAX) {
        return ENGINE_ENOTSUP;
    }
    bool acquire = (flags & ENGINE_ALL_ACQUIRE) != 0;
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *rule = &checks[i].rule->t->rule;
        int rc = checks[i].cost < 0                                             ? ENGINE_ECOST
                 : checks[i].key_len > w->engine->cfg.key_max                   ? ENGINE_EKEY
                 : !acquire                                                     ? ENGINE_OK
                 : !sl_rule_holds(rule)                                         ? ENGINE_ENOHOLDS
                 : !w->engine->requests->ops->holds                             ? ENGINE_ENOTSUP
                 : checks[i].hold_ns < 0 || checks[i].hold_ns > rule->window_ns ? ENGINE_EHOLDTIME
                                                                                : ENGINE_OK;
        if (rc != ENGINE_OK) {
            *bad = i;
            return rc;
        }
        bytes += checks[i].key_len;
    }
    allowall_t *a = allowall_new(w, n, bytes);
    if (a == NULL) {
        return ENGINE_ENOTSUP;
    }
    a->w = w;
    a->now_ns = now_ns;
    a->fn = fn;
    a->arg = arg;
    a->n = n;
    a->independent = (flags & ENGINE_ALL_INDEPENDENT) != 0;
    a->acquire = acquire;
    char *p = a->bytes;
    for (size_t i = 0; i < n; i++) {
        const engine_check_t *c = &checks[i];
        size_t j = a->independent ? a->m : 0;
        while (j < a->m && !(a->rules[j] == c->rule && a->key_lens[j] == c->key_len &&
                             memcmp(a->keys[j], c->key, c->key_len) == 0)) {
            j++;
        }
        if (j == a->m) { /* a new (rule, key) */
            memcpy(p, c->key, c->key_len);
            a->keys[j] = p;
            p += c->key_len;
            a->key_lens[j] = c->key_len;
            a->rules[j] = c->rule;
            a->ref[j] = (allowall_ref_t){a, j};
            a->prios[j] = c->priority;
            engine_rule_hold(c->rule);
            a->m++;
        }
        a->prios[j] = c->priority < a->prios[j] ? c->priority : a->prios[j];
        a->costs[j] = cost_sum(a->costs[j], c->cost);
        if (c->hold_ns != 0 && (a->holds_ns[j] == 0 || c->hold_ns < a->holds_ns[j])) {
            a->holds_ns[j] = c->hold_ns; /* 0, the hold_timeout in force, is the longest */
        }
        a->map[i] = j;
    }
    if (engine_resolve_overrides(w, a->rules, a->keys, a->key_lens, a->m, now_ns, allowall_resolved,
                                 a) == ENGINE_OK) {
        allowall_resolved(a, ENGINE_OK);
    }
    return ENGINE_OK;
}
